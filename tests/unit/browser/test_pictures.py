"""The rollout pictures draw in a real browser (headless Chromium): the HTML/SVG report of
``plan``/``simulate``/``apply --report`` and the Mermaid Gantt of the PR comment (mermaid.js)."""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from reconciler.cli.main import main
from reconciler.model.run import BatchRecord, CompartmentResult, Event, RunResult
from reconciler.report.htmlreport import COLORS, MAX_LANES, ReportRun, render_html
from tests.unit.browser.conftest import Browser, colours, near

ROOT = Path(__file__).resolve().parents[3]
FLEET = ROOT / "examples" / "fleets" / "gpu-24.yaml"


@pytest.mark.slow
def test_plan_report_draws_lanes_per_node_in_chromium(browser: Browser, tmp_path: Path) -> None:
    out = tmp_path / "plan.html"
    assert main(["plan", str(ROOT / "recipes" / "gpu-training-tuning.yaml"), "--cluster", f"sim:{FLEET}",
                 "-o", "name", "--report", str(out)]) == 0
    page = out.read_text()
    assert "<script" not in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    dom = browser.dom(out)
    for label in ("gpu-training-tuning · predicted (simulated) · succeeded", "compartment us-east-1a",
                  "compartment us-east-1b", "gpu-a-001 · batch 1", "gpu-b-012 · batch 5", "5: 1, 2, 3 x 3"):
        assert label in dom, label
    size, counts = colours(browser.screenshot(out))
    assert size == (1280, 1600) and len(counts) > 20  # not a blank page
    for phase in ("stage", "reboot", "drain", "wait"):  # the protected-pod wait of gpu-a-001 is drawn
        assert near(counts, COLORS[phase]) > 50, phase


@pytest.mark.slow
def test_apply_report_draws_the_actual_run(browser: Browser, tmp_path: Path) -> None:
    out = tmp_path / "apply.html"
    assert main(["apply", str(ROOT / "recipes" / "gpu-training-tuning.yaml"), "--cluster", f"sim:{FLEET}",
                 "-o", "json", "--report", str(out)]) == 0
    dom = browser.dom(out)
    assert "gpu-training-tuning · actual · succeeded" in dom and "gpu-a-012 · batch 5" in dom
    _, counts = colours(browser.screenshot(out))
    assert near(counts, COLORS["stage"]) > 50 and near(counts, COLORS["uncordon"]) > 5


def test_report_path_is_checked_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "missing" / "r.html"
    assert main(["apply", str(ROOT / "recipes" / "gpu-training-tuning.yaml"), "--cluster", f"sim:{FLEET}",
                 "--report", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "--report" in err and "does not exist" in err


def _big_run(nodes_per_zone: int = 1000, batch: int = 3) -> RunResult:
    """A synthetic 2-compartment run of 2 * ``nodes_per_zone`` nodes in batches of ``batch``."""
    events: list[Event] = []
    comps = []
    for z in ("a", "b"):
        t = 0.0
        batches = []
        names = [f"gpu-{z}-{i:04d}" for i in range(nodes_per_zone)]
        for k in range(0, len(names), batch):
            number = k // batch + 1
            members = names[k : k + batch]
            events.append(Event(t, f"zone-{z}", "batch-start", f"batch {number}: {', '.join(members)}"))
            for n in members:
                events += [Event(t, n, "cordon"), Event(t + 5, n, "drained", "2 pods gone"),
                           Event(t + 5, n, "stage-start", "drv 1.0.0 apply"), Event(t + 35, n, "stage-end", "ok"),
                           Event(t + 35, n, "interrupt", "reboot"), Event(t + 155, n, "rebooted"),
                           Event(t + 160, n, "uncordon"), Event(t + 160, n, "complete")]
            events.append(Event(t + 160, f"zone-{z}", "batch-end", f"batch {number}: ok"))
            batches.append(BatchRecord(number, tuple(members), succeeded=len(members)))
            t += 160
        comps.append(CompartmentResult(f"zone-{z}", batches=tuple(batches)))
    return RunResult("r1", "h" * 64, "drivers", "succeeded", [], tuple(comps), events, max(e.t for e in events))


@pytest.mark.slow
def test_a_2000_node_report_is_bounded_and_still_draws(browser: Browser, tmp_path: Path) -> None:
    run = _big_run()
    page = render_html([ReportRun(run, "predicted", "synthetic")], title="big")
    assert len(page) < 1_500_000
    lanes = page.count('fill="#fafafa"/>') + page.count('fill="#eef2ff"/>')
    assert 2 <= lanes <= MAX_LANES
    out = tmp_path / "big.html"
    out.write_text(page)
    dom = browser.dom(out)
    assert "2000 nodes: one lane per batch" in dom and re.search(r"batches 1-\d+ \(\d+ nodes\)", dom)
    _, counts = colours(browser.screenshot(out))
    assert near(counts, COLORS["reboot"]) > 100


@pytest.mark.slow
def test_mermaid_gantt_of_the_pr_comment_renders_with_batches_in_order(
    browser: Browser, mermaid_js: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = tmp_path / "repo"
    shutil.copytree(ROOT / "recipes", r / "recipes")
    shutil.copytree(ROOT / "policies", r / "policies")

    def git(*a: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@e", *a], cwd=r, check=True,
                       capture_output=True)

    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "base")
    f = r / "recipes" / "gpu-training-tuning.yaml"
    f.write_text(f.read_text().replace("version: 0.3.2", "version: 0.3.3"))
    git("commit", "-qam", "head")
    assert main(["plan", "--repo", str(r), "--base", "HEAD~1", "--head", "HEAD", "--cluster", f"sim:{FLEET}",
                 "--recipe", "gpu-training-tuning", "-o", "markdown"]) == 0
    body = capsys.readouterr().out
    chart = body.split("```mermaid\n", 1)[1].split("```", 1)[0]
    page = tmp_path / "gantt.html"
    page.write_text(
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><script src="{mermaid_js.as_uri()}"></script></head>'
        f'<body><pre class="mermaid">\n{chart}</pre><script>mermaid.initialize({{startOnLoad: false}});'
        "mermaid.run().then(() => document.body.setAttribute('data-done', '1'))"
        ".catch(e => document.body.setAttribute('data-error', String(e)));</script></body></html>")
    dom = browser.dom(page)
    assert 'data-done="1"' in dom and 'data-error=' not in dom, dom[:500]
    assert 'aria-roledescription="gantt"' in dom
    for label in ("us-east-1a (", "us-east-1b (", "batch 1 · 1 node", "batch 5 · 3 nodes", "batch 5 · 2 nodes"):
        assert label in dom, label
    # bars of one compartment follow each other (the start of each batch is where the last ended)
    rects = [(int(m.group(1)), float(m.group(2)), float(m.group(3)), float(m.group(4))) for m in re.finditer(
        r'<rect id="[^"]*-task(\d+)"[^>]* x="([\d.]+)" y="([\d.]+)" width="([\d.]+)"', dom)]
    first = sorted(rects)[:5]  # us-east-1a: tasks 1..5
    assert len(first) == 5
    for (_, x0, _, w0), (_, x1, _, _) in itertools.pairwise(first):
        assert x1 >= x0 + w0 - 1.5, first
    assert first[-1][1] > first[0][1] + 100
    _, counts = colours(browser.screenshot(page, (1200, 500)))
    assert len(counts) > 10

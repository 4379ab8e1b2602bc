"""The PR comment's duration estimate is the simulator's (the run ``reconciler simulate`` makes),
with its assumptions from flags, recipe annotations, ``--sim-config`` or the defaults."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from reconciler.cli.estimate import assumptions, simulator
from reconciler.cli.main import main
from reconciler.errors import InputError
from reconciler.load import load_inputs, policy_for
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
from reconciler.report.estimate import REBOOT_ANNOTATION, STAGE_ANNOTATION

ROOT = Path(__file__).resolve().parents[3]
FLEET = ROOT / "examples" / "fleets" / "gpu-24.yaml"
RECIPE = ROOT / "recipes" / "gpu-training-tuning.yaml"


def _args(**kw: object) -> argparse.Namespace:
    return argparse.Namespace(**{"sim_config": None, "stage_time": None, "reboot_time": None, **kw})


def _annotated(tmp_path: Path, notes: dict[str, str]) -> Path:
    text = RECIPE.read_text()
    block = "  annotations:\n" + "".join(f"    {k}: {json.dumps(v)}\n" for k, v in notes.items())
    text = text.replace("  name: gpu-training-tuning\n", "  name: gpu-training-tuning\n" + block, 1)
    (tmp_path / "recipes").mkdir(exist_ok=True)
    shutil.copytree(ROOT / "policies", tmp_path / "policies", dirs_exist_ok=True)
    out = tmp_path / "recipes" / RECIPE.name
    out.write_text(text)
    return out


def test_estimate_equals_the_simulate_verb_makespan(capsys: pytest.CaptureFixture[str]) -> None:
    from reconciler.cli.clusters import open_cluster

    inputs = load_inputs([str(RECIPE)], [str(ROOT / "policies")])
    (r,) = inputs.recipes
    fleet = observe(open_cluster(argparse.Namespace(cluster=f"sim:{FLEET}", kubeconfig=None, sim_config=None,
                                                    context=None, namespace=None, request_timeout=None)).cluster)
    est = simulator(fleet, _args(), inputs)(r, policy_for(r, inputs), compute_plan(r, policy_for(r, inputs), fleet))
    assert main(["simulate", str(RECIPE), "--cluster", f"sim:{FLEET}", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert est.seconds == doc["durationSeconds"] > 0
    assert {c.name: c.nodes for c in est.compartments} == {"us-east-1a": 12, "us-east-1b": 12}
    assert est.assumptions.source == "simulator defaults" and est.assumptions.text() == "stage 30 s, reboot 2 min"
    # the old constant-based figure was far off
    from reconciler.report.compare import estimate_seconds

    assert estimate_seconds(compute_plan(r, policy_for(r, inputs), fleet)) > 2 * est.seconds


def test_flags_beat_annotations_beat_sim_config(tmp_path: Path) -> None:
    path = _annotated(tmp_path, {STAGE_ANNOTATION: "45s", REBOOT_ANNOTATION: "8m"})
    inputs = load_inputs([str(path)], [str(tmp_path / "policies")])
    (r,) = inputs.recipes
    cfg, a = assumptions(r, inputs, _args(), None)
    assert (cfg.stage_duration("apply"), cfg.rebootSeconds, a.source) == (45.0, 480.0, "recipe annotation")
    cfg, a = assumptions(r, inputs, _args(stage_time=10.0), None)
    assert (a.stage_seconds, a.reboot_seconds) == (10.0, 480.0)
    assert a.source == "stage: --stage-time; reboot: recipe annotation"


@pytest.mark.parametrize("key", [STAGE_ANNOTATION, REBOOT_ANNOTATION])
@pytest.mark.parametrize("value", ["soon", "9000h", "1" * 100_000 + "s"], ids=["word", "too-long", "huge"])
def test_bad_annotation_fails_every_verb_at_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     key: str, value: str) -> None:
    # checked when the recipe loads: validate, plan, simulate and apply refuse it as --report does,
    # exit 2 with the file:line of the annotation, its key, a bounded message, and nothing written
    path = _annotated(tmp_path, {key: value})
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if key in t)
    fleet = tmp_path / "fleet.yaml"
    shutil.copy(FLEET, fleet)
    before = fleet.read_bytes()
    sim = ["--cluster", f"sim:{fleet}"]
    for argv in (["validate", str(path)], ["plan", str(path), *sim], ["simulate", str(path), *sim],
                 ["apply", str(path), *sim, "-o", "json"],
                 ["plan", str(path), *sim, "--report", str(tmp_path / "r.html")]):
        assert main(argv) == 2, argv
        out = capsys.readouterr()
        assert not out.out.strip(), (argv, out.out[:300])
        (err,) = [x for x in out.err.splitlines() if x.strip()]
        assert err.removeprefix("error: ").startswith(f"{path}:{line}:"), (argv, err)
        assert key in err and ("not a duration" in err or "longer than" in err), err
        assert len(err) < 500 and "Traceback" not in out.err
    assert fleet.read_bytes() == before and not (tmp_path / "r.html").exists()


def test_estimate_annotation_of_a_nodewright_resource_is_checked_too(tmp_path: Path) -> None:
    path = tmp_path / "cr.yaml"
    path.write_text("apiVersion: nodewright.nvidia.com/v1alpha1\nkind: NodeWright\nmetadata:\n  name: t\n"
                    f"  annotations:\n    {REBOOT_ANNOTATION}: later\n"
                    "spec:\n  packages: {tools: {version: 1.0.0, image: x/tools}}\n")
    with pytest.raises(InputError) as e:
        load_inputs([str(path)])
    assert e.value.pos is not None and e.value.pos.line == 6
    assert "the reboot time the simulated estimate assumes: 'later' is not a duration" in e.value.message
    assert REBOOT_ANNOTATION in e.value.field


def test_good_annotations_still_load_and_apply(tmp_path: Path) -> None:
    path = _annotated(tmp_path, {STAGE_ANNOTATION: "1h30m", REBOOT_ANNOTATION: "168h"})
    inputs = load_inputs([str(path)], [str(tmp_path / "policies")])
    _, a = assumptions(inputs.recipes[0], inputs, _args(), None)
    assert (a.stage_seconds, a.reboot_seconds) == (5400.0, 168 * 3600.0)


def test_plan_repo_uses_the_flags_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
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
    argv = ["plan", "--repo", str(r), "--base", "HEAD~1", "--head", "HEAD", "--cluster", f"sim:{FLEET}",
            "--recipe", "gpu-training-tuning"]
    page = tmp_path / "change.html"
    assert main([*argv, "-o", "json", "--stage-time", "1m", "--reboot-time", "10m", "--report", str(page)]) == 0
    doc = json.loads(capsys.readouterr().out)
    html = page.read_text()  # the head's predicted rollout, with the assumptions it was simulated with
    assert "gpu-training-tuning · predicted (simulated)" in html and "stage 1 min, reboot 10 min" in html
    (rc,) = doc["recipes"]
    est = rc["headEstimate"]
    assert est["assumptions"] == {"stageSeconds": 60.0, "rebootSeconds": 600.0,
                                  "source": "stage: --stage-time; reboot: --reboot-time"}
    assert rc["head"]["estimatedSeconds"] == est["estimatedSeconds"] > 0
    assert [p["fields"] for p in rc["packages"]] == [["version"]]
    with pytest.raises(SystemExit) as e:
        main([*argv, "--stage-time", "soon"])
    assert e.value.code == 2 and "argument --stage-time: 'soon' is not a duration" in capsys.readouterr().err

"""Renderers: text (no colour codes unless asked), JSON (the contract), Markdown (PR comment: summary
first, escaped, size-capped with an explicit truncation note); and the ``plan`` verb's output."""

from __future__ import annotations

import json
import re

import pytest

from reconciler.cli.plan import format_plans, pending
from reconciler.model.policy import DeploymentPolicy
from reconciler.plan.planner import compute_plan
from reconciler.report.render import MARKDOWN_LIMIT, md_escape, render_json, render_markdown, render_text
from reconciler.testing import budget, fleet, node, package, pdb, pod, recipe

ANSI = re.compile(r"\x1b\[")
LEGACY = DeploymentPolicy.legacy("legacy", budget(count=1))


def sample_plan(**kw):
    r = recipe(
        kw.pop("name", "gpu-tuning"),
        package("base-tools", "1.0.0"),
        package("tuning", "1.1.4", depends_on={"base-tools": "1.0.0"}, interrupt="reboot"),
        protect={"w": "train"},
    )
    ns = kw.pop("nodes", [node("n1"), node("n2", recipe=r.name, installed=list(r.packages.values()))])
    pods = kw.pop("pods", [pod("web-1", labels={"app": "web"}), pod("train", labels={"w": "train"})])
    return compute_plan(r, LEGACY, fleet(ns, pods, [pdb("web", {"app": "web"}, allowed=0)]), revision="abc123")


# ------------------------------------------------------------------------------ json


def test_render_json_is_the_contract():
    p = sample_plan()
    assert render_json(p) == p.to_json()
    assert json.loads(render_json(p))["planHash"] == p.planHash


# ------------------------------------------------------------------------------ text


def test_text_shows_summary_steps_and_warnings_without_colour():
    out = render_text(sample_plan(), width=250)
    assert not ANSI.search(out)
    assert "Plan for recipe gpu-tuning" in out and "revision abc123" in out
    assert "1 of 2 selected change" in out
    assert "tuning: install 1.1.4 [apply, config, post-interrupt] after: base-tools" in out
    assert "reboot" in out and "wait 1" in out and "evict 1" in out
    assert "allows 0 disruptions" in out
    assert "n2" not in out.split("Nodes")[-1].split("Warnings")[0]  # up-to-date nodes only counted


def test_text_colour_only_when_asked():
    assert ANSI.search(render_text(sample_plan(), color=True))


def test_text_never_interprets_markup_from_names():
    out = render_text(sample_plan(nodes=[node("[bold]n1[/bold]")], pods=[]))
    assert "[bold]n1[/bold]" in out


def test_text_no_changes():
    pkg = package("tuned")
    p = compute_plan(recipe("r", pkg), LEGACY, fleet([node("n1", recipe="r", installed=[pkg])]))
    assert "No changes" in render_text(p)


# ------------------------------------------------------------------------------ markdown


def test_markdown_summary_first_then_details():
    md = render_markdown(sample_plan())
    assert md.startswith("<!-- reconciler:plan recipe=gpu-tuning -->\n")
    summary, _, details = md.partition("<details>")
    assert "**1 of 2 selected nodes change.**" in summary
    assert "| Reboots | 1 |" in summary
    assert "| Batches | 1" in summary
    assert "**Risks (" in summary and "allows 0 disruptions" in summary
    assert "Nodes (1 changing)" in details
    assert md.count("<details>") == md.count("</details>")
    assert "Truncated" not in md


@pytest.mark.parametrize(
    ("text", "forbidden"),
    [
        ("<script>alert(1)</script>", "<script>"),
        ("</details><details open>", "</details><details"),
        ("[click](https://evil.example)", "[click](https"),
        ("**bold** _it_ `code`", "**bold**"),
        ("a | b", "a | b"),
        ("line\n# heading", "\n# heading"),
        ("<!-- hidden -->", "<!--"),
    ],
)
def test_md_escape_neutralises_markup(text, forbidden):
    assert forbidden not in md_escape(text)


def test_md_escape_blocks_mentions():
    assert "@&#8203;org/team" in md_escape("@org/team")


def test_markdown_escapes_names_from_recipes_and_cluster():
    evil = "x</details><img src=x onerror=alert(1)>"
    with pytest.raises(ValueError, match="DNS-1123 subdomain"):  # a recipe name cannot carry markup at all
        sample_plan(name="r<b>")
    p = sample_plan(nodes=[node("n|1"), node(evil)], pods=[pod("p<b>", node=evil, namespace="a@b")])
    md = render_markdown(p)
    assert "<img" not in md and "<b>" not in md
    assert md.count("<details>") == md.count("</details>")
    assert "n\\|1" in md
    # every table row of the node table has exactly 7 cells
    rows = [line for line in md.splitlines() if line.startswith("| n")]
    assert rows and all(len(re.split(r"(?<!\\)\|", r)) - 2 == 7 for r in rows)


def test_markdown_truncates_under_the_limit_with_a_note():
    ns = [node(f"node-{i:05d}-with-a-rather-long-name") for i in range(2500)]
    pods = [pod(f"workload-{i}", node=n.name, labels={"app": "web"}) for i, n in enumerate(ns)]
    md = render_markdown(sample_plan(nodes=ns, pods=pods))
    assert len(md) <= MARKDOWN_LIMIT < 65_536
    assert "**Truncated**" in md and "reconciler plan -o json" in md
    assert md.count("<details>") == md.count("</details>")
    assert md.index("**2500 of 2500 selected nodes change.**") < md.index("<details>")


def test_markdown_respects_a_custom_limit():
    ns = [node(f"n{i}") for i in range(200)]
    md = render_markdown(sample_plan(nodes=ns, pods=[]), limit=8_000)
    assert len(md) <= 8_000 and "**Truncated**" in md


def test_markdown_no_changes():
    pkg = package("tuned")
    p = compute_plan(recipe("r", pkg), LEGACY, fleet([node("n1", recipe="r", installed=[pkg])]))
    assert "No changes" in render_markdown(p)


# ------------------------------------------------------------------------------ plan verb output


def test_format_plans_json_one_or_many():
    a, b = sample_plan(name="aaa"), sample_plan(name="bbb")
    assert format_plans([a], "json") == a.to_json()
    doc = json.loads(format_plans([a, b], "json"))
    assert [p["recipe"]["name"] for p in doc["plans"]] == ["aaa", "bbb"]


def test_format_plans_markdown_shares_the_budget():
    ns = [node(f"node-{i:05d}-with-a-long-name") for i in range(1500)]
    plans = [sample_plan(name=f"r{i}", nodes=ns, pods=[]) for i in range(3)]
    md = format_plans(plans, "markdown")
    assert len(md) <= MARKDOWN_LIMIT
    assert md.count("<!-- reconciler:plan recipe=") == 3


def test_pending_changes():
    pkg = package("tuned")
    done = compute_plan(recipe("r", pkg), LEGACY, fleet([node("n1", recipe="r", installed=[pkg])]))
    assert pending(sample_plan()) and not pending(done)


def test_plan_verb_end_to_end_on_the_example_fleet(tmp_path, capsys):
    """The verb wired to the loader and the simulated fleet (repository examples)."""
    from pathlib import Path

    from reconciler.cli.main import main

    root = Path(__file__).resolve().parents[3]
    recipes, fleet_file = root / "recipes", root / "examples" / "fleets" / "gpu-24.yaml"
    if not recipes.is_dir() or not fleet_file.is_file():
        pytest.skip("repository examples not present")
    rc = main(["plan", str(recipes), "--cluster", f"sim:{fleet_file}", "-o", "json", "--detailed-exitcode"])
    out = capsys.readouterr().out
    doc = json.loads(out)
    plans = doc.get("plans", [doc])
    assert plans and all(len(p["planHash"]) == 64 for p in plans)
    assert rc == (3 if any(p["summary"]["nodesChanging"] for p in plans) else 0)
    rc2 = main(["plan", str(recipes), "--cluster", f"sim:{fleet_file}", "-o", "json"])
    assert rc2 == 0 and capsys.readouterr().out == out  # deterministic


def test_finished_pods_are_removed_not_evicted_in_every_view():
    """A Succeeded or Failed pod is deleted by the drain without a budget check; ``apply`` counts
    it as removed, so the plan says the same (it said "evict 2" and "2 pod(s) evicted")."""
    pods = [pod("web-1", labels={"app": "web"}), pod("report", phase="Succeeded", owner="Job"),
            pod("crashed", phase="Failed", owner="Job")]
    p = sample_plan(pods=pods)
    n1 = next(n for n in p.nodes if n.name == "n1")
    assert set(n1.evict) == {"default/web-1", "default/report", "default/crashed"}
    assert set(n1.finished) == {"default/report", "default/crashed"}
    md = render_markdown(p)
    assert "1 pod(s) evicted, 2 finished pod(s) removed" in md
    assert "evict: default/web-1" in md and "remove finished: default/crashed, default/report" in md
    table = render_text(p)
    assert "evict 1" in table and "remove 2 finished" in table


def test_text_warnings_are_whole_lines_not_wrapped_at_the_table_width():
    """A warning longer than the 120 columns the tables use stays one line (grep, CI logs)."""
    p = sample_plan()
    long = "node n1: " + "a very long explanation " * 10 + "END"
    out = render_text(p.model_copy(update={"warnings": (long,)}))
    assert f"  ! {long}" in out.splitlines()


# ------------------------------------------------------------------------------ text at scale (issue 38)


def test_text_groups_the_nodes_that_do_the_same_above_the_threshold_and_wide_lists_each():
    from reconciler.report.render import SUMMARY_AT

    many = [node(f"n{i:03d}") for i in range(SUMMARY_AT + 10)]
    r = recipe("tune", package("base-tools", "1.0.0"))
    done = recipe("tune", package("base-tools", "0.9.0"))
    upgraded = [node(f"u{i:03d}", recipe="tune", installed=list(done.packages.values())) for i in range(5)]
    p = compute_plan(r, LEGACY, fleet([*many, *upgraded], [], []))
    out = render_text(p, width=200)
    rows = [line for line in out.splitlines() if "base-tools:" in line]
    assert len(rows) == 2, out  # install ×40, upgrade ×5: one row each
    assert "n000, n001, n002 … (40 nodes)" in out and "u000, u001, u002 … (5 nodes)" in out
    assert "-o wide" in out
    wide = render_text(p, width=200, wide=True)
    assert len([line for line in wide.splitlines() if "base-tools:" in line]) == len(many) + len(upgraded)
    few = compute_plan(r, LEGACY, fleet(many[:SUMMARY_AT], [], []))
    assert len([line for line in render_text(few, width=200).splitlines() if "base-tools:" in line]) == SUMMARY_AT

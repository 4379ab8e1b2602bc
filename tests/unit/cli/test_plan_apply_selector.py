"""``plan``/``apply -l/--selector`` (kubectl's habit): only matching nodes get work; the others stay
in their compartment (budget and matched counts unchanged) and are left exactly as they are; the
selector is part of the plan hash; a selector matching no node is an error."""

from __future__ import annotations

import json
from pathlib import Path

from reconciler.model.policy import DeploymentPolicy
from reconciler.model.selectorsyntax import parse_selector
from reconciler.plan.planner import compute_plan
from reconciler.testing import budget, fleet, node, package, recipe
from tests.unit.ops.conftest import RunCli, load_fleet

ROOT = Path(__file__).resolve().parents[3]
FLEET = ROOT / "examples" / "fleets" / "gpu-24.yaml"
RECIPE = str(ROOT / "recipes" / "gpu-training-tuning.yaml")
ZONE_A = "topology.kubernetes.io/zone=us-east-1a"


def test_planner_keeps_the_compartment_but_gives_work_only_to_matching_nodes() -> None:
    r = recipe("t", package("pkg", "1.0.0", interrupt="reboot"), selector={"pool": "gpu"}, budget=budget(count=2))
    nodes = [node(f"n{i}", labels={"pool": "gpu", "rack": "a" if i < 3 else "b"}) for i in range(6)]
    pol = DeploymentPolicy.legacy("legacy", r.interruptionBudget)
    full = compute_plan(r, pol, fleet(nodes))
    part = compute_plan(r, pol, fleet(nodes), only=parse_selector("rack=a"))
    (c,) = part.compartments
    assert c.matched == 6 and c.ceiling == full.compartments[0].ceiling == 2
    assert sorted(n for b in c.batches for n in b) == ["n0", "n1", "n2"]
    assert part.summary.nodesChanging == 3 and part.planHash != full.planHash
    assert all(not n.steps and n.batch == 0 for n in part.nodes if n.name >= "n3")
    assert any("3 selected node(s) with work do not match -l rack=a" in w for w in part.warnings)
    assert compute_plan(r, pol, fleet(nodes), only=parse_selector("rack=a")).planHash == part.planHash


def test_apply_selector_changes_only_matching_nodes(cli: RunCli, tmp_path: Path) -> None:
    after = tmp_path / "after.yaml"
    rc, out, err = cli("apply", RECIPE, "--cluster", f"sim:{FLEET}", "-l", ZONE_A, "--sim-save", str(after),
                       "-o", "json")
    assert rc == 0, err
    doc = json.loads(out)
    done = {n["name"] for n in doc["nodes"] if n["state"] == "complete"}
    assert done == {f"gpu-a-{i:03d}" for i in range(1, 13)}
    nodes = load_fleet(after)
    key = "reconciler.nodewright.dev/nodeState_gpu-training-tuning"
    assert all(key in nodes[f"gpu-a-{i:03d}"]["metadata"].get("annotations", {}) for i in range(1, 13))
    assert not any(key in nodes[f"gpu-b-{i:03d}"]["metadata"].get("annotations", {}) for i in range(1, 13))


def test_plan_hash_includes_the_selector(cli: RunCli, tmp_path: Path) -> None:
    rc, out, _ = cli("plan", RECIPE, "--cluster", f"sim:{FLEET}", "-o", "json")
    full = tmp_path / "full.json"
    full.write_text(out)
    rc, out, _ = cli("plan", RECIPE, "--cluster", f"sim:{FLEET}", "-o", "json", "-l", ZONE_A)
    assert rc == 0 and json.loads(out)["planHash"] != json.loads(full.read_text())["planHash"]
    part = tmp_path / "part.json"
    part.write_text(out)
    # a plan approved for all nodes does not let a subset run, nor the other way round
    rc, _, err = cli("apply", RECIPE, "--cluster", f"sim:{FLEET}", "-l", ZONE_A, "--plan", str(full))
    assert rc == 2 and "plan" in err
    rc, _, err = cli("apply", RECIPE, "--cluster", f"sim:{FLEET}", "--plan", str(part))
    assert rc == 2
    rc, _, err = cli("apply", RECIPE, "--cluster", f"sim:{FLEET}", "-l", ZONE_A, "--plan", str(part), "-o", "name")
    assert rc == 0, err


def test_selector_matching_no_node_is_an_error(cli: RunCli) -> None:
    for verb in (["plan"], ["apply"], ["apply", "--dry-run"]):
        rc, _, err = cli(*verb, RECIPE, "--cluster", f"sim:{FLEET}", "-l", "zone=nowhere")
        assert rc == 2 and "-l/--selector zone=nowhere: no node has these labels" in err, (verb, err)


def test_no_changes_under_a_selector_says_what_it_left_out(cli: RunCli) -> None:
    """`-l` leaving out every node with work is not "every selected node is up to date"."""
    rc, out, err = cli("plan", RECIPE, "--cluster", f"sim:{FLEET}", "-l", "nodepool=cpu", "--detailed-exitcode")
    assert rc == 0, err
    assert "every selected node is up to date" not in out
    assert ("No changes: -l nodepool=cpu picks none of the 24 node(s) the recipe selects; 24 node(s) with work "
            "left out by -l.") in out
    rc, out, _ = cli("plan", RECIPE, "--cluster", f"sim:{FLEET}", "-l", "nodepool=cpu", "-o", "json")
    assert json.loads(out)["summary"]["selector"] == {"selector": "nodepool=cpu", "nodes": 0, "leftOut": 24}
    rc, out, _ = cli("plan", RECIPE, "--cluster", f"sim:{FLEET}", "-o", "json")
    assert "selector" not in json.loads(out)["summary"]  # only with -l


def test_no_changes_text_counts_the_nodes_the_selector_picks() -> None:
    from reconciler.report.render import render_markdown, render_text

    pkg = package("pkg", "1.0.0")
    r = recipe("t", pkg, selector={"pool": "gpu"})
    pol = DeploymentPolicy.legacy("legacy", r.interruptionBudget)
    done = [node(f"a{i}", labels={"pool": "gpu", "rack": "a"}, recipe="t", installed=[pkg]) for i in range(2)]
    todo = [node("b0", labels={"pool": "gpu", "rack": "b"})]
    some = compute_plan(r, pol, fleet(done + todo), only=parse_selector("rack=a"))
    assert some.summary.selector is not None
    assert some.summary.selector.model_dump() == {"selector": "rack=a", "nodes": 2, "leftOut": 1}
    line = "No changes for the 2 node(s) -l rack=a picks; 1 node(s) with work left out by -l."
    assert line in render_text(some)
    clean = compute_plan(r, pol, fleet(done), only=parse_selector("rack=a"))
    assert "No changes: the 2 node(s) -l rack=a picks are up to date." in render_text(clean)
    assert "No changes: the 2 node(s) -l rack=a picks are up to date." in render_markdown(clean)
    assert "No changes: every selected node is up to date." in render_text(compute_plan(r, pol, fleet(done)))

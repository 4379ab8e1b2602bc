"""``reconciler draw RESULT.json --report FILE``: the picture of saved ``apply``/``simulate -o json``
results; a malformed file is exit 2 naming file:line:column and the field, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.ops.conftest import RunCli

ROOT = Path(__file__).resolve().parents[3]
FLEET = ROOT / "examples" / "fleets" / "gpu-24.yaml"
RECIPE = str(ROOT / "recipes" / "gpu-training-tuning.yaml")


def test_draws_apply_and_simulate_results(cli: RunCli, tmp_path: Path) -> None:
    rc, out, _ = cli("apply", RECIPE, "--cluster", f"sim:{FLEET}", "-o", "json")
    assert rc == 0
    (tmp_path / "apply.json").write_text(out)
    rc, out, _ = cli("simulate", RECIPE, "--cluster", f"sim:{FLEET}", "-o", "json")
    assert rc == 0
    (tmp_path / "sim.json").write_text(out)
    page = tmp_path / "r.html"
    rc, _, err = cli("draw", str(tmp_path / "apply.json"), str(tmp_path / "sim.json"), "--report", str(page))
    assert rc == 0 and "wrote the rollout of 2 recipe run(s) to " in err
    html = page.read_text()
    assert "gpu-training-tuning · actual · succeeded" in html
    assert "gpu-training-tuning · predicted (simulated) · succeeded" in html
    assert html.count("gpu-a-001 · batch 1") == 2


def test_draws_a_run_that_waits_for_an_earlier_recipe(cli: RunCli, tmp_path: Path) -> None:
    cfg = tmp_path / "sim.yaml"
    cfg.write_text("failures: [{node: gpu-a-001, package: base-tools, stage: apply, exitCode: 3, times: 99}]\n")
    rc, out, _ = cli("apply", str(ROOT / "recipes" / "gpu-node-stack.yaml"), RECIPE, "--cluster", f"sim:{FLEET}",
                     "--sim-config", str(cfg), "-o", "json")
    assert rc == 1
    assert [r["result"] for r in json.loads(out)["results"]][-1] == "waiting"
    (tmp_path / "apply.json").write_text(out)
    page = tmp_path / "r.html"
    rc, _, _ = cli("draw", str(tmp_path / "apply.json"), "--report", str(page))
    assert rc == 0 and "gpu-training-tuning · actual · waiting" in page.read_text()


@pytest.mark.parametrize(("doc", "where", "message"), [
    ([], "1:1", "must hold a JSON object, not array"),
    ({"results": []}, "results", "non-empty list"),
    ({"recipe": "x", "result": "ok", "timeline": [], "compartments": []}, "result", "one of succeeded"),
    ({"recipe": "x", "result": "failed", "timeline": [{"t": -1, "node": "n", "event": "cordon"}],
      "compartments": []}, "timeline[0].t", "between 0 and 1e9"),
    ({"recipe": "x", "result": "failed", "timeline": [{"t": 1, "node": 3, "event": "cordon"}],
      "compartments": []}, "timeline[0].node", "must be a string"),
    ({"recipe": "x", "result": "failed", "timeline": [],
      "compartments": [{"name": "z", "batches": [{"number": True, "nodes": []}]}]},
     "compartments[0].batches[0]", "integer number"),
    ({"recipe": "x", "result": "failed", "timeline": [],
      "compartments": [{"name": "z", "batches": [{"number": 1, "nodes": [1]}]}]},
     "compartments[0].batches[0].nodes", "list of node names"),
])
def test_bad_result_files_are_named_errors(cli: RunCli, tmp_path: Path, doc: object, where: str,
                                           message: str) -> None:
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(doc, indent=1))
    page = tmp_path / "r.html"
    rc, out, err = cli("draw", str(f), "--report", str(page))
    assert rc == 2 and not page.exists() and out == ""
    assert err.startswith(f"error: {f}:") and where in err and message in err and "Traceback" not in err


def test_nan_and_duplicate_keys_are_refused(cli: RunCli, tmp_path: Path) -> None:
    f = tmp_path / "bad.json"
    f.write_text('{"recipe": "x", "recipe": "y", "result": "failed", "timeline": [], "compartments": []}')
    rc, _, err = cli("draw", str(f), "--report", str(tmp_path / "r.html"))
    assert rc == 2 and "recipe" in err
    f.write_text('{"recipe": "x", "result": "failed", "timeline": [{"t": NaN, "node": "n", "event": "e"}], '
                 '"compartments": []}')
    rc, _, err = cli("draw", str(f), "--report", str(tmp_path / "r.html"))
    assert rc == 2 and "NaN" in err


@pytest.mark.parametrize(("verb", "what"), [("apply", "rollout"), ("simulate", "predicted rollout"),
                                            ("plan", "predicted rollout")])
def test_every_verb_with_report_says_where_it_wrote_it(cli: RunCli, tmp_path: Path, verb: str, what: str) -> None:
    """``apply``/``simulate --report`` wrote the page without a word, while ``plan`` and ``draw`` said so."""
    page = tmp_path / "r.html"
    rc, _, err = cli(verb, RECIPE, "--cluster", f"sim:{FLEET}", "--report", str(page))
    assert rc == 0 and page.exists()
    assert f"wrote the {what} of 1 recipe run(s) to {page}" in err


def test_a_plan_given_to_draw_is_named_as_a_plan(cli: RunCli, tmp_path: Path) -> None:
    """It said 'recipe: recipe must be a string' at the plan's last line."""
    rc, out, _ = cli("plan", RECIPE, "--cluster", f"sim:{FLEET}", "-o", "json")
    (tmp_path / "plan.json").write_text(out)
    rc, _, err = cli("draw", str(tmp_path / "plan.json"), "--report", str(tmp_path / "r.html"))
    assert rc == 2 and "this is a plan (`reconciler plan -o json`)" in err and "plan … --report FILE" in err
    assert not (tmp_path / "r.html").exists()


def test_package_render_of_an_unknown_package_lists_the_recipe_s_packages(cli: RunCli) -> None:
    recipe = str(ROOT / "recipes" / "gpu-node-stack.yaml")
    rc, _, err = cli("package", "render", recipe, "--package", "nvidia-setpu")
    assert rc == 2 and "did you mean 'nvidia-setup'?" in err
    assert "packages: base-tools, kernel-params, nvidia-setup, rdma-memlock" in err


def test_a_node_outside_the_selector_is_said_to_be_outside_it(cli: RunCli) -> None:
    rc, _, err = cli("node", "ignore", "-l", "topology.kubernetes.io/zone=us-east-1b", "gpu-a-001",
                     "--cluster", f"sim:{FLEET}", "--dry-run")
    assert rc == 2 and "node 'gpu-a-001' is not among the 12 node(s) -l topology.kubernetes.io/zone=us-east-1b " \
                       "selects" in err and "not found" not in err

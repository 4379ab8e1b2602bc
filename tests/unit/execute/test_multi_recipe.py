"""Several recipes on one node (issue #8 §4): priority/sequencing, shared cordon, runtime-required
taint, autoTaintNewNodes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.adapters.sim.config import SimConfig
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.cli.main import main
from reconciler.errors import CrashInjected
from reconciler.model.nodestate import RUNTIME_REQUIRED_TAINT_KEY, cordon_key
from reconciler.testing.builders import package, recipe
from reconciler.testing.fleetgen import make_node, write_fleet

from .harness import GPU, ONE_AT_A_TIME, SHA, TRAINING, apply

YAML_SHA = "sha256:" + "d" * 64


def _recipe_yaml(name: str, priority: int, *, sequencing: str = "node", interrupt: str = "reboot",
                 runtime_required: bool = False, auto_taint: bool = False) -> str:
    return f"""\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: NodeRecipe
metadata: {{name: {name}}}
spec:
  version: "1"
  nodeSelector: {{matchLabels: {{pool: gpu}}}}
  interruptionBudget: {{count: 2}}
  priority: {priority}
  sequencing: {sequencing}
  runtimeRequired: {str(runtime_required).lower()}
  autoTaintNewNodes: {str(auto_taint).lower()}
  timeouts: {{stageRetries: 0}}
  packages:
    {name}-pkg:
      version: 1.0.0
      image: ghcr.io/example/{name}
      containerSHA: {YAML_SHA}
      interrupt: {{type: {interrupt}}}
"""


def _fleet_file(tmp_path: Path, objs: list[dict]) -> Path:
    f = tmp_path / "fleet.yaml"
    write_fleet(f, objs)
    return f


def test_priority_and_node_sequencing_skip_nodes_where_an_earlier_recipe_failed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.yaml").write_text(_recipe_yaml("first", 100))
    (tmp_path / "b.yaml").write_text(_recipe_yaml("second", 200))
    fleet = _fleet_file(tmp_path, [make_node(f"n{i}", {"pool": "gpu"}) for i in (1, 2, 3)])
    cfg = tmp_path / "sim.yaml"
    cfg.write_text("failures: [{node: n2, package: first-pkg, stage: apply, exitCode: 5, times: 9}]\n")
    rc = main(["apply", str(tmp_path / "b.yaml"), str(tmp_path / "a.yaml"), "--cluster", f"sim:{fleet}",
               "--sim-config", str(cfg), "-o", "json"])
    docs = json.loads(capsys.readouterr().out)["results"]
    assert rc == 1
    assert [d["recipe"] for d in docs] == ["first", "second"]  # priority order, whatever the argument order
    second = {n["name"]: n for n in docs[1]["nodes"]}
    assert second["n2"]["state"] == "waiting" and "first" in second["n2"]["message"]
    # the first recipe failed on n2, in its first batch (n1, n2): it halted there (no failure
    # threshold: the first failed batch halts, issue 34), so it never ran on n3 either; the second
    # did not fail anywhere, it waits where the first is not complete
    assert (docs[0]["result"], docs[1]["result"]) == ("halted", "waiting")
    assert second["n1"]["state"] == "complete" and second["n3"]["state"] == "waiting"


def test_a_node_an_earlier_recipe_leaves_failed_still_holds_the_next_recipe(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On the next run the first recipe does not retry n2 (same inputs: no step planned there, the
    node is ``notRetried``); it is still not complete there, so the second recipe keeps waiting."""
    (tmp_path / "a.yaml").write_text(_recipe_yaml("first", 100))
    (tmp_path / "b.yaml").write_text(_recipe_yaml("second", 200))
    fleet = _fleet_file(tmp_path, [make_node(f"n{i}", {"pool": "gpu"}) for i in (1, 2, 3)])
    cfg = tmp_path / "sim.yaml"
    cfg.write_text("failures: [{node: n2, package: first-pkg, stage: apply, exitCode: 5, times: 9}]\n")
    recipes = [str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml")]
    after = tmp_path / "after.yaml"
    assert main(["apply", *recipes, "--cluster", f"sim:{fleet}", "--sim-config", str(cfg), "--sim-save", str(after),
                 "-o", "json"]) == 1
    capsys.readouterr()
    rc = main(["apply", *recipes, "--cluster", f"sim:{after}", "-o", "json"])
    first, second = ({n["name"]: n for n in d["nodes"]} for d in json.loads(capsys.readouterr().out)["results"])
    assert rc == 1
    assert first["n2"]["state"] == "failed" and "not retried" in first["n2"]["message"]
    assert second["n2"]["state"] == "waiting" and "first" in second["n2"]["message"]


def test_sequencing_all_holds_the_next_recipe_everywhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rdir = tmp_path / "recipes"
    rdir.mkdir()
    (rdir / "a.yaml").write_text(_recipe_yaml("first", 100, sequencing="all"))
    (rdir / "b.yaml").write_text(_recipe_yaml("second", 200))
    fleet = _fleet_file(tmp_path, [make_node(f"n{i}", {"pool": "gpu"}) for i in (1, 2)])
    cfg = tmp_path / "sim.yaml"
    cfg.write_text("failures: [{node: n2, package: first-pkg, stage: apply, exitCode: 5, times: 9}]\n")
    main(["apply", str(rdir), "--cluster", f"sim:{fleet}", "--sim-config", str(cfg), "-o", "json"])
    docs = json.loads(capsys.readouterr().out)["results"]
    assert {n["state"] for n in docs[1]["nodes"]} == {"waiting"}
    assert docs[1]["result"] == "waiting"


def test_shared_cordon_is_released_only_when_the_last_recipe_is_done() -> None:
    sim = SimFleet([make_node("n1", {"pool": "gpu"})], SimConfig())
    a = recipe("alpha", package("a-pkg", sha=SHA, interrupt="reboot"), selector=GPU, protect=TRAINING)
    b = recipe("beta", package("b-pkg", sha=SHA, interrupt="reboot"), selector=GPU, protect=TRAINING)
    sim.crash_after = 3  # alpha cordons n1 and stops mid-way
    with pytest.raises(CrashInjected):
        apply(sim, a, ONE_AT_A_TIME, check=False)
    sim.crash_after = None
    assert sim.get_node("n1").unschedulable
    beta = apply(sim, b, ONE_AT_A_TIME, check=False)
    assert beta.node("n1").state == "complete"
    n1 = sim.get_node("n1")
    assert n1.unschedulable and cordon_key("alpha") in n1.annotations and cordon_key("beta") not in n1.annotations
    alpha = apply(sim, a, ONE_AT_A_TIME)
    assert alpha.node("n1").state == "complete" and not sim.get_node("n1").unschedulable


def test_runtime_required_taint_stays_until_every_runtime_required_recipe_is_complete(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.yaml").write_text(_recipe_yaml("first", 100, runtime_required=True, auto_taint=True,
                                                  interrupt="noop"))
    (tmp_path / "b.yaml").write_text(_recipe_yaml("second", 200, runtime_required=True, interrupt="noop"))
    fleet = _fleet_file(tmp_path, [make_node("n1", {"pool": "gpu"}), make_node("n2", {"pool": "gpu"})])
    cfg = tmp_path / "sim.yaml"
    cfg.write_text("failures: [{node: n2, package: second-pkg, stage: apply, exitCode: 5, times: 9}]\n")
    saved = tmp_path / "after.yaml"
    main(["apply", str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml"), "--cluster", f"sim:{fleet}",
          "--sim-config", str(cfg), "--sim-save", str(saved), "-o", "json"])
    capsys.readouterr()
    after = SimFleet.from_file(str(saved))
    taints = {n.name: {t.key for t in n.taints} for n in after.list_nodes()}
    assert RUNTIME_REQUIRED_TAINT_KEY not in taints["n1"]  # both recipes complete on n1
    assert RUNTIME_REQUIRED_TAINT_KEY in taints["n2"]  # second failed on n2: the taint stays


def test_auto_taint_only_touches_nodes_never_worked_on() -> None:
    objs = [make_node("new", {"pool": "gpu"}), make_node("old", {"pool": "gpu"}, annotations={
        "reconciler.nodewright.dev/status_x": "complete"})]
    sim = SimFleet(objs)
    from reconciler.execute.taints import auto_taint
    from reconciler.observe.snapshot import observe

    r = recipe("tune", package("pk", sha=SHA), selector=GPU, protect=TRAINING, runtimeRequired=True,
               autoTaintNewNodes=True)
    assert auto_taint(sim, [r], observe(sim)) == ["new"]
    assert auto_taint(sim, [r], observe(sim)) == []  # idempotent
    assert {t.key for t in sim.get_node("new").taints} == {RUNTIME_REQUIRED_TAINT_KEY}
    run = apply(sim, r, ONE_AT_A_TIME)
    assert run.node("new").state == "complete" and not sim.get_node("new").taints

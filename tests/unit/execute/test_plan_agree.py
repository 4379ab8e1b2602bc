"""What ``plan`` shows for a node is what ``apply`` runs there (issue 34, items 8-10), on the
simulated fleet, against NodeWright's end-to-end expectations (its chainsaw suite):

* a config-only change of a package recorded at ``config/complete`` runs ``config`` (and the
  ``configInterrupts`` its changed keys select), records the new config digest, and is done;
* a package removed from the recipe without ``uninstall.enabled`` keeps its entry as a marker:
  nothing runs (its uninstall needs ``uninstall.apply``: ``test_scenarios.py``);
* a package without an interrupt runs before the cordon, the wait and the drain: it reaches
  ``config/complete`` while a protected pod still runs, and a node whose packages have no
  interrupt is never cordoned.

The generated version of this check is ``test_plan_apply_agree.py``."""

from __future__ import annotations

from typing import Any

from reconciler.adapters.sim.config import SimConfig
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.diff import config_digest
from reconciler.model.nodestate import config_key, parse_config_digests, parse_state, state_key
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
from reconciler.testing.builders import package, recipe, state_annotations
from reconciler.testing.fleetgen import make_node, make_pod

from .harness import GPU, ONE_AT_A_TIME, SHA, TRAINING, apply


def node_with(*installed: Any, **kw: Any) -> dict[str, Any]:
    return make_node("n1", {"pool": "gpu"}, annotations=state_annotations("tune", installed=installed), **kw)


def started(sim: SimFleet) -> list[tuple[str, str]]:
    return [(p, s) for _t, ev, _n, p, _v, s in sim.stage_log if ev == "start"]


def entries(sim: SimFleet) -> dict[str, tuple[str, str]]:
    st = parse_state(sim.get_node("n1").annotations[state_key("tune")])
    return {k: (v.stage, v.state) for k, v in st.items()}


def test_a_config_only_change_of_a_package_at_config_complete_runs_config_and_is_done() -> None:
    """Item 8: plan said ``reconfigure [config]`` and apply ran nothing, reported the node
    complete, kept the old digest, and every later apply repeated the no-op."""
    old = package("tuned", sha=SHA, config={"a.conf": "1"})
    new = package("tuned", sha=SHA, config={"a.conf": "2"})
    r = recipe("tune", new, selector=GPU)
    sim = SimFleet([node_with(old)])
    n1 = compute_plan(r, ONE_AT_A_TIME, observe(sim)).node("n1")
    assert n1 is not None and [(s.action, s.stages) for s in n1.steps] == [("reconfigure", ("config",))]
    run = apply(sim, r, ONE_AT_A_TIME)
    assert run.result.result == "succeeded"
    assert started(sim) == [("tuned", "config")]
    assert parse_config_digests(sim.get_node("n1").annotations[config_key("tune")])["tuned"] == config_digest(new)
    assert not compute_plan(r, ONE_AT_A_TIME, observe(sim)).node("n1").has_work  # type: ignore[union-attr]
    assert not sim.get_node("n1").unschedulable and not run.events("n1", "cordon")


def test_a_config_change_whose_key_selects_an_interrupt_runs_config_then_it_then_post_interrupt() -> None:
    old = package("tuned", sha=SHA, config={"sysctl.conf": "1"}, config_interrupts={"sysctl*": "restartAllServices"})
    new = package("tuned", sha=SHA, config={"sysctl.conf": "2"}, config_interrupts={"sysctl*": "restartAllServices"})
    r = recipe("tune", new, selector=GPU)
    sim = SimFleet([node_with(old)])
    n1 = compute_plan(r, ONE_AT_A_TIME, observe(sim)).node("n1")
    assert n1 is not None and [s.stages for s in n1.steps] == [("config", "post-interrupt")]
    apply(sim, r, ONE_AT_A_TIME)
    assert started(sim) == [("tuned", "config"), ("tuned", "interrupt"), ("tuned", "post-interrupt")]
    assert entries(sim) == {"tuned|1.0.0": ("post-interrupt", "complete")}
    assert not compute_plan(r, ONE_AT_A_TIME, observe(sim)).node("n1").has_work  # type: ignore[union-attr]


def test_a_package_removed_from_the_recipe_stays_as_a_marker_and_nothing_runs() -> None:
    """Item 9: it was uninstalled although it never enabled uninstall (NodeWright v0.15 did;
    its current suite expects the entry kept and nothing run)."""
    kept, removed = package("base", sha=SHA), package("legacy-agent", sha=SHA)
    r = recipe("tune", kept, selector=GPU)
    sim = SimFleet([node_with(kept, removed)])
    plan = compute_plan(r, ONE_AT_A_TIME, observe(sim))
    assert not plan.node("n1").has_work  # type: ignore[union-attr]
    assert any("legacy-agent is not in the recipe any more" in w for w in plan.warnings)
    apply(sim, r, ONE_AT_A_TIME)
    assert started(sim) == []
    assert entries(sim) == {"base|1.0.0": ("config", "complete"), "legacy-agent|1.0.0": ("config", "complete")}


def test_a_package_without_an_interrupt_completes_while_a_protected_pod_still_runs() -> None:
    """Item 10: NodeWright gates only packages with an interrupt; its suite expects a
    no-interrupt package at ``config/complete`` while a protected pod still runs. Here it
    completes before the node is cordoned; the rebooting package waits for the pod, then the
    drain, as before."""
    r = recipe("tune", package("agent", sha=SHA), package("driver", sha=SHA, interrupt="reboot"), selector=GPU,
               protect=TRAINING)
    train = make_pod("ml", "train", "n1", labels={"workload": "long-running-training"}, owner=("Job", "t"),
                     active_deadline=300)
    sim = SimFleet([make_node("n1", {"pool": "gpu"}), train], SimConfig(stageSeconds=20))
    seen: list[tuple[bool, dict[str, tuple[str, str]]]] = []
    run = apply(sim, r, ONE_AT_A_TIME, after={"patch_node": lambda name, **kw: seen.append(
        (sim.get_pod("ml", "train") is not None and sim.get_pod("ml", "train").phase == "Running",  # type: ignore[union-attr]
         entries(sim) if state_key("tune") in sim.get_node("n1").annotations else {}))})
    assert run.result.result == "succeeded"
    cordon_at = next(e.t for e in run.events("n1", "cordon"))
    agent_done = next(e.t for e in run.events("n1", "stage-end") if e.detail.startswith("agent 1.0.0 config"))
    assert agent_done <= cordon_at
    assert any(training and st.get("agent|1.0.0") == ("config", "complete") for training, st in seen)
    driver_start = next(e.t for e in run.events("n1", "stage-start") if e.detail.startswith("driver"))
    assert driver_start >= next(e.t for e in run.events("n1", "drained"))
    assert "run before the cordon" in (run.plan.node("n1").note or "")  # type: ignore[union-attr]

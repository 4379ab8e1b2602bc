"""Node identity (issue 34, item 3): a node with another UID is another machine. Our records
carry the UID of the machine they were written on (the in-flight record, the cordon claim), every
write of a lifecycle carries the UID it works on as a precondition, and a lifecycle that finds
another machine under its node's name starts again from scratch: nothing of the old machine is
recorded on the new one, and a cordon the new machine registered with is not ours."""

from __future__ import annotations

import json
from typing import Any

import pytest

from reconciler.adapters.sim.fleet import SimFleet
from reconciler.errors import ConflictError
from reconciler.model.nodestate import (
    CordonRecord,
    InFlight,
    cordon_key,
    dump_model,
    inflight_key,
    parse_model,
    parse_state,
    state_key,
)
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
from reconciler.ports import StageSpec
from reconciler.testing.builders import package, recipe
from reconciler.testing.fleetgen import make_node

from .harness import GPU, ONE_AT_A_TIME, SHA, TRAINING, apply

TUNE = recipe("tune", package("base", sha=SHA), package("tuned", sha=SHA, depends_on={"base": "1.0.0"},
                                                          interrupt="reboot"), selector=GPU, protect=TRAINING)


def nodes(n: int) -> list[dict[str, Any]]:
    return [make_node(f"n{i}", {"pool": "gpu"}, created=1795000000.0 + i) for i in range(1, n + 1)]


def stages_on(sim: SimFleet, node: str, since: int = 0) -> list[tuple[str, str]]:
    """(package, stage) of every stage pod started on ``node`` from entry ``since`` of the
    simulated fleet's stage log on."""
    return [(p, s) for _t, ev, n, p, _v, s in sim.stage_log[since:] if n == node and ev == "start"]


def test_the_commitment_records_the_machine_it_was_made_on() -> None:
    """The in-flight record and the cordon claim carry the node's UID (read mid-lifecycle)."""
    seen: list[tuple[InFlight | None, CordonRecord | None]] = []
    sim = SimFleet(nodes(1))
    uid, boot = sim.get_node("n1").uid, sim.get_node("n1").boot_id

    def look(spec: StageSpec) -> None:
        ann = sim.get_node("n1").annotations
        seen.append((parse_model(InFlight, ann.get(inflight_key("tune"))),
                     parse_model(CordonRecord, ann.get(cordon_key("tune")))))

    run = apply(sim, TUNE, ONE_AT_A_TIME, after={"start_stage": look})
    assert run.result.result == "succeeded"
    # base (no interrupt) runs before the cordon: the claim is there from tuned's first stage on
    fl, claim = next((f, c) for f, c in seen if c is not None)
    assert fl is not None and claim is not None
    assert fl.nodeUID == uid and claim.uid == uid
    assert fl.release and fl.recipeVersion == TUNE.version
    assert [(s.package, s.to, s.stages) for s in fl.steps or ()] == [
        ("base", "1.0.0", ("apply", "config")), ("tuned", "1.0.0", ("apply", "config", "post-interrupt"))]
    assert fl.interruptOwner == "tuned" and fl.bootID == boot  # the owner and the baseline, fixed at the commit


def test_a_machine_replaced_while_its_reboot_was_pending_is_planned_from_scratch() -> None:
    """Issue 34 item 3: replaced mid-reboot, the new machine was recorded complete with no stage
    run on it. Now every stage runs on the new machine, and nothing of the old one is kept."""
    sim = SimFleet(nodes(1))
    old_uid = sim.get_node("n1").uid
    replaced: list[int] = []

    def replace(spec: StageSpec) -> None:
        if spec.stage == "interrupt" and not replaced:
            replaced.append(len(sim.stage_log))
            sim.replace_node("n1")

    run = apply(sim, TUNE, ONE_AT_A_TIME, after={"start_stage": replace})
    n1 = sim.get_node("n1")
    assert replaced and n1.uid != old_uid
    assert run.node("n1").state == "complete", run.node("n1").message
    assert run.events("n1", "replaced")
    # every stage of the recipe ran on the new machine, and its own reboot with it
    assert stages_on(sim, "n1", since=replaced[0]) == [
        ("base", "apply"), ("base", "config"), ("tuned", "apply"), ("tuned", "config"), ("tuned", "interrupt"),
        ("tuned", "post-interrupt")]
    state = parse_state(n1.annotations[state_key("tune")])
    assert {k: (v.stage, v.state) for k, v in state.items()} == {
        "base|1.0.0": ("config", "complete"), "tuned|1.0.0": ("post-interrupt", "complete")}
    assert not n1.unschedulable and cordon_key("tune") not in n1.annotations
    assert not compute_plan(TUNE, ONE_AT_A_TIME, observe(sim)).node("n1").has_work  # type: ignore[union-attr]


def test_a_cordon_the_new_machine_registered_with_is_not_ours() -> None:
    """Replaced mid-stages by a machine that registers cordoned: its cordon stays after the run
    (it is someone else's), and the lifecycle still runs every stage on it."""
    sim = SimFleet(nodes(1))
    done: list[bool] = []

    def replace(spec: StageSpec) -> None:
        if spec.package == "tuned" and spec.stage == "apply" and not done:
            done.append(True)
            sim.replace_node("n1", unschedulable=True)

    run = apply(sim, TUNE, ONE_AT_A_TIME, after={"start_stage": replace})
    n1 = sim.get_node("n1")
    assert run.node("n1").state == "complete", run.node("n1").message
    assert n1.unschedulable, "the new machine's own cordon was lifted"
    assert cordon_key("tune") not in n1.annotations
    assert parse_state(n1.annotations[state_key("tune")])["tuned|1.0.0"].stage == "post-interrupt"


def test_records_of_another_machine_are_void_for_the_plan_and_the_run() -> None:
    """Our annotations copied onto a node object with another UID (its in-flight record and claim
    name the old machine): the plan ignores them (planned from scratch), the run removes them, and
    the claim does not make the node's cordon ours."""
    sim = SimFleet(nodes(2))
    apply(sim, TUNE, ONE_AT_A_TIME)
    # n2 is replaced; a provisioner copies n1's annotations (ours included) onto it
    sim.replace_node("n2", unschedulable=True)
    fl = InFlight(runId="run-old", planHash="h", phase="interrupt", lifecycle="run-old", nodeUID="another-machine",
                  interrupt={"type": "reboot"}, interruptPackages=("tuned",), requestedAt="2026-01-01T00:00:00Z")
    claim = CordonRecord(runId="run-old", uid="another-machine")
    copied = {**sim.get_node("n1").annotations, inflight_key("tune"): dump_model(fl),
              cordon_key("tune"): dump_model(claim)}
    sim.nodes["n2"]["metadata"]["annotations"] = copied
    sim._index.node_changed("n2")
    plan = compute_plan(TUNE, ONE_AT_A_TIME, observe(sim))
    n2 = plan.node("n2")
    assert n2 is not None and [s.package for s in n2.steps] == ["base", "tuned"], n2
    assert "another machine" in n2.note and not plan.outOfScope
    run = apply(sim, TUNE, ONE_AT_A_TIME)
    node = sim.get_node("n2")
    assert run.node("n2").state == "complete", run.node("n2").message
    assert node.unschedulable  # registered cordoned: not ours to lift
    rec = parse_model(InFlight, node.annotations.get(inflight_key("tune")))
    assert rec is None and cordon_key("tune") not in node.annotations


def test_a_write_with_another_machines_uid_is_refused() -> None:
    sim = SimFleet(nodes(1))
    uid = sim.get_node("n1").uid
    sim.patch_node("n1", annotations={"a": "1"}, uid=uid)
    sim.replace_node("n1")
    with pytest.raises(ConflictError) as err:
        sim.patch_node("n1", annotations={"a": "2"}, uid=uid)
    assert err.value.reason == "UIDPrecondition"
    assert "a" not in sim.get_node("n1").annotations
    assert json.dumps(sim.get_node("n1").annotations) == "{}"

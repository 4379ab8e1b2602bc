"""Nodes that join NotReady and failures their readiness caused (issue 34, item 2), on the simulated fleet.

An autoscaled GPU node joins NotReady for minutes while its drivers load, registered with the
runtime-required taint. That is waiting, not failure: the lifecycle waits for it within
``timeouts.nodeReady`` (counted from its Ready condition's last transition), and past the bound the
node is left waiting — nothing started, nothing written, its taint kept — and taken up once Ready.
A failure the node's readiness caused is retried once its readiness changes, and a failure record of
another machine under the same name (another UID) holds nothing: "not retried with the same inputs"
counts the node's readiness and identity among the inputs (``reconciler.model.nodestate.not_retried``).
"""

from __future__ import annotations

from reconciler.adapters.sim.fleet import SimFleet
from reconciler.model.nodestate import (
    RUNTIME_REQUIRED_TAINT_KEY,
    FailureRecord,
    dump_model,
    failure_key,
    inflight_key,
    inputs_digest,
    not_retried,
    status_key,
)
from reconciler.model.recipe import Timeouts
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
from reconciler.testing import builders as b
from reconciler.testing.builders import package, policy, recipe
from reconciler.testing.fleetgen import make_node

from .harness import GPU, SHA, TRAINING, apply

TAINT = {"key": RUNTIME_REQUIRED_TAINT_KEY, "value": "true", "effect": "NoSchedule"}
HALT_AT_FIRST = policy(count=1, default_strategy="fixed", failureThreshold=1, safetyLimit=100)


def fleet(n: int = 3) -> SimFleet:
    sim = SimFleet([make_node(f"n{i}", GPU, created=1795000000.0) for i in range(1, n + 1)])
    sim.set_node("n2", ready=False, taints=[TAINT])  # joins NotReady, registered with the taint
    return sim


def tune(**timeouts: int) -> object:
    return recipe("tune", package("tuned", sha=SHA, interrupt="reboot"), selector=GPU, protect=TRAINING,
                  runtimeRequired=True, timeouts=Timeouts(**timeouts))


def taints(sim: SimFleet, node: str) -> list[str]:
    return [t.key for t in sim.get_node(node).taints]


def test_a_node_that_joins_not_ready_is_waited_for_then_done_in_the_same_run() -> None:
    sim = fleet()
    sim._at(sim.now() + 450, lambda: sim.set_node("n2", ready=True))  # drivers loaded
    run = apply(sim, tune(), HALT_AT_FIRST)
    assert run.result.result == "succeeded", [(n.name, n.state, n.message) for n in run.result.nodes]
    assert {n.name: n.state for n in run.result.nodes} == dict.fromkeys(("n1", "n2", "n3"), "complete")
    waits = run.events("n2", "wait")
    assert waits and "NodeNotReady" in waits[0].detail and "600 s" in waits[0].detail
    assert run.events("n2", "cordon")[0].t >= 450  # nothing started before it was Ready
    assert failure_key("tune") not in sim.get_node("n2").annotations
    assert RUNTIME_REQUIRED_TAINT_KEY not in taints(sim, "n2")  # removed once its packages passed


def test_a_node_not_ready_past_the_bound_is_left_waiting_not_failed_and_done_once_ready() -> None:
    sim = fleet()
    first = apply(sim, tune(nodeReady=300), HALT_AT_FIRST)
    n2 = first.node("n2")
    assert n2.state == "waiting" and "NodeNotReady" in n2.message and "nothing was started" in n2.message
    # not a failure: no record, nothing written on it, its taint kept; the others were not halted by it
    ann = sim.get_node("n2").annotations
    assert failure_key("tune") not in ann and inflight_key("tune") not in ann and status_key("tune") not in ann
    assert RUNTIME_REQUIRED_TAINT_KEY in taints(sim, "n2") and not sim.get_node("n2").unschedulable
    assert first.node("n1").state == first.node("n3").state == "complete"
    assert first.result.result == "waiting" and first.events("n2", "not-started")
    # the plan agrees: nothing holds it; once Ready the next apply completes it
    sim.set_node("n2", ready=True)
    assert compute_plan(tune(nodeReady=300), HALT_AT_FIRST, observe(sim)).node("n2").notRetried is None
    second = apply(sim, tune(nodeReady=300), HALT_AT_FIRST)
    assert second.node("n2").state == "complete" and second.result.result == "succeeded"
    assert RUNTIME_REQUIRED_TAINT_KEY not in taints(sim, "n2")


def test_a_node_that_stays_not_ready_long_ago_is_not_waited_for_again() -> None:
    """The bound counts from the Ready condition's last transition, not from this run: a node
    NotReady for an hour does not hold its batch another 600 s at every pass."""
    sim = fleet()
    sim.advance(3600)
    run = apply(sim, tune(), HALT_AT_FIRST)
    assert run.node("n2").state == "waiting"
    assert run.events("n2", "not-started") and not run.events("n2", "wait")


def _failed_earlier(sim: SimFleet, rec: FailureRecord) -> None:
    ann = dict(sim.get_node("n2").annotations)
    ann[failure_key("tune")] = dump_model(rec)
    sim.nodes["n2"]["metadata"]["annotations"] = ann
    sim._bump(sim.nodes["n2"])
    sim._index.node_changed("n2")


def test_a_failure_its_readiness_caused_is_retried_once_its_readiness_changes() -> None:
    r = tune()
    same = inputs_digest(r, HALT_AT_FIRST)  # type: ignore[arg-type]
    for rec in (  # NotReady at the end of its lifecycle; a record of an older version (readiness unknown)
        FailureRecord(runId="run-0", reason="NodeNotReady", inputs=same, ready="False"),
        FailureRecord(runId="run-0", reason="NodeNotReady", inputs=same),
    ):
        sim = fleet()
        sim.set_node("n2", ready=True)
        _failed_earlier(sim, rec)
        assert not_retried(sim.get_node("n2"), "tune", same) is None
        assert compute_plan(r, HALT_AT_FIRST, observe(sim)).node("n2").notRetried is None  # type: ignore[arg-type]
        run = apply(sim, r, HALT_AT_FIRST)
        assert run.node("n2").state == "complete", run.node("n2").message


def test_a_failure_not_caused_by_readiness_still_holds_and_readiness_unchanged_still_holds() -> None:
    r = tune()
    same = inputs_digest(r, HALT_AT_FIRST)  # type: ignore[arg-type]
    sim = fleet()
    sim.set_node("n2", ready=True)
    uid = sim.get_node("n2").uid
    stage = FailureRecord(runId="run-0", reason="StageFailed", inputs=same, uid=uid, ready="True")
    _failed_earlier(sim, stage)
    assert not_retried(sim.get_node("n2"), "tune", same) == stage
    sim.set_node("n2", ready=False)  # a stage failure is not retried because the node went NotReady
    assert not_retried(sim.get_node("n2"), "tune", same) == stage
    not_ready = FailureRecord(runId="run-0", reason="RebootTimeout", inputs=same, uid=uid, ready="False")
    _failed_earlier(sim, not_ready)
    assert not_retried(sim.get_node("n2"), "tune", same) == not_ready  # still NotReady: held
    run = apply(sim, r, HALT_AT_FIRST)
    assert run.node("n2").state == "failed" and "not retried" in run.node("n2").message


def test_a_failure_record_of_another_machine_under_the_same_name_holds_nothing() -> None:
    r = tune()
    same = inputs_digest(r, HALT_AT_FIRST)  # type: ignore[arg-type]
    sim = fleet()
    sim.set_node("n2", ready=True)
    _failed_earlier(sim, FailureRecord(runId="run-0", reason="StageFailed", inputs=same, uid="uid-of-the-old-n2",
                                       ready="True"))
    assert sim.get_node("n2").uid and not_retried(sim.get_node("n2"), "tune", same) is None
    assert compute_plan(r, HALT_AT_FIRST, observe(sim)).node("n2").notRetried is None  # type: ignore[arg-type]
    assert not_retried(b.node("n2", recipe="tune", failure=FailureRecord(
        runId="run-0", reason="StageFailed", inputs=same, uid="uid-n2")), "tune", same) is not None
    run = apply(sim, r, HALT_AT_FIRST)
    assert run.node("n2").state == "complete"

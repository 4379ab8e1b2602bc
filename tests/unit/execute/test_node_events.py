"""Kubernetes Events on the node for cordon, drain and uncordon (issue 38): ``kubectl describe
node`` says which recipe cordoned, drained and released the node. They are notices: a refused
Event write is logged and the rollout goes on (the node is not failed for it)."""

from __future__ import annotations

import pytest

from reconciler.adapters.sim.fleet import SimFleet
from reconciler.execute.rollout import Rollout
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
from reconciler.testing.builders import package, recipe
from reconciler.testing.faults import Fault, FaultyCluster
from reconciler.testing.fleetgen import make_node

from .harness import GPU, ONE_AT_A_TIME, SHA, apply

R = recipe("tune", package("tuned", sha=SHA, interrupt="reboot"), selector=GPU)


def test_each_node_gets_cordoned_drained_and_uncordoned_events_in_order() -> None:
    run = apply([make_node(f"n{i}", GPU) for i in (1, 2)], R, ONE_AT_A_TIME)
    assert {o.name: o.state for o in run.result.nodes} == {"n1": "complete", "n2": "complete"}
    for node in ("n1", "n2"):
        mine = [e for e in run.sim.events if e["node"] == node]
        assert [e["reason"] for e in mine] == ["Cordoned", "Drained", "Uncordoned"], mine
        assert all(e["type"] == "Normal" and e["message"].startswith("recipe tune") for e in mine)
        assert "pods gone" in mine[1]["message"]


def test_a_refused_event_write_does_not_stop_the_rollout(caplog: pytest.LogCaptureFixture) -> None:
    sim = SimFleet([make_node("n1", GPU)])
    refused = [Fault("forbidden", verb="emit_event", times=None)]
    plan = compute_plan(R, ONE_AT_A_TIME, observe(sim))
    port = FaultyCluster(sim, clock=sim, faults=refused)
    result = Rollout(R, ONE_AT_A_TIME, plan, port, sim).run()
    assert [o.state for o in result.nodes] == ["complete"] and result.result == "succeeded"
    assert sim.events == [] and len(port.injected) == 3  # cordon, drain, uncordon: each refused
    assert "Event Cordoned not written" in caplog.text

"""Fresh decisions where ownership matters (issue 12, finding 4).

Cordon and uncordon are decided from a read whose resourceVersion is the patch's precondition;
on 409, or after any failed write, the node is read again and the decision made again. An admin
cordon made while our cordon was being retried, or between our read and our write, is never
claimed as ours and never removed by us.
"""

from __future__ import annotations

import pytest

from reconciler.adapters.sim.fleet import SimFleet
from reconciler.execute.rollout import Rollout
from reconciler.model.nodestate import cordon_key
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
from reconciler.testing.builders import package, recipe
from reconciler.testing.faults import Fault, FaultyCluster
from reconciler.testing.fleetgen import make_node

from .harness import GPU, ONE_AT_A_TIME, SHA, TRAINING

R = recipe("tune", package("driver", sha=SHA, interrupt="reboot"), selector=GPU, protect=TRAINING)


def _run(faults: list[Fault], admin_at: float) -> tuple[SimFleet, FaultyCluster, object]:
    sim = SimFleet([make_node("n1", {"pool": "gpu"})])
    sim._at(admin_at, lambda: sim.set_node("n1", unschedulable=True))  # `kubectl cordon n1` by an admin
    fc = FaultyCluster(sim, faults=faults)
    plan = compute_plan(R, ONE_AT_A_TIME, observe(sim))
    res = Rollout(R, ONE_AT_A_TIME, plan, fc, sim, run_id="run-own").run()
    return sim, fc, res


@pytest.mark.parametrize(
    ("faults", "admin_at"),
    [
        # our cordon fails (500) and the admin cordons before the retry
        ([Fault("server", verb="patch_node", target="node/n1", nth=1, delay=2.0)], 1.0),
        # our cordon is in flight (2 s) while the admin cordons: the write meets a changed node (409)
        ([Fault(None, verb="patch_node", target="node/n1", nth=1, delay=2.0)], 1.0),
        # our cordon lands at 2 s but its answer is lost; the admin's cordon at 3 s changes nothing
        # (the node is already cordoned, as `kubectl cordon` says); the retry finds our claim
        ([Fault("timeout", verb="patch_node", target="node/n1", nth=1, after=True, delay=2.0)], 3.0),
    ],
    ids=["refused-then-admin", "admin-between-read-and-write", "answer-lost"],
)
def test_an_admin_cordon_during_our_cordon_is_never_claimed_or_removed(faults: list[Fault], admin_at: float) -> None:
    sim, _, res = _run(faults, admin_at=admin_at)
    node = sim.nodes["n1"]
    n1 = next(n for n in res.nodes if n.name == "n1")  # type: ignore[attr-defined]
    assert n1.state == "complete", n1
    lost_answer = faults[0].after
    if lost_answer:
        # the cordon landed before the admin's (a no-op then): it is ours, and ours alone is released
        assert not node["spec"].get("unschedulable")
    else:
        assert node["spec"].get("unschedulable") is True, "the admin's cordon must stay"
        events = [e for e in res.timeline if e.node == "n1" and e.event in ("cordon", "uncordon")]  # type: ignore[attr-defined]
        assert [e.event for e in events] == ["cordon"] and "someone else" in events[0].detail
    assert cordon_key("tune") not in node["metadata"].get("annotations", {})


def test_a_cordon_patch_carries_the_resource_version_it_was_decided_from() -> None:
    sim = SimFleet([make_node("n1", {"pool": "gpu"})])
    seen: list[str | None] = []

    def patch(name: str, **kw: object) -> None:
        if kw.get("unschedulable") is not None:
            seen.append(kw.get("resource_version"))  # type: ignore[arg-type]

    plan = compute_plan(R, ONE_AT_A_TIME, observe(sim))
    Rollout(R, ONE_AT_A_TIME, plan, FaultyCluster(sim, before={"patch_node": patch}), sim, run_id="run-rv").run()
    assert len(seen) == 2 and all(seen), seen  # cordon and uncordon, both conditional

"""The invariants' Watch is a port decorator (issue 13): it sees exactly the requests that reached
the simulated fleet, whatever decorators a test puts around it."""

from __future__ import annotations

import pytest

from reconciler.adapters.sim.fleet import SimFleet
from reconciler.errors import TooManyRequestsError, TransientError
from reconciler.model.nodestate import cordon_key
from reconciler.testing.faults import Fault, FaultyCluster
from reconciler.testing.fleetgen import make_node, make_pod
from reconciler.testing.invariants import Watch


def _fleet() -> SimFleet:
    return SimFleet([make_node("n1", {}), make_node("n2", {}),
                     make_pod("web", "w1", "n1", labels={"app": "w"}, owner=("ReplicaSet", "w"))])


def test_a_write_whose_answer_was_lost_is_seen_one_refused_before_it_reached_the_fleet_is_not() -> None:
    sim = _fleet()
    watch = Watch(sim, "r", {"n1": "c", "n2": "c"})
    faulty = FaultyCluster(watch.port, clock=sim, faults=[
        Fault("timeout", verb="patch_node", target="node/n1", after=True),  # applied, answer lost
        Fault("unavailable", verb="patch_node", target="node/n2"),  # never reaches the fleet
        Fault("throttle", verb="evict_pod", target="pod/web/w1")])
    cordon = {cordon_key("r"): '{"runId":"x"}'}
    for node in ("n1", "n2"):
        with pytest.raises(TransientError):
            faulty.patch_node(node, annotations=cordon, unschedulable=True)
    assert watch.max_held == {"c": 1} and watch.held() == {"c": ["n1"]}
    with pytest.raises(TooManyRequestsError):
        faulty.evict_pod("web", "w1", "", 1)
    assert watch.evicted == []
    faulty.evict_pod("web", "w1", "", 1)
    assert watch.evicted == [("web/w1", {"app": "w"}, "Running")]
    assert [(c.verb, c.target, c.outcome) for c in watch.port.calls] == [
        ("patch_node", "node/n1", "ok"), ("evict_pod", "pod/web/w1", "ok")]

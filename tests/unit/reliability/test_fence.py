"""Fenced writes (issue 12, finding 2): a run that lost its Lease writes nothing more.

A run's renewals fail (a partition between it and the API server, for lease writes only); the
Lease expires on the server; another run takes it over once it has expired and finishes the
rollout. Every write the first run made must precede its own fence deadline, hence the expiry and
the take-over: zero writes after the loss. Writes are recorded with the simulated UTC time by a
port decorator around the simulated fleet.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from reconciler.adapters.sim.fleet import SimFleet
from reconciler.execute.fence import FencedCluster
from reconciler.execute.lock import LeaseGroup, LeaseLostError, lease_name
from reconciler.execute.rollout import Rollout
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
from reconciler.ports import ClusterPorts
from reconciler.testing.faults import WRITE_METHODS, Fault, FaultyCluster

from .sweep import CONFIG, POLICY, RECIPE, fleet, recorded_state, run_scenario

NAME = lease_name(RECIPE.name)


class WriteLog:
    """Records (UTC time, holder tag, method, target) of every write that reaches ``sim``."""

    def __init__(self, sim: SimFleet, tag: str) -> None:
        self.sim, self.tag = sim, tag
        self.log: list[tuple[float, str, str]] = []

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self.sim, name)
        if name not in WRITE_METHODS or name.endswith("_lease"):
            return fn

        def write(*a: Any, **kw: Any) -> Any:
            self.log.append((self.sim.utc(), name, str(a[0]) if a else ""))
            return fn(*a, **kw)

        return write


def _rollout(cluster: Any, sim: SimFleet, group: LeaseGroup, run_id: str) -> Rollout:
    plan = compute_plan(RECIPE, POLICY, observe(sim))
    return Rollout(RECIPE, POLICY, plan, cluster, sim, run_id=run_id, on_tick=group.tick)


def _at(sim: SimFleet, t: float, fn: Callable[[], None]) -> None:
    sim._at(t, fn)


@pytest.mark.parametrize(("partition_from", "latency"), [(1, 0.0), (3, 0.0), (6, 0.0), (1, 7.0), (4, 7.0)])
def test_a_run_whose_renewals_fail_writes_nothing_after_the_loss(partition_from: int, latency: float) -> None:
    """``latency``: simulated seconds each write spends in flight, so one pass of the loop (many
    writes) outlasts the lease: only a check before every write keeps the run inside it."""
    reference = recorded_state(run_scenario().sim)
    sim = SimFleet(fleet(), CONFIG)
    lease_path = FaultyCluster(sim, faults=[Fault("reset", verb="replace_lease", nth=partition_from, times=None)])
    a = LeaseGroup(lease_path, sim, [RECIPE.name], "run-a")
    a.acquire()
    log_a = WriteLog(sim, "run-a")
    taken: list[float] = []

    def thief() -> None:  # run B polls the lease and takes it as soon as it has expired on the server
        lease = sim.get_lease(NAME)
        assert lease is not None
        if lease.expires_in(sim.utc()) <= 0:
            b.acquire()
            taken.append(sim.utc())
        else:
            _at(sim, sim._now + 1.0, thief)

    b = LeaseGroup(sim, sim, [RECIPE.name], "run-b")
    _at(sim, 1.0, thief)
    slow = FaultyCluster(log_a, clock=sim, faults=[Fault(None, verb="write", times=None, delay=latency)])  # type: ignore[arg-type]
    ra = _rollout(FencedCluster(slow, a), sim, a, "run-a")
    res = ra.run()
    assert "stops writing" in ra.stopped or "could not renew" in ra.stopped, ra.stopped
    assert res.result == "failed"
    while not taken:  # the thief takes over once the lease expired
        sim.wait(1.0)
    assert log_a.log, "run A wrote before the partition"
    last = max(t for t, _, _ in log_a.log)
    lease_b = sim.get_lease(NAME)
    assert lease_b is not None and lease_b.holder == "run-b"
    assert last < taken[0], (last, taken[0])
    # stronger: A stopped before its own deadline (last renewal sent + duration - margin)
    lock = a.locks[0]
    assert last <= sim.epoch + lock._renewed_at - sim.mono_offset + lock.duration - lock.margin + latency + 1e-6
    # every later write of A is refused by the fence, and ticks keep saying why
    with pytest.raises(LeaseLostError):
        FencedCluster(log_a, a).patch_node("n1", annotations={"x": "y"})  # type: ignore[arg-type]
    with pytest.raises(LeaseLostError):
        a.tick(sim.now())
    n = len(log_a.log)
    # run B resumes A's nodes and ends where an uninterrupted run ends
    _rollout(sim, sim, b, "run-b").run()
    b.release()
    assert len(log_a.log) == n
    assert recorded_state(sim) == reference


def test_the_fence_refuses_writes_once_the_margin_is_gone_even_between_ticks() -> None:
    sim = SimFleet(fleet(), CONFIG)
    g = LeaseGroup(sim, sim, [RECIPE.name], "run-a", duration=60)
    g.acquire()
    fenced = FencedCluster(sim, g)
    fenced.patch_node("n1", annotations={"x": "1"})  # held with margin: allowed
    lock = g.locks[0]
    sim.advance(lock.duration - lock.margin - 0.5)
    fenced.patch_node("n1", annotations={"x": "2"})  # 0.5 s of margin left
    sim.advance(1.0)  # no tick happened: the deadline alone refuses the write
    before = sim.writes
    with pytest.raises(LeaseLostError, match="stops writing"):
        fenced.patch_node("n1", annotations={"x": "3"})
    assert sim.writes == before
    assert sim.nodes["n1"]["metadata"]["annotations"]["x"] == "2"


def test_a_stolen_lease_stops_the_run_at_its_next_renewal_and_no_write_follows() -> None:
    sim = SimFleet(fleet(), CONFIG)
    g = LeaseGroup(sim, sim, [RECIPE.name], "run-a")
    g.acquire()
    log_a = WriteLog(sim, "run-a")
    from dataclasses import replace

    stolen: list[float] = []

    def steal() -> None:
        sim.leases[NAME] = replace(sim.leases[NAME], holder="run-intruder")
        stolen.append(sim.utc())

    _at(sim, 300.0, steal)
    r = _rollout(FencedCluster(log_a, g), sim, g, "run-a")  # type: ignore[arg-type]
    r.run()
    assert "taken over by run-intruder" in r.stopped
    # detected at the first renewal after the theft; not one write after that renewal
    renewal_every = g.locks[0].renew_every
    detected = stolen[0] + renewal_every
    assert all(t <= detected + 1e-6 for t, _, _ in log_a.log)


class _Refuse:
    """A fence that refuses every write."""

    def check(self) -> None:
        raise LeaseLostError("lost")


def test_the_fenced_cluster_exposes_the_bundles_control_store() -> None:
    """A role bundle (``KubeCluster.ports``) carries its control store as one role; the fenced
    cluster reads through it and fences its writes (the controller's pause/disable controls)."""
    from dataclasses import replace

    sim = SimFleet(fleet())
    bundle = ClusterPorts.of(sim)

    class Open:
        def check(self) -> None:
            pass

    fenced = FencedCluster(bundle, Open())
    fenced.patch_config_map("node-reconciler", "controls", {"r": "1"})
    assert fenced.get_config_map("node-reconciler", "controls") == {"r": "1"}
    refused = FencedCluster(bundle, _Refuse())
    with pytest.raises(LeaseLostError):
        refused.patch_config_map("node-reconciler", "controls", {"r": None})
    assert refused.get_config_map("node-reconciler", "controls") == {"r": "1"}

    with pytest.raises(TypeError, match="keeps no ConfigMaps"):
        FencedCluster(replace(bundle, controls=None), Open()).get_config_map("a", "b")


def test_the_fenced_bundle_keeps_the_reconcilers_namespace() -> None:
    """A bundle in another namespace (``-n``) stays there fenced: the pause/disable switches of a
    controller pass are read from that namespace's controls ConfigMap, not the default one."""
    from dataclasses import replace

    from reconciler.ops.controls import namespace_for

    bundle = replace(ClusterPorts.of(SimFleet(fleet())), namespace="gpu-ops")
    assert namespace_for(FencedCluster(bundle, _Refuse()).ports) == "gpu-ops"

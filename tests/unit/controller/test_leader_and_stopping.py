"""Leader election on a Lease (reconciler.controller.leader) and the stop signal
(reconciler.controller.stopping) on the simulated fleet: one leader at a time, a clean release
hands over at once, a leader that cannot renew steps down, and a stop fences writes and wakes waits."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from reconciler.adapters.sim.fleet import SimFleet
from reconciler.controller.leader import LEADER_LEASE, Leadership
from reconciler.controller.stopping import PassStopped, StoppableClock, StoppableCluster, StoppableFeed, StopSignal
from reconciler.errors import LeaseHeldError
from reconciler.execute.lock import holder_identity, lease_name, take_lease
from reconciler.load.recipes import OBJECT_NAME
from reconciler.ports import ClusterPorts

ROOT = Path(__file__).resolve().parents[3]
FLEET = str(ROOT / "examples" / "fleets" / "gpu-24.yaml")


def _until(cond: object, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


def test_the_leader_lease_name_can_never_be_a_recipes() -> None:
    assert not OBJECT_NAME.fullmatch(LEADER_LEASE)
    assert lease_name(LEADER_LEASE).startswith("reconciler-controller-leader-")


def test_one_leader_at_a_time_and_a_clean_release_hands_over() -> None:
    sim = SimFleet.from_file(FLEET)
    a = Leadership(sim, sim, "a/1", lease_duration=15, renew_deadline=10, retry_period=0.05).start()
    assert _until(a.is_leader)
    b = Leadership(sim, sim, "b/1", lease_duration=15, renew_deadline=10, retry_period=0.05).start()
    time.sleep(0.3)
    assert not b.is_leader()  # a renews; b stands by
    lease = sim.get_lease(a.lease_name)
    assert lease is not None and lease.holder == "a/1"
    a.release()
    assert _until(b.is_leader)  # no waiting for expiry: the Lease was deleted
    assert sim.get_lease(b.lease_name).holder == "b/1"  # type: ignore[union-attr]
    b.release()
    assert sim.get_lease(b.lease_name) is None


def test_a_leader_past_its_renew_deadline_steps_down() -> None:
    sim = SimFleet.from_file(FLEET)
    a = Leadership(sim, sim, "a/1", lease_duration=15, renew_deadline=10, retry_period=0.05)
    a.lock.acquire()
    a.leading.set()
    assert a.is_leader()
    sim.advance(11)  # no renewal for longer than the renew deadline
    assert not a.is_leader()
    assert "may expire" in a.lost() or "last renewed" in a.lost()


def test_leader_durations_must_be_ordered() -> None:
    sim = SimFleet.from_file(FLEET)
    with pytest.raises(ValueError, match="retry period"):
        Leadership(sim, sim, "a/1", lease_duration=10, renew_deadline=10, retry_period=2)


def test_a_stop_fences_writes_but_not_reads_and_forwards_the_adapter_attributes() -> None:
    sim = SimFleet.from_file(FLEET)
    signal = StopSignal()
    fenced = StoppableCluster(sim, signal)
    node = fenced.list_nodes()[0]
    fenced.emit_event(node.name, "Test", "before the stop")
    signal.preempt("node x joined")
    with pytest.raises(PassStopped, match="preempted: node x joined"):
        fenced.emit_event(node.name, "Test", "after the stop")
    assert fenced.get_node(node.name).name == node.name  # reads pass
    assert fenced.calls is sim.calls  # type: ignore[attr-defined]  # adapter attributes are forwarded
    signal.clear_preempt()
    fenced.emit_event(node.name, "Test", "after clearing")
    signal.request_shutdown()
    with pytest.raises(PassStopped, match="shutdown"):
        fenced.patch_node(node.name, labels={"a": "b"})


class SlowClock:
    """A real-time clock whose wait sleeps, and a change feed on it that tells nothing changed
    (as the watch streams do when nothing changes)."""

    def now(self) -> float:
        return time.monotonic()

    def utc(self) -> float:
        return time.time()

    def wait(self, seconds: float) -> None:
        time.sleep(seconds)

    def changed(self, within: float) -> set[str]:
        time.sleep(within)
        return set()


def test_a_stop_wakes_a_long_wait_within_a_slice() -> None:
    signal = StopSignal()
    clock = StoppableClock(SlowClock(), signal, slice_seconds=0.05)
    feed = StoppableFeed(SlowClock(), SlowClock(), signal, slice_seconds=0.05)
    threading.Timer(0.2, signal.request_shutdown).start()
    start = time.monotonic()
    with pytest.raises(PassStopped):
        clock.wait(3600)
    with pytest.raises(PassStopped):
        feed.changed(3600)
    assert time.monotonic() - start < 2.0
    start = time.monotonic()
    StoppableClock(SlowClock(), StopSignal(), slice_seconds=0.05).wait(0.12)
    assert 0.1 <= time.monotonic() - start < 1.0  # the whole wait, in slices
    assert StoppableFeed(SlowClock(), SlowClock(), StopSignal(), slice_seconds=0.05).changed(0.12) == set()


def test_the_controls_are_reached_through_a_role_bundle() -> None:
    """A role bundle (``KubeCluster.ports``) carries its control store as one role. The stop
    wrapper reads the pause/disable controls through it and fences writes to it."""
    sim = SimFleet.from_file(FLEET)
    signal = StopSignal()
    fenced = StoppableCluster(ClusterPorts.of(sim), signal)
    fenced.patch_config_map("node-reconciler", "node-reconciler-controls", {"r": '{"paused": true}'})
    assert fenced.get_config_map("node-reconciler", "node-reconciler-controls") == {"r": '{"paused": true}'}
    signal.request_shutdown()
    with pytest.raises(PassStopped):
        fenced.patch_config_map("node-reconciler", "node-reconciler-controls", {"r": None})
    assert fenced.get_config_map("node-reconciler", "node-reconciler-controls") == {"r": '{"paused": true}'}


def test_a_new_leader_takes_over_the_recipe_leases_of_the_leader_it_superseded_at_once() -> None:
    """a leads and holds a recipe Lease for its pass, then dies (no release): b leads once the
    leader Lease expired and takes a's recipe Lease at once (a is fenced: it stopped writing by its
    renew deadline); a pipeline run's Lease is still waited for."""
    sim = SimFleet.from_file(FLEET)
    a = Leadership(sim, sim, "a/1", lease_duration=15, renew_deadline=10, retry_period=2)
    a.lock.acquire()
    take_lease(sim, lease_name("tuning"), holder_identity("run-a", "a/1"), 60, sim.utc(), None)
    take_lease(sim, lease_name("drivers"), holder_identity("run-p", "ci-runner/7"), 60, sim.utc(), None)
    sim.advance(16)  # a was killed: its leader Lease expired, its 60 s recipe Leases have not
    b = Leadership(sim, sim, "b/1", lease_duration=15, renew_deadline=10, retry_period=2)
    b.lock.acquire()
    if b.lock.took_over_from:  # what the election thread does on taking the Lease
        b.superseded = b.superseded | {b.lock.took_over_from}
    assert b.superseded == {"a/1"}
    took = take_lease(sim, lease_name("tuning"), holder_identity("run-b", "b/1"), 60, sim.utc(),
                      sim.get_lease(lease_name("tuning")), b.superseded)
    assert took.holder == "run-b@b/1" and took.transitions == 1
    with pytest.raises(LeaseHeldError):
        take_lease(sim, lease_name("drivers"), holder_identity("run-b", "b/1"), 60, sim.utc(),
                   sim.get_lease(lease_name("drivers")), b.superseded)


def test_the_election_thread_records_whom_it_superseded() -> None:
    sim = SimFleet.from_file(FLEET)
    take_lease(sim, lease_name(LEADER_LEASE), "a/1", 15, sim.utc() - 20, None)  # expired: a was killed
    b = Leadership(sim, sim, "b/1", lease_duration=15, renew_deadline=10, retry_period=0.05).start()
    try:
        assert _until(b.is_leader)
        assert b.superseded == {"a/1"}
    finally:
        b.release()

"""The fault-injection wrapper itself: which call fails, with what, and what reaches the cluster."""

from __future__ import annotations

import pytest

from reconciler.adapters.sim.fleet import SimFleet
from reconciler.errors import (
    ClusterError,
    ConflictError,
    CrashInjected,
    ForbiddenError,
    NotFoundError,
    ServerError,
    TooManyRequestsError,
    TransientError,
)
from reconciler.execute.lock import release_lease, renew_lease, take_lease
from reconciler.ports import Cluster
from reconciler.testing.faults import FAULT_KINDS, Fault, FaultyCluster, make_error
from reconciler.testing.fleetgen import make_node, make_pod


def sim() -> SimFleet:
    return SimFleet([make_node(f"n{i}", {"pool": "gpu"}) for i in (1, 2, 3)]
                    + [make_pod("web", "w-1", "n1", owner=("ReplicaSet", "w"))])


def test_is_a_cluster_port() -> None:
    fc: Cluster = FaultyCluster(sim())  # mypy checks the protocol; this checks it at run time too
    assert {n.name for n in fc.list_nodes()} == {"n1", "n2", "n3"}


@pytest.mark.parametrize(("kind", "cls", "status"), [
    ("conflict", ConflictError, 409), ("throttle", TooManyRequestsError, 429), ("server", ServerError, 500),
    ("unavailable", TransientError, 503), ("timeout", TransientError, 0), ("reset", TransientError, 0),
    ("forbidden", ForbiddenError, 403), ("notfound", NotFoundError, 404), ("invalid", ClusterError, 422),
])
def test_errors_have_the_adapters_types_and_statuses(kind: str, cls: type, status: int) -> None:
    err = make_error(kind, "patch node n1", retry_after=3)  # type: ignore[arg-type]
    assert type(err) is cls and err.status == status and "patch node n1" in str(err)
    if kind == "throttle":
        assert err.retry_after == 3 and not err.disruption_budget  # type: ignore[attr-defined]
    assert len(FAULT_KINDS) == 9


def test_nth_write_fails_once_before_reaching_the_cluster() -> None:
    s = sim()
    fc = FaultyCluster(s, faults=[Fault("conflict", verb="write", nth=2)])
    fc.patch_node("n1", labels={"a": "1"})
    with pytest.raises(ConflictError):
        fc.patch_node("n2", labels={"a": "1"})
    assert "a" not in s.get_node("n2").labels  # the request never arrived
    fc.patch_node("n2", labels={"a": "1"})  # fired once only
    assert s.get_node("n2").labels["a"] == "1"
    assert fc.writes == 2 and [c.outcome for c in fc.calls] == ["ok", "failed:conflict", "ok"]
    assert len(fc.injected) == 1


def test_after_applies_the_write_and_loses_the_answer() -> None:
    s = sim()
    fc = FaultyCluster(s, faults=[Fault("timeout", verb="patch_node", target="node/n3", after=True)])
    fc.patch_node("n1", unschedulable=True)
    with pytest.raises(TransientError, match="Read timed out"):
        fc.patch_node("n3", unschedulable=True)
    assert s.get_node("n3").unschedulable  # the write happened
    assert fc.calls[-1].outcome == "failed-after:timeout"


def test_every_matching_call_with_times_none() -> None:
    fc = FaultyCluster(sim(), faults=[Fault("unavailable", verb="get_node", target="node/n2", times=None)])
    for _ in range(3):
        with pytest.raises(TransientError):
            fc.get_node("n2")
    assert fc.get_node("n1").name == "n1"
    assert len(fc.injected) == 3


def test_read_and_write_classes() -> None:
    fc = FaultyCluster(sim(), faults=[Fault("reset", verb="read", nth=2)])
    fc.list_nodes()
    fc.patch_node("n1", labels={"x": "y"})  # a write does not count for a read rule
    with pytest.raises(TransientError, match="Connection reset"):
        fc.list_pods("n1")


def test_crash_after_the_nth_successful_write() -> None:
    s = sim()
    fc = FaultyCluster(s, crash_after_writes=2, faults=[Fault("unavailable", verb="write", nth=1)])
    with pytest.raises(TransientError):
        fc.patch_node("n1", labels={"a": "1"})  # failed: not a write that happened
    fc.list_nodes()
    fc.patch_node("n1", labels={"a": "1"})
    with pytest.raises(CrashInjected):
        fc.patch_node("n2", labels={"a": "1"})
    assert s.get_node("n2").labels["a"] == "1"  # the crash comes right after the write
    assert fc.calls[-1].outcome == "ok+crash"


def test_delay_advances_simulated_time() -> None:
    s = sim()
    fc = FaultyCluster(s, faults=[Fault(None, verb="get_node", delay=45.0, times=None)])
    t0 = s.now()
    fc.get_node("n1")
    fc.get_node("n2")
    assert s.now() - t0 == pytest.approx(90.0) and fc.delayed == pytest.approx(90.0)
    assert not fc.injected  # a delay is not a failure


def test_lease_calls_are_forwarded_and_injectable() -> None:
    s = sim()
    fc = FaultyCluster(s, faults=[Fault("conflict", verb="replace_lease", nth=1)])
    rec = take_lease(fc, "reconciler-tune", "run-a@h/1", 60, s.utc(), fc.get_lease("reconciler-tune"))
    assert rec.holder == "run-a@h/1" and fc.get_lease("reconciler-tune") is not None
    with pytest.raises(ConflictError):
        renew_lease(fc, "reconciler-tune", "run-a@h/1", None, s.utc())
    renew_lease(fc, "reconciler-tune", "run-a@h/1", None, s.utc())
    release_lease(fc, "reconciler-tune", "run-a@h/1")
    assert fc.get_lease("reconciler-tune") is None
    assert [c.verb for c in fc.write_calls] == ["create_lease", "replace_lease", "replace_lease", "delete_lease"]
    assert [c.at for c in fc.write_calls] == [s.now()] * 4  # no delay: all at one simulated instant

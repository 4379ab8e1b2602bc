"""Decisions and observers on one thread (issue 12, finding 7): with ``workers > 1`` node runs
advance on pool threads, but every observer (timeline listener: terminal, status object, metrics)
is called on the rollout loop's thread, in event order."""

from __future__ import annotations

import threading
from collections.abc import Callable

import greenlet

from reconciler.adapters.kube import greenio
from reconciler.adapters.kube.greenio import GreenPool
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.execute.rollout import Rollout
from reconciler.execute.timeline import Event, RunResult, Timeline
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
from reconciler.ports import JobPool
from reconciler.testing.builders import package, policy, recipe
from reconciler.testing.faults import FaultyCluster
from reconciler.testing.fleetgen import make_node

from .harness import GPU, SHA, TRAINING


def test_observers_run_on_the_loop_thread_while_workers_do_the_api_calls() -> None:
    sim = SimFleet([make_node(f"n{i}", {"pool": "gpu"}) for i in range(1, 9)])
    api_threads: set[int] = set()
    recorded = FaultyCluster(sim, before={"patch_node": lambda *a, **kw: api_threads.add(threading.get_ident())})
    seen: list[tuple[int, Event]] = []
    r = recipe("tune", package("driver", sha=SHA, interrupt="reboot"), selector=GPU, protect=TRAINING)
    pol = policy(count=4, default_strategy="fixed", initialBatch=4)
    rollout = Rollout(r, pol, compute_plan(r, pol, observe(sim)), recorded, sim, run_id="run-threads", workers=4,
                      on_event=lambda ev: seen.append((threading.get_ident(), ev)))
    res = rollout.run()
    assert res.result == "succeeded"
    assert len(api_threads - {threading.get_ident()}) >= 2  # the pool did the API calls
    assert {t for t, _ in seen} == {threading.get_ident()}  # every observer call on the loop thread
    assert [ev for _, ev in seen] == list(res.timeline)  # each event announced once, in order


def test_events_added_off_the_owner_thread_wait_for_flush() -> None:
    tl = Timeline(start=0.0)
    got: list[str] = []
    tl.listeners.append(lambda ev: got.append(ev.event))
    worker = threading.Thread(target=lambda: tl.add(1.0, "n1", "cordon"))
    worker.start()
    worker.join()
    assert [e.event for e in tl.events] == ["cordon"] and got == []
    tl.add(2.0, "n1", "drained")  # on the owner thread: announces what was pending first
    assert got == ["cordon", "drained"]
    failed: list[BaseException] = []

    def flush_elsewhere() -> None:
        try:
            tl.flush()
        except RuntimeError as e:
            failed.append(e)

    t = threading.Thread(target=flush_elsewhere)
    t.start()
    t.join()
    assert failed


def _per_node(events: list[Event]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for ev in events:
        out.setdefault(ev.node, []).append(ev.event)
    return out


_Callers = set[tuple[int, int]]
_Seen = list[tuple[int, Event]]


def _run_tune(job_pool: Callable[[int], JobPool] | None) -> tuple[RunResult, _Callers, _Seen, SimFleet]:
    """The 8-node reboot rollout above with 4 nodes at once: its result, who made each node
    write (thread, greenlet), who saw each event (thread) and the fleet afterwards."""
    sim = SimFleet([make_node(f"n{i}", {"pool": "gpu"}) for i in range(1, 9)])
    callers: set[tuple[int, int]] = set()
    recorded = FaultyCluster(sim, before={"patch_node": lambda *a, **kw: callers.add(
        (threading.get_ident(), id(greenlet.getcurrent())))})
    seen: list[tuple[int, Event]] = []
    r = recipe("tune", package("driver", sha=SHA, interrupt="reboot"), selector=GPU, protect=TRAINING)
    pol = policy(count=4, default_strategy="fixed", initialBatch=4)
    rollout = Rollout(r, pol, compute_plan(r, pol, observe(sim)), recorded, sim, run_id="run-green",
                      workers=4, job_pool=job_pool, on_event=lambda ev: seen.append((threading.get_ident(), ev)))
    return rollout.run(), callers, seen, sim


def test_a_green_pool_does_the_api_calls_on_the_loop_thread_with_the_thread_pools_outcome() -> None:
    """The real cluster's job pool (reconciler/adapters/greenio.GreenPool, issue 17): each node's
    I/O in its own greenlet on the loop's thread, observers still called in event order, and the
    same node-by-node outcome as the thread pool's."""
    me = threading.get_ident()
    outcomes = []
    for job_pool in (None, GreenPool):
        res, callers, seen, sim = _run_tune(job_pool)
        assert res.result == "succeeded"
        assert {t for t, _ in seen} == {me}
        assert [ev for _, ev in seen] == list(res.timeline)
        outcomes.append((sorted((o.name, o.state) for o in res.nodes), _per_node(list(res.timeline)),
                         {n.name: n.annotations for n in sim.list_nodes()}))
        if job_pool is GreenPool:
            assert {t for t, _ in callers} == {me}  # every API call on the loop thread
            assert len({g for _, g in callers}) >= 2  # from the pool's greenlets
            assert greenio.active_hub() is None  # the pool ends with the run
        else:
            assert len({t for t, _ in callers} - {me}) >= 2
    assert outcomes[0] == outcomes[1]

"""Decisions and observers on one thread (issue 12, finding 7): with ``workers > 1`` node runs
advance on pool threads, but every observer (timeline listener: terminal, status object, metrics)
is called on the rollout loop's thread, in event order."""

from __future__ import annotations

import threading

from reconciler.adapters.sim.fleet import SimFleet
from reconciler.execute.rollout import Rollout
from reconciler.execute.timeline import Event, Timeline
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
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

"""Stage pods deleted by someone else (issue 34, item 4), on the simulated fleet.

A janitor, an eviction or the pod garbage collector deletes a stage pod before its end. That is a
timeline event (``stage-lost``) and a Kubernetes Event (``StagePodDeleted``) naming who could be
seen deleting it, an attempt counted and recorded (the package entry's ``restarts``: a restart goes
on counting), one bound across re-creations (the stage timeout counts from the first pod's start)
and a named failure at the bound (``StagePodDeleted``). Before, the pod was made again silently and
without bound, its timeout restarted each time: a node stayed "in progress" for 6 h.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from reconciler.adapters.sim.config import SimConfig
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.errors import CrashInjected
from reconciler.execute.rollout import Rollout
from reconciler.model.nodestate import parse_state, state_key
from reconciler.model.recipe import Timeouts
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
from reconciler.ports import StageSpec
from reconciler.testing.builders import package, recipe
from reconciler.testing.faults import FaultyCluster
from reconciler.testing.fleetgen import make_node

from .harness import GPU, ONE_AT_A_TIME, SHA, apply

EVICTED = ("EvictionByEvictionAPI", "Eviction API: evicting")


def tune(stage_timeout: int = 1800) -> Any:
    return recipe("tune", package("tuned", sha=SHA), selector=GPU,
                  timeouts=Timeouts(stageRetries=2, retryBackoff=1, stage=stage_timeout))


def fleet(config: SimConfig | None = None) -> SimFleet:
    return SimFleet([make_node("n1", GPU)], config or SimConfig(stageSeconds=100))


def janitor(sim: SimFleet, *, times: int, after: float = 10.0, by: tuple[str, str] | None = None,
            grace: float = 0.0, stage: str = "apply") -> dict[str, Callable[..., object]]:
    """``after`` seconds after each of the first ``times`` ``stage`` pods is created, someone else
    deletes it (``by``: the DisruptionTarget its deleter sets; ``grace``: seconds terminating)."""
    left = [times]

    def on_start(spec: StageSpec) -> None:
        if spec.stage == stage and left[0] > 0:
            left[0] -= 1
            sim._at(sim.now() + after, lambda: sim.delete_stage_pod(spec.pod_name, by=by, grace=grace))

    return {"start_stage": on_start}


def one_pod_per_stage(sim: SimFleet) -> Callable[..., object]:
    """After every write: at most one stage pod per (node, package) — never the replacement beside
    the pod it replaces."""
    def check(*_: Any, **__: Any) -> None:
        seen: dict[tuple[str, str], list[str]] = {}
        for name, spec in sim.stage_pods().items():
            if sim.stage_status(spec).phase in ("pending", "running"):  # working (a finished one holds a pause)
                seen.setdefault((spec.node, spec.package), []).append(name)
        assert all(len(v) <= 1 for v in seen.values()), seen
    return check


def restarts(sim: SimFleet) -> int:
    state = parse_state(sim.get_node("n1").annotations.get(state_key("tune")))
    return state["tuned|1.0.0"].restarts


def test_a_deleted_stage_pod_is_an_event_an_attempt_and_is_made_again() -> None:
    sim = fleet()
    run = apply(sim, tune(), ONE_AT_A_TIME, after={**janitor(sim, times=1), "patch_node": one_pod_per_stage(sim)})
    assert run.result.result == "succeeded"
    lost = run.events("n1", "stage-lost")
    assert len(lost) == 1 and "attempt 1 of 3" in lost[0].detail and "no look caught it being deleted" in lost[0].detail
    starts = [e.detail for e in run.events("n1", "stage-start")]
    assert starts[:2] == ["tuned 1.0.0 apply (attempt 1)", "tuned 1.0.0 apply (attempt 2)"]
    events = [e for e in sim.events if e["reason"] == "StagePodDeleted"]
    assert len(events) == 1 and events[0]["type"] == "Warning" and "attempt 2" in events[0]["message"]
    # the stage ran to its end exactly once after the deletion
    assert [(e[1], e[5]) for e in sim.stage_log if e[5] == "apply"] == [("start", "apply"), ("start", "apply"),
                                                                        ("succeeded", "apply")]


def test_the_event_names_who_was_seen_deleting_it() -> None:
    sim = fleet()
    run = apply(sim, tune(), ONE_AT_A_TIME, after=janitor(sim, times=1, by=EVICTED, grace=12))
    lost = run.events("n1", "stage-lost")
    assert len(lost) == 1 and "by EvictionByEvictionAPI: Eviction API: evicting" in lost[0].detail
    assert any("EvictionByEvictionAPI" in e["message"] for e in sim.events if e["reason"] == "StagePodDeleted")
    assert run.result.result == "succeeded"


def test_deleted_at_every_attempt_fails_the_node_at_the_bound_naming_the_reason() -> None:
    sim = fleet()
    run = apply(sim, tune(), ONE_AT_A_TIME, after=janitor(sim, times=99))
    n1 = run.node("n1")
    assert n1.state == "failed" and n1.reason == "StagePodDeleted" and "no attempts left" in n1.message
    assert n1.failed_stage == "apply" and len(run.events("n1", "stage-lost")) == 2
    assert run.events("n1", "failed")[0].t < 100  # three deletions 10 s apart, not hours


def test_the_stage_timeout_counts_from_the_first_pods_start_across_re_creations() -> None:
    sim = fleet(SimConfig(stageSeconds=10_000))  # a stage that hangs
    run = apply(sim, tune(stage_timeout=600), ONE_AT_A_TIME, after=janitor(sim, times=1, after=500))
    n1 = run.node("n1")
    first = run.events("n1", "stage-start")[0].t
    retry = run.events("n1", "stage-retry")  # the replacement timed out 600 s after the first start
    assert retry and "StageTimeout" in retry[0].detail and retry[0].t - first < 610
    assert n1.state == "failed"


def test_a_restart_after_a_loss_goes_on_counting() -> None:
    sim = fleet()
    r = tune()
    crashed: list[int] = []

    def crash_after_the_loss(*_: Any, **__: Any) -> None:  # killed right after the loss was recorded
        if restarts(sim) == 1 and not crashed:
            crashed.append(1)
            raise CrashInjected("killed after the loss was recorded")

    port = FaultyCluster(sim, clock=sim, after={**janitor(sim, times=1), "patch_node": crash_after_the_loss})
    with contextlib.suppress(CrashInjected):
        Rollout(r, ONE_AT_A_TIME, compute_plan(r, ONE_AT_A_TIME, observe(sim)), port, sim).run()
    assert crashed and restarts(sim) == 1
    # a new process: the replacement pod is deleted too; the count goes on (attempt 2 of 3 lost)
    again = apply(sim, r, ONE_AT_A_TIME, after=janitor(sim, times=1))
    lost = again.events("n1", "stage-lost")
    assert len(lost) == 1 and "attempt 2 of 3" in lost[0].detail
    assert "tuned 1.0.0 apply (attempt 3)" in [e.detail for e in again.events("n1", "stage-start")]
    assert again.result.result == "succeeded"


def rebooting() -> Any:
    return recipe("tune", package("tuned", sha=SHA, interrupt="reboot"), selector=GPU,
                  timeouts=Timeouts(stageRetries=2, retryBackoff=1))


def test_an_interrupt_pod_deleted_each_time_before_it_acts_fails_the_node_at_the_bound() -> None:
    """A janitor deletes every interrupt pod right after it is made, before the reboot it asks for:
    the interrupt is requested again at most ``stageRetries`` times, then the node fails with
    ``StagePodDeleted``, our cordon and the owed interrupt kept. Before, it was requested again at
    every look for as long as the janitor went on, its reboot timeout restarted each time (here 100
    interrupt pods, then complete; a janitor that never stops: 1,493 pods in 1,582 s, no end)."""
    sim = fleet()
    run = apply(sim, rebooting(), ONE_AT_A_TIME, after=janitor(sim, times=99, after=0.0, stage="interrupt"))
    n1 = run.node("n1")
    assert n1.state == "failed" and n1.reason == "StagePodDeleted" and "3 times" in n1.message, n1.message
    made = [e for e in sim.stage_log if e[1] == "start" and e[5] == "interrupt"]
    assert len(made) == 3 and not sim.interrupt_log
    again = [e.detail for e in run.events("n1", "interrupt")]
    assert again == ["reboot", "reboot (requested again, request 2: the last one never reached the node)",
                     "reboot (requested again, request 3: the last one never reached the node)"], again


def test_an_interrupt_pod_deleted_once_before_it_acts_is_requested_again_and_the_node_reboots_once() -> None:
    sim = fleet()
    run = apply(sim, rebooting(), ONE_AT_A_TIME, after=janitor(sim, times=1, after=0.0, stage="interrupt"))
    assert run.node("n1").state == "complete"
    assert len(sim.interrupt_log) == 1 and len(run.events("n1", "rebooted")) == 1

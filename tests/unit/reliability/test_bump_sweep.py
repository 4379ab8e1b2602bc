"""Crash sweeps of a bumped release (issue 34, item 1): the representative rollout of
:mod:`sweep` at release 1 is killed after every one of its writes and the recipe bumped (the
driver, which reboots, to 1.1.0; the other packages kept), then the bumped release is applied;
and a release-1 run killed while its reboots are pending is followed by bumped runs killed after
every one of their writes, then resumed. Whatever the crash point, at every write of every run:

* a node runs stage pods of one lifecycle only, at most one per package (:func:`check_stage_pods`);
* no node is recorded complete at a version whose stages did not run on it (:func:`check_recorded_ran`);
* the budget holds, no protected pod is evicted, no node is left cordoned by us without a record;
* at most one interrupt is requested per interrupt a commitment owes (:func:`check_timeline`) —
  two per node at most (release 1's, owed once a stage of it ran, and release 2's);

and the end is the bumped release on every node — the same package states, config digests,
status, cordons, failure records and conditions as release 1 applied whole and then release 2 —
and a new plan has nothing left to do.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import Any

import pytest

from reconciler.adapters.sim.config import SimConfig
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.errors import CrashInjected
from reconciler.execute.rollout import Rollout
from reconciler.model.nodestate import InFlight, inflight_key, parse_model
from reconciler.model.recipe import Recipe
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
from reconciler.testing.faults import FaultyCluster
from reconciler.testing.invariants import (
    Watch,
    check_budget,
    check_cordons,
    check_protected,
    check_recorded_ran,
    check_stage_pods,
    check_timeline,
)

from .sweep import FIGURES, POLICY, RECIPE, fleet, recorded_state

#: No injected stage failure: the failure paths are the crash sweep's (test_sweeps.py); here every
#: node must end on release 2, whatever the history.
CONFIG = SimConfig()

V1 = RECIPE
V2 = RECIPE.model_copy(update={"version": "2", "packages": {
    **RECIPE.packages, "driver": RECIPE.packages["driver"].model_copy(update={"version": "1.1.0"})}})


def final(sim: SimFleet) -> dict[str, Any]:
    """The recorded end state (:func:`sweep.recorded_state`)."""
    return recorded_state(sim)


def _run(sim: SimFleet, port: FaultyCluster, r: Recipe, run_id: str) -> list[str]:
    plan = compute_plan(r, POLICY, observe(sim))
    rollout = Rollout(r, POLICY, plan, port, sim, run_id=run_id)
    try:
        rollout.run()
    finally:
        problems = check_timeline(rollout.timeline.events, {k: list(v.dependsOn) for k, v in r.packages.items()})
    return [f"{run_id}: {p}" for p in problems]


def history(crash_v1: int | None, crash_v2: int | None = None) -> tuple[SimFleet, list[str]]:
    """Release 1 (killed after write ``crash_v1``), then release 2 (killed after ``crash_v2``,
    then resumed), on a fresh fleet; the invariants' violations."""
    sim = SimFleet(fleet(), CONFIG)
    ceilings = {c.name: c.ceiling for c in compute_plan(V1, POLICY, observe(sim)).compartments}
    watch = Watch(sim, V1.name, {n: "__default__" for n in sim.nodes})
    problems: list[str] = []
    runs: list[tuple[Recipe, int | None]] = [(V1, crash_v1), (V2, crash_v2)]
    if crash_v2 is not None:
        runs.append((V2, None))
    for i, (r, crash) in enumerate(runs):
        port = FaultyCluster(watch.port, clock=sim, crash_after_writes=crash)
        try:
            problems += _run(sim, port, r, f"run-{i}")
        except CrashInjected:
            FIGURES["crash_points"] += 1
        FIGURES["scenarios"] += 1
    problems += check_budget(watch, ceilings) + check_protected(watch, V2) + check_cordons(sim, V2.name, ())
    problems += check_stage_pods(watch) + check_recorded_ran(sim, V2.name)
    made = Counter(n for _t, ev, n, _p, _v, s in sim.stage_log if ev == "start" and s == "interrupt")
    problems += [f"{n}: {k} interrupt pods over two releases" for n, k in made.items() if k > 2]
    plan = compute_plan(V2, POLICY, observe(sim))
    problems += [f"{n.name}: a new plan still has work: {n.note}" for n in plan.nodes
                 if n.has_work and n.notRetried is None]
    return sim, problems


@pytest.fixture(scope="module")
def reference() -> tuple[dict[str, Any], int, int]:
    """Release 1 whole, then release 2 whole: the end state and each run's writes."""
    sim = SimFleet(fleet(), CONFIG)
    counts = []
    for i, r in enumerate((V1, V2)):
        port = FaultyCluster(sim, clock=sim)
        assert not _run(sim, port, r, f"ref-{i}")
        counts.append(port.writes)
    return final(sim), counts[0], counts[1]


def _compare(want: dict[str, Any], sim: SimFleet) -> list[str]:
    got = final(sim)
    return [f"{n}: final state differs: want {want.get(n)}, got {got.get(n)}" for n in sorted(set(want) | set(got))
            if want.get(n) != got.get(n)]


def test_the_bumped_reference_ends_on_release_2(reference: tuple[dict[str, Any], int, int]) -> None:
    state, w1, w2 = reference
    assert w1 > 100 and w2 > 50
    assert all(s["failure"] is None and not s["unschedulable"] for s in state.values()), state
    assert all('"driver|1.1.0"' in s["annotations"]["reconciler.nodewright.dev/nodeState_tune"]
               for s in state.values())


@pytest.mark.slow
def test_release_1_killed_after_every_write_then_release_2(reference: tuple[dict[str, Any], int, int]) -> None:
    state, w1, _ = reference
    failures = []
    for n in range(1, w1 + 1):
        sim, problems = history(n)
        problems += _compare(state, sim)
        if problems:
            failures.append((n, problems[:3]))
    assert not failures, failures


@pytest.mark.slow
def test_release_2_killed_after_every_write_while_release_1_owes_its_reboots(
        reference: tuple[dict[str, Any], int, int]) -> None:
    """Release 1 killed right after its first reboot request, so release 2 finds lifecycles at
    the interrupt (one pending reboot) and at the stages; release 2 is then killed after each of
    its writes and resumed."""
    state, _, w2 = reference
    probe = SimFleet(fleet(), CONFIG)
    port = FaultyCluster(probe, clock=probe)
    _run(probe, port, V1, "probe")
    first_reboot = next(c.n for c in port.write_calls if c.verb == "start_stage" and c.target.endswith("/interrupt"))
    crash_v1 = sum(1 for c in port.write_calls if c.n <= first_reboot)
    at = SimFleet(fleet(), CONFIG)
    with contextlib.suppress(CrashInjected):
        _run(at, FaultyCluster(at, clock=at, crash_after_writes=crash_v1), V1, "at")
    phases = {parse_model(InFlight, n.annotations.get(inflight_key(V1.name))).phase  # type: ignore[union-attr]
              for n in at.list_nodes() if inflight_key(V1.name) in n.annotations}
    assert "interrupt" in phases, phases  # a reboot pending when release 2 comes
    failures = []
    for m in range(1, w2 + 40):
        sim, problems = history(crash_v1, m)
        problems += _compare(state, sim)
        if problems:
            failures.append((m, problems[:3]))
    assert not failures, failures

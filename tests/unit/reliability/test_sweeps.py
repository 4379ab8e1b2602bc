"""Fault sweeps on the simulated fleet (issue #6 §1): crash after every write, each write failing
once with each transient error, a sample of failing reads, and combinations, over the
representative rollout (6 nodes, 3 packages with dependencies, a reboot, a PDB, a protected pod,
a failing stage). Every scenario checks the invariants listed in :mod:`sweep` and compares the
final recorded state with the uninterrupted run's.

Regression tests at the end pin each bug the sweeps found in ``reconciler/execute``.
"""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.adapters.sim.fleet import SimFleet
from reconciler.execute.rollout import Rollout
from reconciler.model.nodestate import condition_type, failure_key
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
from reconciler.testing.faults import Fault, FaultyCluster
from reconciler.testing.fleetgen import make_pdb

from .sweep import CONFIG, POLICY, RECIPE, Scenario, fleet, recorded_state, run_scenario


@pytest.fixture(scope="module")
def reference() -> tuple[dict[str, Any], Scenario]:
    """The uninterrupted run: its recorded state and its calls (what the sweeps number)."""
    base = run_scenario()
    assert not base.problems, base.problems
    assert base.resumed is None and not base.crashed
    return recorded_state(base.sim), base


def test_reference_run_is_representative(reference: tuple[dict[str, Any], Scenario]) -> None:
    state, base = reference
    verbs = {c.verb for c in base.first.write_calls}
    assert {"patch_node", "evict_pod", "start_stage", "delete_stages", "set_node_condition"} <= verbs
    assert len(state) == 6 and base.writes > 100
    assert state["n5"]["failure"] == ("StageFailed", "apply", "driver", 9)  # the failing stage
    assert sum(1 for s in state.values() if s["failure"] is None and not s["unschedulable"]) == 5
    assert any(ev[5] == "interrupt" for ev in base.sim.stage_log)  # the reboot


@pytest.mark.slow
def test_crash_after_every_write_then_resume(reference: tuple[dict[str, Any], Scenario]) -> None:
    state, base = reference
    failures = []
    for n in range(1, base.writes + 1):
        s = run_scenario(crash_after=n, reference=state)
        assert s.crashed and s.resumed is not None
        if s.problems:
            failures.append((n, base.first.write_calls[n - 1], s.problems[:3]))
    assert not failures, failures


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "after"), [
    ("conflict", False), ("throttle", False), ("unavailable", False), ("timeout", False), ("server", False),
    ("timeout", True), ("reset", True),
], ids=["409", "429", "503", "timeout", "500", "timeout-after-write", "reset-after-write"])
def test_each_write_failing_once(reference: tuple[dict[str, Any], Scenario], kind: str, after: bool) -> None:
    """The run absorbs the error (no restart needed) and ends in the reference state."""
    state, base = reference
    failures = []
    step = 2 if kind == "reset" else 1  # a reset after the write behaves as a timeout after it: every 2nd
    for n in range(1, base.writes + 1, step):
        s = run_scenario([Fault(kind, verb="write", nth=n, after=after)], reference=state)  # type: ignore[arg-type]
        assert len(s.first.injected) == 1
        if s.problems or s.stopped or s.resumed is not None:
            failures.append((n, base.first.write_calls[n - 1], s.stopped, s.problems[:3]))
    assert not failures, failures


@pytest.mark.slow
def test_a_sample_of_reads_failing_once(reference: tuple[dict[str, Any], Scenario]) -> None:
    """Every 6th read fails once with a 503. Only the very first read (before anything is
    written) may stop the run; then a restart finishes it."""
    state, base = reference
    reads = [c for c in base.first.calls if not c.write]
    failures = []
    for i in range(1, len(reads) + 1, 6):
        s = run_scenario([Fault("unavailable", verb="read", nth=i)], reference=state)
        if s.stopped and s.first.writes:
            failures.append((i, reads[i - 1], "stopped after writing", s.stopped))
        if s.problems:
            failures.append((i, reads[i - 1], s.problems[:3]))
    assert not failures, failures


@pytest.mark.slow
def test_transient_error_then_crash_then_resume(reference: tuple[dict[str, Any], Scenario]) -> None:
    """A write fails, the run goes on, and is killed a few writes later (every 4th write)."""
    state, base = reference
    failures = []
    for n in range(1, base.writes, 4):
        s = run_scenario([Fault("unavailable", verb="write", nth=n)], crash_after=n + 2, reference=state)
        if s.problems:
            failures.append((n, s.problems[:3]))
    assert not failures, failures


def test_api_outage_of_two_minutes_mid_rollout(reference: tuple[dict[str, Any], Scenario]) -> None:
    """Every call fails (connection reset) for 2 minutes of simulated time, each call taking 3 s,
    starting at several points of the rollout: retried with bounded backoff, nothing fails."""
    state, _ = reference
    for start in (10, 200, 450, 700):
        faults = [Fault("reset", verb="*", nth=start, for_seconds=120.0, delay=3.0)]
        s = run_scenario(faults, reference=state)
        assert not s.problems, (start, s.problems[:3])
        assert not s.stopped and s.resumed is None, (start, s.stopped)
        assert len(s.first.injected) >= 3  # the outage hit the run (fewer calls: backoff)


def test_slow_api_calls(reference: tuple[dict[str, Any], Scenario]) -> None:
    """Every write takes 20 s (simulated): timings shift, the outcome does not."""
    state, _ = reference
    s = run_scenario([Fault(None, verb="write", times=None, delay=20.0)], reference=state)
    assert not s.problems, s.problems[:3]
    assert s.first.delayed >= 20.0 * s.first.writes


def test_throttling_with_retry_after_on_every_tenth_call(reference: tuple[dict[str, Any], Scenario]) -> None:
    state, base = reference
    faults = [Fault("throttle", verb="*", nth=n, retry_after=7.0) for n in range(10, len(base.first.calls), 10)]
    s = run_scenario(faults, reference=state)
    assert not s.problems and not s.stopped, (s.stopped, s.problems[:3])
    assert len(s.first.injected) >= 50


# ------------------------------------------------------------------ regressions found by the sweeps
def _rollout(sim: SimFleet, cluster: Any) -> Any:
    plan = compute_plan(RECIPE, POLICY, observe(sim))
    return Rollout(RECIPE, POLICY, plan, cluster, sim, run_id="run-x").run()


def test_409_on_eviction_does_not_count_the_pod_as_gone() -> None:
    """Bug: any 409 on an eviction marked the pod gone, so stages started with it still on the node.
    Only a failed UID precondition (a new pod under that name) means gone (drain §1.9)."""
    s = run_scenario([Fault("conflict", verb="evict_pod", target="pod/web/web-1", nth=1)])
    assert not s.problems, s.problems
    assert s.first.calls[[c.outcome for c in s.first.calls].index("failed:conflict") + 1].verb == "get_pod"


def test_500_on_eviction_with_one_pdb_is_retried() -> None:
    """Bug: every 500 on an eviction failed the node as MultiplePDBs; with fewer than two PDBs
    selecting the pod it is an API server error and is retried (drain §1.9)."""
    s = run_scenario([Fault("server", verb="evict_pod", nth=1)])
    assert not s.problems and failure_key("tune") not in s.sim.nodes["n1"]["metadata"]["annotations"]


def test_500_on_eviction_with_two_pdbs_still_fails_fast() -> None:
    objs = [*fleet(), make_pdb("web", "web-extra", {"app": "web"}, max_unavailable=1)]
    sim = SimFleet(objs, CONFIG)
    res = _rollout(sim, sim)
    n1 = next(n for n in res.nodes if n.name == "n1")
    assert n1.state == "failed" and n1.reason == "MultiplePDBs"


def test_failed_patch_keeps_the_deferred_stage_records() -> None:
    """Bug: a patch that failed dropped the records deferred to it (completed stages, config
    digests), so the node ended "complete" with packages still "in_progress" or without digests."""
    objs = [o for o in fleet() if o["kind"] == "Node"][:1]
    sim = SimFleet(objs, CONFIG)
    ok = SimFleet(objs, CONFIG)
    _rollout(ok, ok)
    # fail every 2nd patch of n1 once: each deferred record must survive its failed write
    fc = FaultyCluster(sim, faults=[Fault("unavailable", verb="patch_node", nth=n) for n in range(2, 30, 2)])
    res = _rollout(sim, fc)
    assert res.result == "succeeded" and fc.injected
    assert recorded_state(sim) == recorded_state(ok)


def test_crash_between_failure_record_and_condition_keeps_the_condition() -> None:
    """Bug: the Erroring condition is written after the failure record; a run killed in between
    left a failed node without it, and the resumed run (which leaves same-input failures alone)
    never wrote it. The resumed run now re-asserts it."""
    base = run_scenario()
    idx = next(i for i, c in enumerate(base.first.write_calls)
               if c.verb == "set_node_condition" and c.target == "node/n5")
    s = run_scenario(crash_after=idx, reference=recorded_state(base.sim))  # killed right before the condition
    assert not s.problems, s.problems
    conds = {c["type"]: c["status"] for c in s.sim.nodes["n5"]["status"]["conditions"]}
    assert conds[condition_type("tune", "Erroring")] == "True"


def test_list_before_a_batch_failing_is_retried_not_fatal() -> None:
    """Bug: a transient error on the LIST taken before each batch ended the whole run (exit 4)."""
    s = run_scenario([Fault("unavailable", verb="list_nodes", nth=2, times=3)])
    assert not s.stopped and s.resumed is None and not s.problems
    assert len(s.first.injected) == 3


def test_invalid_request_fails_the_node_instead_of_retrying_for_days() -> None:
    """Bug: a 400/422 answer (the API refuses the request itself, e.g. a stage pod the recipe made
    invalid) was retried every poll for the whole run (7 days, node cordoned). Now the node fails at
    once with the API's message and the rollout goes on."""
    s = run_scenario([Fault("invalid", verb="start_stage", target="stage/n1/*", times=None)])
    assert not s.problems, s.problems
    assert len(s.first.injected) == 1 and s.sim.now() < 3600
    rec = s.sim.nodes["n1"]["metadata"]["annotations"][failure_key("tune")]
    assert '"reason":"Invalid"' in rec and "Pod is invalid" in rec


# ---- the readiness gate (issue 15): the same sweep with every node held at a gate
def _gated() -> tuple[Any, Any]:
    from reconciler.adapters.sim.config import SimValidator
    from reconciler.model.recipe import ReadinessGate

    recipe = RECIPE.model_copy(update={"readinessGate": ReadinessGate(conditionType="example.com/Validated",
                                                                        timeout="20m")})
    config = CONFIG.model_copy(update={"validator": SimValidator(conditionType="example.com/Validated",
                                                                 afterSeconds=90, failsOn=("n6",))})
    return recipe, config


@pytest.mark.slow
def test_crash_after_every_write_with_a_readiness_gate_then_resume() -> None:
    """Every node waits at the gate for the simulated validator (n6 is never passed: it fails with
    ReadinessGateTimeout and stays cordoned); a crash after any write, then a resumed run, ends
    in the state of the uninterrupted run."""
    recipe, config = _gated()
    base = run_scenario(recipe=recipe, config=config)
    assert not base.problems, base.problems
    state = recorded_state(base.sim)
    assert state["n6"]["failure"] == ("ReadinessGateTimeout", "", "", None) and state["n6"]["unschedulable"]
    assert sum(1 for s in state.values() if s["failure"] is None and not s["unschedulable"]) == 4
    failures = []
    for n in range(1, base.writes + 1):
        s = run_scenario(crash_after=n, reference=state, recipe=recipe, config=config)
        assert s.crashed and s.resumed is not None
        if s.problems:
            failures.append((n, base.first.write_calls[n - 1], s.problems[:3]))
    assert not failures, failures


def test_a_default_halt_survives_a_crash_at_every_write_after_the_failure() -> None:
    """Issue 34: with no failureThreshold the representative rollout halts at n5's failed batch.
    Killed after any write from n5's failure record on and resumed, it stays halted: the resumed
    run finds the halt again in the node n5 was left failed on (batching.resume_state) instead of
    starting its batches afresh and trying the nodes after it."""
    halting = POLICY.model_copy(update={"default": POLICY.default.model_copy(update={
        "strategy": POLICY.default.strategy.model_copy(update={  # type: ignore[union-attr]
            "exponential": POLICY.default.strategy.exponential.model_copy(  # type: ignore[union-attr]
                update={"failureThreshold": None})})})})
    base = run_scenario(policy=halting)
    assert not base.problems, base.problems
    state = recorded_state(base.sim)
    assert state["n5"]["failure"] is not None
    untouched = [n for n, st in state.items() if not st["annotations"] and not st["labels"]]
    assert untouched  # the halt spared nodes: what a resumed run must not touch either
    # from n5's first stage pod (its batch partner in flight meanwhile) to the run's end: a halt
    # found again by the resumed run still finishes the lifecycles the killed run started
    first = next(i for i, c in enumerate(base.first.write_calls)
                 if c.verb == "start_stage" and c.target.startswith("stage/n5/"))
    finished_in_flight = 0
    for n in range(first, base.writes + 1):
        s = run_scenario(crash_after=n, reference=state, policy=halting)
        assert s.crashed and not s.problems, (n, s.problems[:3])
        assert s.resumed is not None
        finished_in_flight += any(c.halted and c.batches and "earlier run left failed" in c.halt_reason
                                  for c in s.resumed.compartments)
    assert finished_in_flight  # some crash points left n5's batch partner in flight: it was finished

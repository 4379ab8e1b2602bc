"""What a run releases at its end (``Rollout._end_lifecycles``): the shared objects of every
lifecycle it worked on — the ones it started and the ones it resumed from a run that was killed or
preempted — unless a node of that lifecycle failed or is still running in this run; a resumed
lifecycle only if no stage pod of it is left (``end_run(if_unused=True)``)."""

from __future__ import annotations

import contextlib
from typing import Any

from reconciler.adapters.sim.config import SimConfig, StageFailure
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.errors import CrashInjected
from reconciler.model.nodestate import inflight_key
from reconciler.testing.builders import package, policy, recipe
from reconciler.testing.fleetgen import make_node

from .harness import GPU, SHA, TRAINING, apply

RECIPE = recipe("tune", package("base", sha=SHA, interrupt="reboot"), selector=GPU, protect=TRAINING)
POLICY = policy(count=1, default_strategy="fixed", initialBatch=1)


def fleet(n: int = 3) -> list[dict[str, Any]]:
    return [make_node(f"n{i}", {"pool": "gpu"}, created=1795000000.0 + i) for i in range(1, n + 1)]


def recorded() -> tuple[dict[str, Any], list[tuple[str, bool]]]:
    """``after`` hooks recording every ``end_run`` of the rollout, and the list they fill."""
    ends: list[tuple[str, bool]] = []
    return {"end_run": lambda run_id, if_unused=False: ends.append((run_id, if_unused))}, ends


def crashed_mid_lifecycle() -> SimFleet:
    """A fleet whose first run (``r1``) was killed while n1 was in its lifecycle."""
    probe = SimFleet(fleet())
    apply(probe, RECIPE, POLICY, run_id="r1")
    for k in range(1, probe.writes):
        sim = SimFleet(fleet(), crash_after=k)
        with contextlib.suppress(CrashInjected):
            apply(sim, RECIPE, POLICY, check=False, run_id="r1")
        if any(inflight_key(RECIPE.name) in n.annotations for n in sim.list_nodes()):
            sim.crash_after = None
            return sim
    raise AssertionError("no crash point left a node in flight")


def test_an_uninterrupted_run_releases_its_own_lifecycle() -> None:
    sim = SimFleet(fleet())
    hooks, ends = recorded()
    run = apply(sim, RECIPE, POLICY, after=hooks, run_id="r1")
    assert run.result.result == "succeeded"
    assert ends == [("r1", False)]


def test_the_run_that_resumes_a_killed_run_releases_that_lifecycle_too() -> None:
    sim = crashed_mid_lifecycle()
    hooks, ends = recorded()
    run = apply(sim, RECIPE, POLICY, after=hooks, run_id="r2")
    assert run.result.result == "succeeded"
    assert ("r1", True) in ends  # resumed: released only if no stage pod of it is left
    assert ("r2", False) in ends  # the nodes r2 started itself


def test_a_failed_node_keeps_its_lifecycle() -> None:
    sim = SimFleet(fleet(), SimConfig(failures=(StageFailure(node="n2", package="base", stage="apply", times=99),)))
    hooks, ends = recorded()
    run = apply(sim, RECIPE, POLICY, after=hooks, run_id="r1")
    assert run.node("n2").state == "failed"
    assert ends == []  # n2's stage pods keep its logs and the resume point


class _OwnersFleet(SimFleet):
    """A simulated fleet that also holds run owners of earlier lifecycles (as the kube adapter's
    run-owner ConfigMaps are); records ``end_run``."""

    def __init__(self, *args: Any, owners: set[str], **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.owners = set(owners)
        self.ended: list[tuple[str, bool]] = []

    def lifecycles(self) -> set[str]:
        return set(self.owners)

    def end_run(self, run_id: str, *, if_unused: bool = False) -> None:
        self.ended.append((run_id, if_unused))
        self.owners.discard(run_id)


def test_lifecycles_left_by_other_runs_are_released_unless_a_record_names_them() -> None:
    """A killed run's lifecycle whose nodes another (also stopped) run finished is released by the
    next run to finish; one still named by an in-flight record — another recipe's node, here — is
    kept."""
    from reconciler.model.nodestate import InFlight
    from reconciler.model.vocab import Phase

    sim = _OwnersFleet(fleet(), owners={"r0", "r-old"})
    other = InFlight(runId="r0", planHash="h", phase=Phase.WAIT, lifecycle="r0").model_dump_json()
    sim.patch_node("n3", annotations={inflight_key("other-recipe"): other})
    run = apply(sim, RECIPE, POLICY, run_id="r2")
    assert run.result.result == "succeeded"
    assert ("r-old", True) in sim.ended  # nothing names it: released (if no stage pod is left)
    assert all(lc != "r0" for lc, _ in sim.ended)  # n3's record of other-recipe names it: kept
    assert ("r2", False) in sim.ended


def test_a_resumed_lifecycle_fills_its_batch_no_extra_node_starts_beside_it() -> None:
    """A run resuming a stopped one (preempted controller pass, killed apply) puts the node in
    flight in its first batch and counts it against the strategy's batch size: with batches of 1
    and a change that cordons nothing (no budget cost) the second node still waits for the first."""
    plain = recipe("tune", package("base", sha=SHA), selector=GPU, protect=TRAINING)
    probe = SimFleet(fleet(2))
    apply(probe, plain, POLICY, run_id="r1")
    for k in range(1, probe.writes):
        sim = SimFleet(fleet(2), crash_after=k)
        with contextlib.suppress(CrashInjected):
            apply(sim, plain, POLICY, check=False, run_id="r1")
        flying = [n.name for n in sim.list_nodes() if inflight_key(plain.name) in n.annotations]
        if len(flying) == 1:
            break
    else:
        raise AssertionError("no crash point left exactly one node in flight")
    sim.crash_after = None
    run = apply(sim, plain, POLICY, run_id="r2")
    assert run.result.result == "succeeded"
    starts = [e.detail for e in run.result.timeline if e.event == "batch-start"]
    assert starts[0] == f"batch 1: {flying[0]}", starts
    assert all(len(s.split(": ", 1)[1].split(", ")) == 1 for s in starts), starts

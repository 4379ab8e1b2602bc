"""Fault sweeps over the representative rollout of ``tests/unit/execute/test_crash_resume.py``.

One *scenario* = a fresh simulated fleet, a first run through a :class:`FaultyCluster` with the
faults of the scenario (and possibly a crash), then — when it crashed or stopped — a resumed run
with a fresh planner and run id, exactly as ``reconciler apply`` would be started again. Watchers
see every write of both runs, so the invariants hold across the crash boundary:

* the final recorded state (package states, config digests, status label and annotation, cordon
  and failure records, our node conditions) equals the uninterrupted run's;
* no node is left cordoned by us without a failure record;
* the budget ceiling is never exceeded (nodes held cordoned by the recipe, counted after every
  write of both runs);
* no protected pod is evicted;
* no stage that completed is started again (the simulated fleet's stage log across both runs);
* stages start in dependency order, at most one interrupt per node per run, and at most one
  interrupt pod per node across the crash and the resume;
* "drained" means the pods are gone: when a package stage starts on a cordoned node, no pod that
  the drain must remove is still on it (:class:`DrainProbe`);
* a node runs stage pods of one lifecycle only, at most one per package (``check_stage_pods``),
  and no version is recorded complete on a node where its stages did not run (``check_recorded_ran``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reconciler.adapters.sim.config import SimConfig
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.errors import CrashInjected, ReconcilerError
from reconciler.execute.rollout import Rollout
from reconciler.execute.timeline import Event, RunResult
from reconciler.model.nodestate import PREFIX, cordon_key, failure_key
from reconciler.model.policy import DeploymentPolicy
from reconciler.model.recipe import Recipe
from reconciler.observe.snapshot import observe
from reconciler.plan.drain import classify_pods
from reconciler.plan.planner import compute_plan
from reconciler.ports import StageSpec
from reconciler.testing.faults import Fault, FaultyCluster
from reconciler.testing.invariants import (
    Watch,
    check_budget,
    check_cordons,
    check_no_rerun,
    check_one_interrupt,
    check_protected,
    check_recorded_ran,
    check_stage_pods,
    check_timeline,
)
from tests.unit.execute.test_crash_resume import CONFIG, KEEP, POLICY, RECIPE, fleet

__all__ = ["CONFIG", "POLICY", "RECIPE", "DrainProbe", "Scenario", "fleet", "recorded_state", "run_scenario"]


def recorded_state(sim: SimFleet, recipe: str = RECIPE.name) -> dict[str, Any]:
    """Every durable record of ``recipe`` per node: our package-state/config/status annotations,
    whether the node is unschedulable, whether we hold its cordon, the failure record's reason and
    stage (not its run id), the status label and our node conditions (type, status, reason)."""
    import json

    out: dict[str, Any] = {}
    for n in sim.list_nodes():
        ann = {k: v for k, v in n.annotations.items() if k.startswith(PREFIX) and any(x in k for x in KEEP)}
        fail = n.annotations.get(failure_key(recipe))
        failure = None
        if fail is not None:
            doc = json.loads(fail)
            failure = (doc.get("reason"), doc.get("stage"), doc.get("package"), doc.get("exitCode"))
        raw = sim.nodes[n.name]
        conds = sorted(
            (c.get("type"), c.get("status"), c.get("reason"))
            for c in (raw.get("status") or {}).get("conditions") or ()
            if str(c.get("type", "")).startswith(PREFIX)
        )
        labels = {k: v for k, v in n.labels.items() if k.startswith(PREFIX)}
        out[n.name] = {
            "annotations": ann,
            "labels": labels,
            "unschedulable": n.unschedulable,
            "cordonedByUs": cordon_key(recipe) in n.annotations,
            "failure": failure,
            "conditions": conds,
        }
    return out


class DrainProbe:
    """A ``start_stage`` hook (:attr:`hooks`, for :class:`FaultyCluster`'s ``before``): when a
    package stage (not an interrupt) starts on a node that is cordoned, the pods the drain must
    remove (kubectl's evict class, terminating or not) and the protected pods must all be gone.
    ``problems`` collects violations."""

    def __init__(self, sim: SimFleet, recipe: Recipe) -> None:
        self.sim, self.recipe = sim, recipe
        self.problems: list[str] = []

    @property
    def hooks(self) -> dict[str, Callable[..., object]]:
        """``before`` hooks: check each stage pod as its request is sent."""
        return {"start_stage": self._check}

    def _check(self, spec: StageSpec) -> None:
        if spec.stage in ("interrupt", "uninstall-interrupt") or spec.node not in self.sim.nodes:
            return
        node = self.sim.get_node(spec.node)
        if not node.unschedulable:
            return
        cls = classify_pods(self.sim.list_pods(spec.node), self.recipe.drain, self.recipe.podNonInterruptLabels,
                            now_wall=self.sim.wall(), daemonset_exists=self.sim.daemonset_exists)
        left = [p.ref for p in cls.evict] + [p.ref for p in cls.protected]
        if left:
            self.problems.append(f"{spec.node}: {spec.package} {spec.stage} started while {', '.join(left)} "
                                 "still on the node (not drained)")


@dataclass
class Scenario:
    """Outcome of :func:`run_scenario`: ``problems`` is empty when every invariant held."""

    sim: SimFleet
    first: FaultyCluster
    crashed: bool
    stopped: str
    resumed: RunResult | None
    problems: list[str] = field(default_factory=list)
    writes: int = 0

    @property
    def injected(self) -> int:
        """Faults that fired in the first run (crash not counted)."""
        return len(self.first.injected)


#: Figures of the sweeps run in this session (printed by conftest.py, written to
#: ``$RELIABILITY_FIGURES`` when set): scenarios, faults injected, crash points, problems found.
FIGURES: dict[str, int] = {"scenarios": 0, "faults_injected": 0, "crash_points": 0, "writes_lost": 0,
                           "resumed_runs": 0}


def _rollout(cluster: FaultyCluster, sim: SimFleet, run_id: str, recipe: Recipe, policy: DeploymentPolicy,
             plan: Any = None) -> tuple[Rollout, RunResult | None]:
    plan = plan if plan is not None else compute_plan(recipe, policy, observe(sim))
    r = Rollout(recipe, policy, plan, cluster, sim, run_id=run_id)
    return r, r.run()


def _timeline_problems(events: list[Event], recipe: Recipe, label: str) -> list[str]:
    deps = {k: list(v.dependsOn) for k, v in recipe.packages.items()}
    return [f"{label}: {p}" for p in check_timeline(events, deps)]


def run_scenario(
    faults: list[Fault] | None = None,
    *,
    crash_after: int | None = None,
    reference: dict[str, Any] | None = None,
    objects: list[dict[str, Any]] | None = None,
    config: SimConfig = CONFIG,
    recipe: Recipe = RECIPE,
    policy: DeploymentPolicy = POLICY,
) -> Scenario:
    """Run the representative rollout with ``faults`` and an optional crash after the
    ``crash_after``-th write, resume when the first run did not finish, check every invariant
    (module docstring) and compare with ``reference`` (a :func:`recorded_state`) when given."""
    sim = SimFleet(objects if objects is not None else fleet(), config)
    plan0 = compute_plan(recipe, policy, observe(sim))
    comp = {n.name: n.compartment for n in plan0.nodes}
    ceilings = {c.name: c.ceiling for c in plan0.compartments}
    watch = Watch(sim, recipe.name, comp)
    probe = DrainProbe(sim, recipe)
    first = FaultyCluster(watch.port, clock=sim, faults=faults or [], crash_after_writes=crash_after,
                          before=probe.hooks)
    crashed, stopped = False, ""
    rollout: Rollout | None = None
    result: RunResult | None = None
    problems: list[str] = []
    try:
        rollout, result = _rollout(first, sim, "run-first", recipe, policy, plan0)
    except CrashInjected:
        crashed = True
    except ReconcilerError as e:  # the run stopped on an error it could not retry: a restart must fix it
        stopped = f"{type(e).__name__}: {e}"
    if rollout is not None:
        problems += _timeline_problems(list(rollout.timeline.events), recipe, "first run")
    resumed: RunResult | None = None
    if crashed or stopped or (result is not None and any(n.message == "still running when the run stopped"
                                                         for n in result.nodes)):
        second = FaultyCluster(watch.port, clock=sim, before=probe.hooks)
        r2, resumed = _rollout(second, sim, "run-second", recipe, policy)
        problems += _timeline_problems(list(r2.timeline.events), recipe, "resumed run")
    problems += check_budget(watch, ceilings)
    problems += check_protected(watch, recipe)
    problems += check_cordons(sim, recipe.name, ())
    problems += check_no_rerun(sim)
    problems += check_one_interrupt(sim)
    problems += check_stage_pods(watch)
    problems += check_recorded_ran(sim, recipe.name)
    problems += probe.problems
    if reference is not None:
        got = recorded_state(sim, recipe.name)
        for node in sorted(set(got) | set(reference)):
            if got.get(node) != reference.get(node):
                problems.append(f"{node}: final state differs: {_diff(reference.get(node), got.get(node))}")
                FIGURES["writes_lost"] += 1
    FIGURES["scenarios"] += 1
    FIGURES["faults_injected"] += len(first.injected)
    FIGURES["crash_points"] += int(crashed)
    FIGURES["resumed_runs"] += int(resumed is not None)
    return Scenario(sim, first, crashed, stopped, resumed, problems, writes=first.writes)


def _diff(want: Any, got: Any) -> str:
    if not isinstance(want, dict) or not isinstance(got, dict):
        return f"want {want!r}, got {got!r}"
    parts = []
    for k in sorted(set(want) | set(got)):
        if want.get(k) != got.get(k):
            parts.append(f"{k}: want {want.get(k)!r}, got {got.get(k)!r}")
    return "; ".join(parts)

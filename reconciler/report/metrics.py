"""Prometheus metrics of rollouts: the one model of ``reconciler metrics``, ``apply
--metrics-file/--pushgateway`` and ``reconciler controller``'s ``/metrics`` (same names, labels and
meaning everywhere, so one Grafana dashboard and one set of alert rules serve all three).

:func:`rollout_metrics` computes a :class:`MetricSet` (pure data) for one recipe from the node
records and, when there is one, the plan and the rollout as it goes (:class:`Live`: the same folds
of the timeline the NodeRecipe status and the terminal's live view use,
:class:`~reconciler.report.status.RolloutProgress` and
:class:`~reconciler.report.progress.ProgressBoard`), so the gauges move *during* a rollout.
A :class:`MetricSet` is a ``prometheus_client`` collector; ``prometheus_client`` writes the
exposition text (:func:`exposition`) and pushes it (:mod:`reconciler.adapters.metrics.pushgateway`).
:mod:`reconciler.report.rolloutmetrics` feeds :class:`Live` from the application service's
observer calls.

Gauges (prefix ``node_reconciler_``; names after NodeWright's ``skyhook_*`` set, semantics-nodewright.md
§5.1). Compartment series carry ``recipe``, ``policy``, ``compartment``, ``strategy``:

====================================  =========================================================
``rollout_matched_nodes``             selected nodes in the compartment
``rollout_ceiling``                   budget ceiling (nodes disrupted at once)
``rollout_completed``                 nodes up to date (nothing left to do)
``rollout_in_progress``               nodes being worked on
``rollout_failed``                    nodes failed
``rollout_blocked``                   nodes blocked (protected pods, retried later)
``rollout_progress_percent``          completed × 100 / matched
``rollout_current_batch``             batch k of the rollout in progress or last run (live only)
``rollout_batches``                   batches N to run
``rollout_disrupted``                 budget in use: nodes held cordoned now (live only)
``rollout_halted``                    1 when the compartment halted (live only)
``rollout_max_disrupted``             most nodes held cordoned at once in the rollout (live only)
====================================  =========================================================

Recipe series carry ``recipe``:

=============================================  ===========================================================
``rollout_nodes{state}``                       nodes per state, as the NodeRecipe status counts them
                                               (pending, inProgress, complete, failed, blocked, removed)
``recipe_phase{phase}``                        1 for the rollout's phase (Progressing, Complete, Failed,
                                               Halted, Waiting, Paused; live only)
``rollout_start_timestamp_seconds``            when the rollout in progress or last run started (live only)
``rollout_last_progress_timestamp_seconds``    when a node last changed state in it (live only; the
                                               "rollout stalled" alert)
``run_duration_seconds``                       its duration so far (live only)
``run_result{result}``                         1 for the rollout's result (live only; all 0 until it ends)
``node_target_count``                          selected nodes
``node_status_count{status}``                  nodes per recorded status (``none``: no status)
``package_state_count{package,version,state}``  nodes per package, version and state
``package_stage_count{package,version,stage}``  nodes per package, version and stage
``package_restarts_count{package,version}``    summed restarts per package and version
``recipe_paused`` / ``recipe_disabled``        control switches (``reconciler pause``/``disable``)
``last_update_timestamp_seconds``              when these metrics were computed
=============================================  ===========================================================

Series whose value is unknown (the current batch without a rollout) are left out, not reported as 0.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

from reconciler.errors import ReconcilerError
from reconciler.model.nodestate import (
    NodeStateError,
    PackageState,
    failure_key,
    inflight_key,
    parse_state,
    recorded_status,
    state_key,
)
from reconciler.model.observed import NodeInfo
from reconciler.model.plan import Plan
from reconciler.model.run import Event, RunResult
from reconciler.model.vocab import NodeStatus, RunVerdict
from reconciler.report.progress import ProgressBoard
from reconciler.report.status import NodeProgress, RolloutProgress

PREFIX = "node_reconciler_"
RESULTS = tuple(str(v) for v in RunVerdict)
#: Node states of ``rollout_nodes`` (the NodeRecipe status's ``nodes`` counts).
NODE_STATES: tuple[NodeProgress, ...] = ("pending", "inProgress", "complete", "failed", "blocked", "removed")
#: Phases of ``recipe_phase`` (the NodeRecipe status's ``phase``).
PHASES = ("Progressing", "Complete", "Failed", "Halted", "Waiting", "Paused")

HELP: dict[str, str] = {
    "rollout_matched_nodes": "Selected nodes in the compartment.",
    "rollout_ceiling": "Budget ceiling: nodes the compartment may disrupt at once.",
    "rollout_completed": "Nodes of the compartment that are up to date.",
    "rollout_in_progress": "Nodes of the compartment being worked on.",
    "rollout_failed": "Nodes of the compartment that failed.",
    "rollout_blocked": "Nodes of the compartment blocked by protected pods (retried later).",
    "rollout_progress_percent": "Completed nodes as a percentage of matched nodes.",
    "rollout_current_batch": "Batch k of the rollout in progress (or of the last one) in the compartment.",
    "rollout_batches": "Batches N the compartment's rollout runs.",
    "rollout_disrupted": "Budget in use: nodes of the compartment held cordoned now.",
    "rollout_halted": "1 when the compartment halted (failure threshold or budget).",
    "rollout_max_disrupted": "Most nodes of the compartment held cordoned at once in the rollout in progress or "
                             "the last one.",
    "rollout_nodes": "Nodes of the recipe per state, as its NodeRecipe status counts them.",
    "recipe_phase": "1 for the phase of the recipe's rollout in progress or last run.",
    "rollout_start_timestamp_seconds": "Unix time the rollout in progress (or the last one) started.",
    "rollout_last_progress_timestamp_seconds": "Unix time a node last changed state in the rollout.",
    "run_duration_seconds": "Duration of the rollout in progress (so far) or of the last one, in seconds.",
    "run_result": "1 for the result of the recipe's last rollout (every result 0 while it runs).",
    "node_target_count": "Nodes selected by the recipe.",
    "node_status_count": "Nodes per recorded status of the recipe (none: no status recorded).",
    "package_state_count": "Nodes per package, version and state.",
    "package_stage_count": "Nodes per package, version and stage.",
    "package_restarts_count": "Summed stage restarts per package and version.",
    "recipe_paused": "1 when the recipe is paused (reconciler pause).",
    "recipe_disabled": "1 when the recipe is disabled (reconciler disable).",
    "last_update_timestamp_seconds": "Unix time when these metrics were computed.",
}

Labels = tuple[tuple[str, str], ...]


class MetricsError(ReconcilerError):
    """The metrics could not be pushed."""


@dataclass(eq=False)  # a collector is registered by identity
class MetricSet:
    """Gauge families by full name, each ``labels → value``; a ``prometheus_client`` collector
    (:meth:`collect`), so a registry exposes, writes or pushes it."""

    families: dict[str, dict[Labels, float]] = field(default_factory=dict)

    def set(self, short: str, labels: Mapping[str, str], value: float) -> None:
        """Set the sample of ``node_reconciler_<short>`` with ``labels`` (``short`` is in :data:`HELP`)."""
        self.families.setdefault(PREFIX + short, {})[tuple(sorted(labels.items()))] = float(value)

    def update(self, other: MetricSet) -> None:
        """Add every sample of ``other`` (same name and labels: ``other`` wins)."""
        for name, samples in other.families.items():
            self.families.setdefault(name, {}).update(samples)

    def value(self, short: str, **labels: str) -> float | None:
        """The sample of ``node_reconciler_<short>`` whose labels include ``labels`` (first in
        label order), or None."""
        for key, v in sorted(self.families.get(PREFIX + short, {}).items()):
            d = dict(key)
            if all(d.get(k) == want for k, want in labels.items()):
                return v
        return None

    def describe(self) -> list[Metric]:
        """Nothing up front (the names depend on the data), so registering does not collect."""
        return []

    def collect(self) -> Iterator[Metric]:
        """One gauge family per name, in name order."""
        for name in sorted(self.families):
            samples = self.families[name]
            keys = [k for k, _ in next(iter(samples))] if samples else []
            fam = GaugeMetricFamily(name, HELP[name.removeprefix(PREFIX)], labels=keys)
            for key in sorted(samples):
                fam.add_metric([v for _, v in key], samples[key])
            yield fam


def exposition(*sets: MetricSet) -> bytes:
    """The Prometheus text exposition of ``sets`` (merged), as ``prometheus_client`` writes it."""
    merged = MetricSet()
    for s in sets:
        merged.update(s)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(merged)
    return generate_latest(registry)


@dataclass
class Live:
    """A rollout as it goes (or as it went): the status's per-node fold, the live view's board,
    when it started and when a node last changed state (wall-clock seconds), its result once
    finished."""

    progress: RolloutProgress
    board: ProgressBoard
    started: float
    changed: float
    result: RunResult | None = None
    most: dict[str, int] = field(default_factory=dict)  # compartment → most nodes held at once

    @classmethod
    def start(cls, plan: Plan, at: float) -> Live:
        """A rollout of ``plan`` starting at ``at``."""
        return cls(RolloutProgress(plan), ProgressBoard.for_plan(plan), at, at)

    def on_event(self, ev: Event, at: float) -> None:
        """Fold one timeline event in (at wall time ``at``)."""
        if self.progress.on_event(ev):
            self.changed = at
        self.board.on_event(ev)
        for name, c in self.board.compartments.items():
            self.most[name] = max(self.most.get(name, 0), len(c.held))

    def finish(self, result: RunResult) -> None:
        """Settle it from the run's result."""
        self.progress.finish(result)
        self.result = result

    @classmethod
    def replay(cls, plan: Plan, result: RunResult, ended: float) -> Live:
        """A finished run, folded from its timeline (``ended``: wall time it ended at)."""
        started = ended - result.duration
        live = cls.start(plan, started)
        for ev in result.timeline:
            live.on_event(ev, started + ev.t)
        live.finish(result)
        return live


def _state(node: NodeInfo, recipe: str) -> dict[str, PackageState]:
    try:
        return parse_state(node.annotations.get(state_key(recipe)), node=node.name)
    except NodeStateError:
        return {}


def recorded_states(recipe: str, plan: Plan, by_name: Mapping[str, NodeInfo]) -> dict[str, NodeProgress]:
    """Each planned node's state from its records, without a rollout: a failure record → failed,
    a lifecycle in flight → inProgress, recorded status blocked → blocked, work left → pending,
    else complete."""
    out: dict[str, NodeProgress] = {}
    for n in plan.nodes:
        node = by_name.get(n.name)
        ann = node.annotations if node is not None else {}
        if failure_key(recipe) in ann:
            out[n.name] = "failed"
        elif inflight_key(recipe) in ann:
            out[n.name] = "inProgress"
        elif node is not None and recorded_status(node.labels, ann, recipe) == NodeStatus.BLOCKED:
            out[n.name] = "blocked"
        else:
            out[n.name] = "pending" if n.has_work else "complete"
    return out


def _compartments(ms: MetricSet, plan: Plan, states: Mapping[str, NodeProgress], live: Live | None,
                  base: dict[str, str]) -> None:
    board = live.board if live is not None else ProgressBoard.for_plan(plan)
    for cp in plan.compartments:
        labels = {**base, "policy": plan.policy or "legacy", "compartment": cp.name, "strategy": cp.strategy}
        counts = {s: 0 for s in NODE_STATES}
        for n in plan.nodes:
            if n.compartment == cp.name:
                counts[states.get(n.name, "pending")] += 1
        ms.set("rollout_matched_nodes", labels, cp.matched)
        ms.set("rollout_ceiling", labels, cp.ceiling)
        ms.set("rollout_completed", labels, counts["complete"])
        ms.set("rollout_in_progress", labels, counts["inProgress"])
        ms.set("rollout_failed", labels, counts["failed"])
        ms.set("rollout_blocked", labels, counts["blocked"])
        ms.set("rollout_progress_percent", labels,
               round(counts["complete"] * 100 / cp.matched, 2) if cp.matched else 100)
        progress = board.compartments.get(cp.name)
        ms.set("rollout_batches", labels, progress.batches if progress is not None else 0)
        if live is not None and progress is not None:
            ms.set("rollout_current_batch", labels, progress.batch)
            ms.set("rollout_disrupted", labels, len(progress.held))
            ms.set("rollout_halted", labels, 1 if progress.halted or cp.name in live.progress.halted else 0)
            ms.set("rollout_max_disrupted", labels, live.most.get(cp.name, 0))


def _records(ms: MetricSet, recipe: str, targets: Sequence[NodeInfo], base: dict[str, str]) -> None:
    statuses: dict[str, int] = {}
    states: dict[tuple[str, str, str], int] = {}
    stages: dict[tuple[str, str, str], int] = {}
    restarts: dict[tuple[str, str], int] = {}
    for node in targets:
        st = recorded_status(node.labels, node.annotations, recipe) or "none"
        statuses[st] = statuses.get(st, 0) + 1
        for e in _state(node, recipe).values():
            states[(e.name, e.version, e.state)] = states.get((e.name, e.version, e.state), 0) + 1
            stages[(e.name, e.version, e.stage)] = stages.get((e.name, e.version, e.stage), 0) + 1
            restarts[(e.name, e.version)] = restarts.get((e.name, e.version), 0) + e.restarts
    ms.set("node_target_count", base, len(targets))
    for st, count in statuses.items():
        ms.set("node_status_count", {**base, "status": st}, count)
    for (pkg, ver, state), count in states.items():
        ms.set("package_state_count", {**base, "package": pkg, "version": ver, "state": state}, count)
    for (pkg, ver, stage), count in stages.items():
        ms.set("package_stage_count", {**base, "package": pkg, "version": ver, "stage": stage}, count)
    for (pkg, ver), count in restarts.items():
        ms.set("package_restarts_count", {**base, "package": pkg, "version": ver}, count)


def rollout_metrics(
    recipe: str,
    nodes: Sequence[NodeInfo],
    *,
    plan: Plan | None = None,
    live: Live | None = None,
    paused: bool | None = None,
    disabled: bool | None = None,
    now: float | None = None,
) -> MetricSet:
    """The metrics of ``recipe`` (module docstring).

    ``nodes``: the current node objects (records give statuses and package states). ``plan``: the
    recipe's plan (compartments, matched nodes, batches; ``live.progress.plan`` when ``live`` is
    given); without a plan only the counts over nodes carrying the recipe's state are produced.
    ``live``: the rollout in progress or the last one (node states, batch, budget in use, phase,
    times); without it node states come from the records (:func:`recorded_states`).
    ``paused``/``disabled`` None: not reported. ``now``: wall-clock seconds of the computation.
    """
    ms = MetricSet()
    base = {"recipe": recipe}
    by_name = {n.name: n for n in nodes}
    plan = live.progress.plan if live is not None else plan
    if plan is not None:
        states = dict(live.progress.nodes) if live is not None else recorded_states(recipe, plan, by_name)
        _compartments(ms, plan, states, live, base)
        for s in NODE_STATES:
            ms.set("rollout_nodes", {**base, "state": s}, sum(1 for v in states.values() if v == s))
        targets = [by_name[n.name] for n in plan.nodes if n.name in by_name]
    else:
        targets = [n for n in nodes if state_key(recipe) in n.annotations]
    _records(ms, recipe, targets, base)
    if live is not None:
        phase = live.progress.phase(paused=bool(paused))
        for p in PHASES:
            ms.set("recipe_phase", {**base, "phase": p}, 1 if p == phase else 0)
        ms.set("rollout_start_timestamp_seconds", base, round(live.started, 3))
        ms.set("rollout_last_progress_timestamp_seconds", base, round(live.changed, 3))
        if live.result is not None:
            elapsed = live.result.duration
        else:
            elapsed = max(live.board.elapsed, now - live.started) if now is not None else live.board.elapsed
        ms.set("run_duration_seconds", base, round(elapsed, 3))
        last = live.result.result if live.result is not None else None  # none yet: every result 0
        for r in RESULTS:
            ms.set("run_result", {**base, "result": r}, 1 if last == r else 0)
    if paused is not None:
        ms.set("recipe_paused", base, 1 if paused else 0)
    if disabled is not None:
        ms.set("recipe_disabled", base, 1 if disabled else 0)
    if now is not None:
        ms.set("last_update_timestamp_seconds", base, round(now, 3))
    return ms


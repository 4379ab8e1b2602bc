"""Prometheus metrics of the controller (``/metrics``; prometheus_client, its own registry).

The rollout gauges are the one model of :mod:`reconciler.report.metrics` (the names
``reconciler metrics`` and ``apply --metrics-file`` export, the Grafana dashboard and the alert
rules query), folded as the controller's rollouts go (:class:`~reconciler.report.rolloutmetrics.RolloutMetrics`,
registered here), so a rollout of a day can be watched and alerted on while it runs. The
controller's own series follow the Prometheus naming conventions (``_total`` counters, base
units) under the same prefix: how many passes ran and how they ended, how long they took, what
triggered them, whether this replica leads, status writes, rollouts by result, nodes tainted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from reconciler.errors import ReconcilerError
from reconciler.model.observed import NodeInfo
from reconciler.model.plan import Plan
from reconciler.model.recipe import Recipe
from reconciler.model.run import Event, RunResult
from reconciler.model.vocab import EventKind
from reconciler.report.rolloutmetrics import RolloutMetrics


class ControllerMetrics:
    """The metrics, registered in ``registry`` (a fresh one by default, so tests do not share).

    Args:
        nodes: the nodes as they are now, for the rollout gauges (the node watch's store);
            default none (the gauges then leave the node-record series out).
        wall: UTC wall-clock seconds (the Clock port's ``utc``); default 0.
    """

    def __init__(self, registry: CollectorRegistry | None = None, *,
                 nodes: Callable[[], Sequence[NodeInfo]] | None = None,
                 wall: Callable[[], float] | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.passes = Counter("node_reconciler_controller_passes_total", "Reconcile passes, by how they ended.",
                              ["outcome"], registry=r)
        self.pass_seconds = Histogram("node_reconciler_controller_pass_duration_seconds",
                                      "Duration of a reconcile pass.",
                                      buckets=(0.1, 0.5, 1, 5, 30, 120, 600, 3600, 6 * 3600, 86400), registry=r)
        self.triggers = Counter("node_reconciler_controller_triggers_total", "Watch events that asked for a pass.",
                                ["kind"], registry=r)
        self.leader = Gauge("node_reconciler_controller_leader", "1 while this replica is the leader.", registry=r)
        self.status_writes = Counter("node_reconciler_controller_status_writes_total",
                                     "NodeRecipe status subresource writes.", registry=r)
        self.rollouts = Counter("node_reconciler_rollouts_total", "Rollouts that ended, by recipe and result.",
                                ["recipe", "result"], registry=r)
        self.tainted = Counter("node_reconciler_nodes_tainted_total",
                               "Joining nodes tainted runtime-required (autoTaintNewNodes).", registry=r)
        self.rollout = RolloutMetrics(nodes or (lambda: []), wall or (lambda: 0.0))
        r.register(self.rollout)

    def tainted_nodes(self, nodes: Sequence[str]) -> None:
        """Count nodes tainted at join."""
        self.tainted.inc(len(nodes))


class MetricsObserver:
    """The :class:`~reconciler.service.Observer` feeding :class:`ControllerMetrics`' counters (the
    rollout gauges observe the service themselves: ``ControllerMetrics.rollout``).

    A rollout that was stopped (preempted, SIGTERM, leadership lost) is not counted: it did not
    end, the next pass resumes it."""

    def __init__(self, metrics: ControllerMetrics) -> None:
        self.m = metrics
        self._stopped: set[str] = set()

    def tainted(self, nodes: Sequence[str]) -> None:
        """Nodes tainted at join."""
        self.m.tainted_nodes(nodes)

    def skipped(self, recipe: Recipe, reason: str) -> None:
        """Nothing counted for a held recipe."""

    def started(self, recipe: Recipe, plan: Plan, run_id: str) -> None:
        """Nothing counted at the start."""

    def event(self, plan: Plan, event: Event) -> None:
        """Nothing counted per event; a stopped rollout is remembered."""
        if event.event == EventKind.STOPPED:
            self._stopped.add(plan.recipe.name)

    def finished(self, recipe: Recipe, plan: Plan, result: RunResult) -> None:
        """The rollout's result counted (class docstring)."""
        if recipe.name in self._stopped:
            self._stopped.discard(recipe.name)
            return
        self.m.rollouts.labels(recipe.name, result.result).inc()

    def failed(self, recipe: Recipe | None, error: ReconcilerError, run_id: str) -> None:
        """Counted by the controller (the pass outcome)."""

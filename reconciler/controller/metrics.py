"""Prometheus metrics of the controller (``/metrics``; prometheus_client, its own registry).

Names follow the Prometheus naming conventions (``_total`` counters, base units): how many
passes ran and how they ended, how long they took, what triggered them, whether this replica
leads, status writes, and per recipe the node counts of the last rollout.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from reconciler.errors import ReconcilerError
from reconciler.model.plan import Plan
from reconciler.model.recipe import Recipe
from reconciler.model.run import Event, RunResult
from reconciler.model.vocab import EventKind
from reconciler.report.status import RolloutProgress


class ControllerMetrics:
    """The metrics, registered in ``registry`` (a fresh one by default, so tests do not share)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.passes = Counter("reconciler_controller_passes_total", "Reconcile passes, by how they ended.",
                              ["outcome"], registry=r)
        self.pass_seconds = Histogram("reconciler_controller_pass_duration_seconds", "Duration of a reconcile pass.",
                                      buckets=(0.1, 0.5, 1, 5, 30, 120, 600, 3600, 6 * 3600, 86400), registry=r)
        self.triggers = Counter("reconciler_controller_triggers_total", "Watch events that asked for a pass.",
                                ["kind"], registry=r)
        self.leader = Gauge("reconciler_controller_leader", "1 while this replica is the leader.", registry=r)
        self.status_writes = Counter("reconciler_controller_status_writes_total",
                                     "NodeRecipe status subresource writes.", registry=r)
        self.recipe_nodes = Gauge("reconciler_recipe_nodes", "Nodes of the last rollout of a recipe, by outcome.",
                                  ["recipe", "state"], registry=r)
        self.rollouts = Counter("reconciler_rollouts_total", "Rollouts run, by recipe and result.",
                                ["recipe", "result"], registry=r)
        self.tainted = Counter("reconciler_nodes_tainted_total",
                               "Joining nodes tainted runtime-required (autoTaintNewNodes).", registry=r)

    # Observer of the application service ------------------------------------------------
    def tainted_nodes(self, nodes: Sequence[str]) -> None:
        """Count nodes tainted at join."""
        self.tainted.inc(len(nodes))


class MetricsObserver:
    """The :class:`~reconciler.service.Observer` feeding :class:`ControllerMetrics`.

    A rollout that was stopped (preempted, SIGTERM, leadership lost) is not counted: it did not
    end, the next pass resumes it. The node counts of a finished rollout are the ones its
    NodeRecipe status shows (:class:`~reconciler.report.status.RolloutProgress`: nodes that were
    already up to date count as complete)."""

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
        """Node counts and the result of the rollout (class docstring)."""
        if recipe.name in self._stopped:
            self._stopped.discard(recipe.name)
            return
        self.m.rollouts.labels(recipe.name, result.result).inc()
        progress = RolloutProgress(plan)
        progress.finish(result)
        counts = progress.counts()
        by_result: dict[str, int] = {}
        for n in result.nodes:
            by_result[n.state] = by_result.get(n.state, 0) + 1
        counts.update(waiting=len(progress.waiting), untouched=counts["pending"] - len(progress.waiting),
                      left=by_result.get("left", 0))
        for state in ("complete", "failed", "blocked", "waiting", "untouched", "removed", "left"):
            self.m.recipe_nodes.labels(recipe.name, state).set(counts.get(state, 0))

    def failed(self, recipe: Recipe | None, error: ReconcilerError, run_id: str) -> None:
        """Counted by the controller (the pass outcome)."""

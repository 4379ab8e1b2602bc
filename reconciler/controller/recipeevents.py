"""Kubernetes Events about NodeRecipe objects (issue 15): what ``kubectl describe noderecipe`` and
``kubectl get events`` show of the controller's work on a recipe — a rollout started, succeeded,
failed or halted, or the recipe is held (paused/disabled). An :class:`~reconciler.service.Observer`
of the application service; the Event is created by an :class:`EventSink` (the adapter). Only
recipes that are NodeRecipe objects (a UID) get Events."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from reconciler.errors import ClusterError, ReconcilerError
from reconciler.model.plan import Plan
from reconciler.model.recipe import Recipe
from reconciler.model.run import Event, RunResult
from reconciler.model.vocab import EventKind, NodeResult, RunVerdict
from reconciler.report.status import waiting_text

log = logging.getLogger(__name__)


class EventSink(Protocol):
    """Creates a core/v1 Event about NodeRecipe ``name`` (``uid``)."""

    def emit(self, name: str, uid: str, reason: str, message: str, type_: str = "Normal") -> None:
        """Create the Event. Raises ClusterError."""
        ...


class ObjectUids(Protocol):
    """The UID of a NodeRecipe object (None: the recipe is not an object)."""

    def uid(self, name: str) -> str | None:
        """``metadata.uid`` of NodeRecipe ``name``."""
        ...


#: reason, type of the Event at the end of a rollout, by verdict
END = {RunVerdict.SUCCEEDED: ("RolloutSucceeded", "Normal"), RunVerdict.FAILED: ("RolloutFailed", "Warning"),
       RunVerdict.HALTED: ("RolloutHalted", "Warning"), RunVerdict.WAITING: ("RolloutWaiting", "Normal")}


def end_event(result: RunResult) -> tuple[str, str, str]:
    """``(reason, type, message)`` of the Event for a finished rollout (pure)."""
    reason, type_ = END[RunVerdict(result.result)]
    states = [str(n.state) for n in result.nodes]
    msg = (f"run {result.run_id}: {states.count('complete')} complete, {states.count('failed')} failed, "
           f"{states.count('blocked')} blocked, {states.count('waiting')} waiting")
    halted = [c.name for c in result.compartments if c.halted]
    if halted:
        msg += f"; halted: {', '.join(halted)}"
    waiting = {n.name: n.message for n in result.nodes if n.state == NodeResult.WAITING}
    if waiting:
        msg += f"; {waiting_text(waiting)}"
    return reason, type_, msg


class RecipeEventsObserver:
    """Events on NodeRecipe objects for the rollouts of one pass (module docstring). A failed Event
    write is logged, never fatal."""

    def __init__(self, sink: EventSink, objects: ObjectUids) -> None:
        self.sink, self.objects = sink, objects
        self._stopped: set[str] = set()

    def _emit(self, name: str, reason: str, message: str, type_: str = "Normal") -> None:
        uid = self.objects.uid(name)
        if not uid:
            return
        try:
            self.sink.emit(name, uid, reason, message[:1024], type_)
        except (ClusterError, ReconcilerError) as e:
            log.warning("recipe %s: could not create event %s: %s", name, reason, e)

    def tainted(self, nodes: Sequence[str]) -> None:
        """Not a recipe's event."""

    def skipped(self, recipe: Recipe, reason: str) -> None:
        """A held recipe."""
        self._emit(recipe.name, "Disabled" if reason.startswith("disabled") else "Paused", f"recipe {reason}")

    def started(self, recipe: Recipe, plan: Plan, run_id: str) -> None:
        """A rollout with work begins."""
        changing = plan.summary.nodesChanging
        if changing:
            self._emit(recipe.name, "RolloutStarted",
                       f"run {run_id}: {changing} of {plan.summary.nodes} node(s) change; "
                       f"plan {plan.planHash[:12]}")

    def event(self, plan: Plan, event: Event) -> None:
        """A stopped rollout is not finished (the next pass or leader resumes it)."""
        if event.event == EventKind.STOPPED:
            self._stopped.add(plan.recipe.name)

    def finished(self, recipe: Recipe, plan: Plan, result: RunResult) -> None:
        """The rollout's end (not for a stopped one, nor for one that had nothing to do)."""
        if recipe.name in self._stopped:
            self._stopped.discard(recipe.name)
            return
        if not plan.summary.nodesChanging and result.result == RunVerdict.SUCCEEDED:
            return
        reason, type_, msg = end_event(result)
        self._emit(recipe.name, reason, msg, type_)

    def failed(self, recipe: Recipe | None, error: ReconcilerError, run_id: str) -> None:
        """The apply stopped with an error while ``recipe`` was current (not for a stop the
        controller asked for: a preemption or SIGTERM is no error, the next pass resumes)."""
        if recipe is not None and not getattr(error, "requested", False):
            self._emit(recipe.name, "RolloutError", f"run {run_id}: {error}", "Warning")

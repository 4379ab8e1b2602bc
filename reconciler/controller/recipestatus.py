"""kstatus status on the NodeRecipe objects themselves, written as the service reports progress.

Flux's default health check and Argo CD's (through kstatus-compatible conditions) read a
NodeRecipe's ``status`` without any configuration when it follows the kstatus conventions
(sigs.k8s.io/cli-utils ``pkg/kstatus``; gitops-conventions.md §3.2):

* ``status.observedGeneration`` — the ``metadata.generation`` the status describes; while it is
  behind, kstatus says InProgress ("LatestGenerationNotObserved"). Written from the first status
  write of a pass on, so a new spec is InProgress until the controller has looked at it;
* ``Reconciling=True`` while nodes are being worked on (InProgress), ``Stalled=True`` when the
  rollout cannot go on without a person (a failed node, a halted compartment, a spec the loader
  refuses: Failed), ``Ready=True`` with neither (Current).

The rollout states come from :func:`reconciler.report.status.rollout_status` (the same table as
the ``NodeRecipeRollout`` status object of ``apply``); this module adds the states a controller
has and a pipeline run does not: a recipe held by ``pause``/``disable`` (Ready False, neither
Reconciling nor Stalled: InProgress, "Suspended" for Argo CD) and a refused spec (Stalled,
reason ``InvalidSpec``).

Writes go through :class:`StatusWriter` (the kube adapter :mod:`reconciler.adapters.kube.noderecipes`);
a failed status write is logged and never stops a rollout.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from reconciler.errors import ClusterError, ReconcilerError
from reconciler.model.plan import Plan
from reconciler.model.recipe import Recipe
from reconciler.model.run import Event, RunResult
from reconciler.model.utctime import to_rfc3339
from reconciler.ports import Clock
from reconciler.report.status import RolloutProgress, kstatus_conditions, rollout_status

log = logging.getLogger(__name__)


class StatusWriter(Protocol):
    """Writes a NodeRecipe's status subresource."""

    def write_status(self, name: str, status: Mapping[str, Any]) -> None:
        """Replace the ``status`` of NodeRecipe ``name`` (merge patch of ``/status``). Raises ClusterError."""
        ...


class ObjectView(Protocol):
    """What the status needs to know of the objects: their generation and current conditions."""

    def generation(self, name: str) -> int | None:
        """``metadata.generation`` of NodeRecipe ``name`` (None: no such object)."""
        ...

    def conditions(self, name: str) -> list[Mapping[str, Any]]:
        """``status.conditions`` currently on the object."""
        ...


def held_status(recipe: str, reason: str, *, generation: int, now: str,
                previous: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """Status of a recipe held by ``pause`` or ``disable`` (``reason`` as the service gives it)."""
    why = "Disabled" if reason.startswith("disabled") else "Paused"
    conditions = kstatus_conditions(("False", why, reason), ("False", why, f"not rolled out: {reason}"),
                                    ("False", why, ""), generation=generation, now=now, previous=previous)
    return {"observedGeneration": generation, "phase": why, "summary": reason, "recipe": recipe,
            "conditions": conditions}


def invalid_status(recipe: str, error: str, *, generation: int, now: str,
                   previous: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """Status of a recipe whose spec the loader (or locked mode) refuses: Stalled until it changes."""
    msg = error[:2000]
    conditions = kstatus_conditions(("False", "InvalidSpec", msg), ("False", "InvalidSpec", "not rolled out"),
                                    ("True", "InvalidSpec", msg), generation=generation, now=now, previous=previous)
    return {"observedGeneration": generation, "phase": "Invalid", "summary": msg, "recipe": recipe,
            "conditions": conditions}


class RecipeStatusObserver:
    """An :class:`~reconciler.service.Observer` writing each recipe's kstatus status (module docstring).

    A status write happens when a rollout starts with work to do, when a node's progress changes
    the counts, when it ends, and when a recipe is held; recipes that are not NodeRecipe objects
    (no generation) are left alone.
    """

    def __init__(self, writer: StatusWriter, objects: ObjectView, clock: Clock,
                 on_write: Callable[[str], None] | None = None) -> None:
        self.writer, self.objects, self.clock = writer, objects, clock
        self.on_write = on_write
        self._progress: dict[str, RolloutProgress] = {}
        self._stopped: set[str] = set()
        self.writes = 0

    def _write(self, name: str, build: Callable[[int, str, list[Mapping[str, Any]]], dict[str, Any]]) -> None:
        gen = self.objects.generation(name)
        if gen is None:
            return
        try:
            self.writer.write_status(name, build(gen, to_rfc3339(self.clock.utc()), self.objects.conditions(name)))
            self.writes += 1
            if self.on_write is not None:
                self.on_write(name)
        except ClusterError as e:
            log.warning("recipe %s: could not write its status: %s", name, e)

    def _write_progress(self, p: RolloutProgress) -> None:
        self._write(p.plan.recipe.name,
                    lambda g, now, prev: rollout_status(p, generation=g, now=now, previous=prev))

    def tainted(self, nodes: Sequence[str]) -> None:
        """Nothing to write: the taint is part of the node's rollout."""

    def skipped(self, recipe: Recipe, reason: str) -> None:
        """A held recipe: Ready False, reason Paused or Disabled."""
        self._write(recipe.name, lambda g, now, prev: held_status(recipe.name, reason, generation=g, now=now,
                                                                  previous=prev))

    def started(self, recipe: Recipe, plan: Plan, run_id: str) -> None:
        """Reconciling when the plan has work (an up-to-date recipe goes straight to Ready at the end)."""
        p = RolloutProgress(plan, run_id=run_id)
        self._progress[recipe.name] = p
        c = p.counts()
        if c["pending"] or c["inProgress"]:
            self._write_progress(p)

    def event(self, plan: Plan, event: Event) -> None:
        """A node's progress: written when the counts changed."""
        if event.event == "stopped":  # the rollout was stopped (lease lost, shutdown, preempted)
            self._stopped.add(plan.recipe.name)
        p = self._progress.get(plan.recipe.name)
        if p is not None and p.on_event(event):
            self._write_progress(p)

    def finished(self, recipe: Recipe, plan: Plan, result: RunResult) -> None:
        """The rollout's end: Ready, or Stalled (failed / halted); still Reconciling when it was stopped."""
        p = self._progress.pop(recipe.name, None) or RolloutProgress(plan)
        if recipe.name in self._stopped:  # not finished: the next pass or leader resumes its nodes
            self._stopped.discard(recipe.name)
            return
        p.finish(result)
        self._write_progress(p)

    def failed(self, recipe: Recipe | None, error: ReconcilerError, run_id: str) -> None:
        """The pass stopped with ``error``: the status stays as last written (Reconciling), since
        the next pass or leader resumes; the error is logged by the controller."""
        if recipe is not None:
            self._progress.pop(recipe.name, None)

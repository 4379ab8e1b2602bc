"""Live progress of a rollout, folded from its timeline events (issue 16): what the terminal's live
view and the step summary show. Pure: a :class:`ProgressBoard` is fed the plan and then each
:class:`~reconciler.model.run.Event` in order; no I/O, no clock (times are the events' own ``t``,
seconds since the run started).

Per compartment: the batch in progress of the planned batches (``batch k of N``; N grows when
the budget shrank batches), nodes complete / in progress / waiting on protected pods / failed
(blocked nodes count as waiting: they are retried), and the budget in use (nodes we hold
cordoned now) against the ceiling. The ETA is the predicted duration of what remains, when the
caller gives a prediction per compartment (the simulator's makespan, the same one ``simulate``
computes): predicted total minus the predicted time the current batch started at, scaled by the
pace the finished batches kept against their prediction (:func:`pace`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from reconciler.model.plan import Plan
from reconciler.model.run import Event
from reconciler.model.vocab import EventKind

_DONE = {EventKind.COMPLETE, EventKind.LEFT, EventKind.REMOVED}
_RELEASES = {EventKind.UNCORDON, EventKind.COMPLETE, EventKind.BLOCKED, EventKind.LEFT, EventKind.REMOVED}


@dataclass
class CompartmentProgress:
    """One compartment's counts (see the module docstring). ``batch_starts``: when each batch began
    (event time, s)."""

    name: str
    ceiling: int
    planned_batches: int
    nodes: int
    batch: int = 0
    complete: int = 0
    failed: int = 0
    running: set[str] = field(default_factory=set)
    waiting: set[str] = field(default_factory=set)
    held: set[str] = field(default_factory=set)
    halted: str = ""
    batch_starts: list[float] = field(default_factory=list)

    @property
    def in_progress(self) -> int:
        """Nodes being worked on, not counting those waiting on protected pods."""
        return len(self.running - self.waiting)

    @property
    def batches(self) -> int:
        """Batches to run: the plan's, or more when budget-shrunk batches pushed nodes later."""
        return max(self.planned_batches, self.batch)


@dataclass
class ProgressBoard:
    """The live state of one recipe's rollout. ``predicted``: compartment → predicted seconds of
    every batch start and the end (``[start₁, …, startₙ, end]``, from the simulator), for the ETA."""

    recipe: str
    version: str
    compartments: dict[str, CompartmentProgress]
    node_compartment: dict[str, str]
    predicted: Mapping[str, Sequence[float]] = field(default_factory=dict)
    elapsed: float = 0.0
    finished: str = ""

    @classmethod
    def for_plan(cls, plan: Plan, predicted: Mapping[str, Sequence[float]] | None = None) -> ProgressBoard:
        """A board for ``plan`` before its first event. Only nodes that change are counted."""
        changing = {n.name for n in plan.nodes if n.steps or n.interrupt is not None}
        comps: dict[str, CompartmentProgress] = {}
        where: dict[str, str] = {}
        for c in plan.compartments:
            batches = [tuple(n for n in b if n in changing) for b in c.batches]
            batches = [b for b in batches if b]
            comps[c.name] = CompartmentProgress(c.name, c.ceiling, len(batches), sum(len(b) for b in batches))
            for b in batches:
                for n in b:
                    where[n] = c.name
        return cls(plan.recipe.name, plan.recipe.version, comps, where, dict(predicted or {}))

    def on_event(self, ev: Event) -> None:
        """Fold one event in (events arrive in order)."""
        self.elapsed = max(self.elapsed, ev.t)
        try:
            kind = EventKind(ev.event)
        except ValueError:
            return
        if kind in (EventKind.BATCH_START, EventKind.BATCH_END, EventKind.HALTED):
            c = self.compartments.get(ev.node)
            if c is None:
                return
            if kind is EventKind.BATCH_START:
                c.batch += 1
                c.batch_starts.append(ev.t)
            elif kind is EventKind.HALTED:
                c.halted = ev.detail
            return
        if kind is EventKind.STOPPED:
            self.finished = "stopped"
            return
        comp = self.compartments.get(self.node_compartment.get(ev.node, ""))
        if comp is None:
            return
        n = ev.node
        if kind is EventKind.CORDON:
            comp.held.add(n)
        if kind in _RELEASES:
            comp.held.discard(n)
        if kind is EventKind.WAIT:
            comp.waiting.add(n)
        elif kind in (EventKind.EVICT, EventKind.DRAINED, EventKind.STAGE_START):
            comp.waiting.discard(n)
        if kind in _DONE:
            comp.running.discard(n)
            comp.waiting.discard(n)
            comp.complete += kind is EventKind.COMPLETE
        elif kind is EventKind.FAILED:
            comp.running.discard(n)
            comp.waiting.discard(n)
            comp.failed += 1
        elif kind is EventKind.BLOCKED:
            comp.running.discard(n)
            comp.waiting.add(n)
        else:
            comp.running.add(n)

    def eta(self) -> float | None:
        """Seconds until the last compartment is predicted to end, or None without a prediction:
        per compartment, the predicted time from its current batch's start to its end, scaled by
        :func:`pace` (how long its finished batches took against their prediction), less the time
        the current batch has run."""
        out: list[float] = []
        for name, c in self.compartments.items():
            pred = self.predicted.get(name)
            if not pred or c.halted:
                continue
            if c.batch == 0:
                out.append(pred[-1])
                continue
            k = min(c.batch, len(pred) - 1)  # batch k started at pred[k-1] in the prediction
            started_at = c.batch_starts[-1] if c.batch_starts else 0.0
            rate = pace(pred, c.batch_starts)
            out.append(max(0.0, rate * (pred[-1] - pred[k - 1]) - (self.elapsed - started_at)))
        return max(out) if out else None

    def pace(self) -> float:
        """The observed pace over all compartments (the slowest one's :func:`pace`): 1.0 until a
        batch has ended, the factor the ETA is scaled by (shown beside it)."""
        rates = [pace(self.predicted[n], c.batch_starts) for n, c in self.compartments.items()
                 if self.predicted.get(n)]
        return max(rates, default=1.0)

    @property
    def totals(self) -> dict[str, int]:
        """Counts over every compartment: nodes, complete, running, waiting, failed, held."""
        cs = self.compartments.values()
        return {"nodes": sum(c.nodes for c in cs), "complete": sum(c.complete for c in cs),
                "running": sum(c.in_progress for c in cs), "waiting": sum(len(c.waiting) for c in cs),
                "failed": sum(c.failed for c in cs), "held": sum(len(c.held) for c in cs)}


def pace(predicted: Sequence[float], starts: Sequence[float]) -> float:
    """Observed time of a compartment's finished batches over their predicted time: batches
    ``1..k-1`` ran from ``starts[0]`` to ``starts[k-1]`` (the start of the current batch ``k``),
    predicted from ``predicted[0]`` to ``predicted[k-1]``. 1.0 before a batch has ended (or with
    no predicted time); bounded to 1/100..100. The simulator's default stage, reboot and drain
    durations are guesses (a 37 s rollout was predicted 6 min on a real cluster): the live ETA
    learns the real pace from the batches done."""
    k = min(len(starts), len(predicted) - 1)
    if k < 2:
        return 1.0
    want, took = predicted[k - 1] - predicted[0], starts[k - 1] - starts[0]
    if want <= 0 or took <= 0:
        return 1.0
    return min(100.0, max(0.01, took / want))


def predicted_schedule(events: Sequence[Event], compartments: Sequence[str]) -> dict[str, list[float]]:
    """Batch start times and the end per compartment from a *simulated* run's timeline
    (``[start₁, …, startₙ, end]``), the prediction :meth:`ProgressBoard.eta` uses."""
    out: dict[str, list[float]] = {c: [] for c in compartments}
    ends: dict[str, float] = {}
    for ev in events:
        if ev.node in out and ev.event == EventKind.BATCH_START:
            out[ev.node].append(ev.t)
        elif ev.node in out and ev.event == EventKind.BATCH_END:
            ends[ev.node] = ev.t
    return {c: [*starts, ends.get(c, starts[-1] if starts else 0.0)] for c, starts in out.items() if starts}

"""What a run reports: its timeline events, node outcomes, batches and the result document of ``apply``.

Plain data shared by ``execute`` (which produces it) and ``report``/``cli`` (which render it), so it
lives in ``model`` (docs/architecture-layers.md); :mod:`reconciler.execute.timeline` re-exports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconciler.model.vocab import EventKind, NodeResult, RunVerdict

#: Every timeline event kind, as strings (see :class:`reconciler.model.vocab.EventKind`).
EVENTS: tuple[str, ...] = tuple(k.value for k in EventKind)

#: The end of an ``evict`` event's detail when the drain deleted a finished (Succeeded/Failed) pod
#: instead of evicting it (``kubectl drain`` deletes those): such a pod counts as removed, not evicted.
REMOVED_SUFFIX = " (finished: removed)"


def run_verdict(*, halted: bool, failed: bool, waiting: bool) -> RunVerdict:
    """How a run ended, from what its nodes and compartments did: ``halted`` (a compartment
    stopped), ``failed`` (a node failed, stayed blocked or was still running at the end),
    ``waiting`` (a node did not start, waiting for an earlier recipe). The first that holds wins,
    in that order; none → SUCCEEDED (:class:`~reconciler.model.vocab.RunVerdict`)."""
    if halted:
        return RunVerdict.HALTED
    if failed:
        return RunVerdict.FAILED
    return RunVerdict.WAITING if waiting else RunVerdict.SUCCEEDED



@dataclass(frozen=True)
class Event:
    """One timeline entry: ``t`` seconds since the run started, the node (or compartment for
    batch events), the event name (see :data:`EVENTS`) and a human detail; ``at``: the instant as
    UTC epoch seconds (None when the timeline has no wall-clock origin, as in a drawn result file),
    written by the event streams (``--events-file``, ``-o jsonl``), not by the result document."""

    t: float
    node: str
    event: str
    detail: str = ""
    at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"t": round(self.t, 3), "node": self.node, "event": self.event, "detail": self.detail}


@dataclass(frozen=True)
class NodeOutcome:
    """Final state of one node in a run."""

    name: str
    state: NodeResult
    compartment: str = ""
    failed_stage: str = ""
    reason: str = ""
    message: str = ""
    exit_code: int | None = None
    log_tail: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON form (issue #3 §5 contract: name, state, failedStage, message)."""
        d: dict[str, Any] = {
            "name": self.name,
            "state": self.state,
            "compartment": self.compartment,
            "failedStage": self.failed_stage or None,
            "message": self.message,
        }
        if self.reason:
            d["reason"] = self.reason
        if self.exit_code is not None:
            d["exitCode"] = self.exit_code
        if self.log_tail:
            d["logTail"] = self.log_tail
        return d


@dataclass(frozen=True)
class BatchRecord:
    """One batch of a compartment: its nodes and how they ended (``passed`` None: no node of it
    was counted, or it has not ended)."""

    number: int
    nodes: tuple[str, ...]
    succeeded: int = 0
    failed: int = 0
    blocked: int = 0
    passed: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "number": self.number,
            "nodes": list(self.nodes),
            "succeeded": self.succeeded,
            "failed": self.failed,
            "blocked": self.blocked,
            "passed": self.passed,
        }


@dataclass(frozen=True)
class CompartmentResult:
    """How one compartment of a run went: its budget ``ceiling``, ``strategy`` (``legacy-fixed``
    without one), its batches, whether it ``halted`` (with ``halt_reason``), the most nodes it had
    disrupted at once (``max_disrupted``) and the nodes it never started (``untouched``)."""

    name: str
    ceiling: int = 0
    strategy: str = ""
    batches: tuple[BatchRecord, ...] = ()
    halted: bool = False
    halt_reason: str = ""
    max_disrupted: int = 0
    untouched: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``apply -o json``)."""
        return {"name": self.name, "ceiling": self.ceiling, "strategy": self.strategy,
                "batches": [b.to_dict() for b in self.batches], "halted": self.halted,
                "haltReason": self.halt_reason, "maxDisrupted": self.max_disrupted,
                "untouched": list(self.untouched)}


@dataclass(frozen=True)
class RunResult:
    """The result document of one ``apply`` run (issue #3 §5).

    ``result`` is ``succeeded`` (every node with work complete), ``failed`` (some node failed or
    stayed blocked), ``halted`` (a compartment stopped at its failure threshold or its budget) or
    ``waiting`` (nothing failed; nodes wait for an earlier recipe): :func:`run_verdict`.
    """

    run_id: str
    plan_hash: str
    recipe: str
    result: RunVerdict
    nodes: list[NodeOutcome]
    compartments: tuple[CompartmentResult, ...]
    timeline: list[Event]
    duration: float
    writes: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "runId": self.run_id,
            "planHash": self.plan_hash,
            "recipe": self.recipe,
            "result": self.result,
            "durationSeconds": round(self.duration, 3),
            "nodes": [n.to_dict() for n in self.nodes],
            "compartments": [c.to_dict() for c in self.compartments],
            "timeline": [e.to_dict() for e in self.timeline],
        }


@dataclass(frozen=True)
class RunCounts:
    """What one run did, counted from its node outcomes and timeline, as every run summary shows it
    (the terminal table, ``apply -o markdown``): nodes ``complete``, ``failed`` and ``held``
    (blocked or waiting), ``reboots``, pods ``evicted`` and finished pods ``removed`` (apart:
    ``kubectl drain`` deletes those), ``batches`` started over all compartments."""

    complete: int
    failed: int
    held: int
    reboots: int
    evicted: int
    removed: int
    batches: int


def run_counts(r: RunResult) -> RunCounts:
    """The :class:`RunCounts` of ``r`` (pure)."""
    states = [n.state for n in r.nodes]
    evicts = [e for e in r.timeline if e.event == EventKind.EVICT]
    removed = sum(1 for e in evicts if e.detail.endswith(REMOVED_SUFFIX))
    return RunCounts(
        complete=states.count(NodeResult.COMPLETE),
        failed=states.count(NodeResult.FAILED),
        held=states.count(NodeResult.BLOCKED) + states.count(NodeResult.WAITING),
        reboots=sum(1 for e in r.timeline if e.event == EventKind.REBOOTED),
        evicted=len(evicts) - removed,
        removed=removed,
        batches=sum(len(c.batches) for c in r.compartments),
    )

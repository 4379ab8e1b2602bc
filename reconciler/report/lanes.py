"""Per-node phases of a run, for pictures of the rollout (pure).

From the timeline of a :class:`~reconciler.model.run.RunResult` (the simulated run of ``plan`` /
``simulate``, or the actual run of ``apply``) each node's life in the run becomes a list of
:class:`Segment` in the NodeWright lifecycle order: ``cordon`` → ``wait`` (protected pods) →
``drain`` → ``stage`` (one per stage pod) → ``reboot`` (or another ``interrupt``) → ``uncordon``,
plus a ``failed``/``blocked`` mark. Nodes are ordered by compartment and batch
(:func:`node_lanes`). For a big fleet :func:`batch_lanes` folds the nodes of a batch into one lane
(each phase from its first start to its last end in that batch), and runs of batches into one lane
beyond ``max_lanes``, so a picture stays bounded whatever the fleet size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from reconciler.model.run import Event, RunResult
from reconciler.model.vocab import EventKind

Phase = Literal["cordon", "wait", "drain", "stage", "reboot", "interrupt", "uncordon", "failed", "blocked"]
#: Phases in lifecycle order (legend order).
PHASES: tuple[Phase, ...] = ("cordon", "wait", "drain", "stage", "reboot", "interrupt", "uncordon", "failed",
                             "blocked")
#: Phases drawn as a mark at one instant rather than a bar.
MARKS: frozenset[str] = frozenset({"cordon", "uncordon", "failed", "blocked"})


@dataclass(frozen=True)
class Segment:
    """One phase of a lane: ``start``/``end`` seconds since the run started, a human ``detail``."""

    phase: Phase
    start: float
    end: float
    detail: str = ""


@dataclass
class Lane:
    """One row of the picture: a node (or a folded batch range), its compartment and batch
    numbers, its segments and end state (``complete``, ``failed``, …, or ``""``)."""

    label: str
    compartment: str
    batches: tuple[int, int]
    segments: list[Segment] = field(default_factory=list)
    state: str = ""
    nodes: int = 1


def _segments(events: Sequence[Event], end_of_run: float) -> tuple[list[Segment], str]:
    segs: list[Segment] = []
    state = ""
    open_: dict[str, tuple[float, str]] = {}

    def close(kind: str, t: float) -> None:
        if kind in open_:
            t0, detail = open_.pop(kind)
            segs.append(Segment(kind, t0, max(t, t0), detail))  # type: ignore[arg-type]

    for ev in events:
        e, t = ev.event, ev.t
        if e == EventKind.CORDON:
            segs.append(Segment("cordon", t, t))
        elif e == EventKind.WAIT:
            open_.setdefault("wait", (t, ev.detail))
        elif e in (EventKind.EVICT, EventKind.EVICT_REFUSED):
            close("wait", t)
            open_.setdefault("drain", (t, ev.detail))
        elif e == EventKind.DRAINED:
            close("wait", t)
            if "drain" not in open_:
                open_["drain"] = (t, "")
            close("drain", t)
        elif e == EventKind.STAGE_START:
            close("wait", t)
            close("drain", t)
            close("reboot", t)
            close("interrupt", t)
            close("stage", t)
            open_["stage"] = (t, ev.detail.replace(" (attempt 1)", ""))
        elif e in (EventKind.STAGE_END, EventKind.STAGE_RETRY):
            close("stage", t)
        elif e == EventKind.INTERRUPT:
            close("stage", t)
            open_["reboot" if "reboot" in ev.detail else "interrupt"] = (t, ev.detail)
        elif e == EventKind.REBOOTED:
            close("reboot", t)
        elif e == EventKind.UNCORDON:
            for k in list(open_):
                close(k, t)
            segs.append(Segment("uncordon", t, t))
        elif e in (EventKind.FAILED, EventKind.BLOCKED):
            for k in list(open_):
                close(k, t)
            segs.append(Segment(e, t, t, ev.detail))  # type: ignore[arg-type]
            state = e
        elif e == EventKind.COMPLETE:
            state = "complete"
    for k in list(open_):
        close(k, end_of_run)
    return segs, state


def node_lanes(run: RunResult) -> list[Lane]:
    """One lane per node that is in a batch, ordered by compartment (as the run lists them),
    batch and name."""
    end_of_run = max((e.t for e in run.timeline), default=0.0)
    by_node: dict[str, list[Event]] = {}
    for ev in run.timeline:
        by_node.setdefault(ev.node, []).append(ev)
    lanes: list[Lane] = []
    for c in run.compartments:
        comp = c.name
        for b in c.batches:
            number = b.number
            for name in sorted(b.nodes):
                segs, state = _segments(by_node.get(name, []), end_of_run)
                lanes.append(Lane(name, comp, (number, number), segs, state))
    return lanes


def _fold(lanes: Sequence[Lane], label: str) -> Lane:
    first, last = lanes[0], lanes[-1]
    segs: list[Segment] = []
    for phase in PHASES:
        mine = [s for ln in lanes for s in ln.segments if s.phase == phase]
        if mine:
            n = sum(1 for ln in lanes if any(s.phase == phase for s in ln.segments))
            segs.append(Segment(phase, min(s.start for s in mine), max(s.end for s in mine), f"{n} node(s)"))
    states = {ln.state for ln in lanes}
    state = "failed" if "failed" in states else ("blocked" if "blocked" in states else
                                                 ("complete" if states == {"complete"} else ""))
    nodes = sum(ln.nodes for ln in lanes)
    return Lane(label, first.compartment, (first.batches[0], last.batches[1]), sorted(segs, key=lambda s: s.start),
                state, nodes)


def batch_lanes(lanes: Sequence[Lane], max_lanes: int = 300) -> list[Lane]:
    """``lanes`` folded one lane per batch; when that is still more than ``max_lanes``, runs of
    consecutive batches of a compartment are folded too (each compartment gets a share of
    ``max_lanes`` in proportion to its batches, at least one lane)."""
    per_batch: dict[tuple[str, int], list[Lane]] = {}
    order: list[str] = []
    for ln in lanes:
        if ln.compartment not in order:
            order.append(ln.compartment)
        per_batch.setdefault((ln.compartment, ln.batches[0]), []).append(ln)
    total = len(per_batch)
    out: list[Lane] = []
    for comp in order:
        keys = sorted(k for k in per_batch if k[0] == comp)
        share = max(1, (max_lanes * len(keys)) // max(total, 1))
        step = -(-len(keys) // share)  # ceil
        for i in range(0, len(keys), step):
            chunk = keys[i : i + step]
            members = [ln for k in chunk for ln in per_batch[k]]
            n = len(members)
            label = (f"batch {chunk[0][1]}" if len(chunk) == 1 else f"batches {chunk[0][1]}-{chunk[-1][1]}") + \
                f" ({n} node{'s' if n != 1 else ''})"
            out.append(_fold(members, label))
    return out

"""Duration estimates taken from a simulated run, and the compact wording of batch lists (pure).

The estimate shown in a pull-request comment and in ``plan --repo`` is what the project's own
simulator predicts (the run ``reconciler simulate`` makes: the plan applied to a copy of the
observed fleet on a simulated clock), not a sum of constants. The CLI runs the simulation
(:mod:`reconciler.cli.estimate`) and hands the :class:`~reconciler.model.run.RunResult` to
:func:`estimate_from_run`, which reduces it to per-compartment durations, batch spans and the
assumptions that produced them (:class:`Assumptions`: stage and reboot time and where they came
from — recipe annotations, flags, ``--sim-config`` or the simulator's defaults).

:func:`run_length` writes a batch-size list as ``3 x 1, 333 x 3`` instead of 336 numbers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.load.recipes import REBOOT_ESTIMATE_ANNOTATION, STAGE_ESTIMATE_ANNOTATION
from reconciler.model.run import RunResult
from reconciler.model.vocab import EventKind

#: Recipe annotations that set the estimate's assumptions (Go durations, e.g. ``45s``, ``8m``);
#: checked when the recipe is loaded (:func:`reconciler.load.recipes.check_estimate_annotations`).
STAGE_ANNOTATION = STAGE_ESTIMATE_ANNOTATION
REBOOT_ANNOTATION = REBOOT_ESTIMATE_ANNOTATION


@dataclass(frozen=True)
class Assumptions:
    """What the simulated estimate assumed: seconds one stage takes (with its check), seconds a
    reboot takes until the node is Ready again, and ``source`` (``"simulator defaults"``,
    ``"recipe annotations"``, ``"--stage-time/--reboot-time"``, ``"--sim-config FILE"``, or a
    combination joined by ``", "``)."""

    stage_seconds: float
    reboot_seconds: float
    source: str

    def text(self) -> str:
        """``stage 30 s, reboot 2 min``."""
        return f"stage {human_duration(self.stage_seconds)}, reboot {human_duration(self.reboot_seconds)}"

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"stageSeconds": self.stage_seconds, "rebootSeconds": self.reboot_seconds, "source": self.source}


@dataclass(frozen=True)
class BatchSpan:
    """One batch of a compartment in the simulated (or actual) run: its number, node count and
    start/end in seconds since the run started."""

    compartment: str
    number: int
    size: int
    start: float
    end: float


@dataclass(frozen=True)
class CompartmentEstimate:
    """One compartment: nodes it touches, batch sizes in order, seconds until its last batch
    ends (compartments run side by side, so the recipe takes as long as the slowest one)."""

    name: str
    nodes: int
    batch_sizes: tuple[int, ...]
    seconds: float


@dataclass(frozen=True)
class Estimate:
    """The simulated rollout of one plan: makespan ``seconds``, per-compartment figures,
    the batch spans (for the Gantt chart), the simulated result (``succeeded``/``failed``/
    ``halted``) and the :class:`Assumptions`."""

    seconds: float
    compartments: tuple[CompartmentEstimate, ...]
    batches: tuple[BatchSpan, ...]
    result: str
    assumptions: Assumptions
    simulated: bool = True
    notes: tuple[str, ...] = field(default=())

    def compartment(self, name: str) -> CompartmentEstimate | None:
        """The estimate of compartment ``name``, if it has one."""
        return next((c for c in self.compartments if c.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (seconds rounded to whole seconds)."""
        return {
            "estimatedSeconds": round(self.seconds),
            "simulatedResult": self.result,
            "assumptions": self.assumptions.to_dict(),
            "compartments": [
                {"name": c.name, "nodes": c.nodes, "batchSizes": list(c.batch_sizes),
                 "estimatedSeconds": round(c.seconds)}
                for c in self.compartments
            ],
        }


_BATCH_NO = re.compile(r"batch (\d+):.*", re.S)


def batch_spans(run: RunResult) -> list[BatchSpan]:
    """Batch spans of ``run`` from its ``batch-start``/``batch-end`` events (a batch that never
    ended lasts until the run's end); sizes from ``run.compartments[].batches``."""
    sizes: dict[tuple[str, int], int] = {}
    for c in run.compartments:
        for b in c.batches:
            sizes[(c.name, b.number)] = len(b.nodes)
    starts: dict[tuple[str, int], float] = {}
    ends: dict[tuple[str, int], float] = {}
    for ev in run.timeline:
        if ev.event not in ("batch-start", "batch-end"):
            continue
        m = _BATCH_NO.fullmatch(ev.detail)
        if not m:
            continue
        key = (ev.node, int(m.group(1)))
        (starts if ev.event == EventKind.BATCH_START else ends)[key] = ev.t
    end_of_run = max((e.t for e in run.timeline), default=0.0)
    return [
        BatchSpan(comp, number, sizes.get((comp, number), 0), t0, ends.get((comp, number), end_of_run))
        for (comp, number), t0 in sorted(starts.items(), key=lambda kv: (kv[0][0], kv[0][1]))
    ]


def estimate_from_run(run: RunResult, assumptions: Assumptions) -> Estimate:
    """Reduce a simulated run to an :class:`Estimate` (per compartment: nodes in its batches,
    batch sizes, end of its last batch)."""
    spans = batch_spans(run)
    comps: list[CompartmentEstimate] = []
    for c in run.compartments:
        name = c.name
        batches = [b for b in c.batches if b.nodes]
        mine = [s for s in spans if s.compartment == name]
        comps.append(
            CompartmentEstimate(
                name=name,
                nodes=sum(len(b.nodes) for b in batches),
                batch_sizes=tuple(len(b.nodes) for b in batches),
                seconds=max((s.end for s in mine), default=0.0),
            )
        )
    seconds = max([run.duration, *(c.seconds for c in comps)])
    return Estimate(seconds, tuple(comps), tuple(spans), run.result, assumptions)


def run_length(sizes: Iterable[int]) -> str:
    """Run-length encode a batch-size list: ``[1, 1, 1, 3, 3]`` → ``3 x 1, 2 x 3``; a run of one
    is the bare size (``[1, 2, 4]`` → ``1, 2, 4``); ``""`` for no batch."""
    runs: list[list[int]] = []
    for s in sizes:
        if runs and runs[-1][1] == s:
            runs[-1][0] += 1
        else:
            runs.append([1, s])
    return ", ".join(str(s) if n == 1 else f"{n} x {s}" for n, s in runs)


def human_duration(seconds: float) -> str:
    """``0 s``, ``45 s``, ``12 min``, ``2 h 10 min``, ``3 d 4 h``."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    m = round(s / 60)
    if m < 60:
        return f"{m} min"
    h, m = divmod(m, 60)
    if h >= 48:
        d, h = divmod(h, 24)
        return f"{d} d {h} h" if h else f"{d} d"
    return f"{h} h {m} min" if m else f"{h} h"


def name_ranges(names: Sequence[str], limit: int = 300) -> str:
    """Node names compressed into ranges: ``gpu-a-001..012, gpu-b-001..003, web-x`` (names
    ending in digits of the same width and prefix, consecutive, become one range); at most
    ``limit`` characters, the rest counted (``… and 7 more``)."""
    parsed: list[tuple[str, int, int] | str] = []
    for n in sorted(names):
        m = re.fullmatch(r"(.*?)(\d+)", n)
        parsed.append((m.group(1), int(m.group(2)), len(m.group(2))) if m else n)
    parts: list[tuple[str, int]] = []  # (text, how many names)
    i = 0
    while i < len(parsed):
        p = parsed[i]
        if isinstance(p, str):
            parts.append((p, 1))
            i += 1
            continue
        j = i
        while j + 1 < len(parsed):
            q = parsed[j + 1]
            if isinstance(q, str) or q[0] != p[0] or q[2] != p[2] or q[1] != p[1] + (j + 1 - i):
                break
            j += 1
        first = f"{p[0]}{p[1]:0{p[2]}d}"
        if j > i:
            last = parsed[j]
            assert not isinstance(last, str)
            parts.append((f"{first}..{last[1]:0{last[2]}d}", j - i + 1))
        else:
            parts.append((first, 1))
        i = j + 1
    out: list[str] = []
    used = 0
    shown = 0
    for t, k in parts:
        if used + len(t) + 2 > limit and out:
            break
        out.append(t)
        used += len(t) + 2
        shown += k
    rest = len(names) - shown
    return ", ".join(out) + (f" … and {rest} more" if rest > 0 else "")

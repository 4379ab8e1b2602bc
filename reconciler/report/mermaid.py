"""Mermaid Gantt chart of a predicted (or actual) rollout: one section per compartment, one bar
per batch (pure; GitHub and GitLab render ```` ```mermaid ```` blocks in comments).

Bounded in size whatever the fleet: at most :data:`MAX_SECTIONS` compartments and
:data:`MAX_BARS` bars per compartment — beyond that the remaining batches of a compartment are
one bar (``batches 9-334 · 975 nodes``) and the remaining compartments are counted in a note.
Names come from policies: anything but ``[A-Za-z0-9 ._/()-]`` is replaced, so a name cannot end
a task (``:``), start a comment (``%%``) or a new statement (``;``, newline).

Mermaid syntax used (https://mermaid.js.org/syntax/gantt.html): ``dateFormat YYYY-MM-DD
HH:mm:ss`` with second 0 of the run at :data:`EPOCH` (parsed and drawn in the viewer's local
time, so the axis shows elapsed time in any time zone; ``dateFormat X`` is not used: Mermaid 11
reads a start given in it as milliseconds), ``axisFormat``, ``section``, ``name : start, end``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta

from reconciler.report.estimate import BatchSpan, human_duration

#: Compartments drawn (the rest are counted).
MAX_SECTIONS = 12
#: Bars per compartment; the last one aggregates every remaining batch.
MAX_BARS = 10
#: The wall-clock instant second 0 of the run is drawn at (a fixed, timezone-free date).
EPOCH = datetime(2000, 1, 1)


def safe_label(text: str, limit: int = 60) -> str:
    """``text`` reduced to characters that cannot break Mermaid syntax, at most ``limit``."""
    s = re.sub(r"[^A-Za-z0-9 ._/()-]", "_", text)[:limit].strip()
    return s or "_"


def _at(seconds: int) -> str:
    return (EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%d %H:%M:%S")


def _bar(label: str, start: float, end: float) -> str:
    s, e = int(start), max(round(end), int(start) + 1)
    return f"    {label} : {_at(s)}, {_at(e)}"


def _nodes(n: int) -> str:
    return f"{n} node" if n == 1 else f"{n} nodes"


def gantt(spans: Sequence[BatchSpan], title: str, *, order: Sequence[str] = ()) -> str:
    """The chart (without the code fence). ``order``: compartment names in the order to draw
    (others follow sorted); ``spans`` as :func:`reconciler.report.estimate.batch_spans` gives.

    At most ``MAX_SECTIONS * (MAX_BARS + 1) + 6`` lines."""
    by_comp: dict[str, list[BatchSpan]] = {}
    for s in spans:
        by_comp.setdefault(s.compartment, []).append(s)
    names = [n for n in order if n in by_comp] + sorted(n for n in by_comp if n not in order)
    end = max((s.end for s in spans), default=0.0)
    axis = "%H:%M" if end < 86400 else "day %e %Hh"
    lines = ["gantt", f"    title {safe_label(title, 100)}", "    dateFormat YYYY-MM-DD HH:mm:ss",
             f"    axisFormat {axis}"]
    for comp in names[:MAX_SECTIONS]:
        batches = sorted(by_comp[comp], key=lambda s: s.number)
        took = max(b.end for b in batches) - min(b.start for b in batches)
        lines.append(f"    section {safe_label(comp)} ({human_duration(took)})")
        head, rest = batches[: MAX_BARS - 1], batches[MAX_BARS - 1 :]
        if len(rest) == 1:
            head, rest = batches, []
        for b in head:
            lines.append(_bar(f"batch {b.number} · {_nodes(b.size)}", b.start, b.end))
        if rest:
            label = f"batches {rest[0].number}-{rest[-1].number} · {_nodes(sum(b.size for b in rest))}"
            lines.append(_bar(label, min(b.start for b in rest), max(b.end for b in rest)))
    if len(names) > MAX_SECTIONS:
        lines.append(f"    %% {len(names) - MAX_SECTIONS} more compartment(s) not drawn")
    return "\n".join(lines)

"""A self-contained HTML page with an SVG picture of a rollout (pure: returns a string).

``plan --report FILE`` and ``simulate --report FILE`` draw the *predicted* rollout (the
simulator's run of each plan), ``apply --report FILE`` the *actual* one (its timeline). Per
recipe: a summary table (per compartment: nodes, batches run-length encoded, duration, result)
and a lane chart: one lane per node in batch order, grouped by compartment, batches shaded in
alternation, each phase of the node lifecycle a coloured bar (cordon, wait for protected pods,
drain, each stage, reboot or other interrupt, uncordon; failures marked), a time axis (for an
actual run also the UTC time of day) and a legend; the failed and blocked nodes with their reason,
stage and message in a table. Beyond ``max_nodes`` nodes a lane is a batch (or a run of batches, at most
``max_lanes`` lanes), so the page stays small for any fleet (about 1 MB at most).

No script, no external resource (no font, no stylesheet): the file opens offline and in a CI
artifact viewer. Every text from recipes, policies or the cluster is shown as the terminal shows it
(control, bidirectional and zero-width characters as visible escapes) and HTML-escaped.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from reconciler.model.run import RunResult
from reconciler.model.utctime import utc_text
from reconciler.model.vocab import NodeResult
from reconciler.report.estimate import batch_spans, human_duration, run_length
from reconciler.report.lanes import MARKS, PHASES, Lane, batch_lanes, node_lanes
from reconciler.report.safetext import visible

#: Nodes drawn one lane each; above, one lane per batch.
MAX_NODES = 200
#: Lanes per recipe when folded by batch.
MAX_LANES = 300

COLORS: dict[str, str] = {
    "cordon": "#6b7280",
    "wait": "#f59e0b",
    "drain": "#3b82f6",
    "stage": "#10b981",
    "reboot": "#8b5cf6",
    "interrupt": "#c084fc",
    "uncordon": "#16a34a",
    "failed": "#dc2626",
    "blocked": "#ea580c",
}

_LABEL_W, _CHART_W, _PAD, _LANE_H, _HEAD_H, _AXIS_H = 250, 900, 30, 14, 20, 28
_TICKS = (10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800)


@dataclass(frozen=True)
class ReportRun:
    """One recipe's run to draw: ``kind`` predicted (simulated) or actual, and a ``note``
    (e.g. the estimate's assumptions) shown under its heading."""

    run: RunResult
    kind: Literal["predicted", "actual"]
    note: str = ""


def _e(text: object) -> str:
    """``text`` for an HTML text node or attribute value: control, bidi and zero-width characters
    as the terminal shows them (:func:`reconciler.report.safetext.visible`: ``\\x1b``, ``\\u202e``),
    then HTML-escaped."""
    return html.escape(visible(text), quote=True)


def _tick_step(span: float) -> int:
    for t in _TICKS:
        if span / t <= 10:
            return t
    return _TICKS[-1]


def _clock(seconds: float) -> str:
    s = int(seconds)
    if s % 3600 == 0 and s:
        return f"{s // 3600} h"
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d}"
    return f"{s // 60} min" if s % 60 == 0 else f"{s} s"


def _utc_origin(run: RunResult) -> float | None:
    """The run's start as UTC epoch seconds, from its events' instants (None when they have none:
    a predicted run, a result file)."""
    for e in run.timeline:
        if e.at is not None:
            return e.at - e.t
    return None


def _hhmm(epoch: float) -> str:
    """``HH:MM`` UTC of ``epoch`` (the wall-clock axis; the page says the zone)."""
    return utc_text(epoch)[11:16]


def lanes_for(run: RunResult, max_nodes: int = MAX_NODES, max_lanes: int = MAX_LANES) -> tuple[list[Lane], bool]:
    """The lanes drawn for ``run`` and whether they are folded by batch."""
    lanes = node_lanes(run)
    if len(lanes) > max_nodes:
        return batch_lanes(lanes, max_lanes), True
    return lanes, False


def svg_chart(run: RunResult, *, max_nodes: int = MAX_NODES, max_lanes: int = MAX_LANES,
              wall_clock: bool = True) -> str:
    """The lane chart of ``run`` as an ``<svg>`` element (see the module docstring). With
    ``wall_clock`` and events that carry their instant (an actual run), each tick also reads the
    UTC time of day (``12 min · 14:37``)."""
    lanes, folded = lanes_for(run, max_nodes, max_lanes)
    end = max([1.0, *(s.end for ln in lanes for s in ln.segments), *(e.t for e in run.timeline)])
    scale = _CHART_W / end
    comps: list[str] = []
    for ln in lanes:
        if ln.compartment not in comps:
            comps.append(ln.compartment)
    height = _AXIS_H + len(comps) * _HEAD_H + len(lanes) * _LANE_H + 10
    width = _LABEL_W + _CHART_W + _PAD
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11" role="img" '
           f'aria-label="rollout of {_e(run.recipe)}">']
    step = _tick_step(end)
    origin = _utc_origin(run) if wall_clock else None
    t = 0
    while t <= end:
        x = _LABEL_W + t * scale
        label = _clock(t) if origin is None else f"{_clock(t)} · {_hhmm(origin + t)}"
        out.append(f'<line x1="{x:.1f}" y1="{_AXIS_H - 6}" x2="{x:.1f}" y2="{height}" stroke="#e5e7eb"/>')
        out.append(f'<text x="{x:.1f}" y="{_AXIS_H - 10}" text-anchor="middle" fill="#374151">{label}</text>')
        t += step
    y = _AXIS_H
    for comp in comps:
        mine = [ln for ln in lanes if ln.compartment == comp]
        took = max((s.end for ln in mine for s in ln.segments), default=0.0)
        out.append(f'<rect x="0" y="{y}" width="{width}" height="{_HEAD_H}" fill="#f3f4f6"/>')
        out.append(f'<text x="4" y="{y + 14}" font-weight="bold" fill="#111827">compartment {_e(comp)} · '
                   f'{sum(ln.nodes for ln in mine)} node(s) · ends at {_e(human_duration(took))}</text>')
        y += _HEAD_H
        for ln in mine:
            shade = "#fafafa" if ln.batches[0] % 2 else "#eef2ff"
            label = ln.label if folded else f"{ln.label} · batch {ln.batches[0]}"
            out.append(f'<rect x="0" y="{y}" width="{width}" height="{_LANE_H}" fill="{shade}"/>')
            out.append(f'<text x="4" y="{y + 11}" fill="#111827">{_e(label[:48])}</text>')
            for s in ln.segments:
                x = _LABEL_W + s.start * scale
                tip = f"{s.phase} {human_duration(s.start)} → {human_duration(s.end)}" + (
                    f": {s.detail}" if s.detail else "")
                color = COLORS[s.phase]
                if s.phase in MARKS and (s.end - s.start) * scale < 2:
                    out.append(f'<rect x="{x - 1:.1f}" y="{y + 1}" width="2" height="{_LANE_H - 2}" '
                               f'fill="{color}" class="mark {s.phase}"><title>{_e(tip)}</title></rect>')
                else:
                    w = max(1.0, (s.end - s.start) * scale)
                    out.append(f'<rect x="{x:.1f}" y="{y + 2}" width="{w:.1f}" height="{_LANE_H - 4}" rx="2" '
                               f'fill="{color}" class="{s.phase}"><title>{_e(tip)}</title></rect>')
            y += _LANE_H
    out.append("</svg>")
    return "\n".join(out)


def _summary(run: RunResult) -> str:
    spans = batch_spans(run)
    rows = []
    for c in run.compartments:
        name = c.name
        sizes = [len(b.nodes) for b in c.batches if b.nodes]
        mine = [s for s in spans if s.compartment == name]
        took = max((s.end for s in mine), default=0.0)
        failed = sum(b.failed for b in c.batches)
        halted = " (halted)" if c.halted else ""
        rows.append(f"<tr><td>{_e(name)}</td><td>{sum(sizes)}</td><td>{len(sizes)}: {_e(run_length(sizes) or '-')}"
                    f"</td><td>{_e(human_duration(took))}</td><td>{failed}{halted}</td></tr>")
    return ("<table><thead><tr><th>Compartment</th><th>Nodes</th><th>Batches</th><th>Ends after</th>"
            "<th>Failed</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _failures(run: RunResult) -> str:
    """The failed and blocked nodes with their reason, stage and message, in the page (a lane's
    tooltip alone hid them); "" when none."""
    bad = [n for n in run.nodes if n.state in (NodeResult.FAILED, NodeResult.BLOCKED)]
    if not bad:
        return ""
    rows = "".join(f"<tr><td>{_e(n.name)}</td><td>{_e(n.state)}</td><td>{_e(n.reason or '-')}</td>"
                   f"<td>{_e(n.failed_stage or '-')}</td><td>{_e(n.message[:300])}</td></tr>" for n in bad)
    return ('<table class="failures"><thead><tr><th>Node</th><th>State</th><th>Reason</th><th>Stage</th>'
            "<th>Message</th></tr></thead><tbody>" + rows + "</tbody></table>")


def _legend() -> str:
    items = "".join(f'<span class="key"><span class="sw" style="background:{COLORS[p]}"></span>{p}</span>'
                    for p in PHASES)
    return f'<p class="legend">{items}</p>'


_CSS = """body{font-family:sans-serif;margin:16px;color:#111827}h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #d1d5db;padding:3px 8px;font-size:13px}
th{background:#f3f4f6}.note{color:#4b5563;font-size:13px}.legend{font-size:12px}
.key{margin-right:12px;white-space:nowrap}.sw{display:inline-block;width:10px;height:10px;margin-right:4px}"""


def render_html(runs: Sequence[ReportRun], *, title: str, subtitle: str = "", max_nodes: int = MAX_NODES,
                max_lanes: int = MAX_LANES) -> str:
    """The whole page: a heading per recipe (predicted or actual, result, duration), its
    summary table, note and lane chart."""
    parts = [f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{_e(title)}</title>"
             f"<style>{_CSS}</style></head><body>", f"<h1>{_e(title)}</h1>"]
    if subtitle:
        parts.append(f'<p class="note">{_e(subtitle)}</p>')
    parts.append(_legend())
    if not runs:
        parts.append("<p>No recipe has work: nothing to draw.</p>")
    for r in runs:
        run = r.run
        what = "predicted (simulated)" if r.kind == "predicted" else "actual"
        parts.append(f"<h2>{_e(run.recipe)} · {what} · {_e(run.result)} · {_e(human_duration(run.duration))}</h2>")
        if r.note:
            parts.append(f'<p class="note">{_e(r.note)}</p>')
        lanes, folded = lanes_for(run, max_nodes, max_lanes)
        if folded:
            parts.append(f'<p class="note">{sum(ln.nodes for ln in lanes)} nodes: one lane per batch (or run of '
                         f"batches); each phase spans its first start to its last end in the lane.</p>")
        parts.append(_summary(run))
        parts.append(_failures(run))
        actual = r.kind != "predicted"
        if actual and _utc_origin(run) is not None:
            parts.append(f'<p class="note">Started {_e(utc_text(_utc_origin(run) or 0.0))}; the axis reads the '
                         f"time since the start and the time of day (UTC).</p>")
        parts.append(svg_chart(run, max_nodes=max_nodes, max_lanes=max_lanes, wall_clock=actual) if lanes
                     else "<p>No node was in a batch.</p>")
    parts.append("</body></html>\n")
    return "\n".join(parts)

"""``apply -o markdown``: the end-of-run summary as GitHub-flavoured Markdown, for
``$GITHUB_STEP_SUMMARY`` (issue 16). Pure. Text from inputs and the cluster is escaped so it
cannot turn into markup, links, HTML or mentions (:func:`reconciler.report.safetext.md_escape`,
the escaper of every Markdown view)."""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.model.run import RunResult, run_counts
from reconciler.model.vocab import NodeResult, RunVerdict
from reconciler.report.safetext import md_escape as md

_ICON = {RunVerdict.SUCCEEDED: "✅", RunVerdict.FAILED: "❌", RunVerdict.HALTED: "⛔", RunVerdict.WAITING: "⏳"}
#: Nodes listed individually under "not complete" before the rest are counted.
MAX_LISTED = 50


def _hms(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s"


def run_markdown(results: Sequence[RunResult], *, title: str = "node-reconciler apply") -> str:
    """One table row per recipe (verdict, time, nodes complete/failed/held, reboots, pods evicted
    and finished pods removed (:func:`~reconciler.model.run.run_counts`, as the terminal summary),
    batches, the most nodes disrupted at once against the ceiling), then the nodes that did not
    complete with their reason (the first :data:`MAX_LISTED`)."""
    lines = [f"### {md(title)}", "",
             "| recipe | result | time | done | failed | held | reboots | evicted | removed | batches "
             "| disrupted/ceiling |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    problems: list[tuple[str, str, str, str]] = []
    for r in results:
        counts = run_counts(r)
        budget = ", ".join(f"{md(c.name)} {c.max_disrupted}/{c.ceiling}" for c in r.compartments) or "-"
        verdict = RunVerdict(r.result)
        lines.append(
            f"| {md(r.recipe)} | {_ICON[verdict]} {verdict} | {_hms(r.duration)} | {counts.complete} | "
            f"{counts.failed} | {counts.held} | {counts.reboots} | {counts.evicted} | {counts.removed} | "
            f"{counts.batches} | {budget} |")
        for n in r.nodes:
            if n.state not in (NodeResult.COMPLETE, NodeResult.UNTOUCHED, NodeResult.LEFT):
                problems.append((r.recipe, n.name, str(n.state), n.reason or n.message))
    if problems:
        lines += ["", "| recipe | node | state | why |", "|---|---|---|---|"]
        for recipe, node, state, why in problems[:MAX_LISTED]:
            lines.append(f"| {md(recipe)} | {md(node)} | {state} | {md(why[:300])} |")
        if len(problems) > MAX_LISTED:
            lines.append(f"\n… and {len(problems) - MAX_LISTED} more nodes (see `-o json`).")
    return "\n".join(lines) + "\n"

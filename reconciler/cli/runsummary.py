"""The end-of-run summary printed by ``apply`` and ``simulate``: one table for every recipe, the
totals, and each node that did not complete with its reason and log tail."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from reconciler.cli.console import whole_lines
from reconciler.execute.timeline import RunResult
from reconciler.model.run import run_counts
from reconciler.model.vocab import NodeResult, RunVerdict
from reconciler.report.safetext import markup, text
from reconciler.report.status import waiting_text


def hms(seconds: float) -> str:
    """``1h02m03s`` (seconds rounded)."""
    s = round(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s"


#: the result column's colour, by verdict
_COLOUR = {RunVerdict.SUCCEEDED: "green", RunVerdict.FAILED: "red", RunVerdict.HALTED: "red",
           RunVerdict.WAITING: "yellow"}
#: waiting nodes named, per recipe, before the rest are counted
_MAX_WAITING_NAMED = 10


def print_summary(console: Console, results: Sequence[RunResult], *, title: str = "") -> None:
    """One row per recipe (result, duration, nodes complete/failed/blocked or waiting, reboots,
    evictions; at 120 columns or more also batches, finished pods removed, and the most nodes
    disrupted at once per compartment against its ceiling), a totals line, then every node that
    did not complete."""
    if title:
        console.print(text(title), soft_wrap=whole_lines(console))
    # fits the terminal: at under 120 columns the batch, removal and budget columns are left out
    # (the totals line and -o json carry them); cells are never cut to "succ…"
    wide = console.width >= 120
    t = Table(show_header=True, header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1),
              collapse_padding=True, show_edge=False)
    cols = ["recipe", "result", "time", "done", "failed", "held", "reboots", "evicted"]
    if wide:
        cols[7:7] = ["batches"]
        cols += ["removed", "disrupted/ceiling"]
    longest = max((len(r.recipe) for r in results), default=6)
    for col in cols:
        if col == "recipe":
            t.add_column(col, min_width=min(longest, 28), overflow="fold")
        else:
            t.add_column(col, no_wrap=True, justify="left" if col in ("result", "time", "disrupted/ceiling")
                         else "right")
    totals = {"complete": 0, "failed": 0, "other": 0, "reboots": 0, "evictions": 0, "removals": 0}
    for r in results:
        counts = run_counts(r)
        colour = _COLOUR[RunVerdict(r.result)]
        row: list[Text | str] = [
            text(r.recipe),
            f"[{colour}]{r.result}[/{colour}]",
            hms(r.duration),
            str(counts.complete),
            str(counts.failed),
            str(counts.held),
            str(counts.reboots),
            str(counts.evicted),
        ]
        if wide:
            row[7:7] = [str(counts.batches)]
            row += [str(counts.removed),
                    text(", ".join(f"{c.name} {c.max_disrupted}/{c.ceiling}" for c in r.compartments) or "-")]
        t.add_row(*row)
        totals["complete"] += counts.complete
        totals["failed"] += counts.failed
        totals["other"] += counts.held
        totals["reboots"] += counts.reboots
        totals["evictions"] += counts.evicted
        totals["removals"] += counts.removed
    console.print(t)
    ok = sum(1 for r in results if r.result == RunVerdict.SUCCEEDED)
    console.print(
        f"{ok}/{len(results)} recipe(s) succeeded; {totals['complete']} node run(s) complete, "
        f"{totals['failed']} failed, {totals['other']} held (blocked or waiting); {totals['reboots']} reboot(s), "
        f"{totals['evictions']} eviction(s), {totals['removals']} finished pod(s) removed; "
        f"{hms(sum(r.duration for r in results))} in all", soft_wrap=whole_lines(console),
    )
    for r in results:
        for c in r.compartments:
            if c.halt_reason:
                console.print(f"  [red]{markup(r.recipe)}[/red] compartment {markup(c.name)} halted: "
                              f"{markup(c.halt_reason)}", soft_wrap=True)
        waiting = {n.name: n.message for n in r.nodes if n.state == NodeResult.WAITING}
        if waiting:  # one line per recipe: these nodes did nothing wrong
            names = sorted(waiting)
            more = f" and {len(names) - _MAX_WAITING_NAMED} more" if len(names) > _MAX_WAITING_NAMED else ""
            console.print(f"  [yellow]{markup(r.recipe)}[/yellow] {markup(waiting_text(waiting))}: "
                          f"{markup(', '.join(names[:_MAX_WAITING_NAMED]))}{more}", soft_wrap=True)
        for n in r.nodes:
            if n.state in (NodeResult.FAILED, NodeResult.BLOCKED):
                console.print(f"  [red]{markup(r.recipe)}[/red] {markup(n.name)} {markup(n.state)}: "
                              f"{markup(n.message)}", soft_wrap=True)
                if n.log_tail:
                    console.print(text(f"    log: {n.log_tail[-400:]}", multiline=True), soft_wrap=True)

"""The end-of-run summary printed by ``apply`` and ``simulate``: one table for every recipe, the
totals, and each node that did not complete with its reason and log tail."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from reconciler.execute.timeline import RunResult
from reconciler.report.safetext import markup, text


def hms(seconds: float) -> str:
    """``1h02m03s`` (seconds rounded)."""
    s = round(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s"


def print_summary(console: Console, results: Sequence[RunResult], *, title: str = "") -> None:
    """One row per recipe (result, duration, nodes complete/failed/blocked or waiting, batches,
    reboots, evictions, the most nodes disrupted at once per compartment against its ceiling),
    a totals line, then every node that did not complete."""
    if title:
        console.print(text(title))
    t = Table(show_header=True, header_style="bold")
    for col in ("recipe", "result", "duration", "complete", "failed", "blocked/waiting", "batches", "reboots",
                "evictions", "max disrupted / ceiling"):
        t.add_column(col)
    totals = {"complete": 0, "failed": 0, "other": 0, "reboots": 0, "evictions": 0}
    for r in results:
        states = [n.state for n in r.nodes]
        reboots = sum(1 for e in r.timeline if e.event == "rebooted")
        evictions = sum(1 for e in r.timeline if e.event == "evict")
        colour = {"succeeded": "green", "failed": "red", "halted": "red"}[r.result]
        t.add_row(
            text(r.recipe),
            f"[{colour}]{r.result}[/{colour}]",
            hms(r.duration),
            str(states.count("complete")),
            str(states.count("failed")),
            str(states.count("blocked") + states.count("waiting")),
            str(sum(len(c["batches"]) for c in r.compartments)),
            str(reboots),
            str(evictions),
            text(", ".join(f"{c['name']} {c['maxDisrupted']}/{c['ceiling']}" for c in r.compartments) or "-"),
        )
        totals["complete"] += states.count("complete")
        totals["failed"] += states.count("failed")
        totals["other"] += states.count("blocked") + states.count("waiting")
        totals["reboots"] += reboots
        totals["evictions"] += evictions
    console.print(t)
    ok = sum(1 for r in results if r.result == "succeeded")
    console.print(
        f"{ok}/{len(results)} recipe(s) succeeded; {totals['complete']} node run(s) complete, "
        f"{totals['failed']} failed, {totals['other']} blocked or waiting; {totals['reboots']} reboot(s), "
        f"{totals['evictions']} pod removal(s); {hms(sum(r.duration for r in results))} in all",
        soft_wrap=True,
    )
    for r in results:
        for c in r.compartments:
            if c.get("haltReason"):
                console.print(f"  [red]{markup(r.recipe)}[/red] compartment {markup(c['name'])} halted: "
                              f"{markup(c['haltReason'])}", soft_wrap=True)
        for n in r.nodes:
            if n.state in ("failed", "blocked", "waiting"):
                console.print(f"  [red]{markup(r.recipe)}[/red] {markup(n.name)} {markup(n.state)}: "
                              f"{markup(n.message)}", soft_wrap=True)
                if n.log_tail:
                    console.print(text(f"    log: {n.log_tail[-400:]}", multiline=True), soft_wrap=True)

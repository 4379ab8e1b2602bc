"""The end-of-run table fits the terminal and counts evictions apart from finished pods removed."""

from __future__ import annotations

import io

from rich.console import Console

from reconciler.cli.runsummary import print_summary
from reconciler.model.run import BatchRecord, CompartmentResult, Event, NodeOutcome, RunResult


def _result() -> RunResult:
    timeline = [Event(1.0, "n1", "evict", "web/w1"), Event(2.0, "n1", "evict", "ml/done (finished: removed)"),
                Event(3.0, "n1", "rebooted", "bootID a -> b")]
    return RunResult(run_id="run-1", plan_hash="h", recipe="gpu-training-tuning", result="succeeded",
                     nodes=[NodeOutcome("n1", "complete", "zone-a")],
                     compartments=(CompartmentResult("zone-a", 2, batches=(BatchRecord(1, ()),), max_disrupted=1),),
                     timeline=timeline, duration=3725.0, writes=10)


def _render(width: int, *, terminal: bool = True) -> str:
    out = io.StringIO()
    print_summary(Console(file=out, width=width, color_system=None, force_terminal=terminal), [_result()])
    return out.getvalue()


def test_at_80_columns_nothing_is_cut() -> None:
    text = _render(80)
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "succeeded" in text and "…" not in text and "gpu-training-tuning" in text.replace("\n", "")


def test_piped_the_totals_are_one_line_not_broken_mid_sentence() -> None:
    """A terminal wraps prose at words; piped (CI log, grep) each sentence stays on its line."""
    lines = _render(80, terminal=False).splitlines()
    total = [ln for ln in lines if "recipe(s) succeeded" in ln]
    assert len(total) == 1 and total[0].rstrip().endswith("in all") and len(total[0]) > 80


def test_wide_terminals_get_every_column_and_evictions_apart_from_removals() -> None:
    text = _render(160)
    for col in ("batches", "removed", "disrupted/ceiling", "zone-a 1/2"):
        assert col in text
    assert "1 eviction(s), 1 finished pod(s) removed" in text


def test_nodes_waiting_for_an_earlier_recipe_are_one_line_per_recipe_not_a_failure() -> None:
    why = "waiting for recipe gpu-node-stack (priority 100) on this node"
    nodes = [NodeOutcome(f"n{i:02d}", "waiting", "zone-a", message=why) for i in range(12)]
    nodes.append(NodeOutcome("n99", "complete", "zone-a"))
    run = RunResult(run_id="run-1", plan_hash="h", recipe="gpu-training-tuning", result="waiting", nodes=nodes,
                    compartments=(CompartmentResult("zone-a", 2),),
                    timeline=[], duration=5.0)
    out = io.StringIO()
    print_summary(Console(file=out, width=200, color_system=None), [run])
    text = out.getvalue()
    assert "waiting" in text.splitlines()[2]  # the result column
    assert "0/1 recipe(s) succeeded" in text and "0 failed, 12 held (blocked or waiting)" in text
    lines = [ln for ln in text.splitlines() if "waiting for recipe" in ln]
    assert lines == ["  gpu-training-tuning 12 nodes waiting for recipe gpu-node-stack (priority 100): "
                     "n00, n01, n02, n03, n04, n05, n06, n07, n08, n09 and 2 more"]


def test_the_markdown_summary_counts_as_the_terminal_table() -> None:
    """``apply -o markdown`` had no removed column and counted a finished pod's removal by another
    suffix test; both now read :func:`reconciler.model.run.run_counts`."""
    from reconciler.model.run import run_counts
    from reconciler.report.runmarkdown import run_markdown

    r = _result()
    counts = run_counts(r)
    assert (counts.evicted, counts.removed, counts.reboots, counts.batches, counts.complete) == (1, 1, 1, 1, 1)
    header, _, row = run_markdown([r]).splitlines()[2:5]
    cells = dict(zip([c.strip() for c in header.strip("|").split("|")],
                     [c.strip() for c in row.strip("|").split("|")], strict=True))
    assert (cells["evicted"], cells["removed"], cells["reboots"], cells["batches"]) == ("1", "1", "1", "1")

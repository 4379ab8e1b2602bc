"""Per-node phases from a run's timeline, their folding for big fleets, the Mermaid Gantt's bounds
and escaping, and the HTML report's escaping (the browser tests check that they draw)."""

from __future__ import annotations

from reconciler.model.run import BatchRecord, CompartmentResult, Event, RunResult
from reconciler.report.estimate import BatchSpan, name_ranges
from reconciler.report.htmlreport import ReportRun, render_html
from reconciler.report.lanes import batch_lanes, node_lanes
from reconciler.report.mermaid import MAX_BARS, MAX_SECTIONS, gantt


def _run(events: list[Event], comps: list[dict]) -> RunResult:
    """A run of ``events`` whose compartments are ``{name, batches: [{number, nodes}]}``."""
    typed = tuple(CompartmentResult(c["name"], batches=tuple(BatchRecord(b["number"], tuple(b["nodes"]))
                                                             for b in c["batches"])) for c in comps)
    return RunResult("r", "h" * 64, "demo", "succeeded", [], typed, events, max(e.t for e in events))


def test_phases_follow_the_lifecycle() -> None:
    ev = [Event(0, "z", "batch-start", "batch 1: n1"), Event(0, "n1", "cordon"),
          Event(0, "n1", "wait", "blocked by ml/train"), Event(700, "n1", "evict", "ml/train"),
          Event(730, "n1", "drained", "1 pods gone"), Event(730, "n1", "stage-start", "p 1.0.0 apply (attempt 1)"),
          Event(760, "n1", "stage-end", "ok"), Event(760, "n1", "interrupt", "reboot"),
          Event(880, "n1", "rebooted"), Event(880, "n1", "stage-start", "p 1.0.0 post-interrupt (attempt 1)"),
          Event(910, "n1", "stage-end", "ok"), Event(910, "n1", "uncordon"), Event(910, "n1", "complete"),
          Event(910, "z", "batch-end", "batch 1: 1 ok")]
    (lane,) = node_lanes(_run(ev, [{"name": "z", "batches": [{"number": 1, "nodes": ["n1"]}]}]))
    assert [(s.phase, s.start, s.end) for s in lane.segments] == [
        ("cordon", 0, 0), ("wait", 0, 700), ("drain", 700, 730), ("stage", 730, 760), ("reboot", 760, 880),
        ("stage", 880, 910), ("uncordon", 910, 910)]
    assert lane.segments[3].detail == "p 1.0.0 apply" and lane.state == "complete"


def test_a_drain_held_by_a_disruption_budget_is_drain_from_the_first_refusal() -> None:
    """An eviction refused (429) opens the drain segment: the time a PodDisruptionBudget holds
    the node is drain time in the picture, not a gap before it."""
    ev = [Event(0, "z", "batch-start", "batch 1: n1"), Event(0, "n1", "cordon"),
          Event(2, "n1", "evict-refused", "serving/web: budget; retrying every 5 s until the drain timeout (600 s)"),
          Event(300, "n1", "evict", "serving/web"), Event(310, "n1", "drained", "1 pods gone"),
          Event(310, "n1", "uncordon"), Event(310, "n1", "complete"), Event(310, "z", "batch-end", "batch 1: 1 ok")]
    (lane,) = node_lanes(_run(ev, [{"name": "z", "batches": [{"number": 1, "nodes": ["n1"]}]}]))
    assert [(s.phase, s.start, s.end) for s in lane.segments] == [
        ("cordon", 0, 0), ("drain", 2, 310), ("uncordon", 310, 310)]
    assert lane.segments[1].detail.startswith("serving/web: budget")


def test_folding_keeps_every_node_and_bounds_the_lanes() -> None:
    ev, batches = [], []
    for b in range(1, 701):
        names = [f"n{b}-{i}" for i in range(3)]
        batches.append({"number": b, "nodes": names})
        for n in names:
            ev += [Event(b * 10, n, "cordon"), Event(b * 10 + 5, n, "uncordon")]
    ev.append(Event(8000, "n700-0", "failed", "exit 3"))
    lanes = batch_lanes(node_lanes(_run(ev, [{"name": "z", "batches": batches}])), max_lanes=100)
    assert len(lanes) <= 100 and sum(ln.nodes for ln in lanes) == 2100
    assert lanes[0].label.startswith("batches 1-") and lanes[-1].state == "failed"


def test_gantt_is_bounded_and_names_cannot_break_it() -> None:
    spans = [BatchSpan(f"zone:{c};%%x", n, 3, n * 100.0, n * 100.0 + 90) for c in range(20) for n in range(1, 400)]
    chart = gantt(spans, "t: x")
    lines = chart.split("\n")
    assert len(lines) <= MAX_SECTIONS * (MAX_BARS + 1) + 6
    assert sum(1 for ln in lines if ln.startswith("    section ")) == MAX_SECTIONS
    assert "8 more compartment(s) not drawn" in lines[-1]
    body = [ln for ln in lines[4:] if not ln.lstrip().startswith("%%")]
    assert all(";" not in ln and "%%" not in ln for ln in body)
    assert all(ln.count(" : ") == 1 for ln in body if not ln.startswith("    section"))
    assert "batches 10-399 · 1170 nodes : 2000-01-01 00:16:40, 2000-01-01 11:06:30" in chart


def test_html_report_escapes_cluster_text() -> None:
    evil = "<script>alert(1)</script>"
    ev = [Event(0, "z", "batch-start", "batch 1: x"), Event(0, evil, "cordon"),
          Event(1, evil, "failed", evil), Event(1, "z", "batch-end", "batch 1: 0 ok")]
    page = render_html([ReportRun(_run(ev, [{"name": evil, "batches": [{"number": 1, "nodes": [evil]}]}]),
                                  "actual", evil)], title=evil)
    assert "<script" not in page and "&lt;script&gt;" in page


def test_name_ranges_compress_and_stay_bounded() -> None:
    assert name_ranges(["gpu-a-001", "gpu-a-002", "gpu-a-003", "gpu-b-010", "web"]) == "gpu-a-001..003, gpu-b-010, web"
    many = [f"n{i}-x" for i in range(1000)]
    text = name_ranges(many, 100)
    assert len(text) < 130 and text.endswith("more")


def test_html_report_shows_failures_in_the_page_and_the_time_of_day_of_an_actual_run() -> None:
    from datetime import UTC, datetime

    from reconciler.model.run import NodeOutcome

    start = datetime(2026, 12, 7, 14, 30, tzinfo=UTC).timestamp()
    ev = [Event(t, n, kind, "", start + t) for t, n, kind in
          [(0, "z", "batch-start"), (0, "n1", "cordon"), (600, "n1", "failed"), (600, "z", "batch-end")]]
    run = _run(ev, [{"name": "z", "batches": [{"number": 1, "nodes": ["n1"]}]}])
    run = RunResult(run.run_id, run.plan_hash, run.recipe, "failed",
                    [NodeOutcome("n1", "failed", "z", "apply", "StageFailed", "exit code 3 <b>", 3)],
                    run.compartments, run.timeline, run.duration)
    page = render_html([ReportRun(run, "actual", "")], title="t")
    assert "<td>n1</td><td>failed</td><td>StageFailed</td><td>apply</td><td>exit code 3 &lt;b&gt;</td>" in page
    assert "5 min · 14:35" in page and "Started 2026-12-07T14:30:00.000Z" in page
    predicted = render_html([ReportRun(run, "predicted", "")], title="t")
    assert "5 min · 14:35" not in predicted and "5 min<" in predicted  # a simulated run's instant means nothing
    ok = render_html([ReportRun(_run(ev, [{"name": "z", "batches": [{"number": 1, "nodes": ["n1"]}]}]), "actual", "")],
                     title="t")
    assert 'class="failures"' not in ok

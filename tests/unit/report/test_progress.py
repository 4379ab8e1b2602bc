"""The live progress board (report/progress.py), fed the events of real simulated rollouts."""

from __future__ import annotations

import pytest

from reconciler.adapters.sim.fleet import SimFleet
from reconciler.execute.rollout import Rollout
from reconciler.model.run import Event
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
from reconciler.report.progress import ProgressBoard, pace, predicted_schedule
from reconciler.testing.builders import package, policy, recipe
from reconciler.testing.fleetgen import make_node
from tests.unit.execute.harness import GPU, SHA, TRAINING


def _run(n: int = 8, *, count: int = 2, fail: set[str] | None = None) -> tuple[object, object]:
    sim = SimFleet([make_node(f"n{i}", {"pool": "gpu"}) for i in range(1, n + 1)])
    r = recipe("tune", package("driver", sha=SHA, interrupt="reboot"), selector=GPU, protect=TRAINING)
    pol = policy(count=count, default_strategy="fixed", initialBatch=count)
    plan = compute_plan(r, pol, observe(sim))
    return plan, Rollout(r, pol, plan, sim, sim, run_id="run-board").run()


def test_the_board_follows_a_rollout_to_its_end_and_never_shows_more_held_than_the_budget() -> None:
    plan, res = _run()
    board = ProgressBoard.for_plan(plan)  # type: ignore[arg-type]
    (comp,) = board.compartments.values()
    assert comp.nodes == 8 and comp.planned_batches >= 2
    seen_batches = 0
    for ev in res.timeline:  # type: ignore[attr-defined]
        board.on_event(ev)
        assert len(comp.held) <= comp.ceiling
        assert comp.complete + comp.failed + comp.in_progress + len(comp.waiting) <= comp.nodes
        seen_batches = max(seen_batches, comp.batch)
    assert board.totals["complete"] == 8 and board.totals["running"] == 0 and board.totals["held"] == 0
    assert comp.batch == sum(len(c.batches) for c in res.compartments)  # type: ignore[attr-defined]
    assert board.elapsed == max(e.t for e in res.timeline)  # type: ignore[attr-defined]


def test_eta_from_a_simulated_schedule_counts_down_to_zero() -> None:
    plan, res = _run()
    schedule = predicted_schedule(res.timeline, [c.name for c in plan.compartments])  # type: ignore[attr-defined]
    board = ProgressBoard.for_plan(plan, schedule)  # type: ignore[arg-type]
    (name,) = schedule
    total = schedule[name][-1]
    assert board.eta() == total  # nothing started: the whole predicted makespan
    etas = []
    for ev in res.timeline:  # type: ignore[attr-defined]
        board.on_event(ev)
        etas.append(board.eta())
    assert etas[-1] == 0.0
    # the run is its own prediction: ETA + elapsed stays the predicted makespan at every event
    for ev, eta in zip(res.timeline, etas, strict=True):  # type: ignore[attr-defined]
        elapsed = board_elapsed_at(res.timeline, ev)  # type: ignore[attr-defined]
        assert eta is not None and abs(eta - max(0.0, total - elapsed)) < 1e-6


def board_elapsed_at(timeline: list[Event], ev: Event) -> float:
    return max(e.t for e in timeline[: timeline.index(ev) + 1])


def test_a_failed_node_and_a_halt_are_counted() -> None:
    board = ProgressBoard.for_plan(_run()[0])  # type: ignore[arg-type]
    (comp,) = board.compartments.values()
    board.on_event(Event(0.0, comp.name, "batch-start", "batch 1: n1, n2"))
    board.on_event(Event(1.0, "n1", "cordon"))
    board.on_event(Event(2.0, "n1", "wait", "blocked by ml/train"))
    assert comp.in_progress == 0 and comp.waiting == {"n1"} and comp.held == {"n1"}
    board.on_event(Event(3.0, "n1", "failed", "StageFailed: exit 3"))
    board.on_event(Event(4.0, comp.name, "halted", "halted after 1 failed batch"))
    assert comp.failed == 1 and comp.waiting == set() and comp.halted
    assert board.eta() is None  # no prediction given


@pytest.mark.parametrize(("predicted", "starts", "rate"), [
    ([0, 100, 200, 300], [], 1.0),  # nothing started
    ([0, 100, 200, 300], [5.0], 1.0),  # the first batch runs: nothing learnt yet
    ([0, 100, 200, 300], [5.0, 15.0], 0.1),  # batch 1 took 10 s of a predicted 100 s
    ([0, 100, 200, 300], [0.0, 250.0, 500.0], 2.5),
    ([0, 100, 200, 300], [0.0, 0.0], 1.0),  # no time observed: no scale
    ([0, 100, 200, 300], [0.0, 1e6], 100.0),  # bounded
    ([0, 0, 0], [0.0, 10.0], 1.0),  # nothing predicted: no scale
], ids=["none", "first", "faster", "slower", "zero", "bounded", "no-prediction"])
def test_pace_is_the_finished_batches_observed_over_predicted(predicted, starts, rate) -> None:
    assert pace(predicted, starts) == pytest.approx(rate)


def test_the_eta_learns_the_pace_of_finished_batches() -> None:
    """A simulation that guessed 10× too slow (default stage durations on a fast cluster: 6 min
    predicted for a 37 s rollout) is scaled once a batch has ended."""
    plan, res = _run()
    (name,) = [c.name for c in plan.compartments]  # type: ignore[attr-defined]
    real = predicted_schedule(res.timeline, [name])[name]  # type: ignore[attr-defined]
    board = ProgressBoard.for_plan(plan, {name: [10 * t for t in real]})  # type: ignore[arg-type]
    for ev in res.timeline:  # type: ignore[attr-defined]
        board.on_event(ev)
        (comp,) = board.compartments.values()
        eta = board.eta()
        if len(comp.batch_starts) >= 2 and not board.finished:
            assert board.pace() == pytest.approx(0.1)
            assert eta is not None and abs(eta - max(0.0, real[-1] - board.elapsed)) < 1e-6  # the real remainder

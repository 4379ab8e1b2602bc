"""Batch math: ceiling, next batch size, evaluation, prediction, compartment assignment.

Numbers come from semantics-nodewright.md §1.2.2-§1.2.7 and drain-and-scenarios.md S20/S22.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from reconciler.model.policy import DEFAULT_COMPARTMENT
from reconciler.plan.batching import (
    BatchState,
    assign_compartments,
    ceiling,
    evaluate_batch,
    halt_rule,
    next_batch_size,
    predict_batches,
    progress_percent,
    resume_state,
)
from reconciler.testing import budget, compartment, node, policy, strategy

EXP = strategy("exponential", initialBatch=1, growthFactor=2, batchThreshold=100, failureThreshold=2, safetyLimit=50)


def sizes(batches):
    return [len(b) for b in batches]


def nodes(n):
    return [f"n{i:02d}" for i in range(n)]


# ------------------------------------------------------------------------------ ceiling


@pytest.mark.parametrize(
    ("matched", "percent", "expected"),
    [
        (2, 33, 1),  # S20: not 0, not 2
        (100, 29, 29),
        (5, 10, 1),  # rounds down to 0 → 1 (decision (i))
        (7, 50, 3),
        (3, 100, 3),
        (10, 25, 2),
        (10, 30, 3),
        (2, 30, 1),
        (20, 25, 5),
        (0, 25, 0),  # S22: nothing matched
    ],
)
def test_percent_ceiling(matched, percent, expected):
    assert ceiling(budget(percent=percent), matched) == expected


def test_count_ceiling():
    assert ceiling(budget(count=3), 10) == 3
    assert ceiling(budget(count=3), 2) == 3  # the count is the count; remaining caps the batch
    assert ceiling(budget(count=3), 0) == 0


# ------------------------------------------------------------------------------ prediction (all succeed)


def test_worked_example_exponential_with_ceiling_cap():
    # §1.2.7: 20 nodes, exponential ×2 from 1, budget 25 % (ceiling 5) → 1, 2, 4, 5, 5, 3
    ceil = ceiling(budget(percent=25), 20)
    assert sizes(predict_batches(EXP, ceil, nodes(20))) == [1, 2, 4, 5, 5, 3]


def test_worked_example_exponential_without_a_binding_ceiling():
    # the v0.15 arithmetic (no cap): 1, 2, 4, 8, then min(16, remaining 5)
    assert sizes(predict_batches(EXP, 20, nodes(20))) == [1, 2, 4, 8, 5]


def test_linear_example():
    lin = strategy("linear", initialBatch=1, delta=2, batchThreshold=80)
    assert sizes(predict_batches(lin, 10, nodes(10))) == [1, 3, 5, 1]


def test_fixed_strategy_capped_by_ceiling():
    fixed = strategy("fixed", initialBatch=4)
    assert sizes(predict_batches(fixed, 10, nodes(10))) == [4, 4, 2]
    assert sizes(predict_batches(fixed, 3, nodes(10))) == [3, 3, 3, 1]


def test_no_strategy_is_fixed_batches_of_the_ceiling():
    assert sizes(predict_batches(None, ceiling(budget(percent=33), 2), nodes(2))) == [1, 1]
    assert sizes(predict_batches(None, ceiling(budget(percent=100), 5), nodes(5))) == [5]
    assert sizes(predict_batches(None, 2, nodes(5))) == [2, 2, 1]


def test_batches_keep_node_order_and_cover_every_node_once():
    ns = ["c", "a", "b", "e", "d"]
    got = predict_batches(strategy("linear", initialBatch=1, delta=1), 5, ns)
    assert got == [["c"], ["a", "b"], ["e", "d"]]


@pytest.mark.parametrize("strat", [None, strategy("fixed"), strategy("linear"), EXP], ids=str)
def test_s22_no_nodes_no_batch(strat):
    assert predict_batches(strat, ceiling(budget(percent=25), 0), []) == []
    assert next_batch_size(strat, 0, 0, BatchState()) == 0
    assert progress_percent(0, 0) == 100


# ------------------------------------------------------------------------------ next batch size

NEXT_CASES = [
    # id, strategy, ceiling, total, state, expected
    ("fixed-first", strategy("fixed", initialBatch=3), 10, 10, BatchState(), 3),
    ("fixed-capped-by-remaining", strategy("fixed", initialBatch=3), 10, 10, BatchState(completed=9), 1),
    ("linear-grow", strategy("linear", delta=2), 10, 10, BatchState(completed=1, last_batch_size=1), 3),
    (
        "linear-shrink-below-safety",
        strategy("linear", delta=2),
        10,
        20,
        BatchState(completed=2, failed=2, last_batch_size=4, last_batch_failed=True),
        2,
    ),
    (
        "linear-shrink-floor-1",
        strategy("linear", delta=5),
        10,
        20,
        BatchState(failed=2, last_batch_size=2, last_batch_failed=True),
        1,
    ),
    (
        "linear-failed-above-safety-grows",
        strategy("linear", delta=2),
        10,
        10,
        BatchState(completed=5, failed=1, last_batch_size=3, last_batch_failed=True),
        4,  # progress 60 % ≥ 50: grows to 5, remaining 4
    ),
    (
        "exp-shrink",
        EXP,
        10,
        20,
        BatchState(completed=2, failed=1, last_batch_size=2, last_batch_failed=True),
        1,
    ),
    ("exp-grow-capped-by-ceiling", EXP, 5, 20, BatchState(completed=7, last_batch_size=4), 5),
    (
        "late-failure-grows",  # §1.2.7: batch of 8 failed at 75 % progress → 16, capped to remaining 5
        EXP,
        20,
        20,
        BatchState(completed=13, failed=2, last_batch_size=8, last_batch_failed=True),
        5,
    ),
    ("none-strategy", None, 4, 10, BatchState(completed=4), 4),
    ("nothing-left", EXP, 5, 3, BatchState(completed=2, failed=1), 0),
]


@pytest.mark.parametrize(
    ("strat", "ceil", "total", "state", "expected"), [c[1:] for c in NEXT_CASES], ids=[c[0] for c in NEXT_CASES]
)
def test_next_batch_size(strat, ceil, total, state, expected):
    assert next_batch_size(strat, ceil, total, state) == expected


# ------------------------------------------------------------------------------ evaluation


def test_worked_example_early_failures_stop_the_compartment():
    total = 20
    st = BatchState()
    # batch 1: 1 node, ok
    size = next_batch_size(EXP, 5, total, st)
    assert size == 1
    st = evaluate_batch(EXP, total, st, size, 1, 0)
    assert (st.current_batch, st.consecutive_failures, st.should_stop) == (2, 0, False)
    # batch 2: 2 nodes, 1 erroring → 50 % < 100 → failed; progress 3/20 = 15 % < 50
    size = next_batch_size(EXP, 5, total, st)
    assert size == 2
    st = evaluate_batch(EXP, total, st, size, 1, 1)
    assert (st.last_batch_failed, st.consecutive_failures, st.should_stop) == (True, 1, False)
    assert progress_percent(st.processed, total) == 15
    # batch 3: max(1, 2 // 2) = 1; fails → consecutive 2 ≥ 2, progress 20 % < 50 → stop
    size = next_batch_size(EXP, 5, total, st)
    assert size == 1
    st = evaluate_batch(EXP, total, st, size, 0, 1)
    assert (st.consecutive_failures, st.should_stop, st.current_batch) == (2, True, 4)
    assert progress_percent(st.processed, total) == 20
    assert total - st.processed == 16  # never touched


def test_worked_example_late_failure_does_not_stop():
    total, st = 20, BatchState()
    for size in (1, 2, 4):
        assert next_batch_size(EXP, 20, total, st) == size
        st = evaluate_batch(EXP, total, st, size, size, 0)
    assert next_batch_size(EXP, 20, total, st) == 8
    st = evaluate_batch(EXP, total, st, 8, 6, 2)
    assert st.last_batch_failed and not st.should_stop  # progress 75 % ≥ safetyLimit 50
    assert next_batch_size(EXP, 20, total, st) == 5


def test_linear_example_passes_at_exactly_the_threshold():
    lin = strategy("linear", initialBatch=1, delta=2, batchThreshold=80)
    st = BatchState(completed=4, last_batch_size=3)
    assert next_batch_size(lin, 10, 10, st) == 5
    st = evaluate_batch(lin, 10, st, 5, 4, 1)  # 80 % ≥ 80 → passes
    assert not st.last_batch_failed and st.consecutive_failures == 0
    assert next_batch_size(lin, 10, 10, st) == 1


EVAL_CASES = [
    # id, strategy, state, size, ok, failed, expected fields
    (
        "success-resets-consecutive",
        EXP,
        BatchState(consecutive_failures=1),
        2,
        2,
        0,
        {"consecutive_failures": 0, "last_batch_failed": False},
    ),
    (
        "floor-percent",
        strategy("fixed", batchThreshold=67),
        BatchState(),
        3,
        2,
        1,
        {"last_batch_failed": True},
    ),  # floor(200/3) = 66 < 67
    # issue 34, safe by default: no failureThreshold halts at the first failed batch, at any
    # progress; only failureThreshold: never keeps going (NodeWright's unset)
    (
        "no-failure-threshold-stops-at-the-first-failed-batch",
        strategy("fixed"),
        BatchState(),
        1,
        0,
        1,
        {"should_stop": True, "consecutive_failures": 1},
    ),
    (
        "no-failure-threshold-stops-past-the-safety-limit",  # progress 9/10 ≥ safetyLimit 50: still halts
        strategy("fixed", safetyLimit=50),
        BatchState(completed=8),
        1,
        0,
        1,
        {"should_stop": True},
    ),
    (
        "no-failure-threshold-keeps-the-batch-threshold",  # 3 of 4 = 75 % ≥ 70: passed, no halt
        strategy("fixed", batchThreshold=70),
        BatchState(),
        4,
        3,
        1,
        {"last_batch_failed": False, "should_stop": False},
    ),
    (
        "no-failure-threshold-below-the-batch-threshold",  # 2 of 4 = 50 % < 70: failed, halts
        strategy("fixed", batchThreshold=70),
        BatchState(),
        4,
        2,
        2,
        {"last_batch_failed": True, "should_stop": True},
    ),
    (
        "never-never-stops",
        strategy("fixed", failureThreshold="never"),
        BatchState(consecutive_failures=9),
        1,
        0,
        1,
        {"should_stop": False, "consecutive_failures": 10},
    ),
    ("legacy-threshold-100-stops", None, BatchState(), 4, 3, 1, {"last_batch_failed": True, "should_stop": True}),
    ("legacy-passed-batch", None, BatchState(), 4, 4, 0, {"last_batch_failed": False, "should_stop": False}),
    (
        "legacy-last-batch-nothing-left-to-halt",  # progress 100 %: the compartment ends failed, not halted
        None,
        BatchState(completed=6),
        4,
        3,
        1,
        {"last_batch_failed": True, "should_stop": False},
    ),
    (
        "all-blocked-advances",
        EXP,
        BatchState(),
        0,
        0,
        0,
        {"last_batch_failed": False, "current_batch": 2, "last_batch_size": 0},
    ),
    ("stop-is-sticky", EXP, BatchState(should_stop=True), 1, 1, 0, {"should_stop": True}),
    (
        "at-safety-limit-no-stop",
        strategy("fixed", failureThreshold=1, safetyLimit=50),
        BatchState(completed=4),
        1,
        0,
        1,
        {"should_stop": False},
    ),  # progress 5/10 = 50 %, not < 50
    (
        "below-safety-limit-stop",
        strategy("fixed", failureThreshold=1, safetyLimit=60),
        BatchState(completed=4),
        1,
        0,
        1,
        {"should_stop": True},
    ),
    (
        "strict-safety-100",  # S20 issue #592: failureThreshold 1 + safetyLimit 100 stops late too
        strategy("fixed", failureThreshold=1, safetyLimit=100),
        BatchState(completed=8),
        1,
        0,
        1,
        {"should_stop": True},
    ),
]


@pytest.mark.parametrize(
    ("strat", "state", "size", "ok", "failed", "expected"),
    [c[1:] for c in EVAL_CASES],
    ids=[c[0] for c in EVAL_CASES],
)
def test_evaluate_batch(strat, state, size, ok, failed, expected):
    st = evaluate_batch(strat, 10, state, size, ok, failed)
    for k, v in expected.items():
        assert getattr(st, k) == v, k
    assert st.current_batch == state.current_batch + 1
    assert st.completed == state.completed + ok and st.failed == state.failed + failed


HALT_CASES = [
    # id, strategy, expected (failureThreshold, safetyLimit, batchThreshold, default), in words
    ("legacy", None, (1, 100, 100, True), "halts after the first failed batch (a batch fails when one of its nodes "
                                          "fails; default: no failureThreshold)"),
    ("unset", strategy("linear", safetyLimit=30), (1, 100, 100, True), None),
    ("unset-batch-threshold", strategy("fixed", batchThreshold=80), (1, 100, 80, True),
     "halts after the first failed batch (a batch fails when under 80 % of its nodes succeed; default: no "
     "failureThreshold)"),
    ("explicit", EXP, (2, 50, 100, False), "halts after 2 consecutive failed batches while under 50 % of its nodes "
                                           "are done (a batch fails when one of its nodes fails)"),
    ("explicit-strict", strategy("fixed", failureThreshold=1, safetyLimit=100), (1, 100, 100, False), None),
    ("never", strategy("exponential", failureThreshold="never", batchThreshold=90), ("never", 50, 90, False),
     "never halts (failureThreshold: never): a failing package can reach every node"),
]


@pytest.mark.parametrize(("strat", "expected", "words"), [c[1:] for c in HALT_CASES], ids=[c[0] for c in HALT_CASES])
def test_halt_rule(strat, expected, words):
    rule = halt_rule(strat)
    assert (rule.failureThreshold, rule.safetyLimit, rule.batchThreshold, rule.default) == expected
    assert rule.off == (expected[0] == "never")
    if words is not None:
        assert rule.describe() == words


@pytest.mark.parametrize("strat", [None, strategy("fixed"), strategy("linear", batchThreshold=50)])
def test_without_a_failure_threshold_a_failing_compartment_halts_at_its_first_failed_batch(strat):
    """Every node fails: the first batch halts the compartment whatever the batch sizes."""
    total, st = 10, BatchState()
    size = next_batch_size(strat, 2, total, st)
    st = evaluate_batch(strat, total, st, size, 0, size)
    assert st.should_stop and st.processed == size < total


def test_with_never_a_failing_compartment_runs_every_node():
    strat, total, st = strategy("fixed", initialBatch=2, failureThreshold="never"), 10, BatchState()
    while (size := next_batch_size(strat, 2, total, st)) > 0:
        st = evaluate_batch(strat, total, st, size, 0, size)
        assert not st.should_stop
    assert st.failed == total


def test_evaluate_rejects_inconsistent_counts():
    with pytest.raises(ValueError, match="exceeds"):
        evaluate_batch(EXP, 10, BatchState(), 2, 2, 1)
    with pytest.raises(ValueError, match="negative"):
        evaluate_batch(EXP, 10, BatchState(), 2, -1, 0)


def test_batch_state_is_frozen_and_defaults_match_nodewright():
    st = BatchState()
    assert (st.current_batch, st.consecutive_failures, st.completed, st.failed) == (1, 0, 0, 0)
    assert (st.last_batch_size, st.last_batch_failed, st.should_stop) == (0, False, False)
    with pytest.raises(AttributeError):
        st.completed = 3  # type: ignore[misc]
    assert replace(st, completed=3).processed == 3


# ------------------------------------------------------------------------------ compartments


def test_assignment_default_and_single_match():
    pol = policy(compartments=[compartment("gpu", {"pool": "gpu"}, budget(count=1))])
    ns = [node("a", labels={"pool": "gpu"}), node("b", labels={"pool": "cpu"})]
    assert assign_compartments(pol, ns) == {"a": "gpu", "b": DEFAULT_COMPARTMENT}


def test_overlap_prefers_the_safer_strategy():
    pol = policy(
        compartments=[
            compartment("a-exp", {"pool": "gpu"}, budget(count=1), strategy("exponential")),
            compartment("b-lin", {"zone": "z1"}, budget(count=5), strategy("linear")),
            compartment("c-none", {"rack": "r1"}, budget(count=1)),
            compartment("d-fixed", {"team": "ml"}, budget(count=9), strategy("fixed")),
        ]
    )
    labels = {"pool": "gpu", "zone": "z1", "rack": "r1", "team": "ml"}
    got = assign_compartments(pol, [node("n", labels=labels)])
    assert got == {"n": "d-fixed"}
    labels.pop("team")
    assert assign_compartments(pol, [node("n", labels=labels)]) == {"n": "b-lin"}
    labels.pop("zone")
    assert assign_compartments(pol, [node("n", labels=labels)]) == {"n": "a-exp"}  # exponential < none


def test_overlap_then_smaller_ceiling_against_matching_nodes_then_name():
    # both fixed; "big" is 50 % of its 10 matching nodes = 5, "small" is 50 % of 2 = 1
    pol = policy(
        compartments=[
            compartment("big", {"pool": "gpu"}, budget(percent=50), strategy("fixed")),
            compartment("small", {"rack": "r1"}, budget(percent=50), strategy("fixed")),
        ]
    )
    ns = [node(f"g{i}", labels={"pool": "gpu"}) for i in range(8)]
    ns += [node("x1", labels={"pool": "gpu", "rack": "r1"}), node("x2", labels={"pool": "gpu", "rack": "r1"})]
    got = assign_compartments(pol, ns)
    assert got["x1"] == got["x2"] == "small"
    assert got["g0"] == "big"
    # equal strategy and ceiling → name
    pol2 = policy(
        compartments=[
            compartment("zeta", {"pool": "gpu"}, budget(count=2), strategy("fixed")),
            compartment("alpha", {"rack": "r1"}, budget(count=2), strategy("fixed")),
        ]
    )
    assert assign_compartments(pol2, ns)["x1"] == "alpha"


def test_assignment_of_no_nodes_is_empty():
    assert assign_compartments(policy(), []) == {}


RESUME_CASES = [
    # id, strategy, total, failed before, should_stop
    ("nothing-failed", None, 24, 0, False),
    ("legacy-one-failed", None, 24, 1, True),
    ("default-one-failed", strategy("linear", safetyLimit=10), 24, 1, True),
    ("explicit-below-threshold", EXP, 24, 1, False),  # failureThreshold 2
    ("explicit-at-threshold", EXP, 24, 2, True),
    ("explicit-past-safety-limit", EXP, 4, 2, False),  # progress 2/4 = 50 %, not < 50
    ("never", strategy("fixed", failureThreshold="never"), 24, 9, False),
]


@pytest.mark.parametrize(("strat", "total", "before", "stop"), [c[1:] for c in RESUME_CASES],
                         ids=[c[0] for c in RESUME_CASES])
def test_resume_state_finds_a_halt_in_the_nodes_left_failed(strat, total, before, stop):
    st = resume_state(strat, total, before)
    assert st.should_stop == stop
    assert (st.failed, st.consecutive_failures, st.completed, st.current_batch) == (before, before, 0, 1)
    assert (next_batch_size(strat, 3, total, st) > 0) == (total > before)  # the rest is still to do

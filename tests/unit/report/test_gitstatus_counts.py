"""Node counts of the git status file (:func:`reconciler.report.gitstatus.result_counts`): a node
the run left ``untouched`` because it was already up to date is complete (a re-run of ``apply``, or
a controller pass with nothing to do, must not turn a converged fleet into "pending"); untouched
with work is pending; the run's own outcomes count as themselves."""

from __future__ import annotations

import pytest

from reconciler.model.plan import Plan
from reconciler.report.gitstatus import result_counts, status_document
from tests.unit.report.test_status_object import make_plan, result


def _converged() -> Plan:
    return make_plan(n=3, installed=3)  # every node already has the package: no work


@pytest.mark.parametrize(("states", "expected"), [
    # converged fleet, the run left every node untouched ("no changes")
    ({"n0": "untouched", "n1": "untouched", "n2": "untouched"}, {"complete": 3, "pending": 0}),
    # nodes absent from the result count by their plan too
    ({}, {"complete": 3, "pending": 0}),
    ({"n0": "failed", "n1": "untouched"}, {"complete": 2, "failed": 1, "pending": 0}),
    ({"n0": "blocked", "n1": "removed", "n2": "complete"}, {"complete": 1, "blocked": 1, "removed": 1}),
])
def test_counts_on_a_converged_plan(states: dict[str, str], expected: dict[str, int]) -> None:
    counts = result_counts(result(_converged(), states), _converged())
    assert counts["total"] == 3
    for k, v in expected.items():
        assert counts[k] == v, (k, counts)


def test_untouched_with_work_is_pending_and_the_summary_says_so() -> None:
    plan = make_plan(n=3, installed=0)  # every node needs the package
    assert all(n.has_work for n in plan.nodes)
    res = result(plan, {"n0": "complete", "n1": "untouched", "n2": "untouched"}, verdict="failed")
    counts = result_counts(res, plan)
    assert counts["complete"] == 1 and counts["pending"] == 2
    doc = status_document(res, plan, cluster="c1")
    assert doc["counts"] == counts and doc["recipe"]["name"] == "tuning"

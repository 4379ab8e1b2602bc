"""Table tests for the PDB arithmetic and the Eviction API's answer (reconciler.model.disruption).

Expected values are worked out from kube-apiserver's eviction handler and the disruption
controller (the rules quoted in the module under test); the same cases run against a real
control plane in tests/e2e/test_eviction_conformance_e2e.py.
"""

from __future__ import annotations

import pytest

from reconciler.model.disruption import (
    BudgetStatus,
    EvictionAnswer,
    budget_status,
    eviction_answer,
    scaled_value,
)
from reconciler.model.observed import PdbInfo
from reconciler.model.vocab import UnhealthyPodEvictionPolicy as Policy
from reconciler.testing import builders as b


@pytest.mark.parametrize(
    ("value", "total", "round_up", "expected"),
    [
        (3, 10, True, 3),
        ("50%", 3, True, 2),  # 1.5 rounds up
        ("50%", 3, False, 1),
        ("10%", 10000, True, 1000),
        ("10%", 5, True, 1),  # 0.5 rounds up to 1
        ("10%", 5, False, 0),
        ("0%", 7, True, 0),
        ("100%", 7, True, 7),
        ("33%", 0, True, 0),
    ],
)
def test_scaled_value_rounds_as_intstr(value: int | str, total: int, round_up: bool, expected: int) -> None:
    assert scaled_value(value, total, round_up=round_up) == expected


@pytest.mark.parametrize("bad", ["5", "x%", "%", "-1%", True])
def test_scaled_value_refuses_non_percent_strings(bad: object) -> None:
    with pytest.raises(ValueError, match="int-or-percent"):
        scaled_value(bad, 10, round_up=True)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("min_available", "max_unavailable", "pods", "scale", "healthy", "expected"),
    [
        # minAvailable integer: expected = selected pods, desired = the integer
        (2, None, 3, 3, 3, BudgetStatus(3, 2, 3, 1)),
        (2, None, 3, 3, 2, BudgetStatus(3, 2, 2, 0)),
        (2, None, 3, 3, 1, BudgetStatus(3, 2, 1, 0)),  # never negative
        (0, None, 1, 1, 1, BudgetStatus(1, 0, 1, 1)),
        (0, None, 0, 0, 0, BudgetStatus(0, 0, 0, 0)),  # nothing expected: 0
        (1, None, 2, 0, 2, BudgetStatus(2, 1, 2, 1)),  # unmanaged pods count for an integer
        # minAvailable percent: expected = controllers' scale, desired rounded up
        ("50%", None, 3, 3, 3, BudgetStatus(3, 2, 3, 1)),
        ("50%", None, 2, 3, 2, BudgetStatus(3, 2, 2, 0)),  # a pod missing still counts in scale
        ("50%", None, 2, 0, 2, BudgetStatus(0, 0, 2, 0)),  # unmanaged only: nothing expected
        # maxUnavailable: desired = scale - maxUnavailable (rounded up), at least 0
        (None, 1, 3, 3, 3, BudgetStatus(3, 2, 3, 1)),
        (None, 1, 3, 3, 2, BudgetStatus(3, 2, 2, 0)),
        (None, "10%", 10000, 10000, 10000, BudgetStatus(10000, 9000, 10000, 1000)),
        (None, "10%", 5, 5, 5, BudgetStatus(5, 4, 5, 1)),  # 0.5 rounds up to 1
        (None, "50%", 3, 3, 2, BudgetStatus(3, 1, 2, 1)),
        (None, 5, 3, 3, 3, BudgetStatus(3, 0, 3, 3)),  # desired clamps at 0
        (None, 0, 3, 3, 3, BudgetStatus(3, 3, 3, 0)),
        (None, "100%", 2, 2, 0, BudgetStatus(2, 0, 0, 0)),
        # neither field
        (None, None, 3, 3, 3, BudgetStatus(0, 0, 3, 0)),
    ],
)
def test_budget_status_as_the_disruption_controller(
    min_available: int | str | None, max_unavailable: int | str | None, pods: int, scale: int, healthy: int,
    expected: BudgetStatus,
) -> None:
    assert budget_status(min_available, max_unavailable, pods=pods, scale=scale, healthy=healthy) == expected


def pdb(name: str = "web", *, current: int, desired: int, allowed: int, policy: Policy = Policy.IF_HEALTHY_BUDGET,
        ) -> PdbInfo:
    return b.pdb(name, {"app": "web"}, allowed=allowed, current_healthy=current, desired_healthy=desired,
                 unhealthy_policy=policy)


HEALTHY = pdb(current=2, desired=1, allowed=1)  # budget healthy, one disruption allowed
AT_MIN = pdb(current=1, desired=1, allowed=0)  # healthy budget but no disruption left
BELOW = pdb(current=1, desired=2, allowed=0)  # budget not healthy
ZERO_DESIRED = pdb(current=0, desired=0, allowed=0)  # minAvailable 0, no pod Ready


@pytest.mark.parametrize(
    ("phase", "terminating", "ready", "covering", "answer"),
    [
        # no budget check for these, whatever the budgets say
        ("Pending", False, False, [BELOW], EvictionAnswer.NO_CHECK),
        ("Succeeded", False, False, [BELOW, AT_MIN], EvictionAnswer.NO_CHECK),
        ("Failed", False, False, [BELOW], EvictionAnswer.NO_CHECK),
        ("Running", True, True, [BELOW], EvictionAnswer.NO_CHECK),
        # the PDB count check comes before readiness and status
        ("Running", False, True, [HEALTHY, HEALTHY], EvictionAnswer.MULTIPLE_BUDGETS),
        ("Running", False, False, [HEALTHY, AT_MIN], EvictionAnswer.MULTIPLE_BUDGETS),
        ("Unknown", False, False, [HEALTHY, HEALTHY], EvictionAnswer.MULTIPLE_BUDGETS),  # Unknown is checked
        ("Running", False, True, [], EvictionAnswer.NO_BUDGET),
        ("Running", False, False, [], EvictionAnswer.NO_BUDGET),
        # Ready pods: disruptionsAllowed decides, the policy does not matter
        ("Running", False, True, [HEALTHY], EvictionAnswer.ALLOWED),
        ("Running", False, True, [AT_MIN], EvictionAnswer.REFUSED),
        ("Running", False, True, [pdb(current=1, desired=2, allowed=0, policy=Policy.ALWAYS_ALLOW)],
         EvictionAnswer.REFUSED),
        # not Ready, IfHealthyBudget (default): goes without decrement while current >= desired > 0
        ("Running", False, False, [AT_MIN], EvictionAnswer.UNHEALTHY),
        ("Running", False, False, [HEALTHY], EvictionAnswer.UNHEALTHY),
        ("Running", False, False, [BELOW], EvictionAnswer.REFUSED),  # the divergence of issue 13
        ("Running", False, False, [ZERO_DESIRED], EvictionAnswer.REFUSED),  # desired 0: checkAndDecrement
        ("Running", False, False, [pdb(current=1, desired=2, allowed=1)], EvictionAnswer.ALLOWED),
        ("Unknown", False, False, [BELOW], EvictionAnswer.REFUSED),
        # not Ready, AlwaysAllow: always goes
        ("Running", False, False, [pdb(current=1, desired=2, allowed=0, policy=Policy.ALWAYS_ALLOW)],
         EvictionAnswer.UNHEALTHY),
        ("Running", False, False, [pdb(current=0, desired=0, allowed=0, policy=Policy.ALWAYS_ALLOW)],
         EvictionAnswer.UNHEALTHY),
    ],
)
def test_eviction_answer_as_kube_apiserver(
    phase: str, terminating: bool, ready: bool, covering: list[PdbInfo], answer: EvictionAnswer,
) -> None:
    got = eviction_answer(phase, terminating, ready, covering)
    assert got is answer
    assert got.evicts == (answer not in (EvictionAnswer.REFUSED, EvictionAnswer.MULTIPLE_BUDGETS))


def test_http_status_of_answers() -> None:
    assert EvictionAnswer.REFUSED.http_status == 429
    assert EvictionAnswer.MULTIPLE_BUDGETS.http_status == 500
    assert {a.http_status for a in EvictionAnswer if a.evicts} == {201}

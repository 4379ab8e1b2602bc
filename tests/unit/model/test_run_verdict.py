"""How a run's verdict follows from what its nodes and compartments did (RunVerdict)."""

from __future__ import annotations

import pytest

from reconciler.model.run import run_verdict
from reconciler.model.vocab import RunVerdict


@pytest.mark.parametrize(
    ("halted", "failed", "waiting", "verdict"),
    [
        (False, False, False, RunVerdict.SUCCEEDED),
        (False, False, True, RunVerdict.WAITING),
        (False, True, False, RunVerdict.FAILED),
        (False, True, True, RunVerdict.FAILED),  # a failure is not hidden behind nodes that wait
        (True, False, False, RunVerdict.HALTED),
        (True, True, True, RunVerdict.HALTED),
        (True, False, True, RunVerdict.HALTED),
    ],
)
def test_verdict_order_halted_failed_waiting_succeeded(halted: bool, failed: bool, waiting: bool,
                                                         verdict: RunVerdict) -> None:
    assert run_verdict(halted=halted, failed=failed, waiting=waiting) is verdict

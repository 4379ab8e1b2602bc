"""Interrupt merge: reboot > restartAllServices > service > noop; services unioned and sorted."""

from __future__ import annotations

import pytest

from reconciler.model.interrupts import describe, interrupt_from_record, merge_interrupts
from reconciler.model.recipe import Interrupt
from reconciler.testing import as_interrupt

MERGE_CASES = [
    ("none", [], None),
    ("only-none", [None, None], None),
    ("single", ["noop"], "noop"),
    ("reboot-wins", ["service:containerd", "reboot", "restartAllServices", "noop"], "reboot"),
    ("restart-all-beats-service", ["service:kubelet", "restartAllServices"], "restartAllServices"),
    ("service-beats-noop", ["noop", "service:kubelet"], "service:kubelet"),
    (
        "services-union-sorted",
        ["service:kubelet,containerd", "service:containerd,chronyd"],
        "service:chronyd,containerd,kubelet",
    ),
    ("services-ignored-when-reboot", ["service:kubelet", "reboot"], "reboot"),
    ("none-entries-skipped", [None, "service:b", None, "service:a"], "service:a,b"),
]


@pytest.mark.parametrize(("given", "expected"), [c[1:] for c in MERGE_CASES], ids=[c[0] for c in MERGE_CASES])
def test_merge(given, expected):
    assert merge_interrupts([as_interrupt(g) for g in given]) == as_interrupt(expected)


def test_merge_is_order_independent():
    items = [as_interrupt(x) for x in ("service:b", "noop", "service:a", "service:c,b")]
    assert merge_interrupts(items) == merge_interrupts(list(reversed(items)))


def test_interrupt_from_inflight_record():
    assert interrupt_from_record({"type": "service", "services": ["x"]}) == Interrupt(type="service", services=("x",))
    assert interrupt_from_record(None) is None
    assert interrupt_from_record({}) is None
    assert interrupt_from_record({"type": "explode"}) is None


def test_describe():
    assert describe(None) == "-"
    assert describe(as_interrupt("reboot")) == "reboot"
    assert describe(as_interrupt("service:a,b")) == "service(a,b)"

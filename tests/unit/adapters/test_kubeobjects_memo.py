"""Records shared between identical listed objects (kubeobjects' memos) never change a result:
equal fields share one record, values equal across types (1, 1.0, True) do not, unhashable or
malformed fields behave as without the memo."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from reconciler.adapters.kube import objects as kubeobjects
from reconciler.adapters.kube.objects import parse_time, pod_from
from reconciler.testing.fleetgen import make_pod

DEFAULT_TOLERATIONS = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                        "tolerationSeconds": 300}]


STARTED = "2026-12-01T20:49:44Z"


def _pod(name: str, tolerations: list[Any] | None = None) -> dict[str, Any]:
    return make_pod("ns", name, "n1", owner=("ReplicaSet", "rs"), start=parse_time(STARTED), tolerations=tolerations)


def test_identical_fields_share_records() -> None:
    a, b = pod_from(_pod("a", tolerations=DEFAULT_TOLERATIONS)), pod_from(_pod("b", tolerations=DEFAULT_TOLERATIONS))
    assert a.tolerations is b.tolerations and a.owners[0] is b.owners[0]
    assert a.tolerations[0].tolerationSeconds == 300 and a.owners[0].controller is True
    assert a.start_time == b.start_time == parse_time("2026-12-01T20:49:44+00:00")


def test_values_equal_across_types_do_not_share() -> None:
    one = pod_from(_pod("a", tolerations=[{"key": "k", "operator": "Exists", "tolerationSeconds": 1}]))
    as_float = pod_from(_pod("b", tolerations=[{"key": "k", "operator": "Exists", "tolerationSeconds": 1.0}]))
    assert one.tolerations is not as_float.tolerations
    q = _pod("d")
    q["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "rs", "controller": True, "uid": 1}]
    r = _pod("e")
    r["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "rs", "controller": True, "uid": True}]
    assert pod_from(q).owners[0].uid == 1 and pod_from(r).owners[0].uid is True


def test_unhashable_or_invalid_fields_as_without_memo() -> None:
    with pytest.raises(ValidationError):
        pod_from(_pod("a", tolerations=[{"key": "k", "operator": "Sometimes"}]))
    with pytest.raises(ValidationError):  # a list where a number belongs: unhashable key, same error
        pod_from(_pod("b", tolerations=[{"key": "k", "operator": "Exists", "tolerationSeconds": [1]}]))
    with pytest.raises(AttributeError):
        pod_from(_pod("c", tolerations=["not-an-object"]))
    assert parse_time("not a time") is None and parse_time("") is None


def test_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kubeobjects, "MEMO_SIZE", 3)
    monkeypatch.setattr(kubeobjects, "_TIMES", {})
    for s in range(10):
        assert parse_time(f"2026-12-01T20:49:{s:02d}Z") is not None
    assert len(kubeobjects._TIMES) <= 3


@pytest.mark.parametrize("value", [
    "2026-11-30T12:00:00Z", "2028-02-29T23:59:59Z", "2026-02-29T00:00:00Z", "2026-13-01T00:00:00Z",
    "2026-00-10T00:00:00Z", "2026-11-31T00:00:00Z", "2026-11-30T24:00:00Z", "2026-11-30T23:60:00Z",
    "2026-11-30T23:59:60Z", "1970-01-01T00:00:00Z", "1969-12-31T23:59:59Z", "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59Z", "2026-11-30t12:00:00Z", "2026-11-30T12:00:00z", "2026-11-30T1a:00:00Z",
    "2026-1a-30T12:00:00Z", "\uff12\uff10\uff12\uff16-11-30T12:00:00Z", "2026-11-30T\uff11\uff12:00:00Z",
    "2026-11-30T12:00:00+01:00", "2026-11-30T12:00:00.5Z", "2026-11-30 12:00:00Z", "2026-11-30T-1:00:00Z",
    "2026-11-30T+1:00:00Z", "2026-11-30T12:00:00ZZ", "x026-11-30T12:00:00Z"])
def test_canonical_times_take_the_short_way_to_the_same_result(value: str) -> None:
    from reconciler.adapters.kube import objects as kubeobjects

    kubeobjects._TIMES.clear()
    kubeobjects._DAYS.clear()
    fast = kubeobjects._canonical_time(value)
    full = kubeobjects._parse_time(value)
    assert fast < 0 or fast == full  # negative: not canonical, parsed in full
    if len(value) == 20 and value.endswith("Z") and value[10] == "T" and full is not None and full >= 0 \
            and value.isascii():
        assert fast == full  # every valid canonical time after 1970 takes the short way
    assert kubeobjects.parse_time(value) == full

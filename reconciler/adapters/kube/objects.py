"""Convert Kubernetes objects in their JSON/YAML dict form (as ``kubectl get -o yaml`` prints them,
or ``ApiClient.sanitize_for_serialization`` returns them) into our observed records.

Shared by the simulated fleet (which keeps raw dicts so it can save them back) and usable by the
kube adapter. Pure functions; unknown fields are ignored.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import orjson

from reconciler.model.observed import NodeCondition, NodeInfo, OwnerRef, PdbInfo, PodInfo
from reconciler.model.selector import LabelSelector, Requirement, Taint, Toleration
from reconciler.model.vocab import UnhealthyPodEvictionPolicy

Obj = dict[str, Any]


_V = TypeVar("_V")
#: Entries kept per memo below; past it the memo starts again empty (a bound, not an LRU).
MEMO_SIZE = 4096


def _memo(memo: dict[Any, _V], key: Any, make: Callable[[], _V]) -> _V:
    """``memo[key]``, made by ``make()`` on a miss. Records are immutable, so objects listed with
    identical fields (the two default tolerations of every pod, the owner of a ReplicaSet's pods,
    the timestamps of objects created in the same second) share one record: less memory and no
    repeated validation on a LIST of thousands. An unhashable key (a hostile field type) is made
    without the memo, so it fails or succeeds exactly as without it. Keys carry the type of each
    value, since ``1 == 1.0 == True`` would otherwise share a record."""
    try:
        return memo[key]
    except KeyError:
        pass
    except TypeError:
        return make()
    value = make()
    if len(memo) >= MEMO_SIZE:
        memo.clear()
    memo[key] = value
    return value


_TIMES: dict[str, float | None] = {}
_TOLERATIONS: dict[bytes, tuple[Toleration, ...]] = {}
_OWNERS: dict[Any, OwnerRef] = {}
_CONDITIONS: dict[Any, NodeCondition] = {}


_DAYS: dict[str, float | None] = {}
_DIGITS = frozenset("0123456789")


def _canonical_time(value: str) -> float:
    """Epoch seconds of ``YYYY-MM-DDTHH:MM:SSZ`` (how Kubernetes writes times) with hours 00-23,
    minutes and seconds 00-59, from the day's midnight (:func:`_parse_time`, kept per day) plus
    the time of day: exactly what :func:`_parse_time` returns. A negative number when ``value``
    is not of that form or not a valid date (or before 1970): the caller then parses it in full."""
    if (len(value) != 20 or value[4] != "-" or value[7] != "-" or value[10] != "T" or value[13] != ":"
            or value[16] != ":" or value[19] != "Z"
            or not _DIGITS.issuperset(value[11:13] + value[14:16] + value[17:19])):
        return -1.0
    hour, minute, second = int(value[11:13]), int(value[14:16]), int(value[17:19])
    if hour > 23 or minute > 59 or second > 59:
        return -1.0
    day = value[:10]
    try:
        midnight = _DAYS[day]
    except KeyError:
        midnight = _parse_time(day + "T00:00:00Z") if _DIGITS.issuperset(day[:4] + day[5:7] + day[8:10]) else None
        if len(_DAYS) >= MEMO_SIZE:
            _DAYS.clear()
        _DAYS[day] = midnight
    if midnight is None:
        return -1.0
    return midnight + float(hour * 3600 + minute * 60 + second)


def parse_time(value: Any) -> float | None:
    """RFC 3339 timestamp (``2026-11-30T12:00:00Z``) → epoch seconds; None when absent/invalid."""
    if not value:
        return None
    if type(value) is str:  # the memo inlined: called for every timestamp of every listed object
        try:
            return _TIMES[value]
        except KeyError:
            fast = _canonical_time(value)
            parsed = fast if fast >= 0 else _parse_time(value)
            if len(_TIMES) >= MEMO_SIZE:
                _TIMES.clear()
            _TIMES[value] = parsed
            return parsed
    if isinstance(value, str):
        return _memo(_TIMES, value, lambda: _parse_time(value))
    return _parse_time(value)


def _parse_time(value: Any) -> float | None:
    if isinstance(value, datetime):
        dt = value
    else:
        try:
            dt = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def format_time(epoch: float) -> str:
    """Epoch seconds → RFC 3339 UTC with second precision (``...Z``)."""
    return _format_second(round(epoch))


@functools.lru_cache(maxsize=1024)
def _format_second(second: int) -> str:
    """:func:`format_time` of a whole second, memoised: the objects written at one (simulated)
    instant share one string instead of each holding its own."""
    return datetime.fromtimestamp(second, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def selector_from(raw: Any) -> LabelSelector | None:
    """A ``metav1.LabelSelector`` dict → LabelSelector; None for null."""
    if raw is None:
        return None
    exprs = tuple(
        Requirement(key=e["key"], operator=e["operator"], values=tuple(e.get("values") or ()))
        for e in raw.get("matchExpressions") or ()
    )
    return LabelSelector(matchLabels=dict(raw.get("matchLabels") or {}), matchExpressions=exprs)


def _meta(obj: Obj) -> Obj:
    m = obj.get("metadata")
    return m if isinstance(m, dict) else {}


def _condition(c: Obj) -> NodeCondition:
    get = c.get  # the fields as strings; the memo inlined (called for every condition of every node)
    fields = (str(get("type") or ""), str(get("status") or ""), str(get("reason") or ""), str(get("message") or ""),
              get("lastTransitionTime"))
    try:
        return _CONDITIONS[fields]
    except (KeyError, TypeError):  # TypeError: a hostile lastTransitionTime that is not hashable
        pass
    made = NodeCondition(*fields[:4], since=parse_time(fields[4]))
    if not isinstance(fields[4], str | None):
        return made
    if len(_CONDITIONS) >= MEMO_SIZE:
        _CONDITIONS.clear()
    _CONDITIONS[fields] = made
    return made


def node_from(obj: Obj) -> NodeInfo:
    """A Node dict → NodeInfo (Ready and every condition's type/status/reason/message from
    ``status.conditions``; bootID from ``status.nodeInfo``)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    ready: bool | None = None
    conditions = tuple(_condition(c) for c in status.get("conditions") or () if isinstance(c, dict))
    for c in conditions:
        if c.type == "Ready":
            ready = _READY.get(c.status)
    raw_taints = spec.get("taints")
    taints = tuple(
        Taint(key=t["key"], value=str(t.get("value") or ""), effect=t["effect"]) for t in raw_taints
    ) if raw_taints else ()
    labels, annotations = meta.get("labels"), meta.get("annotations")
    return NodeInfo(
        meta["name"],
        str(meta.get("uid") or ""),
        dict(labels) if labels else {},
        dict(annotations) if annotations else {},
        bool(spec.get("unschedulable", False)),
        taints,
        ready,
        str((status.get("nodeInfo") or {}).get("bootID") or ""),
        parse_time(meta.get("creationTimestamp")) or 0.0,
        str(meta.get("resourceVersion") or ""),
        conditions=conditions,
    )


_READY = {"True": True, "False": False}


def _tolerations(raw: Any) -> tuple[Toleration, ...]:
    if not raw:
        return ()
    try:  # the list's JSON as the key (1, 1.0 and true differ); plain JSON types only
        key = orjson.dumps(raw, option=orjson.OPT_PASSTHROUGH_SUBCLASS)
    except TypeError:  # not JSON data (a hostile field type): made without the memo, as it fails or not
        return _make_tolerations(raw)
    return _memo(_TOLERATIONS, key, lambda: _make_tolerations(raw))


def _make_tolerations(raw: Any) -> tuple[Toleration, ...]:
    out = []
    for t in raw or ():
        op = t.get("operator") or "Equal"
        out.append(
            Toleration(
                key=t.get("key") or "",
                operator=op,
                value=str(t.get("value") or ""),
                effect=t.get("effect") or "",
                tolerationSeconds=t.get("tolerationSeconds"),
            )
        )
    return tuple(out)


def _owner(o: Obj) -> OwnerRef:
    kind, name, controller = o.get("kind", ""), o.get("name", ""), bool(o.get("controller", False))
    api_version, uid = o.get("apiVersion", ""), o.get("uid", "")
    key = (kind, name, controller, api_version, uid, type(kind), type(name), type(api_version), type(uid))
    try:
        return _OWNERS[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable field (hostile input): made without the memo
        return OwnerRef(kind=kind, name=name, controller=controller, api_version=api_version, uid=uid)
    ref = OwnerRef(kind=kind, name=name, controller=controller, api_version=api_version, uid=uid)
    if len(_OWNERS) >= MEMO_SIZE:
        _OWNERS.clear()
    _OWNERS[key] = ref
    return ref


def pod_from(obj: Obj) -> PodInfo:
    """A Pod dict → PodInfo (Ready from ``status.conditions``, emptyDir from ``spec.volumes``).

    Called for every pod of a LIST (300,000 in a 100,000-node snapshot): written for speed, fields
    in PodInfo's order; identical tolerations, owners and timestamps share one record."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    ready = False
    for c in status.get("conditions") or ():
        if c.get("type") == "Ready" and c.get("status") == "True":
            ready = True
            break
    refs = meta.get("ownerReferences")
    volumes = spec.get("volumes")
    labels, annotations = meta.get("labels"), meta.get("annotations")
    deletion = meta.get("deletionTimestamp")
    return PodInfo(
        meta.get("namespace") or "default",
        meta["name"],
        str(meta.get("uid") or ""),
        spec.get("nodeName") or "",
        dict(labels) if labels else {},
        dict(annotations) if annotations else {},
        status.get("phase") or "Pending",
        ready,
        tuple(map(_owner, refs)) if refs else (),
        any("emptyDir" in v for v in volumes) if volumes else False,
        parse_time(deletion) if deletion else None,
        _tolerations(spec.get("tolerations")),
        int(spec.get("terminationGracePeriodSeconds", 30) or 0),
        parse_time(status.get("startTime")),
        spec.get("activeDeadlineSeconds"),
    )


def unhealthy_policy_from(value: Any) -> UnhealthyPodEvictionPolicy:
    """``spec.unhealthyPodEvictionPolicy`` → the enum: ``AlwaysAllow`` is AlwaysAllow, anything
    else (absent, ``IfHealthyBudget``) the default, as kube-apiserver's eviction handler reads it
    (it only tests for AlwaysAllow; its validation refuses other values)."""
    if value == UnhealthyPodEvictionPolicy.ALWAYS_ALLOW.value:
        return UnhealthyPodEvictionPolicy.ALWAYS_ALLOW
    return UnhealthyPodEvictionPolicy.IF_HEALTHY_BUDGET


def pdb_from(obj: Obj) -> PdbInfo:
    """A policy/v1 PodDisruptionBudget dict → PdbInfo (``unhealthyPodEvictionPolicy`` included)."""
    meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    return PdbInfo(
        namespace=meta.get("namespace") or "default",
        name=meta["name"],
        selector=selector_from(spec.get("selector")),
        min_available=spec.get("minAvailable"),
        max_unavailable=spec.get("maxUnavailable"),
        disruptions_allowed=int(status.get("disruptionsAllowed", 0) or 0),
        current_healthy=int(status.get("currentHealthy", 0) or 0),
        desired_healthy=int(status.get("desiredHealthy", 0) or 0),
        expected_pods=int(status.get("expectedPods", 0) or 0),
        unhealthy_pod_eviction_policy=unhealthy_policy_from(spec.get("unhealthyPodEvictionPolicy")),
    )

"""Convert Kubernetes objects in their JSON/YAML dict form (as ``kubectl get -o yaml`` prints them,
or ``ApiClient.sanitize_for_serialization`` returns them) into our observed records.

Shared by the simulated fleet (which keeps raw dicts so it can save them back) and usable by the
kube adapter. Pure functions; unknown fields are ignored.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from reconciler.model.observed import NodeInfo, OwnerRef, PdbInfo, PodInfo
from reconciler.model.selector import LabelSelector, Requirement, Taint, Toleration

Obj = dict[str, Any]


def parse_time(value: Any) -> float | None:
    """RFC 3339 timestamp (``2026-11-30T12:00:00Z``) → epoch seconds; None when absent/invalid.
    Text is memoised (the pods of a fleet share start times; hundreds of thousands are read)."""
    if not value:
        return None
    if isinstance(value, str):
        return _parse_text_time(value)
    if isinstance(value, datetime):
        dt = value
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        return dt.timestamp()
    return _parse_text_time(str(value))


@lru_cache(maxsize=65536)
def _parse_text_time(text: str) -> float | None:
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def format_time(epoch: float) -> str:
    """Epoch seconds → RFC 3339 UTC with second precision (``...Z``)."""
    return datetime.fromtimestamp(round(epoch), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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


def node_from(obj: Obj) -> NodeInfo:
    """A Node dict → NodeInfo (Ready from ``status.conditions``; bootID from ``status.nodeInfo``)."""
    meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    ready: bool | None = None
    for c in status.get("conditions") or ():
        if c.get("type") == "Ready":
            ready = {"True": True, "False": False}.get(str(c.get("status")))
    taints = tuple(
        Taint(key=t["key"], value=str(t.get("value") or ""), effect=t["effect"]) for t in spec.get("taints") or ()
    )
    return NodeInfo(
        name=meta["name"],
        uid=str(meta.get("uid") or ""),
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        unschedulable=bool(spec.get("unschedulable", False)),
        taints=taints,
        ready=ready,
        boot_id=str((status.get("nodeInfo") or {}).get("bootID") or ""),
        created=parse_time(meta.get("creationTimestamp")) or 0.0,
        resource_version=str(meta.get("resourceVersion") or ""),
    )


_TOLERATIONS: dict[tuple[Any, ...], Toleration] = {}


def _tolerations(raw: Any) -> tuple[Toleration, ...]:
    """Tolerations of a pod dict. Built without re-validation (``model_construct``): the shapes
    come from the API server or from a snapshot checked at load (:mod:`reconciler.load.kubeshapes`);
    and memoised, since the pods of a fleet repeat a handful of tolerations (models are frozen)."""
    out = []
    for t in raw or ():
        secs = t.get("tolerationSeconds")
        key: tuple[Any, ...] = (t.get("key") or "", t.get("operator") or "Equal", str(t.get("value") or ""),
               t.get("effect") or "",
               int(secs) if secs is not None else None)
        hit = _TOLERATIONS.get(key)
        if hit is None:
            if len(_TOLERATIONS) > 4096:
                _TOLERATIONS.clear()
            hit = _TOLERATIONS[key] = Toleration.model_construct(
                key=key[0], operator=key[1], value=key[2], effect=key[3], tolerationSeconds=key[4])
        out.append(hit)
    return tuple(out)


def pod_from(obj: Obj) -> PodInfo:
    """A Pod dict → PodInfo (Ready from ``status.conditions``, emptyDir from ``spec.volumes``)."""
    meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    ready = False
    for c in status.get("conditions") or ():
        if c.get("type") == "Ready" and c.get("status") == "True":
            ready = True
            break
    owners = tuple([
        OwnerRef(o.get("kind", ""), o.get("name", ""), bool(o.get("controller", False)), o.get("apiVersion", ""),
                 o.get("uid", ""))
        for o in meta.get("ownerReferences") or ()
    ])
    emptydir = False
    for v in spec.get("volumes") or ():
        if "emptyDir" in v:
            emptydir = True
            break
    return PodInfo(
        namespace=meta.get("namespace") or "default",
        name=meta["name"],
        uid=str(meta.get("uid") or ""),
        node_name=spec.get("nodeName") or "",
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        phase=status.get("phase") or "Pending",
        ready=ready,
        owners=owners,
        emptydir=emptydir,
        deletion_ts=parse_time(meta.get("deletionTimestamp")),
        tolerations=_tolerations(spec.get("tolerations")),
        grace_seconds=int(spec.get("terminationGracePeriodSeconds", 30) or 0),
        start_time=parse_time(status.get("startTime")),
        active_deadline=spec.get("activeDeadlineSeconds"),
    )


def pdb_from(obj: Obj) -> PdbInfo:
    """A policy/v1 PodDisruptionBudget dict → PdbInfo."""
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
    )

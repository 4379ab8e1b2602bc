"""Turn an observed fleet (from any ``Cluster``) back into Kubernetes object dicts for the
simulated fleet, so ``reconciler simulate`` can rehearse against a real cluster's current state.

Only what the reconciler reads is kept (labels, annotations, taints, Ready, bootID, pod owners,
phases, emptyDir, deadlines, PDB selectors and budgets); DaemonSet existence is not observed, so
every DaemonSet that owns a pod is taken to exist.
"""

from __future__ import annotations

from typing import Any

from reconciler.adapters.kube.objects import format_time
from reconciler.model.observed import NodeCondition, NodeInfo, ObservedFleet, PdbInfo, PodInfo
from reconciler.model.vocab import UnhealthyPodEvictionPolicy
from reconciler.plan.drain import MANAGED_BY

Obj = dict[str, Any]


def _node(n: NodeInfo) -> Obj:
    spec: Obj = {}
    if n.unschedulable:
        spec["unschedulable"] = True
    if n.taints:
        spec["taints"] = [{"key": t.key, "value": t.value, "effect": t.effect} for t in n.taints]
    ready = n.condition("Ready") or NodeCondition("Ready", {True: "True", False: "False", None: "Unknown"}[n.ready])
    conditions: list[Obj] = []
    for c in (ready, *(c for c in n.conditions if c.type != "Ready")):
        obj: Obj = {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message}
        if c.since is not None:  # how long NotReady; whether a validation is newer than the work
            obj["lastTransitionTime"] = format_time(c.since)
        conditions.append(obj)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": n.name, "uid": n.uid or None, "labels": dict(n.labels),
                     "annotations": dict(n.annotations), "creationTimestamp": format_time(n.created or 0)},
        "spec": spec,
        "status": {"conditions": conditions, "nodeInfo": {"bootID": n.boot_id}},
    }


def _pod(p: PodInfo) -> Obj:
    meta: Obj = {"name": p.name, "namespace": p.namespace, "uid": p.uid, "labels": dict(p.labels),
                 "annotations": dict(p.annotations)}
    if p.owners:
        meta["ownerReferences"] = [{"kind": o.kind, "name": o.name, "controller": o.controller,
                                    "apiVersion": o.api_version, "uid": o.uid} for o in p.owners]
    if p.deletion_ts is not None:
        meta["deletionTimestamp"] = format_time(p.deletion_ts)
    spec: Obj = {"nodeName": p.node_name, "terminationGracePeriodSeconds": p.grace_seconds,
                 "containers": [{"name": "c", "image": "sim"}]}
    if p.emptydir:
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    if p.tolerations:
        spec["tolerations"] = [t.model_dump(exclude_none=True, exclude_defaults=True) | {"operator": t.operator}
                               for t in p.tolerations]
    if p.active_deadline is not None:
        spec["activeDeadlineSeconds"] = p.active_deadline
    status: Obj = {"phase": p.phase, "conditions": [{"type": "Ready", "status": "True" if p.ready else "False"}]}
    if p.start_time is not None:
        status["startTime"] = format_time(p.start_time)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def _pdb(b: PdbInfo) -> Obj:
    spec: Obj = {}
    if b.selector is not None:
        spec["selector"] = b.selector.model_dump(exclude_defaults=True)
    if b.min_available is not None:
        spec["minAvailable"] = b.min_available
    if b.max_unavailable is not None:
        spec["maxUnavailable"] = b.max_unavailable
    if b.unhealthy_pod_eviction_policy is not UnhealthyPodEvictionPolicy.IF_HEALTHY_BUDGET:
        spec["unhealthyPodEvictionPolicy"] = b.unhealthy_pod_eviction_policy.value
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": b.name, "namespace": b.namespace, "generation": 1}, "spec": spec}


def objects_from_observed(fleet: ObservedFleet) -> list[Obj]:
    """Nodes, pods and PDBs of ``fleet`` as Kubernetes dicts (see the module docstring)."""
    objs = [_node(n) for n in fleet.nodes.values()]
    for node in sorted(fleet.pods_by_node):
        objs += [_pod(p) for p in fleet.pods_on(node) if p.labels.get(MANAGED_BY[0]) != MANAGED_BY[1]]
    objs += [_pdb(b) for b in fleet.pdbs]
    for o in objs:
        if o["metadata"].get("uid") is None:
            o["metadata"].pop("uid", None)
    return objs

"""Generate simulated fleets as plain Kubernetes objects (kubectl YAML shape).

Used for ``examples/fleets/``, tests and benchmarks. Deterministic: the same arguments give the
same objects (UIDs derive from names, timestamps from ``start``).
"""

from __future__ import annotations

import io
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from reconciler.adapters.kube.objects import format_time

Obj = dict[str, Any]
START = 1795000000.0  # 2026-11-17T...Z, a fixed instant so generated fleets are reproducible


def _uid(kind: str, name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"fleetgen/{kind}/{name}"))


def _metadata(name: str, namespace: str | None, uid: str, resource_version: str | None, created: float) -> Obj:
    """``metadata`` up to ``creationTimestamp`` (``created``, epoch seconds), in the API server's
    field order (name, namespace, uid, resourceVersion, creationTimestamp; the caller adds labels
    and the rest after it); ``namespace`` and ``resourceVersion`` only when given."""
    meta: Obj = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["uid"] = uid
    if resource_version is not None:
        meta["resourceVersion"] = resource_version
    meta["creationTimestamp"] = format_time(created)
    return meta


def make_node(name: str, labels: dict[str, str], *, created: float = START, annotations: dict[str, str] | None = None,
              unschedulable: bool = False, taints: list[Obj] | None = None, ready: bool | None = True,
              uid: str | None = None, boot_id: str | None = None, kubelet_labels: bool = True,
              resource_version: str | None = None, heartbeat: float | None = None,
              conditions: list[Obj] | None = None) -> Obj:
    """A Node object as ``kubectl get node -o yaml`` prints it (trimmed).

    ``uid`` and ``boot_id`` (``status.nodeInfo.bootID``) default to values derived from ``name``;
    ``ready`` None leaves out the Ready condition (a node the kubelet never reported, read as
    Unknown); ``kubelet_labels`` adds the labels the kubelet sets (``kubernetes.io/hostname``,
    ``kubernetes.io/os``) under ``labels``. ``created`` is epoch seconds, written at second
    precision (``creationTimestamp``). ``resource_version`` writes ``metadata.resourceVersion``
    (None: none, as in a file); ``heartbeat`` (epoch seconds) the Ready condition's
    ``lastHeartbeatTime`` (None: none); ``conditions`` are more ``status.conditions`` after Ready
    (dicts in the API's shape, e.g. an external validator's)."""
    conds: list[Obj] = [] if ready is None else [
        {"type": "Ready", "status": "True" if ready else "False",
         "reason": "KubeletReady" if ready else "KubeletNotReady", "lastTransitionTime": format_time(created)}]
    if conds and heartbeat is not None:
        conds[0]["lastHeartbeatTime"] = format_time(heartbeat)
    conds += conditions or ()
    meta = _metadata(name, None, _uid("node", name) if uid is None else uid, resource_version, created)
    meta["labels"] = ({"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **labels} if kubelet_labels
                      else dict(labels))
    node: Obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta,
        "spec": {"providerID": f"sim://{name}"},
        "status": {
            "conditions": conds,
            "nodeInfo": {"bootID": _uid("boot", name) if boot_id is None else boot_id, "kubeletVersion": "v1.36.3",
                         "osImage": "Ubuntu 24.04 LTS"},
        },
    }
    if annotations:
        node["metadata"]["annotations"] = dict(annotations)
    if unschedulable:
        node["spec"]["unschedulable"] = True
    if taints:
        node["spec"]["taints"] = taints
    return node


#: ``apiVersion`` of a pod's controller by its kind (anything else: ``apps/v1``).
_OWNER_API = {"Job": "batch/v1", "CronJob": "batch/v1", "Node": "v1", "ReplicationController": "v1"}


def make_pod(namespace: str, name: str, node: str, *, labels: dict[str, str] | None = None,
             owner: tuple[str, str] | None = None, phase: str = "Running", ready: bool | None = None,
             emptydir: bool = False, active_deadline: int | None = None, start: float | None = START,
             grace: int = 30, tolerations: list[Obj] | None = None, annotations: dict[str, str] | None = None,
             uid: str | None = None, deletion: float | None = None, resource_version: str | None = None) -> Obj:
    """A Pod object bound to ``node``; ``owner`` = (kind, name) of its controller.

    ``ready`` is the Ready condition (None: Ready when ``phase`` is Running); ``start`` is epoch
    seconds, the ``creationTimestamp`` and ``status.startTime`` (None: not started, no
    ``startTime``, created at :data:`START`); ``deletion`` sets ``metadata.deletionTimestamp``
    (epoch seconds: the pod is terminating); ``uid`` defaults to one derived from the name;
    ``resource_version`` writes ``metadata.resourceVersion`` (None: none).
    Times are written at second precision."""
    meta = _metadata(name, namespace, _uid("pod", f"{namespace}/{name}") if uid is None else uid, resource_version,
                     START if start is None else start)
    meta["labels"] = dict(labels or {})
    pod: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": grace,
            "containers": [{"name": "main", "image": "registry.example/app:1.0"}],
        },
        "status": {"phase": phase},
    }
    if start is not None:
        pod["status"]["startTime"] = format_time(start)
    pod["status"]["conditions"] = [
        {"type": "Ready", "status": "True" if (phase == "Running" if ready is None else ready) else "False"}]
    if annotations:
        pod["metadata"]["annotations"] = dict(annotations)
    if deletion is not None:
        pod["metadata"]["deletionTimestamp"] = format_time(deletion)
        pod["metadata"]["deletionGracePeriodSeconds"] = grace
    if owner:
        pod["metadata"]["ownerReferences"] = [{
            "apiVersion": _OWNER_API.get(owner[0], "apps/v1"),
            "kind": owner[0], "name": owner[1], "uid": _uid(owner[0], f"{namespace}/{owner[1]}"),
            "controller": True, "blockOwnerDeletion": True,
        }]
    if emptydir:
        pod["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    if active_deadline is not None:
        pod["spec"]["activeDeadlineSeconds"] = active_deadline
    if tolerations:
        pod["spec"]["tolerations"] = tolerations
    return pod


def make_pdb(namespace: str, name: str, match_labels: dict[str, str], *, min_available: int | str | None = None,
             max_unavailable: int | str | None = None, unhealthy_policy: str | None = None,
             disruptions_allowed: int | None = None, current_healthy: int | None = None,
             desired_healthy: int | None = None, expected_pods: int | None = None, generation: int = 1,
             resource_version: str | None = None) -> Obj:
    """A policy/v1 PodDisruptionBudget; ``unhealthy_policy`` is ``spec.unhealthyPodEvictionPolicy``
    (``IfHealthyBudget`` or ``AlwaysAllow``; None leaves it unset, which the API treats as the first).
    ``disruptions_allowed``, ``current_healthy``, ``desired_healthy`` and ``expected_pods`` write
    ``status.disruptionsAllowed``, ``currentHealthy``, ``desiredHealthy`` and ``expectedPods`` as
    the disruption controller would have (each None: not written; all None: no status yet, the
    simulated fleet computes its own from the pods). ``generation`` is ``metadata.generation``;
    ``resource_version`` writes ``metadata.resourceVersion`` (None: none)."""
    spec: Obj = {"selector": {"matchLabels": dict(match_labels)}}
    if unhealthy_policy is not None:
        spec["unhealthyPodEvictionPolicy"] = unhealthy_policy
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    meta: Obj = {"name": name, "namespace": namespace}
    if resource_version is not None:
        meta["resourceVersion"] = resource_version
    meta["generation"] = generation
    pdb: Obj = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta, "spec": spec}
    counts = {"disruptionsAllowed": disruptions_allowed, "currentHealthy": current_healthy,
              "desiredHealthy": desired_healthy, "expectedPods": expected_pods}
    status = {k: v for k, v in counts.items() if v is not None}
    if status:
        pdb["status"] = status
    return pdb


#: ``make_pdb``'s keyword for each ``spec`` field it writes (the selector is its own argument).
_PDB_SPEC_KEYWORDS = {"minAvailable": "min_available", "maxUnavailable": "max_unavailable",
                      "unhealthyPodEvictionPolicy": "unhealthy_policy"}


def pdb_keywords(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A PodDisruptionBudget ``spec`` in the API's field names, without the selector
    (``{"minAvailable": 2, "unhealthyPodEvictionPolicy": "AlwaysAllow"}``) → the keywords of
    :func:`make_pdb` that write it (``{"min_available": 2, "unhealthy_policy": "AlwaysAllow"}``).

    Raises:
        ValueError: a field :func:`make_pdb` does not write (the selector among them).
    """
    unknown = sorted(set(spec) - set(_PDB_SPEC_KEYWORDS))
    if unknown:
        raise ValueError(f"make_pdb writes only {sorted(_PDB_SPEC_KEYWORDS)} of a PDB spec, not {unknown}")
    return {_PDB_SPEC_KEYWORDS[k]: v for k, v in spec.items()}


def gpu_fleet(nodes_per_zone: int = 12, zones: tuple[str, ...] = ("us-east-1a", "us-east-1b"),
              training_every: int = 5, training_seconds: int = 1800, inference_replicas: int = 6,
              cpu_nodes: int = 2) -> list[Obj]:
    """A GPU fleet: ``nodes_per_zone`` H100 nodes per zone (label ``nodepool: gpu``), DaemonSet pods
    on every node, a non-interruptible training pod (``workload: long-running-training``, ends
    after ``training_seconds``) on every ``training_every``-th node, an ``inference`` Deployment
    spread over the fleet with a PDB (maxUnavailable 1), a finished Job pod, and ``cpu_nodes``
    nodes outside the GPU pool."""
    objs: list[Obj] = []
    names: list[str] = []
    for zi, zone in enumerate(zones):
        for i in range(nodes_per_zone):
            name = f"gpu-{zone[-1]}-{i + 1:03d}"
            names.append(name)
            objs.append(make_node(name, {
                "nodepool": "gpu",
                "topology.kubernetes.io/zone": zone,
                "node.kubernetes.io/instance-type": "p5.48xlarge",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            }, created=START + zi * 100 + i))
    for i in range(cpu_nodes):
        objs.append(make_node(f"cpu-{i + 1:03d}", {"nodepool": "cpu", "topology.kubernetes.io/zone": zones[0]},
                              created=START + 1000 + i))
    pods: list[Obj] = []
    for name in names:
        pods.append(make_pod("gpu-operator", f"nvidia-device-plugin-{name}", name,
                             labels={"app": "nvidia-device-plugin"},
                             owner=("DaemonSet", "nvidia-device-plugin"),
                             tolerations=[{"operator": "Exists"}]))
        pods.append(make_pod("monitoring", f"node-exporter-{name}", name, labels={"app": "node-exporter"},
                             owner=("DaemonSet", "node-exporter"), tolerations=[{"operator": "Exists"}]))
    for i, name in enumerate(names):
        if training_every and i % training_every == 0:
            pods.append(make_pod("ml", f"train-llm-{i:03d}", name,
                                 labels={"workload": "long-running-training", "job-name": f"train-llm-{i:03d}"},
                                 owner=("Job", f"train-llm-{i:03d}"), active_deadline=training_seconds,
                                 emptydir=True))
    for r in range(inference_replicas):
        node = names[(r * 3 + 1) % len(names)]
        pods.append(make_pod("serving", f"inference-7d9f8-{r:05d}", node, labels={"app": "inference"},
                             owner=("ReplicaSet", "inference-7d9f8")))
    pods.append(make_pod("batch", "report-28931-x7k2p", names[2], labels={"job-name": "report-28931"},
                         owner=("Job", "report-28931"), phase="Succeeded", ready=False, emptydir=True))
    objs += pods
    objs.append(make_pdb("serving", "inference", {"app": "inference"}, max_unavailable=1))
    return objs


def write_fleet(path: str | os.PathLike[str], objects: list[Obj]) -> str:
    """Write ``objects`` as a ``v1 List`` in kubectl YAML (what ``--cluster sim:PATH`` reads);
    returns the path as a string."""
    buf = io.StringIO()
    YAML(typ="safe", pure=True).dump({"apiVersion": "v1", "kind": "List", "items": objects}, buf)
    Path(path).write_text(buf.getvalue(), encoding="utf-8")
    return str(path)

"""Generate simulated fleets as plain Kubernetes objects (kubectl YAML shape).

Used for ``examples/fleets/``, tests and benchmarks. Deterministic: the same arguments give the
same objects (UIDs derive from names, timestamps from ``start``).
"""

from __future__ import annotations

import io
import os
import uuid
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from reconciler.adapters.kubeobjects import format_time

Obj = dict[str, Any]
START = 1795000000.0  # 2026-11-17T...Z, a fixed instant so generated fleets are reproducible


def _uid(kind: str, name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"fleetgen/{kind}/{name}"))


def make_node(name: str, labels: dict[str, str], *, created: float = START, annotations: dict[str, str] | None = None,
              unschedulable: bool = False, taints: list[Obj] | None = None, ready: bool = True) -> Obj:
    """A Node object as ``kubectl get node -o yaml`` prints it (trimmed)."""
    node: Obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": _uid("node", name),
            "creationTimestamp": format_time(created),
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **labels},
        },
        "spec": {"providerID": f"sim://{name}"},
        "status": {
            "conditions": [{"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady",
                            "lastTransitionTime": format_time(created)}],
            "nodeInfo": {"bootID": _uid("boot", name), "kubeletVersion": "v1.36.3", "osImage": "Ubuntu 24.04 LTS"},
        },
    }
    if annotations:
        node["metadata"]["annotations"] = dict(annotations)
    if unschedulable:
        node["spec"]["unschedulable"] = True
    if taints:
        node["spec"]["taints"] = taints
    return node


def make_pod(namespace: str, name: str, node: str, *, labels: dict[str, str] | None = None,
             owner: tuple[str, str] | None = None, phase: str = "Running", ready: bool = True,
             emptydir: bool = False, active_deadline: int | None = None, start: float = START,
             grace: int = 30, tolerations: list[Obj] | None = None) -> Obj:
    """A Pod object bound to ``node``; ``owner`` = (kind, name) of its controller."""
    pod: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": _uid("pod", f"{namespace}/{name}"),
            "creationTimestamp": format_time(start),
            "labels": dict(labels or {}),
        },
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": grace,
            "containers": [{"name": "main", "image": "registry.example/app:1.0"}],
        },
        "status": {
            "phase": phase,
            "startTime": format_time(start),
            "conditions": [{"type": "Ready", "status": "True" if ready and phase == "Running" else "False"}],
        },
    }
    if owner:
        pod["metadata"]["ownerReferences"] = [{
            "apiVersion": "apps/v1" if owner[0] != "Job" else "batch/v1",
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
             max_unavailable: int | str | None = None, unhealthy_policy: str | None = None) -> Obj:
    """A policy/v1 PodDisruptionBudget; ``unhealthy_policy`` is ``spec.unhealthyPodEvictionPolicy``
    (``IfHealthyBudget`` or ``AlwaysAllow``; None leaves it unset, which the API treats as the first)."""
    spec: Obj = {"selector": {"matchLabels": dict(match_labels)}}
    if unhealthy_policy is not None:
        spec["unhealthyPodEvictionPolicy"] = unhealthy_policy
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace, "generation": 1}, "spec": spec}


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

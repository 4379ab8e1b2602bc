"""Regenerate the bad fleet-snapshot corpus: ``python tests/data/bad/snapshots/generate.py``.

Each case is one valid small fleet (3 GPU nodes, DaemonSet/training/inference/Job pods, a PDB: the
shape of ``examples/fleets/gpu-24.yaml``) with one thing wrong, written as kubectl YAML or JSON; the
``simconfig-*`` cases are ``--sim-config`` files used with the valid fleet. YAML cases carry their
description in a comment header, other formats in ``NAME.meta`` next to them:

    # checks: what the input gets wrong
    # expect: a piece of the error message it must produce
    # where: the object and field the message must name (optional)

``tests/unit/reliability/test_bad_snapshots.py`` runs them all.
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = next(p for p in HERE.parents if (p / "pyproject.toml").is_file())
sys.path.insert(0, str(ROOT))

from reconciler.adapters.sim.saved import CLOCK_NAME, SIM_ANN, STAGE_NS  # noqa: E402
from reconciler.adapters.sim.write import dumps_list  # noqa: E402
from reconciler.testing.fleetgen import gpu_fleet  # noqa: E402

Obj = dict[str, Any]
Mut = Callable[[list[Obj]], None]
# indices in base(): nodes 0-2, pods 3-12 (9: ml/train-llm-000, 10-11: serving/inference-*), 13: the PDB
N0, N1, POD, TRAIN, INF, PDB = 0, 1, 3, 9, 10, 13


def base() -> list[Obj]:
    """The valid fleet every case starts from."""
    return gpu_fleet(nodes_per_zone=3, zones=("us-east-1a",), cpu_nodes=0, inference_replicas=2)


def saved() -> list[Obj]:
    """A valid saved simulated fleet: a rebooting node, a terminating pod, a running stage pod, the clock."""
    objs = base()
    objs[N1]["metadata"].setdefault("annotations", {})[SIM_ANN] = json.dumps({"rebootUpAt": 1795000100.0})
    objs[INF]["metadata"].setdefault("annotations", {})[SIM_ANN] = json.dumps({"removeAt": 1795000050.0})
    state = {"recipe": "gpu-training-tuning", "package": "nvidia-tuned", "version": "1.2.0", "stage": "apply",
             "runId": "r1", "attempt": 1, "pullRef": "ghcr.io/x/tuned:1.2.0", "interrupt": None,
             "phase": "running", "exit": None, "reason": "", "log": "", "started": 1795000000.0,
             "doneAt": 1795000030.0, "pendingExit": 0, "pendingReason": "", "pendingLog": ""}
    objs.append({"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"namespace": STAGE_NS, "name": "stage-gpu-a-001-apply",
                              "labels": {"app.kubernetes.io/managed-by": "node-reconciler"},
                              "annotations": {SIM_ANN: json.dumps(state, sort_keys=True)}},
                 "spec": {"nodeName": "gpu-a-001", "containers": [{"name": "pause", "image": "pause"}]}})
    objs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": CLOCK_NAME[0],
                                                                        "name": CLOCK_NAME[1]},
                 "data": {"now": "1795000010.0", "uids": "40"}})
    return objs


STAGE = len(base())  # index of the stage pod in saved()
CLOCK = STAGE + 1


def setp(i: int, path: str | tuple[str, ...], value: Any, *,
         start: Callable[[], list[Obj]] = base) -> Callable[[], list[Obj]]:
    """A case: ``objects[i]`` with ``path`` (dotted, or a tuple of keys) set to ``value`` (``<del>`` removes it)."""
    def make() -> list[Obj]:
        objs = start()
        cur: Any = objs[i]
        keys = list(path) if isinstance(path, tuple) else path.split(".")
        for k in keys[:-1]:
            cur = cur[int(k)] if isinstance(cur, list) else cur.setdefault(k, {})
        last = keys[-1]
        if value == "<del>":
            del cur[last]
        elif isinstance(cur, list):
            cur[int(last)] = value
        else:
            cur[last] = value
        return objs
    return make


def with_(fn: Mut, start: Callable[[], list[Obj]] = base) -> Callable[[], list[Obj]]:
    """A case: the base fleet changed by ``fn``."""
    def make() -> list[Obj]:
        objs = start()
        fn(objs)
        return objs
    return make


def stage_state(**changes: Any) -> Callable[[], list[Obj]]:
    """A saved fleet whose stage pod's state has ``changes`` (a value ``<del>`` removes the key)."""
    def fn(objs: list[Obj]) -> None:
        ann = objs[STAGE]["metadata"]["annotations"]
        st = json.loads(ann[SIM_ANN])
        for k, v in changes.items():
            if v == "<del>":
                st.pop(k)
            else:
                st[k] = v
        ann[SIM_ANN] = json.dumps(st)
    return with_(fn, saved)


def dup(i: int) -> Mut:
    """Append a copy of ``objects[i]`` (same kind and name)."""
    return lambda objs: objs.append(copy.deepcopy(objs[i]))


BIG = "x" * (257 * 1024)


def bomb(levels: int) -> bytes:
    """A "billion laughs" YAML: each of ``levels`` anchors lists the previous one ten times."""
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        prev, cur = chr(96 + i), chr(97 + i)
        lines.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 10) + "]")
    return ("\n".join(lines) + "\n").encode()

# name: (builder, format, checks, expect, where)
CASES: dict[str, tuple[Any, str, str, str, str]] = {
    # --- node names and metadata
    "node-name-number": (setp(N0, "metadata.name", 123), "yaml", "a node whose name YAML reads as a number",
                         "must be a string, not the number 123", "items[0] (Node) metadata.name"),
    "node-name-uppercase": (setp(N0, "metadata.name", "GPU_A_001"), "yaml", "a node name that is not a DNS subdomain",
                            "is not a valid name", "items[0] (Node/GPU_A_001) metadata.name"),
    "node-name-too-long": (setp(N0, "metadata.name", "a" * 254), "json", "a node name of 254 characters",
                           "longer than 253", "items[0]"),
    "node-name-trailing-newline": (setp(N0, "metadata.name", "gpu-a-001\n"), "json",
                                   "a node name with a trailing newline", "is not a valid name",
                                   "items[0] (Node/gpu-a-001\\n) metadata.name"),
    "node-name-slash": (setp(N0, "metadata.name", "gpu/a"), "yaml", "a node name with a slash",
                        "is not a valid name", "items[0] (Node/gpu/a) metadata.name"),
    "node-name-null": (setp(N0, "metadata.name", None), "yaml", "a node whose name is null",
                       "must be a string, not null", "items[0] (Node) metadata.name"),
    "node-name-missing": (setp(N0, "metadata.name", "<del>"), "yaml", "a nameless node",
                          "missing required field", "items[0] (Node) metadata.name"),
    "node-metadata-missing": (setp(N0, "metadata", "<del>"), "json", "a node without metadata",
                              "missing required field", "items[0] (Node) metadata"),
    "node-metadata-list": (setp(N0, "metadata", ["gpu-a-001"]), "yaml", "metadata given as a list",
                           "must be a mapping, not a list", "items[0] (Node) metadata"),
    "node-duplicate-name": (with_(dup(N1)), "yaml", "two nodes with the same name (silently merged before)",
                            "a second Node named gpu-a-002", "items[14] (Node/gpu-a-002) metadata.name"),
    "node-uid-map": (setp(N0, "metadata.uid", {"a": 1}), "yaml", "a uid that is a mapping",
                     "must be a string, not a mapping", "metadata.uid"),
    "node-resourceversion-number": (setp(N0, "metadata.resourceVersion", 17), "yaml",
                                    "a resourceVersion YAML reads as a number", "must be a string, not the number 17",
                                    "metadata.resourceVersion"),
    "node-resourceversion-text": (setp(N0, "metadata.resourceVersion", "latest"), "json",
                                  "a resourceVersion that is not decimal", "is not a resourceVersion",
                                  "metadata.resourceVersion"),
    "node-creation-timestamp-bad": (setp(N0, "metadata.creationTimestamp", "yesterday"), "yaml",
                                    "a creationTimestamp that is not RFC 3339", "is not an RFC 3339 time",
                                    "metadata.creationTimestamp"),
    "node-creation-timestamp-month-13": (setp(N0, "metadata.creationTimestamp", "2026-13-01T00:00:00Z"), "json",
                                         "a timestamp with month 13", "is not an RFC 3339 time",
                                         "metadata.creationTimestamp"),
    # --- labels and annotations
    "node-labels-list": (setp(N0, "metadata.labels", ["nodepool=gpu"]), "yaml", "labels written as a list",
                         "must be a mapping, not a list", "items[0] (Node/gpu-a-001) metadata.labels"),
    "node-labels-string": (setp(N0, "metadata.labels", "nodepool=gpu"), "json", "labels written as a string",
                           "must be a mapping, not the string", "metadata.labels"),
    "node-label-key-space": (setp(N0, "metadata.labels.bad key", "x"), "yaml", "a label key with a space",
                             "is not a valid key", 'metadata.labels["bad key"]'),
    "node-label-key-empty-name": (setp(N0, ("metadata", "labels", "example.com/"), "x"), "yaml",
                                  "a label key with a prefix and no name", "is not a valid key",
                                  'metadata.labels["example.com/"]'),
    "node-label-prefix-too-long": (setp(N0, ("metadata", "labels", "a" * 254 + "/x"), "v"), "json",
                                   "a label key prefix of 254 characters", "prefix is longer than 253",
                                   "metadata.labels"),
    "node-label-value-space": (setp(N0, "metadata.labels.nodepool", "gpu pool"), "yaml", "a label value with a space",
                               "is not a valid label value", "metadata.labels.nodepool"),
    "node-label-value-number": (setp(N0, "metadata.labels.rack", 7), "yaml", "a label value YAML reads as a number",
                                "must be a string, not the number 7; quote it", "metadata.labels.rack"),
    "node-label-value-bool": (setp(N0, "metadata.labels.gpu", True), "yaml", "a label value YAML reads as a boolean",
                              "must be a string, not the boolean true", "metadata.labels.gpu"),
    "node-label-value-too-long": (setp(N0, "metadata.labels.nodepool", "g" * 64), "json",
                                  "a label value of 64 characters", "longer than 63", "metadata.labels.nodepool"),
    "node-label-value-newline": (setp(N0, "metadata.labels.nodepool", "gpu\n"), "json",
                                 "a label value with a trailing newline", "is not a valid label value",
                                 "metadata.labels.nodepool"),
    "node-annotation-state-as-map": (
        setp(N0, ("metadata", "annotations", "reconciler.nodewright.dev/nodeState_gpu-training-tuning"),
             {"nvidia-tuned|1.2.0": {"name": "nvidia-tuned", "version": "1.2.0", "stage": "config",
                                     "state": "complete"}}), "yaml",
        "a node-state annotation written as a map instead of a JSON string", "must be a string, not a mapping",
        'metadata.annotations["reconciler.nodewright.dev/nodeState_gpu-training-tuning"]'),
    "node-annotation-number": (setp(N0, ("metadata", "annotations", "example.com/rack"), 12), "yaml",
                               "an annotation value that is a number", "must be a string, not the number 12",
                               'metadata.annotations["example.com/rack"]'),
    "node-annotation-key-bad": (setp(N0, ("metadata", "annotations", "-bad-/key"), "v"), "yaml",
                                "an annotation key that is not a qualified name", "is not a valid annotation key",
                                "metadata.annotations"),
    "node-annotations-over-256k": (setp(N0, ("metadata", "annotations", "example.com/blob"), BIG), "json",
                                   "annotations over Kubernetes' 256 KiB total", "256 KiB",
                                   "items[0] (Node/gpu-a-001) metadata.annotations"),
    "node-annotations-list": (setp(N0, "metadata.annotations", ["a=b"]), "yaml", "annotations written as a list",
                              "must be a mapping, not a list", "metadata.annotations"),
    # --- taints, conditions, spec, status
    "node-taint-without-key": (setp(N0, "spec.taints", [{"effect": "NoSchedule", "value": "x"}]), "yaml",
                               "a taint without a key", "missing required field", "spec.taints[0].key"),
    "node-taint-without-effect": (setp(N0, "spec.taints", [{"key": "dedicated"}]), "yaml", "a taint without an effect",
                                  "missing required field", "spec.taints[0].effect"),
    "node-taint-bad-effect": (setp(N0, "spec.taints", [{"key": "dedicated", "effect": "NoScheduled"}]), "yaml",
                              "a taint effect Kubernetes does not have", "'NoScheduled' is not allowed",
                              "spec.taints[0].effect"),
    "node-taint-bad-key": (setp(N0, "spec.taints", [{"key": "a b", "effect": "NoSchedule"}]), "json",
                           "a taint key that is not a qualified name", "is not a valid key", "spec.taints[0].key"),
    "node-taint-bad-value": (setp(N0, "spec.taints", [{"key": "a", "value": "x y", "effect": "NoSchedule"}]), "yaml",
                             "a taint value that is not a label value", "is not a valid label value",
                             "spec.taints[0].value"),
    "node-taint-duplicate": (setp(N0, "spec.taints", [{"key": "a", "effect": "NoSchedule"},
                                                      {"key": "a", "value": "2", "effect": "NoSchedule"}]), "yaml",
                             "two taints with the same key and effect", "two taints with key 'a'", "spec.taints"),
    "node-taints-map": (setp(N0, "spec.taints", {"key": "a", "effect": "NoSchedule"}), "yaml",
                        "taints written as a mapping", "must be a list, not a mapping", "spec.taints"),
    "node-taint-string": (setp(N0, "spec.taints", ["dedicated=gpu:NoSchedule"]), "yaml",
                          "a taint in kubectl's key=value:Effect text form", "must be a mapping, not the string",
                          "spec.taints[0]"),
    "node-conditions-string": (setp(N0, "status.conditions", "Ready"), "yaml", "conditions written as a string",
                               "must be a list, not the string 'Ready'", "items[0] (Node/gpu-a-001) status.conditions"),
    "node-condition-status-yes": (setp(N0, "status.conditions.0.status", "Yes"), "yaml",
                                  "a condition status other than True/False/Unknown", "'Yes' is not allowed",
                                  "status.conditions[0].status"),
    "node-condition-status-bool": (setp(N0, "status.conditions.0.status", True), "yaml",
                                   "a condition status YAML reads as a boolean (unquoted True)",
                                   "the boolean true is not allowed", "status.conditions[0].status"),
    "node-condition-without-type": (setp(N0, "status.conditions.0.type", "<del>"), "json",
                                    "a condition without a type", "missing required field",
                                    "status.conditions[0].type"),
    "node-unschedulable-string": (setp(N0, "spec.unschedulable", "true"), "json", "unschedulable as a string",
                                  "must be true or false, not the string 'true'", "spec.unschedulable"),
    "node-bootid-number": (setp(N0, "status.nodeInfo.bootID", 42), "yaml", "a bootID that is a number",
                           "must be a string, not the number 42", "status.nodeInfo.bootID"),
    "node-spec-list": (setp(N0, "spec", []), "yaml", "spec written as a list", "must be a mapping, not a list",
                       "items[0] (Node/gpu-a-001) spec"),
    "node-status-string": (setp(N0, "status", "Ready"), "json", "status written as a string",
                           "must be a mapping, not the string", "items[0] (Node/gpu-a-001) status"),
    "node-nodeinfo-list": (setp(N0, "status.nodeInfo", []), "yaml", "nodeInfo written as a list",
                           "must be a mapping, not a list", "status.nodeInfo"),
    # --- kinds and layout
    "kind-node-lowercase": (setp(N0, "kind", "node"), "yaml", "kind written in lowercase",
                            "did you mean Node", "items[0] (node/gpu-a-001) kind"),
    "kind-nodes-plural": (setp(N0, "kind", "Nodes"), "json", "kind written in plural", "did you mean Node", "items[0]"),
    "kind-pdb-short": (setp(PDB, "kind", "pdb"), "yaml", "the kubectl short name as kind",
                       "did you mean PodDisruptionBudget", "items[13]"),
    "kind-missing": (setp(N0, "kind", "<del>"), "yaml", "an object without kind", "missing required field",
                     "items[0] (object/gpu-a-001) kind"),
    "kind-number": (setp(N0, "kind", 7), "yaml", "a kind that is a number", "must be a non-empty string", "items[0]"),
    "kind-nested-list": (with_(lambda o: o.append({"apiVersion": "v1", "kind": "List", "items": []})), "yaml",
                         "a List inside the List", "a List inside a List", "items[14]"),
    "apiversion-node-apps": (setp(N0, "apiVersion", "apps/v1"), "yaml", "a Node with apiVersion apps/v1",
                             "'apps/v1' is not allowed", "items[0] (Node/gpu-a-001) apiVersion"),
    "apiversion-missing": (setp(N0, "apiVersion", "<del>"), "json", "a Node without apiVersion",
                           "missing required field", "items[0] (Node/gpu-a-001) apiVersion"),
    "apiversion-pdb-v2": (setp(PDB, "apiVersion", "policy/v2"), "yaml", "a PDB apiVersion that does not exist",
                          "'policy/v2' is not allowed", "items[13] (PodDisruptionBudget/serving/inference) apiVersion"),
    "apiversion-daemonset-extensions": (with_(lambda o: o.append({"apiVersion": "extensions/v1beta1",
                                                                  "kind": "DaemonSet", "metadata": {
                                                                      "name": "node-exporter",
                                                                      "namespace": "monitoring"}})), "yaml",
                                        "a DaemonSet of a removed API group", "is not allowed",
                                        "items[14] (DaemonSet/monitoring/node-exporter) apiVersion"),
    "item-not-mapping": (with_(lambda o: o.insert(1, "gpu-a-009")), "yaml", "a List item that is a string",
                         "is the string 'gpu-a-009', not a Kubernetes object", "items[1]"),
    "item-null": (with_(lambda o: o.insert(2, None)), "json", "a List item that is null",
                  "is null, not a Kubernetes object", "items[2]"),
    "no-nodes": (with_(lambda o: o.__delitem__(slice(0, 3))), "yaml", "pods and a PDB but no Node",
                 "holds no Node objects", ""),
    # --- pods
    "pod-duplicate": (with_(dup(TRAIN)), "yaml", "two pods with the same namespace and name",
                      "a second Pod named ml/train-llm-000", "items[14] (Pod/ml/train-llm-000) metadata.name"),
    "pod-same-name-other-namespace-and-duplicate": (
        with_(lambda o: (o.append(dict(copy.deepcopy(o[TRAIN]), metadata=dict(o[TRAIN]["metadata"],
                                                                               namespace="ml2"))),
                         o.append(copy.deepcopy(o[TRAIN])))), "json",
        "the same pod name in two namespaces (fine) and twice in one (not)", "a second Pod named ml/train-llm-000",
        "items[15]"),
    "pod-name-missing": (setp(TRAIN, "metadata.name", "<del>"), "yaml", "a nameless pod", "missing required field",
                         "items[9] (Pod) metadata.name"),
    "pod-namespace-bad": (setp(TRAIN, "metadata.namespace", "ML_Team"), "yaml", "a namespace that is not a DNS label",
                          "is not a valid namespace", "items[9] (Pod/ML_Team/train-llm-000) metadata.namespace"),
    "pod-grace-forever": (setp(TRAIN, "spec.terminationGracePeriodSeconds", "forever"), "yaml",
                          "a grace period of forever", "must be an integer, not the string 'forever'",
                          "items[9] (Pod/ml/train-llm-000) spec.terminationGracePeriodSeconds"),
    "pod-grace-negative": (setp(TRAIN, "spec.terminationGracePeriodSeconds", -5), "yaml", "a negative grace period",
                           "greater than or equal to 0", "spec.terminationGracePeriodSeconds"),
    "pod-grace-float": (setp(TRAIN, "spec.terminationGracePeriodSeconds", 30.5), "json", "a fractional grace period",
                        "must be an integer, not the number 30.5", "spec.terminationGracePeriodSeconds"),
    "pod-grace-huge": (setp(TRAIN, "spec.terminationGracePeriodSeconds", 2**63), "json",
                       "a grace period beyond int64", "outside int64", ""),
    "pod-deadline-zero": (setp(TRAIN, "spec.activeDeadlineSeconds", 0), "yaml", "activeDeadlineSeconds 0",
                          "greater than or equal to 1", "spec.activeDeadlineSeconds"),
    "pod-phase-bad": (setp(TRAIN, "status.phase", "Runing"), "yaml", "a pod phase Kubernetes does not have",
                      "'Runing' is not allowed", "status.phase"),
    "pod-toleration-exists-with-value": (setp(POD, "spec.tolerations", [{"key": "a", "operator": "Exists",
                                                                         "value": "x"}]), "yaml",
                                         "a toleration Exists with a value", "value must be empty when operator is "
                                         "Exists", "spec.tolerations[0]"),
    "pod-toleration-no-key-equal": (setp(POD, "spec.tolerations", [{"operator": "Equal", "value": "x"}]), "yaml",
                                    "a toleration without key and operator Equal",
                                    "operator must be Exists when key is empty", "spec.tolerations[0]"),
    "pod-toleration-operator-in": (setp(POD, "spec.tolerations", [{"key": "a", "operator": "In"}]), "yaml",
                                   "a toleration operator of label selectors", "'In' is not allowed",
                                   "spec.tolerations[0].operator"),
    "pod-toleration-seconds-noschedule": (setp(POD, "spec.tolerations", [{"key": "a", "operator": "Exists",
                                                                          "effect": "NoSchedule",
                                                                          "tolerationSeconds": 30}]), "yaml",
                                          "tolerationSeconds with effect NoSchedule",
                                          "only allowed with effect NoExecute", "spec.tolerations[0]"),
    "pod-tolerations-map": (setp(POD, "spec.tolerations", {"operator": "Exists"}), "json",
                            "tolerations written as a mapping", "must be a list, not a mapping", "spec.tolerations"),
    "pod-owner-without-kind": (setp(TRAIN, "metadata.ownerReferences.0.kind", "<del>"), "yaml",
                               "an ownerReference without kind", "missing required field",
                               "metadata.ownerReferences[0].kind"),
    "pod-owners-map": (setp(TRAIN, "metadata.ownerReferences", {"kind": "Job", "name": "x"}), "yaml",
                       "ownerReferences written as a mapping", "must be a list, not a mapping",
                       "metadata.ownerReferences"),
    "pod-owner-controller-string": (setp(TRAIN, "metadata.ownerReferences.0.controller", "yes"), "yaml",
                                    "controller: yes (a string in YAML 1.2)", "must be true or false",
                                    "metadata.ownerReferences[0].controller"),
    "pod-nodename-bad": (setp(TRAIN, "spec.nodeName", "GPU A 001"), "yaml", "a nodeName that is not a node name",
                         "is not a valid node name", "spec.nodeName"),
    "pod-volumes-string": (setp(TRAIN, "spec.volumes", "scratch"), "yaml", "volumes written as a string",
                           "must be a list, not the string", "spec.volumes"),
    "pod-conditions-map": (setp(TRAIN, "status.conditions", {"Ready": "True"}), "yaml",
                           "pod conditions written as a mapping", "must be a list, not a mapping",
                           "status.conditions"),
    "pod-starttime-bad": (setp(TRAIN, "status.startTime", "2026-11-18 11:06"), "yaml", "a startTime without seconds",
                          "is not an RFC 3339 time", "status.startTime"),
    "pod-labels-list": (setp(INF, "metadata.labels", ["app=inference"]), "yaml", "pod labels as a list",
                        "must be a mapping, not a list", "items[10] (Pod/serving/inference-7d9f8-00000) "
                        "metadata.labels"),
    # --- PodDisruptionBudgets
    "pdb-max-unavailable-abc-percent": (setp(PDB, "spec.maxUnavailable", "abc%"), "yaml",
                                        "maxUnavailable: \"abc%\"", "is not a percentage from 0% to 100%",
                                        "items[13] (PodDisruptionBudget/serving/inference) spec.maxUnavailable"),
    "pdb-unhealthy-policy-unknown": (setp(PDB, "spec.unhealthyPodEvictionPolicy", "Sometimes"), "yaml",
                                     "an unhealthyPodEvictionPolicy kube-apiserver does not have",
                                     "input should be 'IfHealthyBudget' or 'AlwaysAllow'",
                                     "items[13] (PodDisruptionBudget/serving/inference) "
                                     "spec.unhealthyPodEvictionPolicy"),
    "pdb-min-available-150-percent": (setp(PDB, "spec.minAvailable", "150%"), "yaml",
                                      "a percentage over 100", "percentage from 0% to 100%", "spec.minAvailable"),
    "pdb-min-available-digit-string": (setp(PDB, "spec.maxUnavailable", "1"), "json",
                                       "an int-or-string that is a digit string, not a percent",
                                       "'1' is not a percentage", "spec.maxUnavailable"),
    "pdb-max-unavailable-negative": (setp(PDB, "spec.maxUnavailable", -1), "yaml", "a negative maxUnavailable",
                                     "-1 must be between 0 and", "spec.maxUnavailable"),
    "pdb-max-unavailable-float": (setp(PDB, "spec.maxUnavailable", 0.5), "yaml", "a fractional maxUnavailable",
                                  "must be an integer or a percentage string", "spec.maxUnavailable"),
    "pdb-both-set": (setp(PDB, "spec.minAvailable", 1), "yaml", "minAvailable and maxUnavailable both set",
                     "cannot be both set", "spec"),
    "pdb-operator-unknown": (setp(PDB, "spec.selector", {"matchExpressions": [{"key": "app", "operator": "Equals",
                                                                              "values": ["x"]}]}), "yaml",
                             "a matchExpressions operator Kubernetes does not have", "'Equals' is not allowed",
                             "spec.selector.matchExpressions[0].operator"),
    "pdb-operator-gt": (setp(PDB, "spec.selector", {"matchExpressions": [{"key": "app", "operator": "Gt",
                                                                         "values": ["1"]}]}), "json",
                        "Gt (a node-affinity operator, not a label selector one)", "'Gt' is not allowed",
                        "spec.selector.matchExpressions[0].operator"),
    "pdb-in-without-values": (setp(PDB, "spec.selector", {"matchExpressions": [{"key": "app", "operator": "In"}]}),
                              "yaml", "operator In without values", "needs at least one value",
                              "spec.selector.matchExpressions[0]"),
    "pdb-exists-with-values": (setp(PDB, "spec.selector", {"matchExpressions": [{"key": "app", "operator": "Exists",
                                                                                "values": ["x"]}]}), "yaml",
                               "operator Exists with values", "takes no values", "spec.selector.matchExpressions[0]"),
    "pdb-expression-value-bad": (setp(PDB, "spec.selector", {"matchExpressions": [{"key": "app", "operator": "In",
                                                                                  "values": ["a b"]}]}), "yaml",
                                 "a selector value that is not a label value", "is not a valid label value",
                                 "spec.selector.matchExpressions[0].values[0]"),
    "pdb-selector-string": (setp(PDB, "spec.selector", "app=inference"), "yaml", "a selector written as a string",
                            "must be a mapping, not the string", "spec.selector"),
    "pdb-matchlabels-bad-value": (setp(PDB, "spec.selector.matchLabels.app", "in ference"), "yaml",
                                  "a matchLabels value with a space", "is not a valid label value",
                                  "spec.selector.matchLabels.app"),
    "pdb-status-negative": (setp(PDB, "status", {"disruptionsAllowed": -1}), "yaml", "a negative disruptionsAllowed",
                            "greater than or equal to 0", "status.disruptionsAllowed"),
    "pdb-duplicate": (with_(dup(PDB)), "yaml", "two PDBs with the same namespace and name",
                      "a second PodDisruptionBudget named serving/inference", "items[14]"),
    # --- ConfigMaps (recipe controls)
    "configmap-data-number": (with_(lambda o: o.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "namespace": "node-reconciler", "name": "controls"}, "data": {"paused": 1}})), "yaml",
        "ConfigMap data value that is a number", "must be a string, not the number 1", "data.paused"),
    "configmap-key-slash": (with_(lambda o: o.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "namespace": "node-reconciler", "name": "controls"}, "data": {"../etc/x": "1"}})), "yaml",
        "a ConfigMap key with a path", "is not a valid ConfigMap key", "data"),
    # --- saved simulated fleet (--sim-save) state
    "saved-node-state-not-json": (with_(lambda o: o[N1]["metadata"]["annotations"].__setitem__(SIM_ANN, "{reboot"),
                                        saved), "yaml", "a saved-simulation annotation that is not JSON",
                                  "saved simulation state is not JSON", "items[1] (Node/gpu-a-002) "
                                  'metadata.annotations["sim.reconciler.nodewright.dev/state"]'),
    "saved-node-reboot-string": (with_(lambda o: o[N1]["metadata"]["annotations"].__setitem__(
        SIM_ANN, '{"rebootUpAt": "soon"}'), saved), "yaml", "a saved reboot time that is a string",
        "rebootUpAt: must be a number", "items[1] (Node/gpu-a-002)"),
    "saved-node-state-array": (with_(lambda o: o[N1]["metadata"]["annotations"].__setitem__(SIM_ANN, "[1, 2]"),
                                     saved), "json", "a saved-simulation annotation that is a JSON array",
                               "must be a mapping, not a list", "items[1] (Node/gpu-a-002)"),
    "saved-node-state-infinity": (with_(lambda o: o[N1]["metadata"]["annotations"].__setitem__(
        SIM_ANN, '{"rebootUpAt": Infinity}'), saved), "yaml", "a saved reboot time of Infinity",
        "rebootUpAt", "items[1] (Node/gpu-a-002)"),
    "saved-pod-timer-unknown": (with_(lambda o: o[INF]["metadata"]["annotations"].__setitem__(
        SIM_ANN, '{"removeAfter": 5}'), saved), "yaml", "an unknown saved pod timer", "unknown field",
        "items[10] (Pod/serving/inference-7d9f8-00000)"),
    "saved-stage-missing-recipe": (stage_state(recipe="<del>"), "yaml", "a saved stage pod without its recipe",
                                   "recipe: missing required field", "items[14] (Pod/node-reconciler/"),
    "saved-stage-bad-stage": (stage_state(stage="apply-check"), "yaml", "a saved stage that is not a stage",
                              "stage: the string 'apply-check' is not allowed", "items[14]"),
    "saved-stage-attempt-string": (stage_state(attempt="1"), "json", "a saved attempt written as a string",
                                   "attempt: must be an integer", "items[14]"),
    "saved-stage-bad-phase": (stage_state(phase="done"), "yaml", "a saved stage phase that does not exist",
                              "phase: the string 'done' is not allowed", "items[14]"),
    "saved-stage-service-interrupt-no-services": (stage_state(interrupt="restart"), "yaml",
                                                  "a saved interrupt type that does not exist",
                                                  "interrupt: the string 'restart' is not allowed", "items[14]"),
    "saved-stage-without-node": (with_(lambda o: o[STAGE]["spec"].pop("nodeName"), saved), "yaml",
                                 "a saved stage pod that names no node", "needs the node it runs on",
                                 "items[14] (Pod/node-reconciler/stage-gpu-a-001-apply) spec.nodeName"),
    "saved-clock-now-text": (setp(CLOCK, "data.now", "yesterday", start=saved), "yaml",
                             "a saved clock that is not a number", "data.now", "items[15] (ConfigMap/kube-system/"
                             "reconciler-sim-clock) data"),
    "saved-clock-uids-negative": (setp(CLOCK, "data.uids", "-3", start=saved), "yaml",
                                  "a saved uid counter that is negative", "not a non-negative integer", "items[15]"),
}

RAW: dict[str, tuple[bytes, str, str, str]] = {
    # name.ext: (bytes, checks, expect, where)
    "encoding-gzip.json.gz": (gzip.compress(b'{"kind": "List", "items": []}', mtime=0), "a gzip-compressed dump",
                              "gzip-compressed", ""),
    "encoding-utf16.yaml": ("apiVersion: v1\nkind: List\nitems: []\n".encode("utf-16"), "UTF-16 text",
                            "UTF-16", ""),
    "encoding-latin1.yaml": (b"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata:\n"
                             b"    name: gpu-a-001\n    labels: {owner: J\xf6rg}\n", "a Latin-1 byte",
                             "not valid UTF-8", ""),
    "encoding-nul-byte.json": (b'{"apiVersion": "v1", "kind": "List", "items": [\x00]}', "a NUL byte",
                               "NUL byte", ""),
    "empty.yaml": (b"", "an empty file", "is empty", ""),
    "whitespace-only.json": (b"  \n\n\t\n", "only blank characters", "is empty", ""),
    "comments-only.yaml": (b"# kubectl get nodes -o yaml > this file, but the command failed\n", "only a comment",
                           "holds no Node objects", ""),
    "json-syntax-error.json": (b'{"apiVersion": "v1", "kind": "List",\n "items": [\n  {"kind": "Node",}\n ]}\n',
                               "a trailing comma in JSON", "JSON syntax error", ""),
    "json-trailing-data.json": (b'{"apiVersion": "v1", "kind": "List", "items": []}\n{"kind": "Node"}\n',
                                "two JSON documents concatenated", "Extra data", ""),
    "json-1e400.json": (b'{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Pod",\n'
                        b' "metadata": {"name": "p"}, "spec": {"terminationGracePeriodSeconds": 1e400}}]}\n',
                        "a JSON number that overflows a float", "number 1e400 overflows", ""),
    "json-nan.json": (b'{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Node",\n'
                      b' "metadata": {"name": "n", "generation": NaN}}]}\n', "NaN (not JSON)", "NaN", ""),
    "json-infinity.json": (b'{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Node",\n'
                           b' "metadata": {"name": "n", "generation": -Infinity}}]}\n', "-Infinity (not JSON)",
                           "Infinity", ""),
    "json-20000-digits.json": (b'{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Node",'
                               b'\n "metadata": {"name": "n", "generation": ' + b"9" * 20000 + b"}}]}\n",
                               "an integer of 20,000 digits", "outside int64", ""),
    "json-lone-surrogate.json": (b'{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Node",'
                                 b'\n "metadata": {"name": "n", "annotations": {"a": "x\\ud800y"}}}]}\n',
                                 "a lone UTF-16 surrogate escape", "surrogate", ""),
    "json-deep-nesting.json": (b'{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Node",'
                               b' "metadata": {"name": "n"}, "x": ' + b"[" * 5000 + b"]" * 5000 + b"}]}\n",
                               "JSON nested 5,000 deep", "nesting is deeper", ""),
    "json-top-level-string.json": (b'["gpu-a-001", "gpu-a-002"]\n', "a JSON array of names",
                                   "is the string 'gpu-a-001', not a Kubernetes object", "[0]"),
    "yaml-syntax-error.yaml": (b"apiVersion: v1\nkind: List\nitems:\n- kind: Node\n  metadata: {name: n1\n",
                               "an unclosed flow mapping", "YAML syntax error", ""),
    "yaml-tab-indent.yaml": (b"apiVersion: v1\nkind: List\nitems:\n- kind: Node\n\tmetadata: {name: n1}\n",
                             "a tab used for indentation", "YAML syntax error", ""),
    "yaml-alias-bomb.yaml": (bomb(8), "a billion-laughs alias bomb", "alias expansion bomb", ""),
    "yaml-recursive-alias.yaml": (b"apiVersion: v1\nkind: List\nitems: &i\n- *i\n", "an alias that contains itself",
                                  "recursive YAML alias", ""),
    "yaml-python-tag.yaml": (b"apiVersion: v1\nkind: List\nitems:\n- !!python/object/apply:os.system [id]\n",
                             "a python/object tag", "is not allowed", ""),
    "yaml-custom-tag.yaml": (b"apiVersion: v1\nkind: List\nitems:\n- !Node {metadata: {name: n1}}\n", "a custom tag",
                             "YAML tag !Node is not allowed", ""),
    "yaml-duplicate-key.yaml": (b"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata:\n"
                                b"    name: n1\n    name: n2\n", "a mapping key given twice", "duplicate key 'name'",
                                ""),
    "yaml-infinite-float.yaml": (b"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata:\n"
                                 b"    name: n1\n    generation: .inf\n", "an infinite float", "not a finite number",
                                 ""),
    "yaml-deep-nesting.yaml": (b"apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nx: " + b"[" * 500 + b"]" * 500
                               + b"\n", "YAML nested 500 deep", "nesting is deeper", ""),
    "yaml-scalar-document.yaml": (b"gpu-a-001\n", "a document that is a plain string",
                                  "is the string 'gpu-a-001', not a Kubernetes object", "document"),
    "yaml-merge-scalar.yaml": (b"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata:\n"
                               b"    <<: 5\n    name: n1\n", "a merge key with a scalar", "merge key", ""),
    "yaml-big-int.yaml": (b"apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n  generation: 99999999999999999999999\n",
                          "an integer beyond int64", "outside int64", ""),
    "yaml-items-mapping.yaml": (b"apiVersion: v1\nkind: List\nitems:\n  gpu-a-001: {kind: Node}\n",
                                "items written as a mapping", "must be a list of objects, not a mapping", "items"),
    "yaml-documents-duplicate-node.yaml": (b"apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\napiVersion: v1\n"
                                           b"kind: Node\nmetadata: {name: n1}\n",
                                           "the same node in two YAML documents", "a second Node named n1",
                                           "document 2 (Node/n1) metadata.name"),
    "bom-then-duplicate-node.yaml": (b"\xef\xbb\xbfapiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\n"
                                     b"apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n",
                                     "a UTF-8 BOM (accepted) and then a duplicate node: positions unaffected",
                                     "a second Node named n1", "document 2"),
    # --- --sim-config files (run with the valid fleet)
    "simconfig-unknown-field.yaml": (b"stageSecond: 30\n", "a misspelt sim-config setting", "unknown field", ""),
    "simconfig-negative-reboot.yaml": (b"rebootSeconds: -5\n", "a negative duration", "greater than or equal to 0",
                                       "rebootSeconds"),
    "simconfig-infinite.yaml": (b"stageSeconds: .inf\n", "an infinite duration", "finite", "stageSeconds"),
    "simconfig-huge.yaml": (b"rebootSeconds: 1e20\n", "a duration of 10^20 seconds", "less than or equal to",
                            "rebootSeconds"),
    "simconfig-string-number.yaml": (b"rebootSeconds: '120'\n", "a duration written as a string",
                                     "must be a number, not the string '120'",
                                     "rebootSeconds"),
    "simconfig-bool-seconds.yaml": (b"interruptSeconds: true\n", "a duration that is a boolean",
                                    "must be a number, not the boolean true",
                                    "interruptSeconds"),
    "simconfig-bad-stage-key.yaml": (b"stageSeconds: {aply: 60, default: 30}\n", "a stage name misspelt",
                                     "aply", "stageSeconds"),
    "simconfig-failure-exit-zero.yaml": (b"failures:\n- {node: gpu-a-001, package: tuned, stage: apply, exitCode: 0}\n",
                                         "a failure with exit code 0", "greater than or equal to 1",
                                         "failures[0].exitCode"),
    "simconfig-failure-unknown-field.yaml": (b"failures:\n- {node: gpu-a-001, exitcode: 3}\n",
                                             "a failure field in the wrong case", "unknown field",
                                             "failures[0].exitcode"),
    "simconfig-failure-bad-stage.yaml": (b"failures:\n- {stage: reboot}\n", "a failure for a stage that does not exist",
                                         "reboot", "failures[0].stage"),
    "simconfig-failures-map.yaml": (b"failures: {node: gpu-a-001}\n", "failures written as a mapping",
                                    "must be a list", "failures"),
    "simconfig-never-returns-bad.yaml": (b"neverReturns: [GPU_A_001]\n", "neverReturns names a node that cannot exist",
                                         "'GPU_A_001' is not a valid name", "neverReturns[0]"),
    "simconfig-start-time-bad.yaml": (b"startTime: next tuesday\n", "a startTime that is not RFC 3339",
                                      "is not an RFC 3339 time",
                                      "startTime"),
    "simconfig-empty.yaml": (b"# nothing here\n", "a sim-config without settings", "holds no settings", ""),
    "simconfig-list.yaml": (b"- stageSeconds: 30\n", "a sim-config that is a list", "must be a mapping", ""),
    "simconfig-alias-bomb.yaml": (bomb(6), "an alias bomb as sim-config", "alias", ""),
}


def header(checks: str, expect: str, where: str) -> str:
    """The ``# checks/expect/where`` comment header."""
    return f"# checks: {checks}\n# expect: {expect}\n" + (f"# where: {where}\n" if where else "")


def main() -> None:
    """Write every case next to this script (existing cases are overwritten)."""
    for name, (make, fmt, checks, expect, where) in CASES.items():
        text = dumps_list(make(), fmt)
        if fmt == "json":
            (HERE / f"{name}.json").write_text(text, encoding="utf-8")
            (HERE / f"{name}.json.meta").write_text(header(checks, expect, where), encoding="utf-8")
        else:
            (HERE / f"{name}.yaml").write_text(header(checks, expect, where) + text, encoding="utf-8")
    for name, (raw, checks, expect, where) in RAW.items():
        plain = raw.strip() and raw[:2] not in (b"\xff\xfe", b"\xfe\xff") and not raw.startswith(b"\xef\xbb\xbf")
        if name.endswith(".yaml") and plain:
            (HERE / name).write_bytes(header(checks, expect, where).encode() + raw)
        else:
            (HERE / name).write_bytes(raw)
            (HERE / f"{name}.meta").write_text(header(checks, expect, where), encoding="utf-8")
    print(f"{len(CASES) + len(RAW)} cases in {os.path.relpath(HERE)}")


if __name__ == "__main__":
    main()

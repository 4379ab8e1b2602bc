"""The stage-pod builder and status interpreter (reconciler.adapters.kube.stagepod), without a cluster:
the Pod shape NodeWright's agent expects (semantics-nodewright.md §3.1/§3.2) and a table of pod
statuses as the kubelet reports them (the same shapes tests/e2e/test_kube_adapter.py reads back
from a real API server)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from reconciler.adapters.kube.stagepod import (
    INTERRUPT_TYPE_LABEL,
    MANAGED_BY_LABEL,
    SPEC_ANNOTATION,
    STAGE_LABEL,
    build_stage_pod,
    config_map_name,
    dns_name,
    label_value,
    run_owner_name,
    stage_status_from_pod,
)
from reconciler.model.nodestate import RUNTIME_REQUIRED_TAINT_KEY
from reconciler.model.recipe import EnvVar, Interrupt, Resources
from reconciler.ports import StageSpec, StageStatus

Obj = dict[str, Any]


def spec(**kw: Any) -> StageSpec:
    base: dict[str, Any] = dict(recipe="gpu-stack", node="gpu-a-001", package="nvidia-driver", version="1.2.3",
                                stage="apply", pull_ref="ghcr.io/example/nvidia-driver:1.2.3", run_id="r1")
    base.update(kw)
    return StageSpec(**base)


def test_stage_pod_shape() -> None:
    s = spec(config_map={"a.conf": "x"}, env=(EnvVar(name="MODE", value="fast"),), grace_seconds=7)
    pod = build_stage_pod(s, namespace="ops", image_pull_secret="regcred")
    meta, ps = pod["metadata"], pod["spec"]
    assert (meta["name"], meta["namespace"]) == (s.pod_name, "ops")
    assert meta["labels"][MANAGED_BY_LABEL] == "node-reconciler" and meta["labels"][STAGE_LABEL] == "apply"
    assert INTERRUPT_TYPE_LABEL not in meta["labels"]
    assert json.loads(meta["annotations"][SPEC_ANNOTATION])["runId"] == "r1"
    assert ps["nodeName"] == "gpu-a-001" and ps["restartPolicy"] == "Never"
    assert ps["hostPID"] and ps["hostNetwork"] and ps["automountServiceAccountToken"] is False
    assert ps["terminationGracePeriodSeconds"] == 7 and ps["imagePullSecrets"] == [{"name": "regcred"}]
    names = [c["name"] for c in ps["initContainers"]]
    assert names == ["nvidia-driver-init", "nvidia-driver-apply", "nvidia-driver-applycheck"]
    cdir = "/var/lib/skyhook/gpu-stack/nvidia-driver-1.2.3"
    assert ps["initContainers"][1]["args"] == ["apply", "/root", cdir]
    assert ps["initContainers"][2]["args"] == ["apply-check", "/root", cdir]
    assert all(c["securityContext"] == {"privileged": True} for c in ps["initContainers"])
    env = {e["name"]: e.get("value") for e in ps["initContainers"][1]["env"]}
    assert env["MODE"] == "fast" and env["SKYHOOK_RESOURCE_ID"] == "gpu-stack-r1_nvidia-driver_1.2.3"
    assert {"name": "package-config", "configMap": {"name": config_map_name(s)}} in ps["volumes"]
    keys = {t["key"] for t in ps["tolerations"]}
    assert {"node.kubernetes.io/unschedulable", RUNTIME_REQUIRED_TAINT_KEY, "node.kubernetes.io/not-ready"} <= keys
    assert [c["name"] for c in ps["containers"]] == ["pause"]


def test_stage_pod_resources_and_no_config_map() -> None:
    r = Resources(cpuRequest="1", cpuLimit="2", memoryRequest="1Gi", memoryLimit="2Gi")
    ps = build_stage_pod(spec(resources=r))["spec"]
    assert all(v["name"] != "package-config" for v in ps["volumes"])
    assert ps["initContainers"][1]["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"},
                                                    "limits": {"cpu": "2", "memory": "2Gi"}}


def test_interrupt_pod_carries_the_agent_interrupt() -> None:
    s = spec(stage="interrupt", interrupt=Interrupt(type="service", services=("containerd",)))
    pod = build_stage_pod(s)
    (init,) = pod["spec"]["initContainers"]
    assert init["name"] == "interrupt" and init["args"][:2] == ["interrupt", "/root"]
    assert json.loads(base64.b64decode(init["args"][3])) == {"type": "service_restart", "services": ["containerd"]}
    assert pod["metadata"]["labels"][INTERRUPT_TYPE_LABEL] == "service"


def test_interrupt_stage_without_interrupt_is_refused() -> None:
    with pytest.raises(ValueError, match="has no interrupt"):
        build_stage_pod(spec(stage="interrupt"))


def _init(name: str, state: Obj) -> Obj:
    return {"name": name, "state": state}


TERM0 = {"terminated": {"exitCode": 0, "reason": "Completed"}}
INITS = {"initContainers": [{"name": "a"}, {"name": "b"}]}
START = "2026-11-30T12:00:00Z"
T0 = 1796040000.0


@pytest.mark.parametrize(
    ("pod", "expected", "container"),
    [
        ({"spec": INITS, "status": {"phase": "Pending"}}, StageStatus("pending"), ""),
        ({"spec": INITS, "status": {"phase": "Pending", "startTime": START,
                                    "initContainerStatuses": [_init("a", {"running": {"startedAt": START}})]}},
         StageStatus("running", started=T0), ""),
        ({"spec": INITS, "status": {"phase": "Running", "startTime": START,
                                    "initContainerStatuses": [_init("a", TERM0), _init("b", TERM0)]}},
         StageStatus("succeeded", 0, started=T0), ""),
        ({"spec": INITS, "status": {"phase": "Succeeded"}}, StageStatus("succeeded", 0), ""),
        ({"spec": INITS, "status": {"phase": "Pending", "initContainerStatuses": [
            _init("a", TERM0), _init("b", {"terminated": {"exitCode": 3, "reason": "Error", "message": " bad \n"}})]}},
         StageStatus("failed", 3, "Error: bad"), "b"),
        ({"spec": INITS, "status": {"phase": "Pending", "initContainerStatuses": [
            _init("a", {"waiting": {"reason": "ImagePullBackOff", "message": "no such image"}})]}},
         StageStatus("pending", None, "ImagePullBackOff", "no such image"), ""),
        ({"spec": INITS, "status": {"phase": "Pending", "initContainerStatuses": [
            _init("a", {"waiting": {"reason": "PodInitializing"}})]}}, StageStatus("pending"), ""),
        ({"spec": INITS, "status": {"phase": "Failed", "reason": "DeadlineExceeded", "message": "too long"}},
         StageStatus("failed", None, "DeadlineExceeded: too long"), ""),
        ({"spec": INITS, "status": {"phase": "Failed", "containerStatuses": [
            _init("pause", {"terminated": {"exitCode": 143}})]}}, StageStatus("failed", 143, "Failed"), "pause"),
        # being deleted by someone else: who, from the DisruptionTarget condition its deleter set
        ({"metadata": {"deletionTimestamp": START}, "spec": INITS, "status": {
            "phase": "Pending", "startTime": START,
            "initContainerStatuses": [_init("a", {"running": {"startedAt": START}})],
            "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC",
                            "message": "PodGC: node no longer exists"}]}},
         StageStatus("running", started=T0, deleting="DeletionByPodGC: PodGC: node no longer exists"), ""),
        # a plain delete names nobody: said so
        ({"metadata": {"deletionTimestamp": START}, "spec": INITS, "status": {"phase": "Pending"}},
         StageStatus("pending", deleting="a delete request (the API records no deleter on the pod; the cluster's "
                                         "audit log does)"), ""),
    ],
)
def test_stage_status_from_pod(pod: Obj, expected: StageStatus, container: str) -> None:
    assert stage_status_from_pod(pod) == (expected, container)


def test_failure_reason_is_capped() -> None:
    pod = {"spec": INITS, "status": {"initContainerStatuses": [
        _init("a", {"terminated": {"exitCode": 1, "reason": "Error", "message": "x" * 1000}})]}}
    status, _ = stage_status_from_pod(pod)
    assert status.exit_code == 1 and len(status.reason) == 300


@pytest.mark.parametrize("text", ["gpu-a-001", "a" * 63, "", "x.y_z-1"])
def test_label_value_keeps_valid_values(text: str) -> None:
    assert label_value(text) == text


@pytest.mark.parametrize("text", ["a" * 64, "gpu a/1", "-lead", "ünï"])
def test_label_value_makes_invalid_values_valid_and_distinct(text: str) -> None:
    out = label_value(text)
    assert out != text and len(out) <= 63 and label_value(text + "!") != out
    assert out[0].isalnum() and out[-1].isalnum()


def test_dns_names_and_run_owner() -> None:
    assert dns_name("abc-1") == "abc-1"
    long = dns_name("A" * 80)
    assert len(long) <= 63 and long == long.lower() and long != dns_name("A" * 81)
    assert run_owner_name("r1") == "run-r1" and run_owner_name("run-7") == "run-7"

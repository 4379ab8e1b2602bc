"""KubeCluster against a real API server, controller manager, scheduler and kwok nodes.

Each test works in its own namespace and on its own kwok nodes (fixtures in conftest.py). The
behaviour asserted is the server's: the Eviction API's answers (drain-and-scenarios.md §1.6),
resourceVersion preconditions, the garbage collector, kwok stages for stage pods
(tests/controlplane/kwok-stages.yaml) and the reboot emulator.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from kubernetes import client

from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.adapters.kube.stagepod import (
    INTERRUPT_TYPE_LABEL,
    MANAGED_BY_LABEL,
    RUN_ID_LABEL,
    SPEC_ANNOTATION,
    STAGE_LABEL,
    config_map_name,
    run_owner_name,
)
from reconciler.errors import (
    ConflictError,
    ForbiddenError,
    LeaseHeldError,
    NotFoundError,
    ServerError,
    TooManyRequestsError,
)
from reconciler.execute.lock import release_lease, renew_lease, take_lease
from reconciler.model.nodestate import RUNTIME_REQUIRED_TAINT_KEY
from reconciler.model.recipe import EnvVar, Interrupt
from reconciler.model.selector import Taint
from reconciler.ports import LeaseSpec, StageSpec
from reconciler.testing.fleetgen import make_pdb
from tests.controlplane.cluster import ControlPlane, RebootEmulator

T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], what: str, timeout: float = 30.0, interval: float = 0.2) -> T:
    """Poll ``probe`` until it returns a truthy value; fail the test after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < end:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


def deployment(name: str, replicas: int, group: str, labels: dict[str, str]) -> dict[str, Any]:
    """A pause-container Deployment confined to the test's nodes (``e2e.test/group``)."""
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"e2e.test/group": group},
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}],
                },
            },
        },
    }


def running_pods(kube: KubeCluster, ns: str, app: str, n: int) -> list[Any]:
    """Wait until ``n`` Running, not-terminating pods with label app=<app> exist in ``ns``."""

    def probe() -> list[Any] | None:
        pods = [
            p
            for p in kube.pods.list_pods(label_selector=f"app={app}")
            if p.namespace == ns and p.phase == "Running" and p.ready and p.deletion_ts is None
        ]
        return pods if len(pods) == n else None

    return wait_for(probe, f"{n} running pods app={app} in {ns}")


def allowed(kube: KubeCluster, ns: str, name: str, value: int) -> None:
    """Wait until the disruption controller reports ``disruptionsAllowed == value``."""
    wait_for(
        lambda: any(b.namespace == ns and b.name == name and b.disruptions_allowed == value
                    for b in kube.pods.list_pdbs()),
        f"PDB {ns}/{name} disruptionsAllowed={value}",
    )


def spec_for(node: str, run_id: str, **kw: Any) -> StageSpec:
    base: dict[str, Any] = {
        "recipe": "gpu-stack",
        "node": node,
        "package": "nvidia-driver",
        "version": "1.2.3",
        "stage": "apply",
        "pull_ref": "ghcr.io/example/nvidia-driver:1.2.3",
        "run_id": run_id,
    }
    base.update(kw)
    return StageSpec(**base)


# ------------------------------------------------------------------------------------------------
# reads


def test_list_nodes_paginated_and_get_node(controlplane: ControlPlane, kube: KubeCluster, make_nodes: Any) -> None:
    mine = make_nodes(3, labels={"e2e.test/role": "gpu"})
    nodes = kube.nodes.list_nodes()
    names = {n.name for n in nodes}
    assert set(mine) <= names
    assert len(names) >= 15  # 12 shared nodes + ours

    small = KubeCluster.from_kubeconfig(str(controlplane.kubeconfig), page_size=2)
    try:
        assert {n.name for n in small.nodes.list_nodes()} >= names  # many pages of 2, same result
    finally:
        small.close()

    selected = kube.nodes.list_nodes(label_selector="e2e.test/role=gpu")
    assert sorted(n.name for n in selected if n.name in mine) == sorted(mine)
    assert all(n.labels["e2e.test/role"] == "gpu" for n in selected)

    node = kube.nodes.get_node(mine[0])
    assert node.ready is True
    assert node.boot_id and node.uid and node.resource_version
    assert node.unschedulable is False
    with pytest.raises(NotFoundError, match="does-not-exist"):
        kube.nodes.get_node("does-not-exist")


def test_list_pods_by_node_field_selector(
    controlplane: ControlPlane, namespace: str, make_nodes: Any, api: Any
) -> None:
    a, b = make_nodes(2)
    core = client.CoreV1Api(api)
    for i, node in enumerate([a, a, a, b]):
        core.create_namespaced_pod(
            namespace,
            {
                "metadata": {"name": f"p{i}", "labels": {"app": "bare"}},
                "spec": {
                    "nodeName": node,
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                    "volumes": [{"name": "scratch", "emptyDir": {}}] if i == 0 else [],
                },
            },
        )
    kube = KubeCluster.from_kubeconfig(str(controlplane.kubeconfig), page_size=2)
    try:
        on_a = wait_for(
            lambda: (ps := kube.pods.list_pods(node_name=a)) and all(p.phase == "Running" for p in ps) and ps,
            "pods on node a Running",
        )
        assert sorted(p.name for p in on_a) == ["p0", "p1", "p2"]
        assert {p.node_name for p in on_a} == {a}
        assert [p.name for p in kube.pods.list_pods(node_name=b)] == ["p3"]
        p0 = next(p for p in on_a if p.name == "p0")
        assert p0.emptydir and p0.ready and p0.controller is None and p0.uid
        assert kube.pods.get_pod(namespace, "p3") is not None
        assert kube.pods.get_pod(namespace, "nope") is None
        assert len(kube.pods.list_pods(label_selector="app=bare")) == 4
    finally:
        kube.close()


# ------------------------------------------------------------------------------------------------
# node writes


def test_patch_node_resource_version_conflict(kube: KubeCluster, make_nodes: Any) -> None:
    (name,) = make_nodes(1)
    before = kube.nodes.get_node(name)
    after = kube.nodes.patch_node(
        name,
        annotations={"reconciler.nodewright.dev/test": "one"},
        labels={"e2e.test/patched": "yes"},
        resource_version=before.resource_version,
    )
    assert after.annotations["reconciler.nodewright.dev/test"] == "one"
    assert after.labels["e2e.test/patched"] == "yes"
    assert after.resource_version != before.resource_version

    with pytest.raises(ConflictError) as err:  # stale resourceVersion: the server refuses
        kube.nodes.patch_node(
            name, annotations={"reconciler.nodewright.dev/test": "two"}, resource_version=before.resource_version
        )
    assert err.value.status == 409
    assert "the object has been modified" in str(err.value)
    assert kube.nodes.get_node(name).annotations["reconciler.nodewright.dev/test"] == "one"

    cleared = kube.nodes.patch_node(
        name, annotations={"reconciler.nodewright.dev/test": None}, labels={"e2e.test/patched": None}
    )
    assert "reconciler.nodewright.dev/test" not in cleared.annotations
    assert "e2e.test/patched" not in cleared.labels
    with pytest.raises(NotFoundError):
        kube.nodes.patch_node("does-not-exist", annotations={"a": "b"})


def test_cordon_with_ownership_record_and_taints_in_one_write(kube: KubeCluster, make_nodes: Any) -> None:
    (name,) = make_nodes(1)
    rv = kube.nodes.get_node(name).resource_version
    record = json.dumps({"run": "r1"})
    taint = Taint(key=RUNTIME_REQUIRED_TAINT_KEY, value="true", effect="NoSchedule")
    cordoned = kube.nodes.patch_node(
        name,
        unschedulable=True,
        annotations={"reconciler.nodewright.dev/cordon_gpu-stack": record},
        taints=(taint,),
        resource_version=rv,
    )
    assert cordoned.unschedulable is True
    assert cordoned.annotations["reconciler.nodewright.dev/cordon_gpu-stack"] == record
    assert cordoned.taints == (taint,)
    # one write: exactly one new resourceVersion between the two states
    assert int(cordoned.resource_version) > int(rv)

    uncordoned = kube.nodes.patch_node(
        name, unschedulable=False, annotations={"reconciler.nodewright.dev/cordon_gpu-stack": None}, taints=()
    )
    assert uncordoned.unschedulable is False
    assert uncordoned.taints == ()
    assert "reconciler.nodewright.dev/cordon_gpu-stack" not in uncordoned.annotations


def test_set_node_condition_merges_by_type(kube: KubeCluster, make_nodes: Any, api: Any) -> None:
    (name,) = make_nodes(1)
    ctype = "reconciler.nodewright.dev/gpu-stack/Erroring"
    kube.nodes.set_node_condition(name, ctype, "True", "StageFailed", "apply of nvidia-driver exited 3")

    def cond() -> Any:
        node = client.CoreV1Api(api).read_node_status(name)
        return {c.type: c for c in node.status.conditions}

    first = cond()[ctype]
    assert (first.status, first.reason, first.message) == ("True", "StageFailed", "apply of nvidia-driver exited 3")
    assert cond()["Ready"].status == "True"  # kwok's conditions kept
    time.sleep(1.1)
    kube.nodes.set_node_condition(name, ctype, "True", "StageFailed", "still failing")
    second = cond()[ctype]
    assert second.message == "still failing"
    assert second.last_transition_time == first.last_transition_time  # status unchanged
    kube.nodes.set_node_condition(name, ctype, "False", "Recovered", "ok")
    third = cond()[ctype]
    assert third.status == "False" and third.last_transition_time > first.last_transition_time


def test_emit_event_on_node(kube: KubeCluster, make_nodes: Any, api: Any) -> None:
    (name,) = make_nodes(1)
    kube.events.emit_event(name, "NodeCordoned", "cordoned by gpu-stack run r1")
    kube.events.emit_event(name, "StageFailed", "apply exited 3", type_="Warning")
    events = (
        client.CoreV1Api(api)
        .list_namespaced_event("default", field_selector=f"involvedObject.kind=Node,involvedObject.name={name}")
        .items
    )
    got = {(e.reason, e.type, e.message) for e in events}
    assert ("NodeCordoned", "Normal", "cordoned by gpu-stack run r1") in got
    assert ("StageFailed", "Warning", "apply exited 3") in got
    e = events[0]
    assert e.source.component == "node-reconciler"
    assert e.reporting_component == "node-reconciler"
    assert e.involved_object.uid == name  # what `kubectl describe node` searches for


# ------------------------------------------------------------------------------------------------
# evictions (drain-and-scenarios.md §1.6)


def test_evict_pod_allowed_by_pdb_is_recreated_elsewhere(
    kube: KubeCluster, namespace: str, make_nodes: Any, api: Any, test_id: str
) -> None:
    make_nodes(3)
    labels = {"app": "web"}
    client.AppsV1Api(api).create_namespaced_deployment(namespace, deployment("web", 2, test_id, labels))
    client.PolicyV1Api(api).create_namespaced_pod_disruption_budget(
        namespace, make_pdb(namespace, "web", labels, min_available=1))
    pods = running_pods(kube, namespace, "web", 2)
    allowed(kube, namespace, "web", 1)
    victim = pods[0]
    kube.nodes.patch_node(victim.node_name, unschedulable=True)  # cordon first, as a drain does

    kube.pods.evict_pod(namespace, victim.name, victim.uid, grace_seconds=1)

    wait_for(lambda: kube.pods.get_pod(namespace, victim.name) is None, "evicted pod gone")
    after = running_pods(kube, namespace, "web", 2)
    new = [p for p in after if p.uid not in {q.uid for q in pods}]
    assert len(new) == 1
    assert new[0].node_name != victim.node_name  # the scheduler avoided the cordoned node
    assert new[0].controller is not None and new[0].controller.kind == "ReplicaSet"


def test_evict_blocked_by_pdb_is_429_disruption_budget(
    kube: KubeCluster, namespace: str, make_nodes: Any, api: Any, test_id: str
) -> None:
    make_nodes(1)
    labels = {"app": "db"}
    client.AppsV1Api(api).create_namespaced_deployment(namespace, deployment("db", 1, test_id, labels))
    client.PolicyV1Api(api).create_namespaced_pod_disruption_budget(
        namespace, make_pdb(namespace, "db", labels, min_available=1))
    (pod,) = running_pods(kube, namespace, "db", 1)
    wait_for(
        lambda: any(b.name == "db" and b.expected_pods == 1 for b in kube.pods.list_pdbs() if b.namespace == namespace),
        "PDB observed",
    )
    allowed(kube, namespace, "db", 0)
    with pytest.raises(TooManyRequestsError) as err:
        kube.pods.evict_pod(namespace, pod.name, pod.uid, grace_seconds=None)
    assert err.value.disruption_budget is True
    assert err.value.status == 429
    assert "disruption budget" in str(err.value)
    assert "db" in str(err.value)  # the cause names the budget
    assert kube.pods.get_pod(namespace, pod.name) is not None


def test_evict_with_two_pdbs_is_500_server_error(
    kube: KubeCluster, namespace: str, make_nodes: Any, api: Any, test_id: str
) -> None:
    make_nodes(1)
    labels = {"app": "twice"}
    client.AppsV1Api(api).create_namespaced_deployment(namespace, deployment("twice", 1, test_id, labels))
    (pod,) = running_pods(kube, namespace, "twice", 1)
    pol = client.PolicyV1Api(api)
    pol.create_namespaced_pod_disruption_budget(namespace, make_pdb(namespace, "one", labels, min_available=0))
    pol.create_namespaced_pod_disruption_budget(namespace, make_pdb(namespace, "two", labels, min_available=0))
    # The server refuses before looking at any budget status (eviction.go), so no wait for the
    # disruption controller here (it only re-syncs one of two PDBs that select the same pod).
    wait_for(lambda: len([b for b in kube.pods.list_pdbs() if b.namespace == namespace]) == 2, "two PDBs listed")
    with pytest.raises(ServerError) as err:
        kube.pods.evict_pod(namespace, pod.name, pod.uid, grace_seconds=None)
    assert err.value.status == 500
    assert "more than one PodDisruptionBudget" in str(err.value)


def test_evict_uid_precondition_and_missing_pod(
    kube: KubeCluster, namespace: str, make_nodes: Any, api: Any, test_id: str
) -> None:
    make_nodes(1)
    labels = {"app": "uid"}
    client.AppsV1Api(api).create_namespaced_deployment(namespace, deployment("uid", 1, test_id, labels))
    (pod,) = running_pods(kube, namespace, "uid", 1)
    with pytest.raises(ConflictError) as err:
        kube.pods.evict_pod(namespace, pod.name, "00000000-0000-0000-0000-000000000000", grace_seconds=None)
    assert err.value.status == 409
    assert "UID" in str(err.value) or "uid" in str(err.value)
    assert kube.pods.get_pod(namespace, pod.name) is not None
    with pytest.raises(NotFoundError):
        kube.pods.evict_pod(namespace, "no-such-pod", pod.uid, grace_seconds=None)


def test_evict_in_terminating_namespace_is_403_namespace_terminating(
    kube: KubeCluster, namespace: str, make_nodes: Any, api: Any
) -> None:
    (node,) = make_nodes(1)
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "held", "finalizers": ["e2e.test/hold"]},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
        },
    )
    pod = wait_for(lambda: (p := kube.pods.get_pod(namespace, "held")) and p.phase == "Running" and p,
                   "held pod running")
    core.delete_namespace(namespace)
    wait_for(lambda: core.read_namespace(namespace).status.phase == "Terminating", "namespace terminating")
    try:
        with pytest.raises(ForbiddenError) as err:
            kube.pods.evict_pod(namespace, "held", pod.uid, grace_seconds=None)
        assert err.value.reason == "NamespaceTerminating"
        assert err.value.status == 403
    finally:
        core.patch_namespaced_pod("held", namespace, {"metadata": {"finalizers": None}})


def test_daemonset_pods_and_daemonset_exists(
    kube: KubeCluster, namespace: str, make_nodes: Any, api: Any, test_id: str
) -> None:
    nodes = make_nodes(2)
    labels = {"app": "agent"}
    client.AppsV1Api(api).create_namespaced_daemon_set(
        namespace,
        {
            "metadata": {"name": "agent"},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "nodeSelector": {"e2e.test/group": test_id},
                        "containers": [{"name": "a", "image": "registry.k8s.io/pause:3.10"}],
                    },
                },
            },
        },
    )
    for n in nodes:
        pods = wait_for(
            lambda n=n: [p for p in kube.pods.list_pods(node_name=n) if p.phase == "Running"], f"daemonset pod on {n}"
        )
        (p,) = pods
        assert p.controller is not None and p.controller.kind == "DaemonSet" and p.controller.name == "agent"
    assert kube.pods.daemonset_exists(namespace, "agent") is True
    assert kube.pods.daemonset_exists(namespace, "gone") is False


def test_rbac_denied_is_forbidden(controlplane: ControlPlane) -> None:
    denied = KubeCluster.from_kubeconfig(str(controlplane.reconciler_kubeconfig))
    try:
        with pytest.raises(ForbiddenError) as err:
            denied.nodes.list_nodes()
        assert err.value.status == 403
        assert 'User "reconciler" cannot list resource "nodes"' in str(err.value)
        assert controlplane.reconciler_token not in str(err.value)
    finally:
        denied.close()


# ------------------------------------------------------------------------------------------------
# stage pods


def test_stage_pod_shape_success_and_cleanup(kube: KubeCluster, make_nodes: Any, api: Any) -> None:
    (node,) = make_nodes(1)
    spec = spec_for(
        node,
        "run-1",
        config_map={"apply.sh": "echo hi"},
        env=(EnvVar(name="DRIVER_BRANCH", value="550"),),
        grace_seconds=5,
    )
    assert kube.stages.stage_status(spec).phase == "missing"
    kube.stages.start_stage(spec)
    kube.stages.start_stage(spec)  # idempotent: the existing pod is kept
    core = client.CoreV1Api(api)
    pod = core.read_namespaced_pod(spec.pod_name, kube.namespace)
    assert pod.spec.node_name == node
    assert pod.spec.host_pid and pod.spec.host_network
    assert pod.spec.restart_policy == "Never"
    assert pod.spec.termination_grace_period_seconds == 5
    names = [c.name for c in pod.spec.init_containers]
    assert names == ["nvidia-driver-init", "nvidia-driver-apply", "nvidia-driver-applycheck"]
    copy_dir = "/var/lib/skyhook/gpu-stack/nvidia-driver-1.2.3"
    assert pod.spec.init_containers[0].image == spec.pull_ref
    assert pod.spec.init_containers[1].args == ["apply", "/root", copy_dir]
    assert pod.spec.init_containers[2].args == ["apply-check", "/root", copy_dir]
    assert all(c.security_context.privileged for c in pod.spec.init_containers)
    assert {"name": "DRIVER_BRANCH", "value": "550"} in [
        {"name": e.name, "value": e.value} for e in pod.spec.init_containers[1].env
    ]
    assert [c.image for c in pod.spec.containers] == ["registry.k8s.io/pause:3.10"]
    tol = {(t.key, t.operator) for t in pod.spec.tolerations}
    assert ("node.kubernetes.io/unschedulable", "Exists") in tol
    assert (RUNTIME_REQUIRED_TAINT_KEY, "Exists") in tol
    assert pod.metadata.labels[MANAGED_BY_LABEL] == "node-reconciler"
    assert pod.metadata.labels[STAGE_LABEL] == "apply"
    assert pod.metadata.labels[RUN_ID_LABEL] == "run-1"
    assert json.loads(pod.metadata.annotations[SPEC_ANNOTATION])["image"] == spec.pull_ref
    (owner,) = pod.metadata.owner_references
    assert (owner.kind, owner.name) == ("ConfigMap", run_owner_name("run-1"))
    cm = core.read_namespaced_config_map(config_map_name(spec), kube.namespace)
    assert cm.data == {"apply.sh": "echo hi"}
    assert config_map_name(spec).startswith("gpu-stack-nvidia-driver-1-2-3-")
    # one ConfigMap per package version and configuration, shared by every node's stage pods
    other = spec_for(node, "run-1", config_map={"apply.sh": "echo hi"})
    assert config_map_name(other) == config_map_name(spec)
    mounts = {m.mount_path for m in pod.spec.init_containers[0].volume_mounts}
    assert "/skyhook-package/configmaps" in mounts

    st = wait_for(lambda: (s := kube.stages.stage_status(spec)).phase == "succeeded" and s, "stage succeeded")
    assert st.exit_code == 0 and st.started is not None

    kube.stages.delete_stage(spec)
    wait_for(lambda: kube.stages.stage_status(spec).phase == "missing", "stage pod deleted")
    kube.stages.delete_stage(spec)  # absent is fine
    kube.stages.delete_run("run-1")  # the run owner takes the shared ConfigMap with it (garbage collector)
    wait_for(lambda: not core.list_namespaced_config_map(
        kube.namespace, field_selector=f"metadata.name={config_map_name(spec)}").items, "configmap collected")


def test_stage_failure_exit_code_from_package_env(kube: KubeCluster, make_nodes: Any) -> None:
    (node,) = make_nodes(1)
    env = (EnvVar(name="SIM_TEST_OUTCOME", value="fail"), EnvVar(name="SIM_TEST_EXIT_CODE", value="3"))
    spec = spec_for(node, "run-2", env=env)
    kube.stages.start_stage(spec)
    st = wait_for(lambda: (s := kube.stages.stage_status(spec)).phase == "failed" and s, "stage failed")
    assert st.exit_code == 3
    assert st.reason.startswith("Error")
    # the log is read only when asked for (a failure record; a rebooted interrupt pod's is not),
    # and a terminated container's log does not change: asking again does not read it again
    log_reads: list[str] = []
    orig_log = kube.stages._log_tail  # every log read
    kube.stages._log_tail = (  # type: ignore[method-assign]
        lambda *a, **k: (log_reads.append(a[0]), orig_log(*a, **k))[1])
    try:
        assert kube.stages.stage_status(spec).phase == "failed"
        assert log_reads == []
        assert kube.stages.stage_status(spec, log=True).log_tail == ""  # kwok nodes have no container logs
        assert kube.stages.stage_status(spec, log=True).phase == "failed"
    finally:
        del kube.stages._log_tail  # the instance attribute: the method again
    assert log_reads == [spec.pod_name]

    # the same env restricted to another stage: this one succeeds
    other = spec_for(node, "run-2", stage="config", env=(*env, EnvVar(name="SIM_TEST_STAGES", value="apply")))
    kube.stages.start_stage(other)
    assert wait_for(lambda: kube.stages.stage_status(other).phase == "succeeded", "config stage succeeded")


def test_stage_failure_of_check_container_by_annotation(kube: KubeCluster, make_nodes: Any, api: Any) -> None:
    (node,) = make_nodes(1)
    spec = spec_for(node, "run-3", env=(EnvVar(name="SIM_TEST_RUN_FOR", value="5s"),))
    kube.stages.start_stage(spec)
    client.CoreV1Api(api).patch_namespaced_pod(
        spec.pod_name,
        kube.namespace,
        {
            "metadata": {
                "annotations": {
                    "sim.test/outcome": "fail",
                    "sim.test/exit-code": "42",
                    "sim.test/fail-container": "check",
                    "sim.test/run-for": "200ms",
                }
            }
        },
    )
    st = wait_for(lambda: (s := kube.stages.stage_status(spec)).phase == "failed" and s, "check failed")
    assert st.exit_code == 42
    pod = client.CoreV1Api(api).read_namespaced_pod(spec.pod_name, kube.namespace)
    codes = [
        (s.name, s.state.terminated.exit_code if s.state.terminated else None)
        for s in pod.status.init_container_statuses
    ]
    assert codes == [("nvidia-driver-init", 0), ("nvidia-driver-apply", 0), ("nvidia-driver-applycheck", 42)]


def test_stage_image_pull_error(kube: KubeCluster, make_nodes: Any) -> None:
    (node,) = make_nodes(1)
    spec = spec_for(node, "run-4", env=(EnvVar(name="SIM_TEST_OUTCOME", value="pull-error"),))
    kube.stages.start_stage(spec)
    # pending with the waiting reason (the kubelet retries the pull; the executor's pull grace decides)
    st = wait_for(lambda: (s := kube.stages.stage_status(spec)).reason and s, "pull error seen")
    assert (st.phase, st.exit_code, st.reason) == ("pending", None, "ErrImagePull")


def test_stage_running_then_restart_while_terminating(kube: KubeCluster, make_nodes: Any) -> None:
    (node,) = make_nodes(1)
    spec = spec_for(node, "run-5", env=(EnvVar(name="SIM_TEST_OUTCOME", value="hang"),))
    kube.stages.start_stage(spec)
    assert wait_for(lambda: kube.stages.stage_status(spec).phase == "running", "stage running")
    time.sleep(1.5)
    assert kube.stages.stage_status(spec).phase == "running"  # "hang" never finishes
    kube.stages.delete_stage(spec)
    wait_for(lambda: kube.stages.stage_status(spec).phase == "missing", "pod gone")


def test_service_interrupt_pod(kube: KubeCluster, make_nodes: Any, api: Any) -> None:
    (node,) = make_nodes(1)
    spec = spec_for(
        node, "run-6", stage="interrupt", interrupt=Interrupt(type="service", services=("containerd", "kubelet"))
    )
    kube.stages.start_stage(spec)
    pod = client.CoreV1Api(api).read_namespaced_pod(spec.pod_name, kube.namespace)
    (init,) = pod.spec.init_containers
    assert init.name == "interrupt"
    assert init.args[:3] == ["interrupt", "/root", "/var/lib/skyhook/gpu-stack/nvidia-driver-1.2.3"]
    assert json.loads(base64.b64decode(init.args[3])) == {
        "type": "service_restart",
        "services": ["containerd", "kubelet"],
    }
    assert pod.metadata.labels[INTERRUPT_TYPE_LABEL] == "service"
    assert wait_for(lambda: kube.stages.stage_status(spec).phase == "succeeded", "service interrupt done")


def test_reboot_interrupt_gives_new_boot_id(
    kube: KubeCluster, make_nodes: Any, controlplane_reboots: RebootEmulator
) -> None:
    (node,) = make_nodes(1)
    boot0 = kube.nodes.get_node(node).boot_id
    spec = spec_for(node, "run-7", stage="interrupt", interrupt=Interrupt(type="reboot"))
    kube.stages.start_stage(spec)

    wait_for(lambda: kube.nodes.get_node(node).ready is False, "node NotReady during reboot", timeout=20)
    back = wait_for(
        lambda: (n := kube.nodes.get_node(node)).ready and n.boot_id != boot0 and n,
        "node Ready with a new bootID",
        timeout=30,
    )
    assert back.boot_id and back.boot_id != boot0
    st = wait_for(lambda: (s := kube.stages.stage_status(spec)).phase == "failed" and s, "interrupt pod ended")
    assert st.exit_code == 143  # the agent's container dies with the host
    assert (node, spec.pod_name) in controlplane_reboots.reboots
    assert not controlplane_reboots.errors


def test_run_owner_garbage_collects_stage_objects(kube: KubeCluster, make_nodes: Any, api: Any) -> None:
    (node,) = make_nodes(1)
    specs = [spec_for(node, "run-8", package=p, config_map={"k": "v"}) for p in ("pkg-a", "pkg-b")]
    for s in specs:
        kube.stages.start_stage(s)
    core = client.CoreV1Api(api)
    assert core.read_namespaced_config_map(run_owner_name("run-8"), kube.namespace).data["runId"] == "run-8"
    kube.stages.delete_run("run-8")
    wait_for(lambda: all(kube.stages.stage_status(s).phase == "missing" for s in specs), "GC deleted stage pods")
    wait_for(
        lambda: not core.list_namespaced_config_map(kube.namespace, label_selector=f"{RUN_ID_LABEL}=run-8").items,
        "GC deleted stage ConfigMaps",
    )


def test_end_run_if_unused_keeps_a_lifecycle_whose_stage_pods_are_left(kube: KubeCluster, make_nodes: Any,
                                                                       api: Any) -> None:
    """A lifecycle an earlier run started is released by the run that resumed it only when no stage
    pod of it is left (a failed node outside that run keeps its pods and their logs)."""
    a, b = make_nodes(2)
    failed = spec_for(a, "run-10", package="pkg-a", config_map={"k": "v"})
    done = spec_for(b, "run-10", package="pkg-a", config_map={"k": "v"})
    for s in (failed, done):
        kube.stages.start_stage(s)
    core = client.CoreV1Api(api)
    kube.stages.delete_stages("gpu-stack", b)  # b completed: its pods go
    wait_for(lambda: kube.stages.stage_status(done).phase == "missing", "b's pods deleted")
    kube.stages.end_run("run-10", if_unused=True)
    assert core.read_namespaced_config_map(run_owner_name("run-10"), kube.namespace)  # a's pod is left: kept
    assert kube.stages.stage_status(failed).phase != "missing"
    kube.stages.delete_stages("gpu-stack", a)
    wait_for(lambda: kube.stages.stage_status(failed).phase == "missing", "a's pods deleted")
    kube.stages.end_run("run-10", if_unused=True)
    wait_for(lambda: not core.list_namespaced_config_map(kube.namespace,
                                                        label_selector=f"{RUN_ID_LABEL}=run-10").items,
             "the owner and its ConfigMaps deleted")


def test_delete_stages_of_recipe_on_node(kube: KubeCluster, make_nodes: Any, api: Any) -> None:
    a, b = make_nodes(2)
    mine = [spec_for(a, "run-9", package=p, config_map={"k": p}) for p in ("pkg-a", "pkg-b")]
    other_node = spec_for(b, "run-9", package="pkg-a")
    other_recipe = spec_for(a, "run-9", recipe="other-stack", package="pkg-a")
    for s in (*mine, other_node, other_recipe):
        kube.stages.start_stage(s)
    kube.stages.delete_stages("gpu-stack", a)
    wait_for(lambda: all(kube.stages.stage_status(s).phase == "missing" for s in mine),
             "recipe's pods on node a deleted")
    assert kube.stages.stage_status(other_node).phase != "missing"
    assert kube.stages.stage_status(other_recipe).phase != "missing"
    # the package ConfigMaps are shared across nodes: they stay until the run owner goes
    names = {c.metadata.name for c in client.CoreV1Api(api).list_namespaced_config_map(kube.namespace).items}
    assert {config_map_name(s) for s in mine} <= names
    kube.stages.delete_stages("gpu-stack", a)  # nothing left: fine


# ------------------------------------------------------------------------------------------------
# leases


def test_lease_store_is_conditional_on_resource_version(kube: KubeCluster) -> None:
    now = time.time()
    a = kube.leases.create_lease("recipe-store", LeaseSpec("runner-a", 30, now, now))
    assert a.holder == "runner-a" and a.namespace == kube.namespace and a.resource_version
    with pytest.raises(ConflictError):  # 409 AlreadyExists
        kube.leases.create_lease("recipe-store", LeaseSpec("runner-b", 30, now, now))
    b = kube.leases.replace_lease("recipe-store", LeaseSpec("runner-a", 30, now, now + 1, 0), a.resource_version)
    assert b.resource_version != a.resource_version and b.renewed is not None and b.renewed >= now + 1 - 1e-3
    with pytest.raises(ConflictError):  # stale resourceVersion
        kube.leases.replace_lease("recipe-store", LeaseSpec("runner-b", 30, now, now, 1), a.resource_version)
    with pytest.raises(ConflictError):
        kube.leases.delete_lease("recipe-store", a.resource_version)
    kube.leases.delete_lease("recipe-store", b.resource_version)
    assert kube.leases.get_lease("recipe-store") is None
    with pytest.raises(NotFoundError):
        kube.leases.delete_lease("recipe-store", b.resource_version)


def test_lease_take_renew_release(kube: KubeCluster) -> None:
    name = "recipe-gpu-stack"
    a = take_lease(kube.leases, name, "runner-a", 30, time.time(), kube.leases.get_lease(name))
    assert a.holder == "runner-a" and a.transitions == 0
    with pytest.raises(LeaseHeldError, match="runner-a"):
        take_lease(kube.leases, name, "runner-b", 30, time.time(), kube.leases.get_lease(name))
    renewed = renew_lease(kube.leases, name, "runner-a", None, time.time())
    assert renewed.renewed is not None and a.renewed is not None and renewed.renewed >= a.renewed
    with pytest.raises(LeaseHeldError):
        renew_lease(kube.leases, name, "runner-b", None, time.time())
    release_lease(kube.leases, name, "runner-b")  # not the holder: no effect
    assert kube.leases.get_lease(name) is not None
    release_lease(kube.leases, name, "runner-a")
    assert kube.leases.get_lease(name) is None

    short = take_lease(kube.leases, "recipe-short", "runner-a", 1, time.time(), None)
    time.sleep(1.5)
    taken = take_lease(kube.leases, "recipe-short", "runner-b", 30, time.time(), kube.leases.get_lease("recipe-short"))
    assert taken.holder == "runner-b" and taken.transitions == short.transitions + 1

"""``reconciler apply --kubeconfig`` end to end on the real control plane (issue #4 §5).

kube-apiserver + etcd + kube-controller-manager (disruption controller, Deployments, DaemonSets,
Jobs) + kube-scheduler + kwok nodes. Stage pods succeed after about a second unless the package's
env says otherwise (tests/controlplane/kwok-stages.yaml); reboots are emulated by
``controlplane_reboots`` (new bootID). Each test has its own nodes and recipe name.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from reconciler.cli.main import main
from reconciler.model.nodestate import RUNTIME_REQUIRED_TAINT_KEY, condition_type, cordon_key, failure_key
from reconciler.testing.fleetgen import make_pdb
from tests.controlplane.cluster import BootIdRecorder

SHA = "sha256:" + "e" * 64


def _recipe(name: str, group: str, *, env: str = "", retries: int = 1, runtime_required: bool = False,
            policy: str = "{count: 3}") -> str:
    return f"""\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: NodeRecipe
metadata: {{name: {name}}}
spec:
  version: "2026.11.1"
  nodeSelector: {{matchLabels: {{e2e.test/group: {group}}}}}
  podNonInterruptLabels: {{matchLabels: {{workload: long-running-training}}}}
  interruptionBudget: {policy}
  runtimeRequired: {str(runtime_required).lower()}
  drain: {{timeoutSeconds: 300, evictionRetrySeconds: 2}}
  timeouts: {{stageRetries: {retries}, retryBackoff: 1, reboot: 120, stage: 120, waitNonInterrupt: 300}}
  packages:
    base-tools:
      version: 1.0.0
      image: ghcr.io/example/base-tools
      containerSHA: {SHA}
    gpu-tuning:
      version: 2.0.0
      image: ghcr.io/example/gpu-tuning
      containerSHA: {SHA}
      dependsOn: {{base-tools: 1.0.0}}
      interrupt: {{type: reboot}}
      configMap: {{profile.conf: "intent=multiNodeTraining"}}
{env}"""


def _deployment(ns: str, group: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "inference", "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "inference"}},
            "template": {
                "metadata": {"labels": {"app": "inference"}},
                "spec": {"nodeSelector": {"e2e.test/group": group},
                         "containers": [{"name": "c", "image": "registry.example/inference:1"}]},
            },
        },
    }


def _daemonset(ns: str, group: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "node-exporter", "namespace": ns},
        "spec": {
            "selector": {"matchLabels": {"app": "node-exporter"}},
            "template": {
                "metadata": {"labels": {"app": "node-exporter"}},
                "spec": {"nodeSelector": {"e2e.test/group": group}, "tolerations": [{"operator": "Exists"}],
                         "containers": [{"name": "c", "image": "registry.example/node-exporter:1"}]},
            },
        },
    }


def _wait(what: str, fn: Any, timeout: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def test_full_apply_across_twelve_nodes(controlplane: Any, controlplane_reboots: Any, api: Any, namespace: str,
                                        make_nodes: Any, test_id: str, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    core, apps, policy = client.CoreV1Api(api), client.AppsV1Api(api), client.PolicyV1Api(api)
    nodes = make_nodes(12)
    taint = {"key": RUNTIME_REQUIRED_TAINT_KEY, "value": "true", "effect": "NoSchedule"}
    for n in nodes:
        core.patch_node(n, {"spec": {"taints": [taint]}})
    apps.create_namespaced_deployment(namespace, _deployment(namespace, test_id, 6) | {
        "spec": _deployment(namespace, test_id, 6)["spec"] | {"template": {
            "metadata": {"labels": {"app": "inference"}},
            "spec": {"nodeSelector": {"e2e.test/group": test_id},
                     "tolerations": [{"key": RUNTIME_REQUIRED_TAINT_KEY, "operator": "Exists"}],
                     "containers": [{"name": "c", "image": "registry.example/inference:1"}]}}}})
    apps.create_namespaced_daemon_set(namespace, _daemonset(namespace, test_id))
    policy.create_namespaced_pod_disruption_budget(namespace, make_pdb(namespace, "inference", {"app": "inference"},
                                                                       max_unavailable=1))
    # a training pod that must not be interrupted; it finishes after 15 s
    core.create_namespaced_pod(namespace, {
        "metadata": {"name": "train-llm", "labels": {"workload": "long-running-training"},
                     "annotations": {"sim.test/outcome": "succeed", "sim.test/run-for": "15s"}},
        "spec": {"nodeName": nodes[0], "restartPolicy": "Never",
                 "tolerations": [{"operator": "Exists"}],
                 "containers": [{"name": "c", "image": "registry.example/train:1"}]}})

    def ready_pods() -> list[Any]:
        pods = core.list_namespaced_pod(namespace, label_selector="app=inference").items
        return [p for p in pods if p.status.phase == "Running" and p.metadata.deletion_timestamp is None]

    _wait("6 inference pods running", lambda: len(ready_pods()) == 6)
    _wait("daemonset pods", lambda: len(core.list_namespaced_pod(namespace, label_selector="app=node-exporter").items)
          == 12)
    _wait("PDB status", lambda: (policy.read_namespaced_pod_disruption_budget(
        "inference", namespace).status.disruptions_allowed or 0) >= 1)
    ds_uids = {p.metadata.uid for p in core.list_namespaced_pod(namespace, label_selector="app=node-exporter").items}
    before = {p.metadata.uid for p in ready_pods()}

    recipe = tmp_path / "recipe.yaml"
    name = f"tune-{test_id[-4:]}"
    recipe.write_text(_recipe(name, test_id, runtime_required=True))
    with BootIdRecorder(controlplane, label_selector=f"e2e.test/group={test_id}") as boots:
        rc = main(["apply", str(recipe), "--kubeconfig", str(controlplane.kubeconfig), "--no-status-object",
                   "-o", "json"])
        time.sleep(3)  # a second reboot of any node would show within the reboot time
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert rc == 0, out.err[-3000:]
    assert doc["result"] == "succeeded"
    assert {n["state"] for n in doc["nodes"]} == {"complete"} and len(doc["nodes"]) == 12
    # one reboot interrupt per node, one reboot each: exactly one new boot ID per node
    assert sorted(n for n, _pod in controlplane_reboots.reboots if n in nodes) == sorted(nodes)
    assert not boots.errors and {n: boots.changes(n) for n in nodes} == dict.fromkeys(nodes, 1)
    assert all(c["maxDisrupted"] <= 3 for c in doc["compartments"])
    for n in nodes:
        node = core.read_node(n)
        assert not node.spec.unschedulable, n
        assert not [t for t in node.spec.taints or () if t.key == RUNTIME_REQUIRED_TAINT_KEY], n
        assert cordon_key(name) not in (node.metadata.annotations or {})
    events = doc["timeline"]
    assert sum(1 for e in events if e["event"] == "rebooted") == 12
    assert any(e["event"] == "wait" and "train-llm" in e["detail"] for e in events)
    # inference pods were evicted and rescheduled by the real scheduler; DaemonSet pods were left alone
    _wait("inference back to 6", lambda: len(ready_pods()) == 6)
    assert before - {p.metadata.uid for p in ready_pods()}
    assert {p.metadata.uid for p in core.list_namespaced_pod(namespace, label_selector="app=node-exporter").items} \
        == ds_uids
    # nothing left behind: the run's owner object and its shared ConfigMaps go, stage pods were deleted
    run_owner = f"run-{doc['runId']}"
    _wait("run objects collected", lambda: not [
        c for c in core.list_namespaced_config_map("node-reconciler").items
        if c.metadata.name == run_owner or any(o.name == run_owner for o in c.metadata.owner_references or ())])
    _wait("stage pods deleted", lambda: not [
        p for p in core.list_namespaced_pod("node-reconciler").items
        if (p.metadata.labels or {}).get("reconciler.nodewright.dev/recipe") == name], timeout=30)


def test_failing_stage_fails_the_node_keeps_it_cordoned_and_halts(controlplane: Any, api: Any, make_nodes: Any,
                                                                   test_id: str, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    core = client.CoreV1Api(api)
    nodes = make_nodes(4)
    env = ("      env: [{name: SIM_TEST_OUTCOME, value: fail}, {name: SIM_TEST_EXIT_CODE, value: \"7\"},\n"
           "            {name: SIM_TEST_STAGES, value: apply}]\n")
    recipe = tmp_path / "recipe.yaml"
    name = f"fail-{test_id[-4:]}"
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"""\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: DeploymentPolicy
metadata: {{name: strict-{test_id[-4:]}}}
spec:
  default:
    budget: {{count: 1}}
    strategy: {{fixed: {{initialBatch: 1, failureThreshold: 1, safetyLimit: 100}}}}
""")
    recipe.write_text(_recipe(name, test_id, env=env, retries=0, policy="null").replace(
        "  interruptionBudget: null\n", f"  deploymentPolicy: strict-{test_id[-4:]}\n"))
    rc = main(["apply", str(recipe), "--policy", str(policy), "--kubeconfig", str(controlplane.kubeconfig),
               "--no-status-object", "-o", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1 and doc["result"] == "halted"
    states = {n["name"]: n for n in doc["nodes"]}
    failed = [n for n in states.values() if n["state"] == "failed"]
    assert len(failed) == 1 and failed[0]["exitCode"] == 7 and failed[0]["failedStage"] == "apply"
    assert sorted(n["state"] for n in states.values()) == ["failed", "untouched", "untouched", "untouched"]
    node = core.read_node(failed[0]["name"])
    assert node.spec.unschedulable and cordon_key(name) in node.metadata.annotations
    assert failure_key(name) in node.metadata.annotations
    conds = {c.type: c for c in node.status.conditions}
    assert conds[condition_type(name, "Erroring")].status == "True"
    evs = core.list_event_for_all_namespaces(field_selector=f"involvedObject.name={failed[0]['name']}").items
    assert any(e.reason == "Failed" and e.type == "Warning" for e in evs)
    assert all(not core.read_node(n).spec.unschedulable for n in nodes if n != failed[0]["name"])

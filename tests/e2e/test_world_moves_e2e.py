"""A rollout that stays right while the world moves (issue 34) on the real control plane: kube-apiserver,
the controllers, kwok nodes (tests/controlplane). Each test makes the world move under ``reconciler
apply`` the way it does on a real cluster and checks what the simulated fleet's tests check
(tests/unit/execute/test_joining_nodes.py, ...)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from reconciler.cli.main import main
from reconciler.model.nodestate import RUNTIME_REQUIRED_TAINT_KEY, failure_key, inflight_key

SHA = "sha256:" + "e" * 64
TAINT = {"key": RUNTIME_REQUIRED_TAINT_KEY, "value": "true", "effect": "NoSchedule"}


def _recipe(name: str, group: str, *, node_ready: int = 600, budget: int = 1) -> str:
    return f"""\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: NodeRecipe
metadata: {{name: {name}}}
spec:
  version: "2026.11.1"
  nodeSelector: {{matchLabels: {{e2e.test/group: {group}}}}}
  interruptionBudget: {{count: {budget}}}
  runtimeRequired: true
  timeouts: {{stageRetries: 0, retryBackoff: 1, reboot: 120, stage: 120, nodeReady: {node_ready}}}
  packages:
    gpu-tuning:
      version: 2.0.0
      image: ghcr.io/example/gpu-tuning
      containerSHA: {SHA}
      interrupt: {{type: reboot}}
"""


def _not_ready(core: Any, node: str) -> None:
    """The node as it joins: kwok leaves it alone (``sim.test/frozen``) and its kubelet says NotReady."""
    core.patch_node(node, {"metadata": {"annotations": {"sim.test/frozen": "true"}}, "spec": {"taints": [TAINT]}})
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    core.patch_node_status(node, {"status": {"conditions": [
        {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "drivers loading",
         "lastHeartbeatTime": now, "lastTransitionTime": now}]}})


def _ready(core: Any, node: str) -> None:
    """The drivers loaded: kwok takes the node over again and makes it Ready."""
    core.patch_node(node, {"metadata": {"annotations": {"sim.test/frozen": None}}})


def _apply(recipe: Path, cp: Any, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    rc = main(["apply", str(recipe), "--kubeconfig", str(cp.kubeconfig), "--no-status-object", "-o", "json"])
    out = capsys.readouterr()
    return rc, json.loads(out.out)


def test_a_node_that_joins_not_ready_is_waited_for_then_left_waiting_then_done(
        controlplane: Any, controlplane_reboots: Any, api: Any, make_nodes: Any, test_id: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    core = client.CoreV1Api(api)
    ok, joining = make_nodes(2)
    name = f"join-{test_id[-4:]}"
    recipe = tmp_path / "recipe.yaml"

    # 1. Ready within timeouts.nodeReady: waited for, then done in the same run (one batch of both:
    # once the other node is cordoned, the joining one has been seen NotReady; Ready 3 s later)
    _not_ready(core, joining)
    recipe.write_text(_recipe(name, test_id, node_ready=300, budget=2))
    done = threading.Event()

    def drivers_loaded() -> None:
        while not done.is_set() and not core.read_node(ok).spec.unschedulable:
            time.sleep(0.2)
        if not done.wait(3.0):
            _ready(core, joining)

    loader = threading.Thread(target=drivers_loaded, daemon=True)
    loader.start()
    try:
        rc, doc = _apply(recipe, controlplane, capsys)
    finally:
        done.set()
        loader.join(timeout=10)
    states = {n["name"]: n["state"] for n in doc["nodes"]}
    assert rc == 0 and states == {ok: "complete", joining: "complete"}, doc["nodes"]
    assert any(e["node"] == joining and e["event"] == "wait" and "NodeNotReady" in e["detail"]
               for e in doc["timeline"])
    node = core.read_node(joining)
    assert failure_key(name) not in (node.metadata.annotations or {})
    assert not [t for t in node.spec.taints or () if t.key == RUNTIME_REQUIRED_TAINT_KEY]

    # 2. NotReady past the bound: left waiting (not failed, nothing written, the taint kept) ...
    _not_ready(core, joining)
    recipe.write_text(_recipe(name, test_id, node_ready=3).replace("2.0.0", "2.0.1"))
    rc, doc = _apply(recipe, controlplane, capsys)
    n = next(n for n in doc["nodes"] if n["name"] == joining)
    assert rc == 1 and doc["result"] == "waiting" and n["state"] == "waiting" and "NodeNotReady" in n["message"]
    node = core.read_node(joining)
    ann = node.metadata.annotations or {}
    assert failure_key(name) not in ann and inflight_key(name) not in ann and not node.spec.unschedulable
    assert [t.key for t in node.spec.taints or ()] == [RUNTIME_REQUIRED_TAINT_KEY]
    # ... and done by the next apply once Ready
    _ready(core, joining)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any(
            c.type == "Ready" and c.status == "True" for c in core.read_node(joining).status.conditions or ()):
        time.sleep(0.3)
    rc, doc = _apply(recipe, controlplane, capsys)
    assert rc == 0 and {n["name"]: n["state"] for n in doc["nodes"]}[joining] == "complete", doc["nodes"]
    assert not [t for t in core.read_node(joining).spec.taints or () if t.key == RUNTIME_REQUIRED_TAINT_KEY]


def test_a_stage_pod_evicted_by_someone_else_is_an_event_naming_it_and_an_attempt(
        controlplane: Any, api: Any, make_nodes: Any, test_id: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The stage pod is evicted through the Eviction API (which marks it DisruptionTarget:
    EvictionByEvictionAPI) and held terminating by a finalizer for a few seconds, as a pod whose
    containers take their grace period to stop: the lifecycle sees who deletes it, and once it is
    gone makes it again as attempt 2, with a Warning Event on the node naming the Eviction API."""
    core = client.CoreV1Api(api)
    (node,) = make_nodes(1)
    name = f"lost-{test_id[-4:]}"
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(_recipe(name, test_id).replace(
        "      interrupt: {type: reboot}\n",
        "      env: [{name: SIM_TEST_RUN_FOR, value: 20s}, {name: SIM_TEST_STAGES, value: apply}]\n")
        .replace("stageRetries: 0", "stageRetries: 2"))
    box: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: box.update(out=_apply(recipe, controlplane, capsys)), daemon=True)
    runner.start()
    sel = f"reconciler.nodewright.dev/recipe={name},reconciler.nodewright.dev/stage=apply"
    deadline = time.monotonic() + 60
    pods: list[Any] = []
    while time.monotonic() < deadline and not pods:
        pods = core.list_namespaced_pod("node-reconciler", label_selector=sel).items
        time.sleep(0.2)
    assert pods, "no apply stage pod"
    pod = pods[0].metadata.name
    time.sleep(6)  # the lifecycle has looked at it (its poll is 5 s)
    core.patch_namespaced_pod(pod, "node-reconciler", {"metadata": {"finalizers": ["e2e.test/hold"]}})
    core.create_namespaced_pod_eviction(pod, "node-reconciler",
                                        {"metadata": {"name": pod, "namespace": "node-reconciler"}})
    time.sleep(8)  # terminating, held by the finalizer: seen being deleted
    core.patch_namespaced_pod(pod, "node-reconciler", {"metadata": {"finalizers": None}})
    runner.join(timeout=240)
    rc, doc = box["out"]
    assert rc == 0 and doc["nodes"][0]["state"] == "complete", doc["nodes"]
    lost = [e for e in doc["timeline"] if e["event"] == "stage-lost"]
    assert len(lost) == 1 and "EvictionByEvictionAPI" in lost[0]["detail"] and "attempt 1 of 3" in lost[0]["detail"]
    assert "gpu-tuning 2.0.0 apply (attempt 2)" in [e["detail"] for e in doc["timeline"] if e["event"] == "stage-start"]
    evs = core.list_event_for_all_namespaces(field_selector=f"involvedObject.name={node}").items
    assert any(e.reason == "StagePodDeleted" and e.type == "Warning" and "EvictionByEvictionAPI" in e.message
               for e in evs)

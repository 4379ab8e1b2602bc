"""The readiness gate on the real control plane (issue 15): ``apply`` of a recipe with
``readinessGate.conditionType`` holds each node — cordoned, runtime-required taint on, in-flight
record at ``readiness-gate`` — after its packages and reboot, until the test (acting as the
external validator, as NVCRE would) patches the node's ``status.conditions``; then that node alone
is uncordoned, untainted and complete, while the other keeps waiting for its own condition."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from reconciler.cli.main import main
from reconciler.model.nodestate import (
    RUNTIME_REQUIRED_TAINT_KEY,
    InFlight,
    cordon_key,
    inflight_key,
    parse_model,
    validate_key,
    validated_key,
)

SHA = "sha256:" + "e" * 64
VALIDATED = "e2e.test/Validated"


def _recipe(name: str, group: str) -> str:
    return f"""\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: NodeRecipe
metadata: {{name: {name}}}
spec:
  version: "2026.12.1"
  nodeSelector: {{matchLabels: {{e2e.test/group: {group}}}}}
  interruptionBudget: {{count: 2}}
  runtimeRequired: true
  timeouts: {{stageRetries: 0, reboot: 120, stage: 120}}
  readinessGate: {{conditionType: {VALIDATED}, timeout: 10m}}
  packages:
    gpu-driver:
      version: 1.0.0
      image: ghcr.io/example/gpu-driver
      containerSHA: {SHA}
      interrupt: {{type: reboot}}
"""


def _wait(what: str, fn: Any, timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _at_gate(core: Any, name: str, recipe: str) -> bool:
    ann = core.read_node(name).metadata.annotations or {}
    fl = parse_model(InFlight, ann.get(inflight_key(recipe)))
    return fl is not None and fl.phase == "readiness-gate"


def _held(node: Any, recipe: str) -> bool:
    """Cordoned by us and still carrying the runtime-required taint."""
    tainted = any(t.key == RUNTIME_REQUIRED_TAINT_KEY for t in node.spec.taints or ())
    return bool(node.spec.unschedulable) and tainted and cordon_key(recipe) in (node.metadata.annotations or {})


def _validate(core: Any, name: str) -> None:
    """What the external validator does: set its condition True in the node's status."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    core.patch_node_status(name, {"status": {"conditions": [{
        "type": VALIDATED, "status": "True", "reason": "ChecksPassed", "message": "e2e validator",
        "lastHeartbeatTime": now, "lastTransitionTime": now}]}})


def test_a_readiness_gate_holds_each_node_cordoned_until_its_condition_is_true(
        controlplane: Any, controlplane_reboots: Any, api: Any, make_nodes: Any, test_id: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    core = client.CoreV1Api(api)
    first, second = make_nodes(2)
    taint = {"key": RUNTIME_REQUIRED_TAINT_KEY, "value": "true", "effect": "NoSchedule"}
    for n in (first, second):
        core.patch_node(n, {"spec": {"taints": [taint]}})
    name = f"gate-{test_id[-4:]}"
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(_recipe(name, test_id))
    outcome: dict[str, Any] = {}

    def run() -> None:
        outcome["rc"] = main(["apply", str(recipe), "--kubeconfig", str(controlplane.kubeconfig),
                              "--no-status-object", "--poll-seconds", "1", "-o", "json"])

    apply = threading.Thread(target=run, name="apply", daemon=True)
    apply.start()
    for n in (first, second):
        _wait(f"{n} at the readiness gate", lambda n=n: _at_gate(core, n, name), timeout=240)
    time.sleep(4)  # a few polls: the gate keeps holding while the condition is absent
    for n in (first, second):
        node = core.read_node(n)
        assert _held(node, name), n
        assert _at_gate(core, n, name)
    assert apply.is_alive()

    _validate(core, first)
    _wait(f"{first} released", lambda: not core.read_node(first).spec.unschedulable, timeout=60)
    done = core.read_node(first)
    assert not [t for t in done.spec.taints or () if t.key == RUNTIME_REQUIRED_TAINT_KEY]
    assert inflight_key(name) not in (done.metadata.annotations or {})
    time.sleep(3)
    assert _held(core.read_node(second), name) and apply.is_alive()  # its own condition is still absent

    _validate(core, second)
    apply.join(timeout=120)
    assert not apply.is_alive(), "apply did not finish after both nodes passed the gate"
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert outcome["rc"] == 0, out.err[-3000:]
    assert doc["result"] == "succeeded" and {n["state"] for n in doc["nodes"]} == {"complete"}
    for n in (first, second):
        node = core.read_node(n)
        assert not node.spec.unschedulable and not [t for t in node.spec.taints or ()
                                                    if t.key == RUNTIME_REQUIRED_TAINT_KEY]
        kinds = [e["event"] for e in doc["timeline"] if e["node"] == n]
        assert kinds.index("rebooted") < kinds.index("gate") < kinds.index("gate-passed") < kinds.index("uncordon")
    passed = {e["node"]: e["t"] for e in doc["timeline"] if e["event"] == "gate-passed"}
    assert passed[first] + 3 <= passed[second]  # each node waits for its own condition


def test_a_validation_left_true_from_an_earlier_release_does_not_pass_the_gate(
        controlplane: Any, controlplane_reboots: Any, api: Any, make_nodes: Any, test_id: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 34: each node's condition was left True a month ago by the validation of an earlier
    release. The gate holds both; it passes one when the validator echoes the gate's token
    (``validated_<recipe>``) and the other when the validator sets its condition again."""
    core = client.CoreV1Api(api)
    echoing, resetting = make_nodes(2)
    for n in (echoing, resetting):
        core.patch_node_status(n, {"status": {"conditions": [{
            "type": VALIDATED, "status": "True", "reason": "ChecksPassed", "message": "driver 0.9.0 passed",
            "lastHeartbeatTime": "2026-10-01T00:00:00Z", "lastTransitionTime": "2026-10-01T00:00:00Z"}]}})
    name = f"stale-{test_id[-4:]}"
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(_recipe(name, test_id))
    outcome: dict[str, Any] = {}

    def run() -> None:
        outcome["rc"] = main(["apply", str(recipe), "--kubeconfig", str(controlplane.kubeconfig),
                              "--no-status-object", "--poll-seconds", "1", "-o", "json"])

    apply = threading.Thread(target=run, name="apply", daemon=True)
    apply.start()
    for n in (echoing, resetting):
        _wait(f"{n} at the readiness gate", lambda n=n: _at_gate(core, n, name), timeout=240)
    time.sleep(4)  # a few polls: the month-old True condition does not pass the gate
    for n in (echoing, resetting):
        assert _at_gate(core, n, name) and core.read_node(n).spec.unschedulable, n
    assert apply.is_alive()

    token = (core.read_node(echoing).metadata.annotations or {})[validate_key(name)]
    core.patch_node(echoing, {"metadata": {"annotations": {validated_key(name): token}}})
    _wait(f"{echoing} released", lambda: not core.read_node(echoing).spec.unschedulable, timeout=60)
    assert validate_key(name) not in (core.read_node(echoing).metadata.annotations or {})
    assert _at_gate(core, resetting, name)
    for status in ("False", "True"):  # the validator validates the node again
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        core.patch_node_status(resetting, {"status": {"conditions": [{
            "type": VALIDATED, "status": status, "reason": "ChecksPassed", "message": "driver 1.0.0",
            "lastHeartbeatTime": now, "lastTransitionTime": now}]}})
    apply.join(timeout=120)
    assert not apply.is_alive() and outcome["rc"] == 0
    doc = json.loads(capsys.readouterr().out)
    passed = {e["node"]: e["detail"] for e in doc["timeline"] if e["event"] == "gate-passed"}
    assert "echoed" in passed[echoing]
    assert "after the work" in passed[resetting] or "since the gate opened" in passed[resetting]
    held = [e["detail"] for e in doc["timeline"] if e["event"] == "gate" and e["node"] == resetting]
    assert held and "before the work it gates" in held[0]

"""Node identity on the real control plane (issue 34, item 3): a node object deleted and
registered again under the same name is another machine (another ``metadata.uid``). A lifecycle
in flight when that happens starts again from scratch on the new machine: every stage runs on it,
nothing of the old machine is recorded on it, and a cordon it registered with stays (not ours).
The simulated side: ``tests/unit/execute/test_node_identity.py``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kubernetes import client

from reconciler.adapters.host import SystemClock
from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.errors import ConflictError
from reconciler.execute.rollout import Rollout
from reconciler.load import load_inputs, policy_for
from reconciler.model.nodestate import cordon_key, inflight_key, parse_state, state_key
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
from reconciler.ports import StageSpec
from reconciler.testing.faults import FaultyCluster

from .test_reliability_e2e import recipe_text


def register_again(core: Any, name: str, labels: dict[str, str], *, unschedulable: bool) -> str:
    """Delete node ``name`` and register a kwok node of that name again (a replaced machine);
    returns the new UID once it is Ready."""
    core.delete_node(name)
    end = time.monotonic() + 30
    while time.monotonic() < end:
        try:
            core.read_node(name)
        except client.exceptions.ApiException as e:
            if e.status == 404:
                break
        time.sleep(0.1)
    spec: dict[str, Any] = {"providerID": f"kwok://{name}"}
    if unschedulable:
        spec["unschedulable"] = True
    core.create_node({"apiVersion": "v1", "kind": "Node", "spec": spec,
                      "metadata": {"name": name, "labels": labels, "annotations": {"kwok.x-k8s.io/node": "fake"}}})
    while time.monotonic() < end:
        node = core.read_node(name)
        if any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or ()):
            return str(node.metadata.uid)
        time.sleep(0.2)
    raise AssertionError(f"node {name} did not come back Ready")


def test_a_machine_replaced_while_its_reboot_was_pending_runs_every_stage_and_keeps_its_own_cordon(
        controlplane: Any, controlplane_reboots: Any, api: Any, make_nodes: Any, test_id: str,
        tmp_path: Path, kube: KubeCluster) -> None:
    core = client.CoreV1Api(api)
    (node,) = make_nodes(1)
    labels = dict(core.read_node(node).metadata.labels)
    old_uid = str(core.read_node(node).metadata.uid)
    name = f"ident-{test_id[-4:]}"
    path = tmp_path / f"{name}.yaml"
    path.write_text(recipe_text(name, test_id))
    inputs = load_inputs([str(path)])
    (recipe,) = inputs.recipes
    policy = policy_for(recipe, inputs)
    clock, watch = SystemClock(), kube.watch()
    replaced: list[str] = []

    def replace(spec: StageSpec) -> None:
        if spec.stage == "interrupt" and not replaced:
            replaced.append(register_again(core, node, labels, unschedulable=True))

    try:
        port = FaultyCluster(kube.ports, clock=clock, after={"start_stage": replace})
        plan = compute_plan(recipe, policy, observe(kube.ports))
        res = Rollout(recipe, policy, plan, port, clock, run_id=f"run-{name}", poll_seconds=1.0, changes=watch).run()
    finally:
        watch.close()
    assert replaced and replaced[0] != old_uid
    outcome = {n.name: (n.state, n.message) for n in res.nodes}
    assert res.result == "succeeded", outcome
    events = [e.event for e in res.timeline if e.node == node]
    assert "replaced" in events
    # after the replacement every stage ran again, on the new machine, with its own reboot
    starts = [c.target.split("/", 2)[2] for c in port.calls if c.verb == "start_stage"]
    first_interrupt = starts.index("gpu-tuning/interrupt")
    assert starts[first_interrupt + 1:] == [
        "base-tools/apply", "base-tools/config", "gpu-tuning/apply", "gpu-tuning/config", "gpu-tuning/interrupt",
        "gpu-tuning/post-interrupt"], starts
    raw = core.read_node(node)
    assert str(raw.metadata.uid) == replaced[0]
    ann = raw.metadata.annotations or {}
    state = parse_state(ann.get(state_key(name)))
    assert {k: (v.stage, v.state) for k, v in state.items()} == {
        "base-tools|1.0.0": ("config", "complete"), "gpu-tuning|2.0.0": ("post-interrupt", "complete")}
    assert raw.spec.unschedulable, "the cordon the new machine registered with was lifted"
    assert cordon_key(name) not in ann and inflight_key(name) not in ann


def test_a_node_write_carrying_another_machines_uid_is_refused(
        controlplane: Any, api: Any, make_nodes: Any, kube: KubeCluster) -> None:
    """The UID precondition of our node writes, as the API server enforces it."""
    core = client.CoreV1Api(api)
    (node,) = make_nodes(1)
    uid = str(core.read_node(node).metadata.uid)
    kube.nodes.patch_node(node, annotations={"example.com/a": "1"}, uid=uid)
    labels = dict(core.read_node(node).metadata.labels)
    register_again(core, node, labels, unschedulable=False)
    try:
        kube.nodes.patch_node(node, annotations={"example.com/a": "2"}, uid=uid)
    except ConflictError as e:
        assert e.reason == "UIDPrecondition"
    else:
        raise AssertionError("a write with the old machine's UID reached the new one")
    assert "example.com/a" not in (core.read_node(node).metadata.annotations or {})

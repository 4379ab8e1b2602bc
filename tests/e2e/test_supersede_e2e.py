"""A recipe bumped at the reboot point, on the real control plane (issue 34, item 1): release 1's
run is stopped right after it requested a node's reboot, and release 2 (the rebooting package
bumped) is applied. The pending reboot is awaited — never requested again — and release 2 then
runs every one of its stages with its own reboot; the node is recorded at release 2 only then.
The simulated side: ``tests/unit/execute/test_supersede.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from reconciler.adapters.host import SystemClock
from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.errors import CrashInjected
from reconciler.execute.rollout import Rollout
from reconciler.load import load_inputs, policy_for
from reconciler.model.nodestate import inflight_key, parse_state, state_key
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
from reconciler.ports import StageSpec
from reconciler.testing.faults import FaultyCluster

from .test_reliability_e2e import recipe_text


def _inputs(path: Path) -> tuple[Any, Any]:
    inputs = load_inputs([str(path)])
    (recipe,) = inputs.recipes
    return recipe, policy_for(recipe, inputs)


def test_a_recipe_bumped_while_a_reboot_is_pending_awaits_it_then_runs_the_new_release_whole(
        controlplane: Any, controlplane_reboots: Any, api: Any, make_nodes: Any, test_id: str,
        tmp_path: Path, kube: KubeCluster) -> None:
    core = client.CoreV1Api(api)
    (node,) = make_nodes(1)
    name = f"bump-{test_id[-4:]}"
    v1, v2 = tmp_path / "v1.yaml", tmp_path / "v2.yaml"
    v1.write_text(recipe_text(name, test_id))
    v2.write_text(recipe_text(name, test_id).replace("version: 2.0.0", "version: 2.0.1")
                  .replace('version: "2026.11.1"', 'version: "2026.11.2"'))
    clock, watch = SystemClock(), kube.watch()

    def stop(spec: StageSpec) -> None:
        if spec.stage == "interrupt":
            raise CrashInjected("release 1's run stopped right after the reboot request")

    try:
        r1, p1 = _inputs(v1)
        first = FaultyCluster(kube.ports, clock=clock, after={"start_stage": stop})
        with pytest.raises(CrashInjected):
            Rollout(r1, p1, compute_plan(r1, p1, observe(kube.ports)), first, clock, run_id=f"run-{name}-1",
                    poll_seconds=1.0, changes=watch).run()
        assert '"phase":"interrupt"' in core.read_node(node).metadata.annotations[inflight_key(name)]
        r2, p2 = _inputs(v2)
        plan = compute_plan(r2, p2, observe(kube.ports))
        n = plan.node(node)
        assert n is not None and n.owedInterrupt is not None and n.owedRelease == "2026.11.1", n
        second = FaultyCluster(kube.ports, clock=clock)
        res = Rollout(r2, p2, plan, second, clock, run_id=f"run-{name}-2", poll_seconds=1.0, changes=watch).run()
    finally:
        watch.close()
    assert res.result == "succeeded", [(x.name, x.state, x.message) for x in res.nodes]
    starts = [c.target.split("/", 2)[2] for c in second.calls if c.verb == "start_stage"]
    assert starts == ["gpu-tuning/upgrade", "gpu-tuning/config", "gpu-tuning/interrupt",
                      "gpu-tuning/post-interrupt"], starts
    kinds = [e.event for e in res.timeline if e.node == node]
    assert kinds.count("interrupt") == 1 and kinds.count("rebooted") == 2, kinds  # awaited, then its own
    ann = core.read_node(node).metadata.annotations or {}
    state = parse_state(ann.get(state_key(name)))
    assert {k: (v.stage, v.state) for k, v in state.items()} == {
        "base-tools|1.0.0": ("config", "complete"), "gpu-tuning|2.0.1": ("post-interrupt", "complete")}
    assert not compute_plan(r2, p2, observe(kube.ports)).node(node).has_work  # type: ignore[union-attr]

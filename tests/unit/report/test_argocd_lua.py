"""The Argo CD Lua health checks of examples/argocd/argocd-cm-health.yaml, run with lupa (a real
Lua interpreter) the way Argo CD runs them (global ``obj``, the script returns ``{status,
message}``), against NodeRecipeRollout objects produced by our status writer and NodeWright /
Skyhook objects in the operator's status shape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from reconciler.execute.timeline import Event, NodeOutcome, RunResult
from reconciler.model.policy import DeploymentPolicy
from reconciler.plan.planner import compute_plan
from reconciler.report.status import RolloutProgress, new_object, rollout_status
from reconciler.testing import budget, fleet, node, package, recipe

lupa = pytest.importorskip("lupa", reason="lupa is in the dev extras (pip install -e .[dev])")

CM = Path(__file__).resolve().parents[3] / "examples" / "argocd" / "argocd-cm-health.yaml"
OURS = "resource.customizations.health.reconciler.nodewright.dev_NodeRecipeRollout"
NODEWRIGHT = "resource.customizations.health.nodewright.nvidia.com_NodeWright"
SKYHOOK = "resource.customizations.health.skyhook.nvidia.com_Skyhook"


def scripts() -> dict[str, str]:
    doc = YAML(typ="safe").load(CM.read_text())
    assert doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == "argocd-cm"
    return dict(doc["data"])


def health(script: str, obj: dict[str, Any]) -> tuple[str, str]:
    """Run one health script as Argo CD does: ``obj`` global, result table ``{status, message}``."""
    lua = lupa.LuaRuntime(unpack_returned_tuples=False, register_eval=False)
    lua.globals().obj = lua.table_from(obj, recursive=True)
    res = lua.execute(script)
    return str(res["status"]), str(res["message"] or "")


TUNED = package("tuned", "1.0.0", interrupt="reboot")


def ours(kind: str) -> dict[str, Any]:
    r = recipe("tuning", TUNED, selector={"pool": "gpu"}, budget=budget(count=1))
    plan = compute_plan(
        r,
        DeploymentPolicy.legacy("legacy", r.interruptionBudget),
        fleet([node(f"n{i}", labels={"pool": "gpu"}) for i in range(3)]),
    )
    p = RolloutProgress(plan)
    states = {"complete": "complete", "failed": "failed", "waiting": "waiting"}
    if kind in states:
        outcome = [
            NodeOutcome(
                n,
                "complete" if i else states[kind],
                "__default__",  # type: ignore[arg-type]
                message={"failed": "exit 1", "waiting": "waiting for recipe first (priority 1) on this node"}.get(
                    kind, "") if not i else "",
            )
            for i, n in enumerate(("n0", "n1", "n2"))
        ]
        p.finish(
            RunResult(
                "run-1", plan.planHash, "tuning", {"complete": "succeeded"}.get(kind, kind), outcome, [], [], 1.0
            )
        )
    elif kind == "running":
        p.on_event(Event(1, "n0", "cordon"))
    o = new_object(plan)
    o["metadata"]["generation"] = 2
    o["status"] = rollout_status(
        p, generation=1 if kind == "stale" else 2, now="2026-11-30T12:00:00Z", paused=kind == "paused"
    )
    return o


@pytest.mark.parametrize(
    ("kind", "status", "message"),
    [
        ("complete", "Healthy", "3/3 nodes complete"),
        ("running", "Progressing", "0/3 nodes complete, 1 in progress, 2 pending"),
        ("failed", "Degraded", "2/3 nodes complete, 1 failed; failed: n0"),
        ("paused", "Suspended", "0/3 nodes complete, 3 pending"),
        ("waiting", "Progressing", "2/3 nodes complete, 1 pending; 1 node waiting for recipe first (priority 1)"),
        ("stale", "Progressing", "node-reconciler has not observed generation 2 yet"),
    ],
)
def test_noderecipe_rollout_health(kind: str, status: str, message: str) -> None:
    assert health(scripts()[OURS], ours(kind)) == (status, message)


def test_noderecipe_rollout_without_status_is_progressing() -> None:
    o = ours("complete")
    del o["status"]
    assert health(scripts()[OURS], o) == ("Progressing", "waiting for node-reconciler to report")


def nodewright(status: str | None, *, generation: int = 1, observed: int = 1) -> dict[str, Any]:
    o: dict[str, Any] = {
        "apiVersion": "nodewright.nvidia.com/v1alpha1",
        "kind": "NodeWright",
        "metadata": {"name": "tuning", "generation": generation},
        "spec": {"packages": {}},
    }
    if status is not None:
        o["status"] = {
            "status": status,
            "observedGeneration": observed,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if status == "complete" else "False",
                    "reason": "NodesConverged" if status == "complete" else "NotReady",
                    "message": f"1/3 nodes complete ({status})",
                }
            ],
        }
    return o


@pytest.mark.parametrize("key", [NODEWRIGHT, SKYHOOK])
@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("complete", "Healthy"),
        ("in_progress", "Progressing"),
        ("waiting", "Progressing"),
        ("unknown", "Progressing"),
        ("erroring", "Degraded"),
        ("blocked", "Degraded"),
        ("paused", "Suspended"),
        ("disabled", "Suspended"),
    ],
)
def test_nodewright_and_skyhook_health(key: str, state: str, expected: str) -> None:
    status, message = health(scripts()[key], nodewright(state))
    assert status == expected and message == f"1/3 nodes complete ({state})"


@pytest.mark.parametrize("key", [NODEWRIGHT, SKYHOOK])
def test_nodewright_stale_or_missing_status_is_progressing(key: str) -> None:
    assert health(scripts()[key], nodewright("complete", generation=3, observed=2))[0] == "Progressing"
    assert health(scripts()[key], nodewright(None))[0] == "Progressing"


RECIPE_CHECK = "resource.customizations.health.reconciler.nodewright.dev_NodeRecipe"


def test_noderecipe_health_follows_the_controllers_status() -> None:
    """The NodeRecipe check against objects as ``reconciler controller`` leaves them (the
    controller's passes on the simulated fleet, tests/unit/controller/conftest.py)."""
    from reconciler.adapters.sim.config import SimConfig, StageFailure
    from reconciler.ops.controls import control_patch, store_for
    from tests.unit.controller.conftest import make, recipe_object

    script = scripts()[RECIPE_CHECK]
    ctl, sim, writer = make([recipe_object("gpu-training-tuning.yaml")])
    fresh = writer.object("gpu-training-tuning")
    assert health(script, {**fresh, "status": {"observedGeneration": -1}})[0] == "Progressing"
    assert ctl.reconcile(["startup"]) == "succeeded"
    done = writer.object("gpu-training-tuning")
    assert health(script, done)[0] == "Healthy"
    newer = {**done, "metadata": {**done["metadata"], "generation": done["metadata"]["generation"] + 1}}
    assert health(script, newer) == ("Progressing", f"node-reconciler has not observed generation "
                                                    f"{newer['metadata']['generation']} yet")

    ctl, _, writer = make([recipe_object("containerd-limits.yaml")],
                          SimConfig(failures=(StageFailure(stage="apply", times=99),)))
    assert ctl.reconcile(["startup"]) == "failed"
    status, message = health(script, writer.object("containerd-limits"))
    assert status == "Degraded" and message

    ctl, sim, writer = make([recipe_object("gpu-training-tuning.yaml")])
    store = store_for(sim)
    assert store is not None
    patch, _, _ = control_patch(sim, "gpu-training-tuning", "pause", reason="freeze", by="sre")
    assert patch is not None
    patch.write(store)
    assert ctl.reconcile(["startup"]) == "succeeded"
    assert health(script, writer.object("gpu-training-tuning"))[0] == "Suspended"


def test_noderecipe_refused_spec_is_degraded_with_the_reason() -> None:
    from tests.unit.controller.conftest import make, recipe_object

    bad = recipe_object("containerd-limits.yaml")
    bad["spec"]["packages"] = {"x": {"version": "not-a-version", "image": "a/b"}}
    ctl, _, writer = make([bad])
    assert ctl.reconcile(["startup"]) == "invalid"
    status, message = health(scripts()[RECIPE_CHECK], writer.object("containerd-limits"))
    assert status == "Degraded" and "NodeRecipe/containerd-limits" in message

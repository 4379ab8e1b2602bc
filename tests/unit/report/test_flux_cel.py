"""The Flux examples: healthCheckExprs evaluated with Flux's own CEL StatusEvaluator
(github.com/fluxcd/pkg/runtime/cel, via tests/gitops/fluxcel) against NodeWright/Skyhook status
objects, and the healthChecks on our NodeRecipeRollout objects checked with real kstatus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from reconciler.report.status import API_VERSION
from tests.gitops.tools import flux_cel

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "flux" / "kustomizations.yaml"


def kustomizations() -> dict[str, dict[str, Any]]:
    docs = list(YAML(typ="safe").load_all(EXAMPLE.read_text()))
    assert all(d["apiVersion"] == "kustomize.toolkit.fluxcd.io/v1" and d["kind"] == "Kustomization" for d in docs)
    return {d["metadata"]["name"]: d for d in docs}


def cr(api: str, kind: str, status: str | None, *, generation: int = 1, observed: int = 1) -> dict[str, Any]:
    o: dict[str, Any] = {
        "apiVersion": api,
        "kind": kind,
        "metadata": {"name": f"t-{status}", "generation": generation},
        "spec": {"packages": {}},
    }
    if status is not None:
        o["status"] = {
            "status": status,
            "observedGeneration": observed,
            "conditions": [{"type": "Ready", "status": "True" if status == "complete" else "False"}],
        }
    return o


@pytest.mark.parametrize(
    ("api", "kind"), [("nodewright.nvidia.com/v1alpha1", "NodeWright"), ("skyhook.nvidia.com/v1alpha1", "Skyhook")]
)
def test_health_check_exprs_map_the_status_enum(api: str, kind: str) -> None:
    spec = kustomizations()["node-tuning"]["spec"]
    assert spec["wait"] is True and spec["timeout"] == "90m"
    (entry,) = [e for e in spec["healthCheckExprs"] if e["kind"] == kind]
    assert entry["apiVersion"] == api
    exprs = {k: entry[k] for k in ("current", "inProgress", "failed")}
    states = ["complete", "in_progress", "waiting", "paused", "disabled", "unknown", "erroring", "blocked"]
    objects = [cr(api, kind, s) for s in states]
    objects.append(cr(api, kind, "complete", generation=2, observed=1))  # new generation not yet observed
    objects[-1]["metadata"]["name"] = "t-stale"
    objects.append(
        {
            "apiVersion": api,
            "kind": kind,
            "metadata": {"name": "t-nostatus", "generation": 1},
            "status": {"observedGeneration": 1},
        }
    )  # operator wrote no status.status yet
    got = [(r["name"], r["status"]) for r in flux_cel(exprs, objects)]
    assert got == [
        ("t-complete", "Current"),
        ("t-in_progress", "InProgress"),
        ("t-waiting", "InProgress"),
        ("t-paused", "InProgress"),
        ("t-disabled", "InProgress"),
        ("t-unknown", "InProgress"),
        ("t-erroring", "Failed"),
        ("t-blocked", "Failed"),
        ("t-stale", "InProgress"),
        ("t-nostatus", "InProgress"),
    ]


def test_noderecipe_health_checks_reference_our_crd_after_the_controller() -> None:
    ks = kustomizations()
    spec = ks["node-recipes"]["spec"]
    assert spec["timeout"] == "6h" and "healthCheckExprs" not in spec  # kstatus suffices for our object
    assert spec["dependsOn"] == [{"name": "node-reconciler"}] and ks["node-reconciler"]["spec"]["wait"] is True
    for hc in spec["healthChecks"]:
        assert (hc["apiVersion"], hc["kind"]) == (API_VERSION, "NodeRecipe") and "namespace" not in hc  # cluster-scoped


def test_the_controllers_noderecipe_status_is_what_flux_health_checks_read() -> None:
    """kstatus (the library Flux's healthChecks use) on NodeRecipe objects as the controller
    leaves them: Current after a rollout, Failed when a node failed, InProgress while held."""
    from reconciler.adapters.sim.config import SimConfig, StageFailure
    from tests.gitops.tools import kstatus
    from tests.unit.controller.conftest import make, recipe_object

    names = {hc["name"] for hc in kustomizations()["node-recipes"]["spec"]["healthChecks"]}
    assert "gpu-training-tuning" in names
    ctl, _, writer = make([recipe_object("gpu-training-tuning.yaml")])
    assert ctl.reconcile(["startup"]) == "succeeded"
    assert kstatus([writer.object("gpu-training-tuning")])[0]["status"] == "Current"
    ctl, _, writer = make([recipe_object("containerd-limits.yaml")],
                          SimConfig(failures=(StageFailure(stage="apply", times=99),)))
    assert ctl.reconcile(["startup"]) == "failed"
    assert kstatus([writer.object("containerd-limits")])[0]["status"] == "Failed"

"""GitOps surfaces on the real test control plane: the NodeRecipeRollout CRD installed for real,
status objects written by our adapter and read back, judged by real kstatus; the Argo CD example
manifests (RBAC, hook Jobs, argocd-cm) and the CRD accepted by a server-side dry run."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from reconciler.adapters.kube.statusobject import StatusObjects
from reconciler.execute.timeline import Event, NodeOutcome, RunResult
from reconciler.model.policy import DeploymentPolicy
from reconciler.plan.planner import compute_plan
from reconciler.report.status import RolloutProgress, new_object, rollout_spec, rollout_status
from reconciler.testing import budget, fleet, node, package, recipe
from tests.gitops.tools import kstatus

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "charts" / "node-reconciler" / "crds" / "nodereciperollouts.yaml"


def load_all(path: Path) -> list[dict[str, Any]]:
    return [d for d in YAML(typ="safe").load_all(path.read_text()) if d]


@pytest.fixture(scope="module")
def crd(controlplane: Any, api: Any) -> None:
    """Install the CRD for real (once) and wait until it is Established."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    ext = client.ApiextensionsV1Api(api)
    (doc,) = load_all(CRD)
    try:
        ext.create_custom_resource_definition(doc)
    except ApiException as e:
        if e.status != 409:
            raise
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        got = ext.read_custom_resource_definition(doc["metadata"]["name"])
        if any(c.type == "Established" and c.status == "True" for c in (got.status.conditions or [])):
            return
        time.sleep(0.2)
    pytest.fail("CRD not Established in 60 s")


def make_plan(name: str) -> Any:
    pkg = package("tuned", "1.0.0", interrupt="reboot")
    r = recipe(name, pkg, selector={"pool": "gpu"}, budget=budget(count=1), version="2026.11.0")
    nodes = [node(f"n{i}", labels={"pool": "gpu"}) for i in range(3)]
    return compute_plan(r, DeploymentPolicy.legacy("legacy", r.interruptionBudget), fleet(nodes), revision="abc")


def test_status_object_round_trip_judged_by_kstatus(crd: None, api: Any, test_id: str) -> None:
    from kubernetes import client

    objs = StatusObjects(api)
    plan = make_plan(test_id)
    stored = objs.ensure(new_object(plan))
    gen = stored["metadata"]["generation"]
    progress = RolloutProgress(plan, run_id="run-e2e")
    try:
        # 1. in progress
        progress.on_event(Event(1, "n0", "cordon"))
        objs.write_status(test_id, rollout_status(progress, generation=gen, now="2026-11-30T12:00:00Z"))
        # 2. complete
        done = copy.deepcopy(progress)
        done.finish(
            RunResult(
                "run-e2e",
                plan.planHash,
                test_id,
                "succeeded",
                [NodeOutcome(n, "complete") for n in ("n0", "n1", "n2")],
                [],
                [],
                5.0,
            )
        )
        read = []
        read.append(objs.get(test_id))
        objs.write_status(
            test_id,
            rollout_status(done, generation=gen, now="2026-11-30T12:01:00Z", previous=read[0]["status"]["conditions"]),
        )
        read.append(objs.get(test_id))
        # 3. failed
        failed = RolloutProgress(plan, run_id="run-e2e")
        failed.finish(
            RunResult(
                "run-e2e",
                plan.planHash,
                test_id,
                "failed",
                [NodeOutcome("n0", "failed", failed_stage="apply", message="exit 2")],
                [],
                [],
                5.0,
            )
        )
        objs.write_status(test_id, rollout_status(failed, generation=gen, now="2026-11-30T12:02:00Z"))
        read.append(objs.get(test_id))
        # 4. a new generation (new revision) not yet observed: spec written, status not yet
        newer = objs.ensure({**new_object(plan), "spec": rollout_spec(plan, revision="def")})
        assert newer["metadata"]["generation"] == gen + 1
        read.append(objs.get(test_id))
        # a status write does not bump the generation (status subresource)
        assert read[1]["metadata"]["generation"] == gen and read[2]["metadata"]["generation"] == gen
        got = [(r["status"], r["message"]) for r in kstatus(read)]
        assert got[0] == ("InProgress", "0/3 nodes complete, 1 in progress, 2 pending")
        assert got[1] == ("Current", "Resource is Ready")
        assert got[2][0] == "Failed" and "failed: n0" in got[2][1]
        assert got[3][0] == "InProgress" and "generation" in got[3][1].lower()
        assert read[1]["status"]["summary"] == "3/3 nodes complete"
    finally:
        client.CustomObjectsApi(api).delete_cluster_custom_object(
            "reconciler.nodewright.dev", "v1alpha1", "nodereciperollouts", test_id
        )


def test_argocd_and_crd_manifests_pass_server_side_dry_run(crd: None, api: Any, namespace: str) -> None:
    """Every example object is accepted by the API server (schema, defaults, admission) in a
    server-side apply dry run; namespaced objects go to the test's namespace."""
    from kubernetes.dynamic import DynamicClient

    dyn = DynamicClient(api)
    docs = load_all(ROOT / "examples" / "rbac" / "reconciler-rbac.yaml")  # the chart's RBAC, rendered
    docs += load_all(ROOT / "examples" / "argocd" / "hooks.yaml")
    docs += load_all(ROOT / "examples" / "argocd" / "argocd-cm-health.yaml") + load_all(CRD)
    kinds = []
    for doc in docs:
        doc = copy.deepcopy(doc)
        if doc["kind"] == "Namespace":
            doc["metadata"]["name"] = namespace
        elif doc["metadata"].get("namespace"):
            doc["metadata"]["namespace"] = namespace
        for s in doc.get("subjects", []):
            s["namespace"] = namespace
        if doc["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            doc["metadata"]["name"] = f"{namespace}-{doc['metadata']['name']}"
            if "roleRef" in doc:
                doc["roleRef"]["name"] = f"{namespace}-{doc['roleRef']['name']}"
        res = dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        out = res.server_side_apply(
            body=doc,
            name=doc["metadata"]["name"],
            namespace=doc["metadata"].get("namespace"),
            field_manager="reconciler-e2e",
            dry_run="All",
            force_conflicts=True,
        )
        assert out.metadata.name == doc["metadata"]["name"]
        kinds.append(doc["kind"])
    assert kinds.count("Job") == 4 and "CustomResourceDefinition" in kinds and "ConfigMap" in kinds

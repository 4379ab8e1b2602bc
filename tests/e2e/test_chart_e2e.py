"""The Helm chart on the real control plane: the rendered chart (CRDs, RBAC, controller Deployment
and metrics Service; and the pipeline CronJob variant) is applied server side with strict field
validation, every recipes/*.yaml is accepted as a NodeRecipe object, and the chart's
ServiceAccount is allowed exactly what the RBAC says (SubjectAccessReview by the API server's
authorizer).

The controller Deployment is applied with 0 replicas: its image is in no registry the kwok
cluster pulls from, and its pods must not land on the nodes other tests drain. The controller
itself runs as host processes with this ServiceAccount's token in tests/e2e/test_controller_e2e.py.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from tests.deploy.conftest import helm_binary

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "node-reconciler"
NS = "node-reconciler"
SA = f"system:serviceaccount:{NS}:node-reconciler"
MANAGER = "reconciler-e2e-chart"


def render(*values: str) -> list[dict[str, Any]]:
    cp = subprocess.run([str(helm_binary()), "template", "node-reconciler", str(CHART), "--namespace", NS,
                         "--kube-version", "1.36.3", "--include-crds", *values],
                        capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    return [d for d in yaml.safe_load_all(cp.stdout) if d]


def apply(dyn: DynamicClient, doc: dict[str, Any], *, dry_run: bool = False) -> Any:
    """Server-side apply with strict field validation (unknown or duplicate fields are errors)."""
    res = dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
    kwargs: dict[str, Any] = {"dry_run": "All"} if dry_run else {}
    return res.server_side_apply(body=doc, name=doc["metadata"]["name"], namespace=doc["metadata"].get("namespace"),
                                 field_manager=MANAGER, force_conflicts=True, field_validation="Strict", **kwargs)


def wait_established(api: Any, name: str) -> None:
    ext = client.ApiextensionsV1Api(api)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        got = ext.read_custom_resource_definition(name)
        if any(c.type == "Established" and c.status == "True" for c in (got.status.conditions or [])):
            return
        time.sleep(0.2)
    pytest.fail(f"CRD {name} not Established in 60 s")


@pytest.fixture(scope="module")
def chart_applied(controlplane: Any, api: Any) -> list[dict[str, Any]]:
    """The default rendering, with the kube-rbac-proxy metrics sidecar and its RBAC, applied
    (server side) into the namespace node-reconciler."""
    dyn = DynamicClient(api)
    with contextlib.suppress(client.exceptions.ApiException):
        client.CoreV1Api(api).create_namespace({"metadata": {"name": NS}})
    objs = render("--set", "controller.replicas=0", "--set", "controller.metrics.rbacProxy.enabled=true",
                  "--set", "controller.metrics.rbacProxy.scrapers[0].name=prometheus",
                  "--set", "controller.metrics.rbacProxy.scrapers[0].namespace=monitoring")
    for doc in [o for o in objs if o["kind"] == "CustomResourceDefinition"]:
        apply(dyn, doc)
        wait_established(api, doc["metadata"]["name"])
    for doc in [o for o in objs if o["kind"] != "CustomResourceDefinition"]:
        assert apply(dyn, doc).metadata.name == doc["metadata"]["name"]
    return objs


def test_the_rendered_chart_is_applied_server_side(chart_applied: list[dict[str, Any]], api: Any) -> None:
    kinds = sorted(o["kind"] for o in chart_applied)
    assert kinds.count("CustomResourceDefinition") == 2 and "Deployment" in kinds and "Service" in kinds
    assert "PodDisruptionBudget" in kinds
    dep = client.AppsV1Api(api).read_namespaced_deployment("node-reconciler-controller", NS)
    controller, proxy = dep.spec.template.spec.containers
    assert controller.args[0] == "controller" and proxy.name == "kube-rbac-proxy"
    assert dep.spec.template.spec.service_account_name == "node-reconciler"
    svc = client.CoreV1Api(api).read_namespaced_service("node-reconciler-metrics", NS)
    assert svc.spec.ports[0].target_port == "https-metrics"
    pdb = client.PolicyV1Api(api).read_namespaced_pod_disruption_budget("node-reconciler-controller", NS)
    assert pdb.spec.max_unavailable == 1


def test_the_pipeline_cronjob_variant_passes_a_server_side_dry_run(chart_applied: list[dict[str, Any]],
                                                                   api: Any) -> None:
    dyn = DynamicClient(api)
    objs = render("--set", "controller.enabled=false", "--set", "pipeline.mode=cronjob",
                  "--set", "recipeSource.type=git", "--set", "recipeSource.git.url=https://git.example/fleet.git",
                  "--set", "recipeSource.git.secretName=fleet-token")
    (cron,) = [o for o in objs if o["kind"] == "CronJob"]
    assert apply(dyn, cron, dry_run=True).metadata.name == "node-reconciler-apply"
    (job,) = [o for o in render("--set", "controller.enabled=false", "--set", "pipeline.mode=job",
                                "--set", "recipeSource.type=directory") if o["kind"] == "Job"]
    assert apply(dyn, job, dry_run=True).metadata.name == "node-reconciler-apply-1"


def test_every_recipe_file_is_accepted_as_a_noderecipe(chart_applied: list[dict[str, Any]], api: Any,
                                                       test_id: str) -> None:
    """recipes/*.yaml applied as they are (strict field validation: a recipe file is the
    object), read back unchanged."""
    dyn = DynamicClient(api)
    custom = client.CustomObjectsApi(api)
    names = []
    try:
        for path in sorted((ROOT / "recipes").glob("*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                if not doc or doc.get("kind") != "NodeRecipe":
                    continue
                doc["metadata"]["name"] = f"{test_id}-{doc['metadata']['name']}"[:63].rstrip("-.")
                out = apply(dyn, doc)
                names.append(out.metadata.name)
                got = custom.get_cluster_custom_object("reconciler.nodewright.dev", "v1alpha1", "noderecipes",
                                                       out.metadata.name)
                assert got["spec"] == doc["spec"], path.name  # nothing pruned or defaulted
                assert got["spec"]["version"], path.name
                assert got["metadata"]["generation"] == 1
        assert len(names) == len(list((ROOT / "recipes").glob("*.yaml")))
    finally:
        for n in names:
            with contextlib.suppress(client.exceptions.ApiException):
                custom.delete_cluster_custom_object("reconciler.nodewright.dev", "v1alpha1", "noderecipes", n)


def test_metadata_version_is_refused_by_the_api_server(chart_applied: list[dict[str, Any]], api: Any,
                                                      test_id: str) -> None:
    """Why the release moved to spec.version (the old file form is only read, with a warning):
    ObjectMeta has no version field."""
    doc = yaml.safe_load((ROOT / "recipes" / "containerd-limits.yaml").read_text())
    doc["metadata"]["name"] = f"{test_id}-as-is"
    doc["metadata"]["version"] = doc["spec"].pop("version")
    with pytest.raises(Exception, match=r"metadata\.version: field not declared in schema"):
        apply(DynamicClient(api), doc, dry_run=True)


def test_a_recipe_with_an_unknown_field_is_rejected(chart_applied: list[dict[str, Any]], api: Any,
                                                    test_id: str) -> None:
    dyn = DynamicClient(api)
    doc = {"apiVersion": "reconciler.nodewright.dev/v1alpha1", "kind": "NodeRecipe",
           "metadata": {"name": f"{test_id}-bad"},
           "spec": {"nodeSelector": {"matchLabels": {"a": "b"}}, "sequencing": "node", "drainz": {}}}
    with pytest.raises(client.exceptions.ApiException) as e:
        apply(dyn, doc, dry_run=True)
    # server-side apply builds a typed patch first: an undeclared field fails there (500 + the field)
    assert ".spec.drainz: field not declared in schema" in str(e.value.body), e.value.body


@pytest.mark.parametrize(("attrs", "allowed"), [
    ({"verb": "patch", "resource": "nodes"}, True),
    ({"verb": "update", "resource": "nodes"}, False),
    ({"verb": "create", "resource": "pods", "subresource": "eviction", "namespace": "team-a"}, True),
    ({"verb": "delete", "resource": "pods", "namespace": "team-a"}, False),
    ({"verb": "create", "resource": "pods", "namespace": NS}, True),
    ({"verb": "get", "resource": "secrets", "namespace": NS}, False),
    ({"verb": "update", "resource": "leases", "group": "coordination.k8s.io", "namespace": NS}, True),
    ({"verb": "create", "resource": "events", "namespace": "default"}, True),
    ({"verb": "watch", "resource": "noderecipes", "group": "reconciler.nodewright.dev"}, True),
    ({"verb": "patch", "resource": "noderecipes", "group": "reconciler.nodewright.dev"}, False),
    ({"verb": "get", "resource": "namespaces", "name": NS}, True),
    ({"verb": "get", "resource": "namespaces", "name": "kube-system"}, False),
    # the kube-rbac-proxy sidecar (controller.metrics.rbacProxy): authenticate and authorize scrapes
    ({"verb": "create", "resource": "tokenreviews", "group": "authentication.k8s.io"}, True),
    ({"verb": "create", "resource": "subjectaccessreviews", "group": "authorization.k8s.io"}, True),
], ids=lambda a: "-".join(str(v) for v in a.values()) if isinstance(a, dict) else str(a))
def test_the_chart_service_account_may_do_exactly_what_the_rbac_says(
        chart_applied: list[dict[str, Any]], api: Any, attrs: dict[str, str], allowed: bool) -> None:
    review = client.AuthorizationV1Api(api).create_subject_access_review({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": SA, "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NS}",
                                        "system:authenticated"],
                 "resourceAttributes": attrs}})
    assert review.status.allowed is allowed, (attrs, review.status.reason)


@pytest.mark.parametrize(("user", "allowed"), [
    ("system:serviceaccount:monitoring:prometheus", True),   # controller.metrics.rbacProxy.scrapers
    ("system:serviceaccount:team-a:default", False),
])
def test_only_the_scrapers_may_read_metrics_through_the_proxy(chart_applied: list[dict[str, Any]], api: Any,
                                                               user: str, allowed: bool) -> None:
    """The question kube-rbac-proxy asks the API server for each scrape (SubjectAccessReview on
    the non-resource URL /metrics), answered by the API server's authorizer."""
    review = client.AuthorizationV1Api(api).create_subject_access_review({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": ["system:serviceaccounts", "system:authenticated"],
                 "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}})
    assert review.status.allowed is allowed, review.status.reason

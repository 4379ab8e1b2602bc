"""``helm install`` and ``helm upgrade`` of the chart on the real control plane, and the CRD
upgrade path (issue 38): Helm installs ``crds/`` once and never updates them, so a release whose
NodeRecipe schema changed is applied by ``reconciler crds apply`` (docs/how-to/deploy-helm.md).

The cluster starts from an older release's NodeRecipe CRD (this one less ``spec.version``, as the
CRD was before the release moved there), installed with ``helm install`` into a namespace of its
own; ``helm upgrade`` to this chart leaves the CRD as it was (Helm's documented behaviour, checked
so the docs stay true), and ``reconciler crds apply`` brings it to this release: a NodeRecipe with
``spec.version`` is then accepted with strict field validation. A typo in values fails ``helm
install`` with the schema's message and installs nothing.

The release is installed with ``rbac.create=false`` and no controller replicas: the chart's
cluster-scoped RBAC is already applied by tests/e2e/test_chart_e2e.py in this control plane (not
owned by a Helm release), and no kubelet runs the image here.
"""

from __future__ import annotations

import contextlib
import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from reconciler.load.crd import noderecipe_crd
from tests.deploy.conftest import helm_binary
from tests.e2e.test_chart_e2e import CHART, ROOT, apply, wait_established

CRD = "noderecipes.reconciler.nodewright.dev"


def helm(controlplane: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(helm_binary()), "--kubeconfig", str(controlplane.kubeconfig), *args],
                          capture_output=True, text=True, timeout=300)


def reconciler(controlplane: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "reconciler", *args, "--kubeconfig", str(controlplane.kubeconfig)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})


def spec_fields(api: Any) -> set[str]:
    got = client.ApiextensionsV1Api(api).read_custom_resource_definition(CRD)
    return set(got.spec.versions[0].schema.open_apiv3_schema.properties["spec"].properties)


def old_crd() -> dict[str, Any]:
    """The NodeRecipe CRD of an older release: no ``spec.version``."""
    doc = copy.deepcopy(noderecipe_crd())
    del doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["version"]
    return doc


def test_helm_upgrade_keeps_old_crds_and_reconciler_crds_apply_updates_them(
        controlplane: Any, api: Any, test_id: str, tmp_path: Path) -> None:
    ns = f"{test_id[-12:]}-helm".strip("-")
    old_chart = tmp_path / "old" / "node-reconciler"
    shutil.copytree(CHART, old_chart)
    (old_chart / "crds" / "noderecipes.yaml").write_text(yaml.safe_dump(old_crd()))
    release = ["-n", ns, "--set", "rbac.create=false", "--set", "controller.replicas=0"]
    # the older release's CRD in the cluster (created by its `helm install`, or there from before)
    apply(DynamicClient(api), old_crd())
    wait_established(api, CRD)
    cp = helm(controlplane, "install", "nr", str(old_chart), "--create-namespace", *release)
    try:
        assert cp.returncode == 0, cp.stderr
        assert "version" not in spec_fields(api)

        cp = helm(controlplane, "upgrade", "nr", str(CHART), *release)
        assert cp.returncode == 0, cp.stderr
        assert "reconciler crds apply" in cp.stdout  # NOTES on an upgrade say what to run
        assert "version" not in spec_fields(api), "helm upgrade updated a CRD: the docs are wrong"
        dep = client.AppsV1Api(api).read_namespaced_deployment("node-reconciler-controller", ns)
        assert dep.metadata.labels["helm.sh/chart"].startswith("node-reconciler-")
        assert {e.name: e.value_from.field_ref.field_path for e in dep.spec.template.spec.containers[0].env
                if e.value_from and e.value_from.field_ref}["POD_NAMESPACE"] == "metadata.namespace"

        cp = reconciler(controlplane, "crds", "apply", "--dry-run")
        assert cp.returncode == 0, cp.stderr
        assert f"customresourcedefinition.apiextensions.k8s.io/{CRD} configured (server dry run)" in cp.stdout
        assert "version" not in spec_fields(api)  # a dry run stores nothing

        cp = reconciler(controlplane, "crds", "apply")
        assert cp.returncode == 0, cp.stderr
        assert f"customresourcedefinition.apiextensions.k8s.io/{CRD} configured" in cp.stdout
        assert "nodereciperollouts.reconciler.nodewright.dev unchanged" in cp.stdout
        assert spec_fields(api) == set(noderecipe_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"][
            "properties"]["spec"]["properties"])
        doc = yaml.safe_load((ROOT / "recipes" / "containerd-limits.yaml").read_text())
        doc["metadata"]["name"] = f"{test_id}-upgraded"[:63]
        assert apply(DynamicClient(api), doc, dry_run=True).spec.version == doc["spec"]["version"]

        cp = reconciler(controlplane, "crds", "apply")  # again: nothing to change
        assert cp.returncode == 0 and cp.stdout.count(" unchanged") == 2, cp.stdout + cp.stderr
    finally:
        helm(controlplane, "uninstall", "nr", "-n", ns)
        reconciler(controlplane, "crds", "apply")  # this release's CRDs for the tests after this one


def test_a_typo_in_values_fails_helm_install_with_the_schemas_message(controlplane: Any, api: Any,
                                                                      test_id: str) -> None:
    ns = f"{test_id[-12:]}-typo".strip("-")
    cp = helm(controlplane, "install", "typo", str(CHART), "-n", ns, "--create-namespace",
              "--set", "controller.replica=3")
    assert cp.returncode == 1
    assert "at '/controller': additional properties 'replica' not allowed" in cp.stderr, cp.stderr
    assert helm(controlplane, "status", "typo", "-n", ns).returncode != 0  # no release recorded
    with pytest.raises(client.exceptions.ApiException):
        client.AppsV1Api(api).read_namespaced_deployment("node-reconciler-controller", ns)


def test_crds_apply_without_the_rights_is_a_cluster_error(controlplane: Any, api: Any, tmp_path: Path) -> None:
    """The chart's ServiceAccount may not patch CRDs: exit 4 with the API server's reason."""
    from tests.e2e.test_chart_e2e import NS

    with contextlib.suppress(client.exceptions.ApiException):
        client.CoreV1Api(api).create_namespace({"metadata": {"name": NS}})
    with contextlib.suppress(client.exceptions.ApiException):
        client.CoreV1Api(api).create_namespaced_service_account(NS, {"metadata": {"name": "node-reconciler"}})
    tok = client.CoreV1Api(api).create_namespaced_service_account_token(
        "node-reconciler", NS, {"spec": {"expirationSeconds": 600}})
    kc = tmp_path / "kubeconfig"
    kc.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "e2e", "cluster": {"server": controlplane.server,
                                                 "certificate-authority": str(controlplane.ca_file)}}],
        "users": [{"name": "sa", "user": {"token": tok.status.token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "e2e", "user": "sa"}}]}))
    cp = subprocess.run([sys.executable, "-m", "reconciler", "crds", "apply", "--kubeconfig", str(kc)],
                        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert cp.returncode == 4, cp.stdout + cp.stderr
    assert "customresourcedefinitions" in cp.stderr and "forbidden" in cp.stderr.lower(), cp.stderr
    assert "Traceback" not in cp.stderr and tok.status.token not in cp.stderr

"""The Argo CD pipeline example (examples/argocd) on a first sync, on the real control plane.

Argo CD is not run here; its sync order is (gitops-conventions.md §2.2, Argo CD's sync-waves
documentation): phase (PreSync, then Sync with the plain resources, then PostSync; SyncFail only
on failure) → sync wave (default 0) → kind (gitops-engine's kind order: ServiceAccount and
ConfigMap before the RBAC kinds, Jobs late) → name, each Job hook waited for before the next
wave. This test lays out the example's objects in that order and walks them as a first sync does:

* every object is applied (server side) when its turn comes; the ServiceAccount and its RBAC are
  deleted first, so nothing the example does not create exists;
* at a Job hook, everything its pod needs (its ServiceAccount, the ConfigMaps it mounts without
  ``optional``) must already have been applied by the walk, its pod must be admitted by Pod
  Security ``restricted`` (a server-side dry run in a namespace enforcing it), and its container
  runs from the image (tests/e2e/test_image_e2e.py: the image's root file system, in cluster,
  with a token of the ServiceAccount the walk created) and must exit 0.

Both with the optional policies ConfigMap (a recipe naming a deploymentPolicy) and without it (a
recipe with an interruptionBudget: the absent ConfigMap mounts an empty directory).
"""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from tests.deploy.test_image import Image, run_in_image
from tests.deploy.test_image import image as image  # the fixture, requested by name
from tests.e2e.test_chart_e2e import NS, apply
from tests.e2e.test_chart_e2e import chart_applied as chart_applied  # the fixture, requested by name
from tests.e2e.test_controller_e2e import _complete, recipe_object
from tests.e2e.test_image_e2e import SA_DIR

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "argocd"
HOOK = "argocd.argoproj.io/hook"
WAVE = "argocd.argoproj.io/sync-wave"
PHASES = ("PreSync", "Sync", "PostSync")
#: gitops-engine's kind order inside a wave (pkg/sync/sync_tasks.go kindOrder), the kinds used here
KIND_ORDER = ("Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy", "PodDisruptionBudget",
              "ServiceAccount", "Secret", "SecretList", "ConfigMap", "StorageClass", "PersistentVolume",
              "PersistentVolumeClaim", "CustomResourceDefinition", "ClusterRole", "ClusterRoleList",
              "ClusterRoleBinding", "ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList",
              "Service", "DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
              "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress", "APIService")


def sync_order(docs: list[dict[str, Any]]) -> list[tuple[str, int, dict[str, Any]]]:
    """``docs`` as Argo CD syncs them: ``(phase, wave, doc)`` in order (SyncFail/Skip hooks left out)."""
    out = []
    for d in docs:
        ann = d["metadata"].get("annotations") or {}
        phase = ann.get(HOOK, "Sync")
        if phase not in PHASES:
            continue
        kind = KIND_ORDER.index(d["kind"]) if d["kind"] in KIND_ORDER else len(KIND_ORDER)
        out.append((PHASES.index(phase), int(ann.get(WAVE, "0")), kind, d["metadata"]["name"], d))
    return [(PHASES[p], w, d) for p, w, _, _, d in sorted(out, key=lambda t: t[:4])]


def _inputs(tmp: Path, test_id: str, with_policies: bool) -> tuple[list[dict[str, Any]], dict[str, Path]]:
    """The ConfigMaps of the inputs as the example's kustomize configMapGenerator makes them
    (PreSync hooks of wave -1, hooks.yaml's header), and the same files as host directories."""
    recipes, policies = tmp / "recipes", tmp / "policies"
    recipes.mkdir(mode=0o755)
    policies.mkdir(mode=0o755)
    name = f"hooks-{test_id[-4:]}"
    doc = recipe_object(name, test_id, budget=2, runtime_required=False)
    doc["metadata"] = {"name": name, "version": "2026.12.1"}
    ann = {HOOK: "PreSync", WAVE: "-1"}
    maps = []
    if with_policies:
        del doc["spec"]["interruptionBudget"]
        doc["spec"]["deploymentPolicy"] = "hooks-rollout"
        policy = {"apiVersion": "reconciler.nodewright.dev/v1alpha1", "kind": "DeploymentPolicy",
                  "metadata": {"name": "hooks-rollout"},
                  "spec": {"default": {"budget": {"count": 2}, "strategy": {"fixed": {"initialBatch": 2}}}}}
        (policies / "hooks-rollout.yaml").write_text(yaml.safe_dump(policy))
        maps.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": "node-reconciler-policies", "namespace": NS, "annotations": ann},
            "data": {"hooks-rollout.yaml": (policies / "hooks-rollout.yaml").read_text()}})
    (recipes / f"{name}.yaml").write_text(yaml.safe_dump(doc))
    maps.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "node-reconciler-recipes", "namespace": NS, "annotations": ann},
        "data": {f"{name}.yaml": (recipes / f"{name}.yaml").read_text()}})
    return maps, {"/inputs/recipes": recipes, "/inputs/policies": policies, "recipe": Path(name)}


def _first_sync_state(api: Any) -> None:
    """Delete what the example creates (ServiceAccount, RBAC, input ConfigMaps): a first sync."""
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    for call in (lambda: core.delete_namespaced_service_account("node-reconciler", NS),
                 lambda: rbac.delete_cluster_role("node-reconciler"),
                 lambda: rbac.delete_cluster_role_binding("node-reconciler"),
                 lambda: rbac.delete_namespaced_role("node-reconciler", NS),
                 lambda: rbac.delete_namespaced_role_binding("node-reconciler", NS),
                 lambda: rbac.delete_namespaced_role("node-reconciler-events", "default"),
                 lambda: rbac.delete_namespaced_role_binding("node-reconciler-events", "default"),
                 lambda: core.delete_namespaced_config_map("node-reconciler-recipes", NS),
                 lambda: core.delete_namespaced_config_map("node-reconciler-policies", NS)):
        with contextlib.suppress(client.exceptions.ApiException):
            call()


def _needs(pod: dict[str, Any]) -> list[tuple[str, str]]:
    """What a pod cannot start without: its ServiceAccount and every non-optional ConfigMap volume."""
    out = [("ServiceAccount", pod.get("serviceAccountName", "default"))]
    for v in pod.get("volumes", []):
        cm = v.get("configMap")
        if cm and not cm.get("optional"):
            out.append(("ConfigMap", cm["name"]))
    return out


def _restricted_dry_run(api: Any, ns: str, pod: dict[str, Any], name: str) -> None:
    """Pod Security admission of the hook's pod in a namespace enforcing ``restricted``."""
    spec = copy.deepcopy(pod)
    spec.pop("serviceAccountName", None)  # admitted on its own merits, not on an account of that namespace
    client.CoreV1Api(api).create_namespaced_pod(ns, {"metadata": {"name": name}, "spec": spec}, dry_run="All")


def _run_hook(img: Image, api: Any, controlplane: Any, pod: dict[str, Any], mounts: dict[str, Path],
              tmp: Path) -> Any:
    """The hook's container run from the image as its pod would run it (in cluster, with a token
    of the pod's ServiceAccount, its volumes bound)."""
    from urllib.parse import urlparse

    (c,) = pod["containers"]
    tok = client.CoreV1Api(api).create_namespaced_service_account_token(
        pod["serviceAccountName"], NS, {"spec": {"expirationSeconds": 3600}})
    sa = tmp / f"sa-{c['name']}-{len(list(tmp.iterdir()))}"
    sa.mkdir(mode=0o755)
    (sa / "token").write_text(tok.status.token)
    (sa / "ca.crt").write_bytes(Path(controlplane.ca_file).read_bytes())
    (sa / "namespace").write_text(NS)
    url = urlparse(controlplane.server)
    env = {"KUBERNETES_SERVICE_HOST": str(url.hostname), "KUBERNETES_SERVICE_PORT": str(url.port),
           **{e["name"]: str(e["value"]) for e in c.get("env", []) if "value" in e}}
    binds = {SA_DIR: sa, **{m["mountPath"]: mounts[m["mountPath"]] for m in c.get("volumeMounts", [])
                            if m["mountPath"] in mounts}}
    return run_in_image(img, c.get("args", []), entrypoint=c.get("command"), env=env, mounts=binds)


@pytest.mark.parametrize("with_policies", [True, False], ids=["with-policies", "without-policies"])
def test_the_argocd_hook_sequence_runs_with_the_charts_rbac_on_a_first_sync(
        image: Image, controlplane: Any, api: Any, chart_applied: Any, make_nodes: Any, test_id: str,
        tmp_path: Path, with_policies: bool) -> None:
    dyn = DynamicClient(api)
    core = client.CoreV1Api(api)
    nodes = make_nodes(2)
    maps, mounts = _inputs(tmp_path, test_id, with_policies)
    recipe = str(mounts.pop("recipe"))
    docs = [d for f in ("rbac-presync.yaml", "hooks.yaml") for d in yaml.safe_load_all((EXAMPLE / f).read_text()) if d]
    order = sync_order(docs + maps)
    assert [p for p, _, d in order if d["kind"] == "Job"] == ["PreSync", "Sync", "PostSync"]
    restricted = f"{test_id}-restricted"
    core.create_namespace({"metadata": {"name": restricted, "labels": {
        "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}})
    _first_sync_state(api)
    applied: set[tuple[str, str]] = set()
    ran: list[str] = []
    try:
        for phase, wave, doc in order:
            kind, name = doc["kind"], doc["metadata"]["name"]
            if kind != "Job":
                apply(dyn, doc)
                applied.add((kind, name))
                continue
            pod = doc["spec"]["template"]["spec"]
            missing = [need for need in _needs(pod) if need not in applied]
            assert not missing, f"{phase} hook {name} (wave {wave}) runs before {missing} exist on a first sync"
            _restricted_dry_run(api, restricted, pod, name)
            cp = _run_hook(image, api, controlplane, pod, mounts, tmp_path)
            assert cp.returncode == 0, (
                f"{phase} hook {name}: exit {cp.returncode}\n{cp.stdout[-2000:]}{cp.stderr[-3000:]}")
            ran.append(f"{phase}:{name}")
            if phase == "Sync":
                assert sorted(_complete(api, nodes, recipe)) == sorted(nodes), cp.stderr[-3000:]
        assert ran == ["PreSync:node-reconciler-presync", "Sync:node-reconciler-apply",
                       "PostSync:node-reconciler-verify"]
    finally:
        with contextlib.suppress(Exception):
            core.delete_namespace(restricted)
        with contextlib.suppress(Exception):
            client.CustomObjectsApi(api).delete_cluster_custom_object(
                "reconciler.nodewright.dev", "v1alpha1", "nodereciperollouts", recipe)
        for cm in ("node-reconciler-recipes", "node-reconciler-policies"):
            with contextlib.suppress(Exception):
                core.delete_namespaced_config_map(cm, NS)
        # the chart's RBAC as the other modules expect it (the walk re-created it as hooks)
        for d in chart_applied:
            if d["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"):
                with contextlib.suppress(Exception):
                    apply(dyn, d)

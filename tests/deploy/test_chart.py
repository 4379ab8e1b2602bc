"""The Helm chart charts/node-reconciler: ``helm lint``, ``helm template`` with default and
non-default values (kinds, controller Deployment, pipeline Job/CronJob, refusals), RBAC least
privilege checked against the API calls the code makes, the CRDs (the NodeRecipe schema,
generated from the model, accepts every file in recipes/) and the rendered example RBAC.

Helm comes from tests/deploy/build-helm.sh (skipped without it, failed in CI).
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.deploy.conftest import OBJECT_META_FIELDS, ROOT, VERSION, helm_binary

pytestmark = pytest.mark.deploy

CHART = ROOT / "charts" / "node-reconciler"
NS = "node-reconciler"
KUBE = "1.36.3"
IMAGE = f"ghcr.io/nodewright/node-reconciler:{VERSION}"
GIT = ["--set", "recipeSource.type=git", "--set", "recipeSource.git.url=https://git.example/fleet.git"]


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    cp = subprocess.run([str(helm_binary()), *args], capture_output=True, text=True, timeout=120)
    if check:
        assert cp.returncode == 0, cp.stderr
    return cp


def render(*values: str, namespace: str = NS, crds: bool = False) -> list[dict[str, Any]]:
    """``helm template`` of the chart; the objects rendered (empty documents dropped)."""
    extra = ["--include-crds"] if crds else []
    cp = helm("template", "node-reconciler", str(CHART), "--namespace", namespace, "--kube-version", KUBE,
              *extra, *values)
    return [d for d in yaml.safe_load_all(cp.stdout) if d]


def render_error(*values: str, namespace: str = NS) -> str:
    cp = helm("template", "node-reconciler", str(CHART), "--namespace", namespace, "--kube-version", KUBE,
              *values, check=False)
    assert cp.returncode != 0, "rendering was expected to fail"
    return cp.stderr


def one(objs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (obj,) = [o for o in objs if o["kind"] == kind]
    return obj


def kinds(objs: list[dict[str, Any]]) -> list[str]:
    return sorted(o["kind"] for o in objs)


# ------------------------------------------------------------------ lint, metadata
MONITORING = ["--set", "controller.metrics.rbacProxy.enabled=true",
              "--set", "controller.metrics.serviceMonitor.enabled=true", "--set", "prometheusRule.enabled=true"]


@pytest.mark.parametrize("values", [
    [],
    ["--set", "controller.enabled=false", "--set", "pipeline.mode=job", *GIT],
    ["--set", "controller.enabled=false", "--set", "pipeline.mode=cronjob", "--set", "recipeSource.type=directory"],
    MONITORING,
], ids=["default", "job-git", "cronjob-directory", "monitoring"])
def test_helm_lint_is_clean(values: list[str]) -> None:
    cp = helm("lint", "--strict", str(CHART), "--namespace", NS, "--kube-version", KUBE, *values)
    assert "0 chart(s) failed" in cp.stdout


def test_chart_and_app_version_follow_the_package_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == VERSION
    assert yaml.safe_load((CHART / "values.yaml").read_text())["image"]["repository"] == IMAGE.split(":")[0]


# ------------------------------------------------------------------ default: the controller
def test_default_values_render_the_controller_and_its_rbac() -> None:
    objs = render()
    assert kinds(objs) == ["ClusterRole", "ClusterRoleBinding", "Deployment", "PodDisruptionBudget", "Role", "Role",
                           "RoleBinding", "RoleBinding", "ServiceAccount"]  # no metrics Service: /metrics is local
    dep = one(objs, "Deployment")
    assert dep["metadata"]["namespace"] == NS and dep["spec"]["replicas"] == 2
    pod = dep["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "node-reconciler"
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 65532
    (c,) = pod["containers"]
    assert c["image"] == IMAGE
    assert c["args"][:2] == ["controller", "--source=crd"]
    assert "--leader-elect=true" in c["args"] and "--leader-elect-lease-duration=10s" in c["args"]
    assert "--metrics-bind-address=127.0.0.1:8080" in c["args"] and "--health-probe-bind-address=:8081" in c["args"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"probes": 8081}  # /metrics on the loopback address: not a pod port
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "probes"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "probes"}
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    env = {e["name"] for e in c["env"]}
    assert {"POD_NAME", "POD_NAMESPACE"} <= env
    pdb = one(objs, "PodDisruptionBudget")
    assert pdb["metadata"]["namespace"] == NS and pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]


def test_controller_with_a_git_source_and_digest_pinned_image() -> None:
    digest = "sha256:" + "ab" * 32
    objs = render(*GIT, "--set", "recipeSource.git.ref=v2026.11", "--set", "recipeSource.git.secretName=fleet-token",
                  "--set", f"image.digest={digest}", "--set", "clusterName=prod-a", "--set", "controller.replicas=3")
    dep = one(objs, "Deployment")
    assert dep["spec"]["replicas"] == 3
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert c["image"] == f"ghcr.io/nodewright/node-reconciler@{digest}"
    for arg in ("--source=git", "--git-url=https://git.example/fleet.git", "--git-ref=v2026.11",
                "--git-path=recipes", "--git-policy-path=policies", "--git-interval=5m", "--cluster-name=prod-a"):
        assert arg in c["args"]
    (tok,) = [e for e in c["env"] if e["name"] == "RECONCILER_GIT_TOKEN"]
    assert tok["valueFrom"]["secretKeyRef"] == {"name": "fleet-token", "key": "token"}


@pytest.mark.parametrize("values", [
    [],
    [*GIT, "--set", "recipeSource.git.secretName=fleet-token", "--set", "clusterName=prod-a"],
    ["--set", "recipeSource.type=directory", "--set", "recipeSource.directory.policyVolume.configMap.name=p"],
    ["--set", "controller.leaderElection.enabled=false", "--set", "controller.extraArgs={--workers=8}"],
], ids=["crd", "git", "directory", "no-leader-election"])
def test_the_controller_args_are_the_verbs_flags(values: list[str]) -> None:
    """Every argument the Deployment passes is parsed by `reconciler controller` itself and passes
    its option checks (reconciler/cli/controller.py), so a rendered chart never crash-loops on a flag."""
    from reconciler.cli.controller import _check
    from reconciler.cli.main import build_parser

    (c,) = one(render(*values), "Deployment")["spec"]["template"]["spec"]["containers"]
    args = build_parser().parse_args(c["args"])
    _check(args)
    assert args.verb == "controller"
    assert args.metrics_addr == ("127.0.0.1", 8080) and args.probe_addr == ("", 8081)
    assert args.leader_elect is ("controller.leaderElection.enabled=false" not in values)
    assert (args.leader_elect_lease_duration, args.leader_elect_renew_deadline, args.leader_elect_retry_period) == (
        10.0, 7.0, 1.0)


def test_controller_with_git_status_commits_gets_the_flags_and_only_the_push_token() -> None:
    objs = render("--set", "clusterName=prod-a", "--set", "statusRepo.url=https://git.example/status.git",
                  "--set", "statusRepo.secretName=status-push")
    from reconciler.cli.controller import _check
    from reconciler.cli.main import build_parser

    (c,) = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"]
    args = build_parser().parse_args(c["args"])
    _check(args)
    assert (args.status_repo, args.status_branch, args.cluster_name) == (
        "https://git.example/status.git", "reconciler-status", "prod-a")
    env = {e["name"]: e for e in c["env"]}
    assert env["RECONCILER_STATUS_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "status-push", "key": "token"}
    assert "RECONCILER_GIT_TOKEN" not in env  # the source is crd: no read token


def test_controller_disabled_renders_no_deployment_and_no_service() -> None:
    objs = render("--set", "controller.enabled=false", "--set", "controller.metrics.rbacProxy.enabled=true")
    assert not {"Deployment", "Service", "PodDisruptionBudget"} & set(kinds(objs))
    assert "metrics" not in " ".join(o["metadata"]["name"] for o in objs)  # nor the proxy's RBAC


# ------------------------------------------------------------------ the pipeline variant
def test_pipeline_job_clones_the_git_source_and_runs_apply() -> None:
    objs = render("--set", "controller.enabled=false", "--set", "pipeline.mode=job", *GIT,
                  "--set", "clusterName=prod-a", "--set", "statusRepo.url=https://git.example/status.git")
    job = one(objs, "Job")
    assert job["metadata"]["name"] == "node-reconciler-apply-1"
    assert job["spec"]["backoffLimit"] == 2 and job["spec"]["activeDeadlineSeconds"] == 21600
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["serviceAccountName"] == "node-reconciler"
    (clone,) = pod["initContainers"]
    assert clone["image"] == IMAGE and "git" in clone["args"][0] and "clone" in clone["args"][0]
    assert {e["name"]: e.get("value") for e in clone["env"]} == {"GIT_URL": "https://git.example/fleet.git",
                                                                  "GIT_REF": "main"}
    (c,) = pod["containers"]
    assert c["command"] == ["/bin/sh", "-ec"]
    script, argv0, *args = c["args"]
    assert script.startswith('exec reconciler apply "$@" --source-revision') and argv0 == "reconciler"
    assert args == ["/source/repo/recipes", "--policy", "/source/repo/policies", "--namespace", NS,
                    "--cluster-name", "prod-a",
                    "--status-object", "--status-repo=https://git.example/status.git",
                    "--status-branch=reconciler-status"]
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert mounts == {"tmp": "/tmp", "source": "/source"}


def test_pipeline_cronjob_with_a_mounted_directory() -> None:
    objs = render("--set", "controller.enabled=false", "--set", "pipeline.mode=cronjob",
                  "--set", "recipeSource.type=directory", "--set", "pipeline.schedule=0 3 * * *",
                  "--set", "recipeSource.directory.policyVolume.configMap.name=node-reconciler-policies")
    cron = one(objs, "CronJob")
    assert cron["spec"]["schedule"] == "0 3 * * *" and cron["spec"]["concurrencyPolicy"] == "Forbid"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert "initContainers" not in pod
    (c,) = pod["containers"]
    assert c["args"] == ['exec reconciler apply "$@"', "reconciler", "/inputs/recipes", "--policy", "/inputs/policies",
                         "--namespace", NS, "--status-object"]
    vols = {v["name"]: v for v in pod["volumes"]}
    assert vols["recipes"]["configMap"] == {"name": "node-reconciler-recipes"}
    assert vols["policies"]["configMap"] == {"name": "node-reconciler-policies"}


def _pods(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for o in objs:
        spec = o.get("spec", {})
        tpl = spec.get("jobTemplate", {}).get("spec", spec).get("template")
        if tpl:
            out.append(tpl["spec"])
    return out


def test_the_reconcilers_pods_are_kept_off_managed_nodes_by_default() -> None:
    """The controller and the pipeline pods: a required node affinity against the managed (GPU)
    nodes and no toleration (the runtime-required taints keep them off joining nodes); a drain
    refuses a node that runs one of them (reconciler.plan.drain.RECONCILER_POD), whose label
    every pod carries."""
    from reconciler.plan.drain import RECONCILER_POD

    objs = render("--set", "pipeline.mode=cronjob", "--set", "recipeSource.type=directory")
    pods = _pods(objs)
    assert len(pods) == 2
    for pod in pods:
        assert pod["affinity"] == {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "nvidia.com/gpu.present", "operator": "NotIn", "values": ["true"]}]}]}}}
        assert "tolerations" not in pod
    for o in objs:
        spec = o.get("spec", {})
        tpl = spec.get("jobTemplate", {}).get("spec", spec).get("template")
        if tpl:
            assert tpl["metadata"]["labels"][RECONCILER_POD[0]] == RECONCILER_POD[1]
    custom = _pods(render("--set", "placement.managedNodes[0].key=pool", "--set",
                          "placement.managedNodes[0].operator=Exists", "--set", "placement.managedNodes[1].key=gpu",
                          "--set", "placement.managedNodes[1].operator=NotIn", "--set",
                          "placement.managedNodes[1].values={no}"))[0]
    assert custom["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"] == [{"matchExpressions": [{"key": "pool", "operator": "DoesNotExist"},
                                                       {"key": "gpu", "operator": "In", "values": ["no"]}]}]
    assert "affinity" not in _pods(render("--set", "placement.avoidManagedNodes=false"))[0]
    own = _pods(render("--set", "affinity.nodeAffinity.x=y"))[0]
    assert own["affinity"] == {"nodeAffinity": {"x": "y"}}


@pytest.mark.parametrize(("values", "namespace", "message"), [
    (["--set", "controller.replica=3"], NS, "at '/controller': additional properties 'replica' not allowed"),
    (["--set", "controller.metrics.servicemonitor.enabled=true"], NS,
     "at '/controller/metrics': additional properties 'servicemonitor' not allowed"),
    (["--set", "controller.enabled=false", "--set", "pipeline.mode=job"], NS,
     "the pipeline Job/CronJob runs `reconciler apply` on files"),
    (["--set", "recipeSource.type=git"], NS, "recipeSource.type=git needs recipeSource.git.url"),
    (["--set", "recipeSource.type=s3"], NS, "at '/recipeSource/type': value must be one of 'crd', 'git', 'directory'"),
    (["--set", "pipeline.mode=daily"], NS, "at '/pipeline/mode': value must be one of 'none', 'job', 'cronjob'"),
    (["--set", "image.digest=sha256:abc"], NS, "at '/image/digest': 'sha256:abc' does not match pattern"),
    (["--set", "controller.replicas=two"], NS, "at '/controller/replicas': got string, want integer"),
    (["--set", "statusRepo.url=https://git.example/s.git"], NS, "statusRepo.url needs clusterName"),
    (["--set", "clusterName=c", "--set", "statusRepo.url=https://bot:ghp_x@git.example/s.git"], NS,
     "statusRepo.url carries a password or token in the URL"),
    (["--set", "recipeSource.type=git", "--set", "recipeSource.git.url=https://ghp_x@git.example/f.git"], NS,
     "recipeSource.git.url carries credentials in the URL"),
    (["--set", "placement.managedNodes[0].key=a", "--set", "placement.managedNodes[0].operator=Gt"], NS,
     "at '/placement/managedNodes/0/operator': value must be one of 'In', 'NotIn', 'Exists', 'DoesNotExist'"),
    (["--set", "controller.metrics.serviceMonitor.enabled=true"], NS,
     "controller.metrics.serviceMonitor needs the metrics Service: set controller.metrics.rbacProxy.enabled=true"),
], ids=["typo", "nested-typo", "pipeline-from-crd", "git-without-url", "bad-source", "bad-mode", "bad-digest",
        "replicas-type", "status-without-cluster", "status-url-password", "git-url-token", "placement-operator",
        "servicemonitor-unserved"])
def test_bad_values_are_refused_with_the_reason(values: list[str], namespace: str, message: str) -> None:
    err = render_error(*values, namespace=namespace)
    assert message in err and "ghp_x" not in err
    if message.startswith("at '/"):  # the schema's: `helm lint` fails too (a template's fail is only [INFO] there)
        lint = helm("lint", "--strict", str(CHART), "--namespace", namespace, "--kube-version", KUBE, *values,
                    check=False)
        assert lint.returncode != 0 and message in lint.stdout + lint.stderr


def test_a_typo_in_a_values_file_fails_with_the_schemas_message(tmp_path: Path) -> None:
    """A misspelt key anywhere in our values (not only at the top) is refused, not ignored."""
    values = tmp_path / "values.yaml"
    values.write_text("controller:\n  leaderElection:\n    leaseDuraton: 30s\n")
    cp = helm("template", "x", str(CHART), "-f", str(values), "--kube-version", KUBE, check=False)
    assert cp.returncode == 1
    assert "at '/controller/leaderElection': additional properties 'leaseDuraton' not allowed" in cp.stderr


def test_every_value_in_values_yaml_is_in_the_schema() -> None:
    """values.yaml is valid against values.schema.json, and every key it sets is declared there
    (so the schema does not lag the values: a new value without a schema entry fails here)."""
    import json

    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    jsonschema.Draft7Validator(schema).validate(values)

    def walk(v: Any, s: dict[str, Any], where: str) -> None:
        if isinstance(v, dict) and "properties" in s:
            for k, sub in v.items():
                assert k in s["properties"], f"{where}.{k} is not in values.schema.json"
                walk(sub, s["properties"][k], f"{where}.{k}")

    walk(values, schema, "")


# ------------------------------------------------------------------ namespace, metrics, monitoring
def test_everything_lands_in_the_release_namespace() -> None:
    """No namespace is hard-coded: every namespaced object (but the Events Role in `default`, where
    `kubectl describe node` looks) is in the release namespace, the RBAC names it, the controller
    reads it from the pod (POD_NAMESPACE) and the pipeline passes it as --namespace."""
    ns = "fleet-ops"
    objs = render("--set", "pipeline.mode=cronjob", "--set", "recipeSource.type=directory", *MONITORING, namespace=ns)
    placed = {(o["kind"], o["metadata"]["name"]): o["metadata"].get("namespace") for o in objs}
    cluster_scoped = {"ClusterRole", "ClusterRoleBinding"}
    assert {k for k, v in placed.items() if v is None} == {k for k in placed if k[0] in cluster_scoped}
    assert {k for k, v in placed.items() if v not in (None, ns)} == {("Role", "node-reconciler-events"),
                                                                      ("RoleBinding", "node-reconciler-events")}
    for b in objs:
        for s in b.get("subjects", []):
            assert s["namespace"] == ns
    (rule,) = [r for r in one([o for o in objs if o["metadata"]["name"] == "node-reconciler"], "ClusterRole")["rules"]
               if r.get("resources") == ["namespaces"]]
    assert rule["resourceNames"] == [ns]
    (c,) = [c for c in one(objs, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]]
    i = c["args"].index("--namespace")
    assert c["args"][i + 1] == ns
    assert one(objs, "ServiceMonitor")["spec"]["namespaceSelector"] == {"matchNames": [ns]}


def test_metrics_through_kube_rbac_proxy_with_a_service_monitor() -> None:
    """rbacProxy: the sidecar serves HTTPS on the Service and passes authorized requests to the
    controller's loopback /metrics; the ServiceMonitor presents the Prometheus token; the proxy may
    create TokenReviews and SubjectAccessReviews, and the scrapers may `get` /metrics."""
    objs = render(*MONITORING, "--set", "controller.metrics.rbacProxy.scrapers[0].name=prometheus-k8s",
                  "--set", "controller.metrics.rbacProxy.scrapers[0].namespace=monitoring")
    dep = one(objs, "Deployment")
    controller, proxy = dep["spec"]["template"]["spec"]["containers"]
    assert "--metrics-bind-address=127.0.0.1:8080" in controller["args"]
    assert proxy["args"] == ["--secure-listen-address=0.0.0.0:8443", "--upstream=http://127.0.0.1:8080/",
                             "--allow-paths=/metrics"]
    assert proxy["securityContext"]["readOnlyRootFilesystem"] is True
    assert proxy["image"] == "quay.io/brancz/kube-rbac-proxy:v0.19.1"
    svc = one(objs, "Service")
    assert svc["spec"]["ports"] == [{"name": "metrics", "port": 8443, "targetPort": "https-metrics", "protocol": "TCP"}]
    assert {p["name"] for p in proxy["ports"]} == {"https-metrics"}
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in svc["spec"]["selector"].items())
    mon = one(objs, "ServiceMonitor")
    assert mon["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    (ep,) = mon["spec"]["endpoints"]
    assert ep["port"] == "metrics" and ep["scheme"] == "https" and ep["path"] == "/metrics"
    assert ep["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    roles = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ClusterRole"}
    assert roles["node-reconciler-metrics-auth"]["rules"] == [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}]
    assert roles["node-reconciler-metrics-reader"]["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    bindings = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ClusterRoleBinding"}
    assert bindings["node-reconciler-metrics-reader"]["subjects"] == [
        {"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}]
    assert bindings["node-reconciler-metrics-auth"]["subjects"][0]["name"] == "node-reconciler"


def test_an_unauthenticated_metrics_port_is_an_explicit_choice() -> None:
    """bindAddress 0.0.0.0 (no proxy): the controller's own port is served by the Service, plain HTTP."""
    objs = render("--set", "controller.metrics.bindAddress=0.0.0.0",
                  "--set", "controller.metrics.serviceMonitor.enabled=true")
    (c,) = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert "--metrics-bind-address=0.0.0.0:8080" in c["args"]
    assert {p["name"]: p["containerPort"] for p in c["ports"]} == {"metrics": 8080, "probes": 8081}
    assert one(objs, "Service")["spec"]["ports"][0]["targetPort"] == "metrics"
    assert one(objs, "ServiceMonitor")["spec"]["endpoints"][0]["scheme"] == "http"


def test_the_prometheus_rule_carries_the_rules_file() -> None:
    """The PrometheusRule's groups are files/prometheus-rules.yaml, whose queries
    tests/unit/report/test_grafana_dashboard.py resolves against a controller's scrape."""
    rule = one(render("--set", "prometheusRule.enabled=true", "--set", "prometheusRule.labels.release=kps"),
               "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "kps"
    assert rule["spec"] == yaml.safe_load((CHART / "files" / "prometheus-rules.yaml").read_text())
    alerts = [r["alert"] for g in rule["spec"]["groups"] for r in g["rules"]]
    assert alerts == ["NodeReconcilerRolloutHalted", "NodeReconcilerNodeFailed", "NodeReconcilerRolloutStalled"]
    assert "PrometheusRule" not in kinds(render()) and "ServiceMonitor" not in kinds(render())


def test_the_pdb_never_blocks_the_drain_of_a_single_replica() -> None:
    pdb = one(render("--set", "controller.replicas=1"), "PodDisruptionBudget")
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": pdb["spec"]["selector"]}
    assert "PodDisruptionBudget" not in kinds(render("--set", "controller.podDisruptionBudget.enabled=false"))


# ------------------------------------------------------------------ RBAC: least privilege
Grant = tuple[str, str, str, str]  # (scope: cluster | release | default, apiGroup, resource, verb)

#: Every request the adapters make → what it needs (None: needs no grant; the reason). A request
#: is (API group, resource[/subresource], verb), read from the code: the generated client's methods
#: (``client.XxxApi(...).method``) by name, and our request path (``kube/api.py``: ``send``,
#: ``json``, ``list_all``, ``stream``) by the method and path of each call (:func:`requests`).
#: A request missing here fails the test: map it (and the chart's rules) when the code gains one.
API_NEEDS: dict[tuple[str, str, str], list[Grant] | str] = {
    ("", "nodes", "list"): [("cluster", "", "nodes", "list")],
    ("", "nodes", "watch"): [("cluster", "", "nodes", "watch")],
    ("", "nodes", "get"): [("cluster", "", "nodes", "get")],
    ("", "nodes", "patch"): [("cluster", "", "nodes", "patch")],
    ("", "nodes/status", "get"): [("cluster", "", "nodes/status", "get")],
    ("", "nodes/status", "patch"): [("cluster", "", "nodes/status", "patch")],
    ("", "pods", "list"): [("cluster", "", "pods", "list")],
    ("", "pods", "watch"): [("cluster", "", "pods", "watch")],
    ("", "pods", "get"): [("cluster", "", "pods", "get")],
    ("", "pods/eviction", "create"): [("cluster", "", "pods/eviction", "create")],
    ("policy", "poddisruptionbudgets", "list"): [("cluster", "policy", "poddisruptionbudgets", "list")],
    ("apps", "daemonsets", "get"): [("cluster", "apps", "daemonsets", "get")],
    ("", "namespaces", "get"): [("cluster", "", "namespaces", "get")],
    ("", "namespaces", "create"): "only when the namespace is missing; the chart (or examples/rbac) creates it",
    # the stage pods, run owners and package ConfigMaps live in the release namespace
    ("", "pods", "create"): [("release", "", "pods", "create")],
    ("", "pods", "delete"): [("release", "", "pods", "delete")],
    ("", "pods", "deletecollection"): [("release", "", "pods", "deletecollection")],
    ("", "pods/log", "get"): [("release", "", "pods/log", "get")],
    ("", "configmaps", "create"): [("release", "", "configmaps", "create")],
    ("", "configmaps", "get"): [("release", "", "configmaps", "get")],
    ("", "configmaps", "list"): [("release", "", "configmaps", "list")],
    ("", "configmaps", "patch"): [("release", "", "configmaps", "patch")],
    ("", "configmaps", "delete"): [("release", "", "configmaps", "delete")],
    ("coordination.k8s.io", "leases", "get"): [("release", "coordination.k8s.io", "leases", "get")],
    ("coordination.k8s.io", "leases", "create"): [("release", "coordination.k8s.io", "leases", "create")],
    ("coordination.k8s.io", "leases", "update"): [("release", "coordination.k8s.io", "leases", "update")],
    ("coordination.k8s.io", "leases", "delete"): [("release", "coordination.k8s.io", "leases", "delete")],
    ("", "events", "create"): [("default", "", "events", "create")],
    ("", "version", "get"): "GET /version: allowed to every user by system:public-info-viewer",
    # kube/statusobject.py (CustomObjectsApi on the NodeRecipeRollout kind)
    ("client", "get_cluster_custom_object", ""): [
        ("cluster", "reconciler.nodewright.dev", "nodereciperollouts", "get")],
    ("client", "create_cluster_custom_object", ""): [
        ("cluster", "reconciler.nodewright.dev", "nodereciperollouts", "create")],
    ("client", "patch_cluster_custom_object", ""): [
        ("cluster", "reconciler.nodewright.dev", "nodereciperollouts", "patch")],
    ("client", "patch_cluster_custom_object_status", ""): [
        ("cluster", "reconciler.nodewright.dev", "nodereciperollouts/status", "patch")],
    # kube/informer.py: `reconciler controller` only (CONTROLLER below)
    ("client", "list_cluster_custom_object", ""): "controller only: NodeRecipe list+watch (CONTROLLER)",
    ("client", "list_node", ""): "controller only: the node informer (the nodes list+watch above)",
    ("client", "list_pod_disruption_budget_for_all_namespaces", ""): "controller only: PDB list+watch (CONTROLLER)",
    ("client", "list_namespaced_config_map", ""): "controller only: the controls ConfigMap (CONTROLLER)",
}
#: what the controller adds (the chart grants it with controller.enabled): kube/informer.py watches
#: nodes, PodDisruptionBudgets, NodeRecipes and the controls ConfigMap; kube/noderecipes.py writes NodeRecipe status
CONTROLLER: set[Grant] = {
    ("release", "", "configmaps", "watch"),
    ("cluster", "reconciler.nodewright.dev", "noderecipes", "list"),
    ("cluster", "reconciler.nodewright.dev", "noderecipes", "watch"),
    ("cluster", "reconciler.nodewright.dev", "noderecipes/status", "patch"),
    ("cluster", "policy", "poddisruptionbudgets", "watch"),
}
#: a generated client's method (the CustomObjectsApi and the informers' listers); ``self.api`` is
#: also our request path (kube/api.py), whose own names are read by :data:`_REQUEST`
_CLIENT_CALL = re.compile(r"(?:self\.api|client\.\w+Api\([^)]*\))\.([a-z_]+)\b")
_OUR_PATH = {"send", "json", "list_all", "stream", "api_client"}
#: a request on our path: method, then the path expression up to the description argument
_REQUEST = re.compile(r"self\.api\.(send|json|list_all|stream)\(\s*(?:\"([A-Z]+)\",\s*)?(.+?),\s*(?:f?\"|what\b)", re.S)
_PATHS = {"_PATHS[kind]": ("/api/v1/nodes", "/api/v1/pods")}  # kube/watch.py: the two streams
#: the adapters' own path helpers: kube/stages.py ``_path(kind[, name])`` in the release namespace,
#: kube/leases.py ``_path([name])``
_STAGES_PATH = re.compile(r'self\._path\("(\w+)"(, [\w.]+)?\)(?: \+ "(/\w+)")?$')
_LEASES_PATH = re.compile(r"self\._path\((\w+)?\)$")


def _templates(expr: str, file: str, text: str, at: int) -> list[str]:
    """The path templates (``{}`` for a value) a path expression of ``file`` stands for."""
    expr = " ".join(expr.split())
    if expr in _PATHS:
        return list(_PATHS[expr])
    if file == "kube/stages.py" and (m := _STAGES_PATH.match(expr)):
        return [f"/api/v1/namespaces/{{}}/{m.group(1)}" + ("/{}" if m.group(2) else "") + (m.group(3) or "")]
    if file == "kube/leases.py" and (m := _LEASES_PATH.match(expr)):
        return ["/apis/coordination.k8s.io/v1/namespaces/{}/leases" + ("/{}" if m.group(1) else "")]
    if expr in ("path", 'f"{path}/{q(name)}"'):
        assigned = re.findall(r"\bpath = (f?\"[^\"]+\")", text[:at])
        assert assigned, f"{file}: a request on `path` with no `path = ...` before it"
        expr = assigned[-1] if expr == "path" else assigned[-1][:-1] + '/{name}"'
    assert re.fullmatch(r'f?"/[^"]*"', expr), f"{file}: a request path this test cannot read: {expr}"
    return [re.sub(r"\{[^}]*\}", "{}", expr.lstrip("f").strip('"'))]


def _request(method: str, template: str) -> tuple[str, str, str]:
    """(API group, resource[/subresource], verb) of ``method`` on a path template."""
    segs = template.strip("/").split("/")
    if segs == ["version"]:
        return ("", "version", "get")
    group, rest = ("", segs[2:]) if segs[0] == "api" else (segs[1], segs[3:])
    if rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]
    resource, named = rest[0], len(rest) > 1
    if len(rest) > 2:
        resource += "/" + rest[2]
    verb = {"GET": "get" if named else "list", "POST": "create", "PATCH": "patch", "PUT": "update",
            "DELETE": "delete" if named else "deletecollection", "WATCH": "watch"}[method]
    return (group, resource, verb)


def api_calls() -> dict[tuple[str, str, str], set[str]]:
    """The requests the adapters make (reconciler/adapters/**/*.py) → the files making them (paths
    under adapters/, e.g. ``kube/watch.py``): ``(group, resource, verb)`` on our request path,
    ``("client", method, "")`` for a generated client's method."""
    found: dict[tuple[str, str, str], set[str]] = {}
    adapters = ROOT / "reconciler" / "adapters"
    for path in sorted(adapters.rglob("*.py")):
        text, file = path.read_text(), path.relative_to(adapters).as_posix()
        for name in set(_CLIENT_CALL.findall(text)) - _OUR_PATH:
            found.setdefault(("client", name, ""), set()).add(file)
        for m in _REQUEST.finditer(text):
            call, method, expr = m.group(1), m.group(2), m.group(3)
            method = {"list_all": "GET", "stream": "WATCH"}.get(call, method)
            assert method, f"{file}: a request without its HTTP method: {m.group(0)[:80]}"
            for template in _templates(expr, file, text, m.start()):
                found.setdefault(_request(method, template), set()).add(file)
    return found


def needed() -> set[Grant]:
    """The grants the code needs, from its requests."""
    calls = api_calls()
    unmapped = sorted(set(calls) - set(API_NEEDS))
    assert not unmapped, f"API requests without an RBAC mapping in this test (add them, and to the chart): {unmapped}"
    assert calls[("", "nodes", "watch")] == calls[("", "pods", "watch")] == {"kube/watch.py"}
    out: set[Grant] = set()
    for name in calls:
        need = API_NEEDS[name]
        if not isinstance(need, str):
            out.update(need)
    return out


def granted(objs: list[dict[str, Any]]) -> tuple[set[Grant], dict[tuple[str, str], list[str]]]:
    """Grants of the rendered roles (bound to the chart's ServiceAccount) and the resourceNames
    restrictions, by (resource, verb)."""
    sa = one(objs, "ServiceAccount")["metadata"]
    bound = {(b["roleRef"]["kind"], b["roleRef"]["name"], b["metadata"].get("namespace"))
             for b in objs if b["kind"] in ("RoleBinding", "ClusterRoleBinding")
             if {"kind": "ServiceAccount", "name": sa["name"], "namespace": sa["namespace"]} in b["subjects"]}
    out: set[Grant] = set()
    names: dict[tuple[str, str], list[str]] = {}
    for role in objs:
        if role["kind"] not in ("Role", "ClusterRole"):
            continue
        ns = role["metadata"].get("namespace")
        assert (role["kind"], role["metadata"]["name"], ns if role["kind"] == "Role" else None) in bound, \
            f"{role['kind']} {role['metadata']['name']} is not bound to the ServiceAccount"
        scope = "cluster" if role["kind"] == "ClusterRole" else "release" if ns == NS else ns
        for rule in role["rules"]:
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], rule
            for g in rule["apiGroups"]:
                for r in rule["resources"]:
                    for v in rule["verbs"]:
                        out.add((scope, g, r, v))
                        if rule.get("resourceNames"):
                            names[(r, v)] = rule["resourceNames"]
    return out, names


def test_rbac_grants_exactly_what_the_code_calls() -> None:
    got, names = granted(render("--set", "controller.enabled=false"))
    need = needed()
    assert got - need == set(), "granted but never called"
    assert need - got == set(), "called but not granted"
    assert names == {("namespaces", "get"): [NS]}


def test_rbac_with_the_controller_adds_only_the_controllers_needs() -> None:
    got, names = granted(render())
    assert got == needed() | CONTROLLER
    # watch of ConfigMaps only for the controls ConfigMap (the informer selects it by name)
    assert names[("configmaps", "watch")] == ["node-reconciler-controls"]


def test_nothing_dangerous_is_granted() -> None:
    got, _ = granted(render())
    resources = {r for _, _, r, _ in got}
    verbs = {(r, v) for _, _, r, v in got}
    assert not resources & {"secrets", "serviceaccounts/token", "roles", "clusterroles", "rolebindings",
                            "clusterrolebindings", "validatingwebhookconfigurations"}
    assert not {v for _, v in verbs} & {"escalate", "bind", "impersonate", "*"}
    assert ("nodes", "update") not in verbs and ("nodes", "delete") not in verbs
    assert ("pods", "delete") not in {(r, v) for s, _, r, v in got if s == "cluster"}


def test_examples_rbac_is_the_chart_rendered(tmp_path: Path) -> None:
    """examples/rbac/reconciler-rbac.yaml and examples/argocd/rbac-presync.yaml are generated from
    the chart (scripts/render-rbac), not copies; the hook variant is the same objects less the
    namespace, each a PreSync hook of wave -1."""
    out, hooks = tmp_path / "rbac.yaml", tmp_path / "rbac-presync.yaml"
    cp = subprocess.run(["bash", str(ROOT / "scripts" / "render-rbac")], capture_output=True, text=True,
                        env={**os.environ, "RBAC_OUT": str(out), "RBAC_HOOKS_OUT": str(hooks),
                             "HELM": str(helm_binary())}, timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert (ROOT / "examples" / "rbac" / "reconciler-rbac.yaml").read_text() == out.read_text(), \
        "examples/rbac/reconciler-rbac.yaml is stale: run scripts/render-rbac"
    assert (ROOT / "examples" / "argocd" / "rbac-presync.yaml").read_text() == hooks.read_text(), \
        "examples/argocd/rbac-presync.yaml is stale: run scripts/render-rbac"
    hooked = [d for d in yaml.safe_load_all(hooks.read_text()) if d]
    plain = [d for d in yaml.safe_load_all(out.read_text()) if d and d["kind"] != "Namespace"]
    assert [(d["kind"], d["metadata"]["name"]) for d in hooked] == [(d["kind"], d["metadata"]["name"]) for d in plain]
    for h, p in zip(hooked, plain, strict=True):
        ann = h["metadata"].pop("annotations")
        assert ann == {"argocd.argoproj.io/hook": "PreSync", "argocd.argoproj.io/sync-wave": "-1"}
        assert h == p
    assert not (ROOT / "examples" / "argocd" / "rbac.yaml").exists()
    docs = [d for d in yaml.safe_load_all(out.read_text()) if d]
    roles = [d for d in docs if d["kind"] in ("Role", "ClusterRole")]
    assert len(roles) == 3  # ClusterRole, Role (release namespace), Role (events in default)
    for d in docs:  # applied without Helm: no Helm ownership a later `helm install` would trip on
        labels = (d.get("metadata") or {}).get("labels") or {}
        assert labels.get("app.kubernetes.io/managed-by") != "Helm" and "helm.sh/chart" not in labels, d["kind"]


# ------------------------------------------------------------------ CRDs
def crds() -> dict[str, dict[str, Any]]:
    objs = [o for o in render(crds=True) if o["kind"] == "CustomResourceDefinition"]
    return {o["spec"]["names"]["kind"]: o for o in objs}


def test_both_crds_are_installed_with_a_status_subresource() -> None:
    got = crds()
    assert set(got) == {"NodeRecipe", "NodeRecipeRollout"}
    for crd in got.values():
        assert crd["spec"]["group"] == "reconciler.nodewright.dev" and crd["spec"]["scope"] == "Cluster"
        (v,) = crd["spec"]["versions"]
        assert v["name"] == "v1alpha1" and v["subresources"] == {"status": {}}
        status = v["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
        assert status["conditions"]["x-kubernetes-list-map-keys"] == ["type"]
        assert "observedGeneration" in status


def test_noderecipe_crd_is_generated_from_the_model() -> None:
    cp = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen-crds"), "--check"], capture_output=True,
                        text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """The CRD schema as JSON Schema with the API server's strict field validation: OpenAPI
    ``nullable`` → a null type, int-or-string → both types, unknown fields rejected where the
    schema lists properties (kube-apiserver fieldValidation=Strict)."""
    s = copy.deepcopy(schema)

    def walk(n: dict[str, Any]) -> None:
        if n.pop("x-kubernetes-int-or-string", False):
            n["type"] = ["integer", "string"]
        if n.pop("nullable", False) and "type" in n:
            n["type"] = [n["type"], "null"] if isinstance(n["type"], str) else [*n["type"], "null"]
        if "properties" in n and not n.get("x-kubernetes-preserve-unknown-fields"):
            n["additionalProperties"] = False
        for v in (n.get("properties") or {}).values():
            walk(v)
        for k in ("items", "additionalProperties"):
            if isinstance(n.get(k), dict):
                walk(n[k])

    walk(s)
    # the API server accepts only ObjectMeta fields in metadata (no custom schema there)
    s["properties"]["metadata"] = {"type": "object", "additionalProperties": False,
                                   "properties": {k: {} for k in OBJECT_META_FIELDS}}
    return s


@pytest.fixture(scope="module")
def noderecipe_validator() -> Iterator[Any]:
    schema = crds()["NodeRecipe"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    cls = jsonschema.validators.validator_for({})
    yield cls(_strict(schema))


def _recipe_docs() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted((ROOT / "recipes").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "NodeRecipe":
                out.append((path.name, doc))
    return out


def test_noderecipe_schema_accepts_every_recipe_in_recipes(noderecipe_validator: Any) -> None:
    """Every recipe file as it is: a recipe file is the object."""
    docs = _recipe_docs()
    assert len(docs) == len(list((ROOT / "recipes").glob("*.yaml")))
    for name, doc in docs:
        errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in noderecipe_validator.iter_errors(doc)]
        assert not errors, f"recipes/{name}: {errors}"
        assert doc["spec"]["version"], name


def test_metadata_version_cannot_be_stored(noderecipe_validator: Any) -> None:
    """Why the release left metadata.version (the old file form): it is not ObjectMeta."""
    doc = copy.deepcopy(_recipe_docs()[0][1])
    doc["metadata"]["version"] = doc["spec"].pop("version")
    messages = [e.message for e in noderecipe_validator.iter_errors(doc)]
    assert any("'version' was unexpected" in m for m in messages), messages


@pytest.mark.parametrize(("path", "value", "wanted"), [
    (("spec", "packagez"), {}, "Additional properties"),
    (("spec", "priority"), "high", "is not of type"),
    (("spec", "priority"), 0, "less than the minimum"),
    (("spec", "sequencing"), "cluster", "is not one of"),
    (("spec", "packages", "x", "interrupt"), {"type": "shutdown"}, "is not one of"),
    (("spec", "drain", "timeoutSeconds"), "30m", "is not of type"),
], ids=["unknown-field", "priority-type", "priority-minimum", "sequencing-enum", "interrupt-enum", "timeout-type"])
def test_noderecipe_schema_rejects_what_the_loader_rejects(noderecipe_validator: Any, path: tuple[str, ...],
                                                            value: Any, wanted: str) -> None:
    doc = copy.deepcopy(_recipe_docs()[0][1])
    doc["spec"].setdefault("packages", {}).setdefault("x", {"version": "1.0.0", "image": "ghcr.io/example/x"})
    node = doc
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    messages = [e.message for e in noderecipe_validator.iter_errors(doc)]
    assert any(wanted in m for m in messages), messages


def test_the_flux_example_values_render(tmp_path: Path) -> None:
    """examples/flux/helmrelease.yaml installs this chart: its values render the controller
    reading NodeRecipe objects, with the policies mounted and git status commits, and every
    argument passes the controller's own option checks."""
    from reconciler.cli.controller import _check
    from reconciler.cli.main import build_parser

    docs = [d for d in yaml.safe_load_all((ROOT / "examples" / "flux" / "helmrelease.yaml").read_text()) if d]
    (release,) = [d for d in docs if d["kind"] == "HelmRelease"]
    assert release["spec"]["chart"]["spec"]["chart"] == "./charts/node-reconciler"
    assert release["metadata"]["namespace"] == NS
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(release["spec"]["values"]))
    objs = render("-f", str(values))
    assert "CronJob" not in kinds(objs) and "Job" not in kinds(objs)
    dep = one(objs, "Deployment")
    assert dep["spec"]["replicas"] == 2
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["image"] == IMAGE
    args = build_parser().parse_args(c["args"])
    _check(args)
    assert args.source == "crd" and args.policy == ["/inputs/policies"] and args.leader_elect
    assert args.status_repo == "https://github.com/example-org/fleet.git" and args.cluster_name == "prod-a"
    assert {m["name"]: m["mountPath"] for m in c["volumeMounts"]}["policies"] == "/inputs/policies"
    (vol,) = [v for v in pod["volumes"] if v["name"] == "policies"]
    assert vol["configMap"] == {"name": "node-reconciler-policies", "optional": True}  # no order to deadlock on
    assert {e["name"] for e in c["env"]} >= {"RECONCILER_STATUS_TOKEN", "POD_NAME", "POD_NAMESPACE"}


def test_the_argocd_controller_application_renders_the_controller(tmp_path: Path) -> None:
    """examples/argocd/applications.yaml: the chart Application's values render the controller on
    NodeRecipe objects (every argument accepted by the verb), and the recipes sync after it."""
    from reconciler.cli.controller import _check
    from reconciler.cli.main import build_parser

    docs = [d for d in yaml.safe_load_all((ROOT / "examples" / "argocd" / "applications.yaml").read_text()) if d]
    apps = {d["metadata"]["name"]: d for d in docs}
    assert set(apps) == {"node-reconciler", "node-recipes"}
    waves = {k: int(v["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]) for k, v in apps.items()}
    assert waves["node-reconciler"] < waves["node-recipes"]
    chart = apps["node-reconciler"]["spec"]
    assert chart["source"]["path"] == "charts/node-reconciler" and chart["destination"]["namespace"] == NS
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(chart["source"]["helm"]["valuesObject"]))
    objs = render("-f", str(values))
    (c,) = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"]
    args = build_parser().parse_args(c["args"])
    _check(args)
    assert args.source == "crd" and args.policy == ["/inputs/policies"]

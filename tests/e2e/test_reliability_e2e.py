"""Reliability and security on the real control plane (issue #6): one reconciler per recipe with
two concurrent processes and a takeover after ``kill -9``; a sample of injected crashes and API
errors; least-privilege RBAC with a ServiceAccount token (and a forbidden verb reported clearly);
planted secrets never leaking into outputs or cluster objects. The kube-apiserver restart test
lives in ``test_apiserver_restart_e2e.py`` (it uses its own control plane).

Each test has its own kwok nodes (``make_nodes``) and its own recipe name, so Leases, stage pods
and node records never mix between tests.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.adapters.host import SystemClock
from reconciler.adapters.kube.cache import WatchStore
from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.errors import CrashInjected
from reconciler.execute.lock import lease_name
from reconciler.execute.rollout import Rollout
from reconciler.load import load_inputs, policy_for
from reconciler.model.nodestate import cordon_key, failure_key, inflight_key, parse_state, state_key
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
from reconciler.testing.faults import Fault, FaultyCluster
from reconciler.testing.fleetgen import make_pdb

ROOT = Path(__file__).resolve().parents[2]
RBAC = ROOT / "examples" / "rbac" / "reconciler-rbac.yaml"  # rendered from the chart (scripts/render-rbac)
CRD = ROOT / "charts" / "node-reconciler" / "crds" / "nodereciperollouts.yaml"
SHA = "sha256:" + "f" * 64
NS = "node-reconciler"


def recipe_text(name: str, group: str, *, budget: int = 1, reboot: bool = True, stage_seconds: str = "") -> str:
    """A recipe over the test's nodes: two packages (dependency), a reboot, a PDB-covered drain."""
    env = (f"      env: [{{name: SIM_TEST_RUN_FOR, value: \"{stage_seconds}\"}}]\n" if stage_seconds else "")
    interrupt = "      interrupt: {type: reboot}\n" if reboot else ""
    return f"""\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: NodeRecipe
metadata: {{name: {name}}}
spec:
  version: "2026.11.1"
  nodeSelector: {{matchLabels: {{e2e.test/group: {group}}}}}
  podNonInterruptLabels: {{matchLabels: {{workload: long-running-training}}}}
  interruptionBudget: {{count: {budget}}}
  drain: {{timeoutSeconds: 300, evictionRetrySeconds: 2}}
  timeouts: {{stageRetries: 1, retryBackoff: 1, reboot: 120, stage: 120, waitNonInterrupt: 120}}
  packages:
    base-tools:
      version: 1.0.0
      image: ghcr.io/example/base-tools
      containerSHA: {SHA}
{env}    gpu-tuning:
      version: 2.0.0
      image: ghcr.io/example/gpu-tuning
      containerSHA: {SHA}
      dependsOn: {{base-tools: 1.0.0}}
{interrupt}      configMap: {{profile.conf: "intent=multiNodeTraining"}}
"""


def wait_for(what: str, fn: Any, timeout: float = 90.0, every: float = 0.3) -> Any:
    """Poll ``fn`` until it returns something truthy (returned) or fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def workload(core: Any, apps: Any, policy: Any, ns: str, group: str, replicas: int,
             max_unavailable: int = 1) -> None:
    """A Deployment spread over the test's nodes and a PDB (``maxUnavailable``) covering it; returns
    when the pods run and the disruption controller has observed the PDB (and allows a disruption,
    when it may)."""
    apps.create_namespaced_deployment(ns, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": ns},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"nodeSelector": {"e2e.test/group": group},
                                       "containers": [{"name": "c", "image": "registry.example/web:1"}]}}}})
    policy.create_namespaced_pod_disruption_budget(ns, make_pdb(ns, "web", {"app": "web"},
                                                                max_unavailable=max_unavailable))

    def running() -> bool:
        pods = core.list_namespaced_pod(ns, label_selector="app=web").items
        return sum(1 for p in pods if p.status.phase == "Running") == replicas

    wait_for(f"{replicas} web pods running", running)
    def pdb_observed() -> bool:
        st = policy.read_namespaced_pod_disruption_budget("web", ns).status
        return bool(st.observed_generation) and (st.disruptions_allowed or 0) >= min(1, max_unavailable)

    wait_for("PDB status", pdb_observed)


def reconciler_cmd(*args: str) -> list[str]:
    """The CLI as a separate process (the way a pipeline runs it)."""
    return [sys.executable, "-m", "reconciler.cli.main", *args]


def assert_all_complete(core: Any, nodes: list[str], recipe: str) -> None:
    """Every node uncordoned, no cordon/in-flight/failure record, both packages complete."""
    for n in nodes:
        node = core.read_node(n)
        ann = node.metadata.annotations or {}
        assert not node.spec.unschedulable, n
        for key in (cordon_key(recipe), inflight_key(recipe), failure_key(recipe)):
            assert key not in ann, (n, key)
        states = parse_state(ann.get(state_key(recipe)))
        assert {(e.name, e.version, e.state) for e in states.values()} == {
            ("base-tools", "1.0.0", "complete"), ("gpu-tuning", "2.0.0", "complete")}, (n, states)


def _kubeconfig(server: str, ca: Path, token: str, user: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Config", "current-context": user,
            "clusters": [{"name": "e2e", "cluster": {"server": server, "certificate-authority": str(ca)}}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": user, "context": {"cluster": "e2e", "user": user}}]}


# ------------------------------------------------------------------ RBAC fixtures
def _create(fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except ApiException as e:
        if e.status != 409:
            raise


def install_rbac(api: Any, *, name: str = "node-reconciler", drop: tuple[str, str] | None = None) -> None:
    """Create the objects of examples/rbac (renamed to ``name`` for variants) and the CRD;
    ``drop=(resource, verb)`` removes one verb from the roles (for the negative tests)."""
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    ext = client.ApiextensionsV1Api(api)
    _create(ext.create_custom_resource_definition, yaml.safe_load(CRD.read_text()))
    wait_for("CRD established", lambda: any(
        c.type == "Established" and c.status == "True"
        for c in ext.read_custom_resource_definition("nodereciperollouts.reconciler.nodewright.dev").status.conditions
        or ()))
    for doc in yaml.safe_load_all(RBAC.read_text()):
        kind, meta = doc["kind"], doc["metadata"]
        if kind != "Namespace":
            meta["name"] = meta["name"].replace("node-reconciler", name)
        for s in doc.get("subjects", ()):
            s["name"] = name
        if "roleRef" in doc:
            doc["roleRef"]["name"] = doc["roleRef"]["name"].replace("node-reconciler", name)
        if drop and "rules" in doc:
            for rule in doc["rules"]:
                if drop[0] in rule["resources"] and drop[1] in rule["verbs"]:
                    rule["verbs"] = [v for v in rule["verbs"] if v != drop[1]]
            doc["rules"] = [r for r in doc["rules"] if r["verbs"]]
        ns = meta.get("namespace")
        create = {
            "Namespace": lambda d: core.create_namespace(d),
            "ServiceAccount": lambda d, ns=ns: core.create_namespaced_service_account(ns, d),
            "ClusterRole": lambda d: rbac.create_cluster_role(d),
            "Role": lambda d, ns=ns: rbac.create_namespaced_role(ns, d),
            "ClusterRoleBinding": lambda d: rbac.create_cluster_role_binding(d),
            "RoleBinding": lambda d, ns=ns: rbac.create_namespaced_role_binding(ns, d),
        }[kind]
        _create(create, doc)


def service_account_kubeconfig(controlplane: Any, api: Any, sa: str, path: Path) -> str:
    """A kubeconfig holding a fresh token of ``node-reconciler/<sa>`` (TokenRequest API); returns the token."""
    core = client.CoreV1Api(api)
    tr = core.create_namespaced_service_account_token(sa, NS, {"spec": {"expirationSeconds": 3600}})
    token = tr.status.token
    path.write_text(json.dumps(_kubeconfig(controlplane.server, controlplane.ca_file, token, sa)))
    path.chmod(0o600)
    return str(token)


@pytest.fixture
def rbac_sa(controlplane: Any, api: Any, tmp_path: Path) -> tuple[Path, str]:
    """The least-privilege ServiceAccount of examples/rbac and a kubeconfig with its token."""
    install_rbac(api)
    kc = tmp_path / "sa.kubeconfig"
    return kc, service_account_kubeconfig(controlplane, api, "node-reconciler", kc)


# ------------------------------------------------------------------ least privilege + secrets
PLANTED = {
    "GITHUB_TOKEN": "ghp_PLANTEDgithubTOKEN0123456789abcdefXYZ",
    "GITLAB_TOKEN": "glpat-PLANTEDgitlabTOKEN-0123456789",
    "RECONCILER_GIT_TOKEN": "PLANTEDgitTOKENxyz987",
}


def _everything_written(core: Any, custom: Any, nodes: list[str], recipe: str) -> str:
    """Text of every object the run wrote or touched: nodes, events about them, the status object,
    the Lease and stage pods/ConfigMaps left in the reconciler's namespace."""
    parts = [json.dumps(client.ApiClient().sanitize_for_serialization(core.read_node(n))) for n in nodes]
    for n in nodes:
        evs = core.list_event_for_all_namespaces(field_selector=f"involvedObject.name={n}").items
        parts.append(json.dumps(client.ApiClient().sanitize_for_serialization(evs)))
    with contextlib.suppress(ApiException):
        parts.append(json.dumps(custom.get_cluster_custom_object("reconciler.nodewright.dev", "v1alpha1",
                                                                 "nodereciperollouts", recipe)))
    for lister in (core.list_namespaced_pod, core.list_namespaced_config_map):
        parts.append(json.dumps(client.ApiClient().sanitize_for_serialization(lister(NS).items)))
    coord = client.CoordinationV1Api(core.api_client)
    parts.append(json.dumps(client.ApiClient().sanitize_for_serialization(coord.list_namespaced_lease(NS).items)))
    return "\n".join(parts)


def test_full_apply_with_least_privilege_service_account_and_no_secret_leaks(
        controlplane: Any, controlplane_reboots: Any, api: Any, namespace: str, make_nodes: Any, test_id: str,
        tmp_path: Path, rbac_sa: tuple[Path, str]) -> None:
    core, apps, pol = client.CoreV1Api(api), client.AppsV1Api(api), client.PolicyV1Api(api)
    custom = client.CustomObjectsApi(api)
    nodes = make_nodes(3)
    workload(core, apps, pol, namespace, test_id, 3)
    kubeconfig, token = rbac_sa
    name = f"rbac-{test_id[-4:]}"
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(recipe_text(name, test_id, budget=1))
    env = {**os.environ, **PLANTED}
    cp = subprocess.run(reconciler_cmd("-vv", "apply", str(recipe), "--kubeconfig", str(kubeconfig), "-o", "json"),
                        capture_output=True, text=True, env=env, timeout=300)
    assert cp.returncode == 0, cp.stderr[-3000:]
    doc = json.loads(cp.stdout)
    assert doc["result"] == "succeeded" and {n["state"] for n in doc["nodes"]} == {"complete"}
    assert sum(1 for e in doc["timeline"] if e["event"] == "evict") >= 2
    assert_all_complete(core, nodes, name)
    rollout = custom.get_cluster_custom_object("reconciler.nodewright.dev", "v1alpha1", "nodereciperollouts", name)
    assert rollout["status"]["observedGeneration"] >= 1  # the status object was written under the role
    # the planted secrets and the ServiceAccount token appear nowhere
    written = _everything_written(core, custom, nodes, name)
    for label, secret in [*PLANTED.items(), ("service account token", token)]:
        for where, text in (("stdout", cp.stdout), ("stderr (-vv debug log)", cp.stderr), ("cluster objects", written)):
            assert secret not in text, f"{label} leaked into {where}"
    assert token[:20] not in cp.stderr  # not even a prefix of it


@pytest.mark.parametrize(("drop", "exit_code", "wanted"), [
    (("pods/eviction", "create"), 1, ('cannot create resource "pods/eviction"',)),
    (("nodes", "patch"), 4, ('cannot patch resource "nodes"',)),
    (("leases", "create"), 4, ('cannot create resource "leases"',)),
], ids=["no-eviction", "no-node-patch", "no-lease-create"])
def test_forbidden_verb_is_reported_in_one_clear_line(
        controlplane: Any, controlplane_reboots: Any, api: Any, namespace: str, make_nodes: Any, test_id: str,
        tmp_path: Path, drop: tuple[str, str], exit_code: int, wanted: tuple[str, ...]) -> None:
    core, apps, pol = client.CoreV1Api(api), client.AppsV1Api(api), client.PolicyV1Api(api)
    nodes = make_nodes(1)
    workload(core, apps, pol, namespace, test_id, 1)
    sa = f"nr-{drop[0].replace('/', '-')}-{drop[1]}"[:40]
    install_rbac(api, name=sa, drop=drop)
    kc = tmp_path / "limited.kubeconfig"
    token = service_account_kubeconfig(controlplane, api, sa, kc)
    name = f"forbid-{test_id[-4:]}"
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(recipe_text(name, test_id))  # with a reboot: the node is cordoned and drained
    cp = subprocess.run(reconciler_cmd("apply", str(recipe), "--kubeconfig", str(kc)),
                        capture_output=True, text=True, timeout=300)
    assert cp.returncode == exit_code, (cp.returncode, cp.stdout[-2000:], cp.stderr[-2000:])
    lines = [x for x in (cp.stdout + cp.stderr).splitlines() if "is forbidden: User" in x]
    assert lines, cp.stdout + cp.stderr
    line = lines[0]
    for w in wanted:
        assert w in line, line  # one line naming the verb and the resource
    assert f"system:serviceaccount:{NS}:{sa}" in line
    assert "Traceback" not in cp.stderr and token not in cp.stdout + cp.stderr
    if exit_code == 1:  # the node failed with the reason recorded; it stays cordoned by us
        ann = core.read_node(nodes[0]).metadata.annotations
        assert '"reason":"Forbidden"' in ann[failure_key(name)]
    else:
        assert "Traceback" not in cp.stdout and cp.stderr.strip().splitlines()[-1].startswith("error: ")


# ------------------------------------------------------------------ one reconciler per recipe
def _lease(api: Any, recipe: str) -> Any:
    try:
        return client.CoordinationV1Api(api).read_namespaced_lease(lease_name(recipe), NS)
    except ApiException as e:
        if e.status == 404:
            return None
        raise


def test_second_process_is_refused_then_takes_over_after_kill_and_resumes(
        controlplane: Any, controlplane_reboots: Any, api: Any, namespace: str, make_nodes: Any, test_id: str,
        tmp_path: Path) -> None:
    core, apps, pol = client.CoreV1Api(api), client.AppsV1Api(api), client.PolicyV1Api(api)
    nodes = make_nodes(4)
    workload(core, apps, pol, namespace, test_id, 2)
    name = f"lock-{test_id[-4:]}"
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(recipe_text(name, test_id, budget=1, stage_seconds="3s"))
    kc = str(controlplane.kubeconfig)
    common = ("--kubeconfig", kc, "--no-status-object", "--lease-duration", "15")
    first_log = (tmp_path / "first.log").open("wb")
    first = subprocess.Popen(reconciler_cmd("apply", str(recipe), *common, "--run-id", "run-first"),
                             stdout=first_log, stderr=subprocess.STDOUT)
    try:
        lease = wait_for("the first run's lease", lambda: _lease(api, name), timeout=60)
        assert lease.spec.holder_identity.startswith("run-first@") and lease.spec.lease_duration_seconds == 15
        in_flight = wait_for("a node in flight", lambda: [
            n for n in nodes if inflight_key(name) in (core.read_node(n).metadata.annotations or {})], timeout=60)
        # a second pipeline run on the same recipe: refused at once, one line naming the holder
        second = subprocess.run(reconciler_cmd("apply", str(recipe), *common, "--run-id", "run-second"),
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == 1, second.stderr
        err = second.stderr.strip().splitlines()
        assert len(err) == 1 and "held by run-first@" in err[0] and "another reconciler run is active" in err[0]
        assert first.poll() is None
        first.send_signal(signal.SIGKILL)  # the first run dies mid-rollout: nothing is released
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(timeout=30)
        first_log.close()
    held = _lease(api, name)
    assert held is not None and held.spec.holder_identity.startswith("run-first@")
    t0 = time.monotonic()
    third = subprocess.run(reconciler_cmd("apply", str(recipe), *common, "--run-id", "run-third",
                                          "--wait-for-lock", "90", "-o", "json"),
                           capture_output=True, text=True, timeout=400)
    assert third.returncode == 0, third.stderr[-3000:]
    assert "took over lease" in third.stderr and "run-first@" in third.stderr
    assert time.monotonic() - t0 >= 5  # it had to wait for the dead run's lease to expire
    doc = json.loads(third.stdout)
    assert doc["result"] == "succeeded"
    resumed = {e["node"] for e in doc["timeline"] if e["event"] == "resume"}
    assert set(in_flight) <= resumed | {n["name"] for n in doc["nodes"] if n["message"] == "no changes"}
    assert_all_complete(core, nodes, name)
    assert _lease(api, name) is None  # released at the end


# ------------------------------------------------------------------ injected faults on the real API
@pytest.fixture
def kube_default_ns(controlplane: Any) -> Iterator[KubeCluster]:
    """A KubeCluster on the admin kubeconfig with the default stage namespace."""
    kc = KubeCluster.from_kubeconfig(str(controlplane.kubeconfig), store=WatchStore("node-reconciler"))
    try:
        yield kc
    finally:
        kc.close()


def _run(cluster: Any, clock: Any, recipe_file: Path, run_id: str, changes: Any = None) -> Any:
    inputs = load_inputs([str(recipe_file)])
    (recipe,) = inputs.recipes
    policy = policy_for(recipe, inputs)
    plan = compute_plan(recipe, policy, observe(cluster))
    return Rollout(recipe, policy, plan, cluster, clock, run_id=run_id, poll_seconds=2.0, changes=changes).run()


def test_sample_of_crashes_and_api_errors_on_the_real_control_plane(
        controlplane: Any, controlplane_reboots: Any, api: Any, make_nodes: Any, test_id: str, tmp_path: Path,
        kube_default_ns: KubeCluster) -> None:
    """Crash after write N (a sample over the rollout), resume with a new run: every node ends
    complete with no stage started again after it had completed; and a run where every 4th write
    fails once (503 / 409 / timeout after the write) still completes."""
    core = client.CoreV1Api(api)
    clock, watch = SystemClock(), kube_default_ns.watch()
    try:
        for i, crash_after in enumerate((2, 7, 13, 21)):
            nodes = make_nodes(2, labels={"e2e.test/scenario": f"c{i}"})
            name = f"crash{i}-{test_id[-4:]}"
            group = f"{test_id}"
            recipe = tmp_path / f"{name}.yaml"
            recipe.write_text(recipe_text(name, group, budget=2).replace(
                f"e2e.test/group: {group}", f"e2e.test/scenario: c{i}, e2e.test/group: {group}"))
            first = FaultyCluster(kube_default_ns.ports, clock=clock, crash_after_writes=crash_after)
            with pytest.raises(CrashInjected):
                _run(first, clock, recipe, f"run-{name}-a", watch)
            done_at_crash = set()
            for n in nodes:
                st = parse_state((core.read_node(n).metadata.annotations or {}).get(state_key(name)))
                done_at_crash |= {(n, e.name, e.version, e.stage) for e in st.values() if e.state == "complete"}
            second = FaultyCluster(kube_default_ns.ports, clock=clock)
            res = _run(second, clock, recipe, f"run-{name}-b", watch)
            assert res.result == "succeeded", (crash_after, [(n.name, n.state, n.message) for n in res.nodes])
            assert_all_complete(core, nodes, name)
            restarted = [c.target for c in second.calls if c.verb == "start_stage"]
            for n, pkg, _ver, stage in done_at_crash:
                assert f"stage/{n}/{pkg}/{stage}" not in restarted, (crash_after, n, pkg, stage)
        # transient errors: every 4th write fails once
        nodes = make_nodes(2, labels={"e2e.test/scenario": "transient"})
        name = f"transient-{test_id[-4:]}"
        recipe = tmp_path / f"{name}.yaml"
        recipe.write_text(recipe_text(name, test_id, budget=2).replace(
            f"e2e.test/group: {test_id}", f"e2e.test/scenario: transient, e2e.test/group: {test_id}"))
        kinds = ("unavailable", "conflict", "timeout")
        faults = [Fault(kinds[k % 3], verb="write", nth=n, after=kinds[k % 3] == "timeout")  # type: ignore[arg-type]
                  for k, n in enumerate(range(4, 60, 4))]
        faulty = FaultyCluster(kube_default_ns.ports, clock=clock, faults=faults)
        res = _run(faulty, clock, recipe, f"run-{name}", watch)
        assert res.result == "succeeded", [(n.name, n.state, n.message) for n in res.nodes]
        assert len(faulty.injected) >= 5
        assert_all_complete(core, nodes, name)
    finally:
        watch.close()


def test_planted_token_in_kubeconfig_of_an_unreachable_or_refusing_server_is_never_printed(
        tmp_path: Path, controlplane: Any) -> None:
    """Errors about a cluster that cannot be reached, or that refuses the token (401), name the
    server but never the credentials."""
    secret = "PLANTEDkubeTOKEN-aaaabbbbccccdddd"
    recipe = tmp_path / "r.yaml"
    recipe.write_text(recipe_text("leak-check", "nobody"))
    for server in ("https://127.0.0.1:1", controlplane.server):
        kc = tmp_path / "kc.json"
        kc.write_text(json.dumps(_kubeconfig(server, controlplane.ca_file, secret, "someone")))
        cp = subprocess.run(reconciler_cmd("-vv", "apply", str(recipe), "--kubeconfig", str(kc)),
                            capture_output=True, text=True, timeout=120)
        assert cp.returncode == 4, (server, cp.returncode, cp.stderr[-1500:])
        assert secret not in cp.stdout + cp.stderr, server
        last = cp.stderr.strip().splitlines()[-1]
        assert last.startswith("error: "), last
        assert "Unauthorized" in last or "Connection" in last or "refused" in last, last

"""``reconciler controller`` on the real control plane (issue 15's "done when").

The chart is rendered and applied server side (CRDs, RBAC; tests/e2e/test_chart_e2e.py); the
controller runs as host processes (``python -m reconciler controller``) with a token of the
chart's ServiceAccount, so it has exactly the chart's permissions. NodeRecipe objects are
applied server side with strict field validation, as Argo CD or Flux would. Ready is judged
by the real kstatus library (sigs.k8s.io/cli-utils ``status.Compute``, tests/gitops/kstatus).

* a NodeRecipe applied → every selected node gets its packages in batches and the object goes
  Current (Ready, observedGeneration = generation); a kwok node that joins with the
  runtime-required taint gets its packages and loses the taint with no other action (the time
  from join to untainted, minus the stage pods' own durations, is printed);
* two replicas with leader election: SIGTERM to the leader mid-rollout → it exits 0 and
  releases the Lease, the standby takes over at once; SIGKILL to the new leader mid-rollout → a
  third replica takes over after the Leases expire and finishes with no node failed or redone.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, watch
from kubernetes.dynamic import DynamicClient

from reconciler.adapters.kube.stagepod import NODE_LABEL, PACKAGE_LABEL, RECIPE_LABEL, STAGE_LABEL
from reconciler.controller.leader import LEADER_LEASE
from reconciler.execute.lock import lease_name
from reconciler.model.nodestate import RUNTIME_REQUIRED_TAINT_KEY, failure_key, inflight_key, status_key
from tests.e2e.test_chart_e2e import NS, apply
from tests.e2e.test_chart_e2e import chart_applied as chart_applied  # the fixture, requested by name
from tests.gitops.tools import kstatus

ROOT = Path(__file__).resolve().parents[2]
SHA = "sha256:" + "e" * 64
GROUP, VERSION, PLURAL = "reconciler.nodewright.dev", "v1alpha1", "noderecipes"
LEADER = lease_name(LEADER_LEASE)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(what: str, fn: Any, timeout: float = 120.0, every: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@pytest.fixture(scope="module")
def sa_kubeconfig(controlplane: Any, api: Any, request: pytest.FixtureRequest,
                  tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The chart applied; a kubeconfig holding a token of its ServiceAccount (TokenRequest API)."""
    request.getfixturevalue("chart_applied")
    tok = client.CoreV1Api(api).create_namespaced_service_account_token(
        "node-reconciler", NS, {"spec": {"expirationSeconds": 7200}})
    path = tmp_path_factory.mktemp("sa") / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "e2e", "cluster": {"server": controlplane.server,
                                                 "certificate-authority": str(controlplane.ca_file)}}],
        "users": [{"name": "sa", "user": {"token": tok.status.token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "e2e", "user": "sa"}}]}))
    return path


class Replica:
    """One ``reconciler controller`` host process."""

    def __init__(self, name: str, kubeconfig: Path, logs: Path, *extra: str) -> None:
        self.name = name
        self.probes, self.metrics = _free_port(), _free_port()
        self.log = logs / f"controller-{name}.log"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "POD_NAME": name, "POD_NAMESPACE": NS}
        self._err = self.log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "-v", "controller", "--source", "crd", "--kubeconfig", str(kubeconfig),
             "--leader-elect", "--leader-elect-lease-duration", "6s", "--leader-elect-renew-deadline", "4s",
             "--leader-elect-retry-period", "1s", "--lease-duration", "10", "--poll-seconds", "5",
             "--metrics-bind-address", f"127.0.0.1:{self.metrics}",
             "--health-probe-bind-address", f"127.0.0.1:{self.probes}", *extra],
            env=env, stdout=subprocess.DEVNULL, stderr=self._err)

    def get(self, path: str, port: int | None = None) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port or self.probes}{path}", timeout=2) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError:
            return 0, ""

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._err.close()


@pytest.fixture
def replicas(sa_kubeconfig: Path, controlplane: Any) -> Iterator[Any]:
    """Factory: ``replicas(name) -> Replica`` (killed at the end)."""
    started: list[Replica] = []

    def start(name: str, *extra: str) -> Replica:
        r = Replica(name, sa_kubeconfig, controlplane.logs, *extra)
        started.append(r)
        return r

    yield start
    for r in started:
        r.stop()


def recipe_object(name: str, group: str, *, budget: int, run_for: str = "1s", runtime_required: bool = True,
                  reboot: bool = False) -> dict[str, Any]:
    env = [{"name": "SIM_TEST_RUN_FOR", "value": run_for}]
    doc: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "NodeRecipe",
        "metadata": {"name": name},
        "spec": {
            "version": "2026.12.1",
            "nodeSelector": {"matchLabels": {"e2e.test/group": group}},
            "interruptionBudget": {"count": budget},
            "runtimeRequired": runtime_required,
            "timeouts": {"stageRetries": 1, "retryBackoff": 1, "stage": 120},
            "packages": {
                "base-tools": {"version": "1.0.0", "image": "ghcr.io/example/base-tools", "containerSHA": SHA,
                               "env": env},
                "gpu-tuning": {"version": "2.0.0", "image": "ghcr.io/example/gpu-tuning", "containerSHA": SHA,
                               "dependsOn": {"base-tools": "1.0.0"}, "env": env},
            },
        },
    }
    if reboot:
        doc["spec"]["packages"]["gpu-tuning"]["interrupt"] = {"type": "reboot"}
        doc["spec"]["timeouts"]["reboot"] = 120
    return doc


def _obj(api: Any, name: str) -> dict[str, Any]:
    out: dict[str, Any] = client.CustomObjectsApi(api).get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    return out


def _kstatus(api: Any, name: str) -> str:
    return str(kstatus([_obj(api, name)])[0]["status"])


def _complete(api: Any, nodes: list[str], recipe: str) -> list[str]:
    core = client.CoreV1Api(api)
    return [n for n in nodes if (core.read_node(n).metadata.labels or {}).get(status_key(recipe)) == "complete"]


def _tainted(api: Any, node: str) -> bool:
    taints = client.CoreV1Api(api).read_node(node).spec.taints or []
    return any(t.key == RUNTIME_REQUIRED_TAINT_KEY for t in taints)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class StagePods:
    """Watches the stage pods of one node: when each was first seen and when its stage finished
    (every init container terminated), to subtract the stages' own time from a measurement."""

    def __init__(self, api: Any, node: str) -> None:
        self.api, self.node = api, node
        self.seen: dict[str, float] = {}
        self.done: dict[str, float] = {}
        self._w = watch.Watch()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        core = client.CoreV1Api(self.api)
        with contextlib.suppress(Exception):
            for ev in self._w.stream(core.list_namespaced_pod, NS, field_selector=f"spec.nodeName={self.node}",
                                     timeout_seconds=300):
                pod = ev["object"]
                name = pod.metadata.name
                self.seen.setdefault(name, time.monotonic())
                inits = pod.status.init_container_statuses or []
                if inits and all(s.state and s.state.terminated for s in inits):
                    self.done.setdefault(name, time.monotonic())

    def stage_seconds(self) -> float:
        self._w.stop()
        return sum(self.done[n] - self.seen[n] for n in self.done)


def test_a_noderecipe_rolls_out_goes_ready_and_a_joining_tainted_node_is_untainted(
        controlplane: Any, api: Any, make_nodes: Any, test_id: str, replicas: Any, tmp_path: Path) -> None:
    dyn = DynamicClient(api)
    core = client.CoreV1Api(api)
    nodes = make_nodes(4)
    name = f"ctl-{test_id[-4:]}"
    bare = tmp_path / "status.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    a = replicas("solo", "--cluster-name", "e2e", "--status-repo", str(bare))
    _wait("the controller ready", lambda: a.get("/readyz")[0] == 200, timeout=60)
    assert a.get("/healthz") == (200, "ok\n")
    applied = apply(dyn, recipe_object(name, test_id, budget=2))
    try:
        gen = applied.metadata.generation
        _wait("status InProgress (observed)", lambda: (_obj(api, name).get("status") or {}).get(
            "observedGeneration") == gen, timeout=60)
        _wait("the NodeRecipe Current by kstatus", lambda: _kstatus(api, name) == "Current", timeout=180)
        st = _obj(api, name)["status"]
        assert {c["type"]: c["status"] for c in st["conditions"]} == {"Ready": "True", "Reconciling": "False",
                                                                      "Stalled": "False"}
        assert st["observedGeneration"] == gen and st["recipeVersion"] == "2026.12.1"
        assert sorted(_complete(api, nodes, name)) == sorted(nodes)
        # the rollout's start and end are Events on the NodeRecipe (kubectl describe noderecipe)
        uid = _obj(api, name)["metadata"]["uid"]
        def reasons() -> list[str]:
            return [e.reason for e in core.list_namespaced_event(
                "default", field_selector=f"involvedObject.kind=NodeRecipe,involvedObject.name={name}").items
                if e.involved_object.uid == uid]

        _wait("a RolloutSucceeded Event on the NodeRecipe", lambda: "RolloutSucceeded" in reasons(), timeout=30)
        assert "RolloutStarted" in reasons(), reasons()
        # --status-repo: the same status file `apply` commits, from the controller's pass
        def status_file() -> str:
            return subprocess.run(["git", "--git-dir", str(bare), "show", f"reconciler-status:status/e2e/{name}.json"],
                                  capture_output=True, text=True).stdout

        doc = json.loads(_wait("the git status commit", status_file, timeout=30))
        assert doc["result"] == "succeeded" and doc["counts"]["complete"] == doc["counts"]["total"] >= len(nodes)
        assert doc["sourceRevision"].startswith("NodeRecipe objects"), doc["sourceRevision"]
        lease = client.CoordinationV1Api(api).read_namespaced_lease(LEADER, NS)
        assert lease.spec.holder_identity.startswith("solo/")
        cpu0, t = _cpu_seconds(a.proc.pid), time.monotonic()
        time.sleep(10)
        idle = (_cpu_seconds(a.proc.pid) - cpu0) / (time.monotonic() - t)
        print(f"\nidle controller: {100 * idle:.1f} % of a core, RSS {_rss_mib(a.proc.pid):.0f} MiB")

        # a node joins with the runtime-required taint: packages, then the taint goes, nothing else done
        joined = f"{test_id}-join"
        pods = StagePods(api, joined)
        t0 = time.monotonic()
        core.create_node({"apiVersion": "v1", "kind": "Node",
                          "metadata": {"name": joined, "annotations": {"kwok.x-k8s.io/node": "fake"},
                                       "labels": {"kubernetes.io/hostname": joined, "e2e.test/group": test_id}},
                          "spec": {"providerID": f"kwok://{joined}",
                                   "taints": [{"key": RUNTIME_REQUIRED_TAINT_KEY, "value": "true",
                                               "effect": "NoSchedule"}]}})
        try:
            _wait("the joined node untainted", lambda: not _tainted(api, joined), timeout=120, every=0.05)
            took = time.monotonic() - t0
            assert _complete(api, [joined], name) == [joined]
            stages = pods.stage_seconds()
            print(f"\njoin-to-untainted {took:.2f} s; stage pods {stages:.2f} s; overhead {took - stages:.2f} s")
            code, body = a.get("/metrics", a.metrics)
            assert code == 200 and "node_reconciler_controller_passes_total" in body
            assert 'node_reconciler_controller_triggers_total{kind="node"}' in body
            _wait("Current again", lambda: _kstatus(api, name) == "Current", timeout=60)
        finally:
            with contextlib.suppress(Exception):
                core.delete_node(joined)
        a.proc.send_signal(signal.SIGTERM)
        assert a.proc.wait(30) == 0, a.tail()
        with pytest.raises(client.exceptions.ApiException):
            client.CoordinationV1Api(api).read_namespaced_lease(LEADER, NS)  # released on the way out
    except BaseException:
        print(a.tail())
        raise
    finally:
        with contextlib.suppress(Exception):
            client.CustomObjectsApi(api).delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)


def test_a_node_joining_with_nodewrights_runtime_required_taint_is_untainted_when_done(
        controlplane: Any, api: Any, test_id: str, replicas: Any) -> None:
    """A node provisioned for NodeWright (``skyhook.nvidia.com=runtime-required:NoSchedule``, its
    operator's default taint) gets its packages and loses that taint, as with ours."""
    core = client.CoreV1Api(api)
    name = f"nw-{test_id[-4:]}"
    joined = f"{test_id}-nw"
    a = replicas("nodewright")
    _wait("the controller ready", lambda: a.get("/readyz")[0] == 200, timeout=60)
    apply(DynamicClient(api), recipe_object(name, test_id, budget=1))
    core.create_node({"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": joined, "annotations": {"kwok.x-k8s.io/node": "fake"},
                                   "labels": {"kubernetes.io/hostname": joined, "e2e.test/group": test_id}},
                      "spec": {"providerID": f"kwok://{joined}",
                               "taints": [{"key": "skyhook.nvidia.com", "value": "runtime-required",
                                           "effect": "NoSchedule"}]}})
    try:
        def nodewright_tainted() -> bool:
            return any(t.key == "skyhook.nvidia.com" for t in core.read_node(joined).spec.taints or [])

        _wait("the joined node complete", lambda: _complete(api, [joined], name), timeout=120)
        _wait("NodeWright's taint removed", lambda: not nodewright_tainted(), timeout=30)
        _wait("the NodeRecipe Current by kstatus", lambda: _kstatus(api, name) == "Current", timeout=60)
    except BaseException:
        print(a.tail())
        raise
    finally:
        with contextlib.suppress(Exception):
            core.delete_node(joined)
        with contextlib.suppress(Exception):
            client.CustomObjectsApi(api).delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)


def test_a_recipe_naming_a_policy_not_given_is_stalled_alone_and_the_others_complete(
        controlplane: Any, api: Any, make_nodes: Any, test_id: str, replicas: Any) -> None:
    """The chart's default (no policy volume): a NodeRecipe naming a deploymentPolicy the
    controller was not given is Stalled on its own object, with a Warning Event naming the field
    and the missing policy; the good recipe beside it completes."""
    core = client.CoreV1Api(api)
    nodes = make_nodes(2)
    good, bad = f"good-{test_id[-4:]}", f"bad-{test_id[-4:]}"
    broken = recipe_object(bad, test_id, budget=1, runtime_required=False)
    del broken["spec"]["interruptionBudget"]
    broken["spec"]["deploymentPolicy"] = "gpu-rollout"
    a = replicas("isolation")
    _wait("the controller ready", lambda: a.get("/readyz")[0] == 200, timeout=60)
    dyn = DynamicClient(api)
    apply(dyn, broken)
    apply(dyn, recipe_object(good, test_id, budget=2, runtime_required=False))
    try:
        _wait("the good NodeRecipe Current", lambda: _kstatus(api, good) == "Current", timeout=180)
        assert sorted(_complete(api, nodes, good)) == sorted(nodes)
        _wait("the bad NodeRecipe Failed by kstatus", lambda: _kstatus(api, bad) == "Failed", timeout=30)
        st = _obj(api, bad)["status"]
        assert st["phase"] == "Invalid" and "spec.deploymentPolicy" in st["summary"] and "gpu-rollout" in st["summary"]
        assert _complete(api, nodes, bad) == []
        events = [e for e in core.list_namespaced_event(
            "default", field_selector=f"involvedObject.kind=NodeRecipe,involvedObject.name={bad}").items
            if e.reason == "InvalidSpec"]
        assert events and events[0].type == "Warning" and "spec.deploymentPolicy" in events[0].message, events
    except BaseException:
        print(a.tail())
        raise
    finally:
        for n in (good, bad):
            with contextlib.suppress(Exception):
                client.CustomObjectsApi(api).delete_cluster_custom_object(GROUP, VERSION, PLURAL, n)


def test_reset_leaves_no_record_request_annotation_or_condition_behind(
        controlplane: Any, api: Any, make_nodes: Any, kube: Any, test_id: str) -> None:
    """``reconciler reset RECIPE`` on the real API server: the recipe's records, status label and
    Erroring condition are gone, and no reconcileRequest annotation is left (a running controller
    takes the state record's removal as the request: controller.triggers.records_removed)."""
    from reconciler.model.nodestate import RECONCILE_REQUEST_KEY, condition_type, state_key

    core = client.CoreV1Api(api)
    (n,) = make_nodes(1)
    r = f"rs-{test_id[-4:]}"
    core.patch_node(n, {"metadata": {
        "annotations": {state_key(r): "{}", failure_key(r): '{"runId": "run-1", "reason": "StageFailed"}',
                        status_key(r): "erroring", RECONCILE_REQUEST_KEY: "41"},
        "labels": {status_key(r): "erroring"}}})
    kube.nodes.set_node_condition(n, condition_type(r, "Erroring"), "True", "StageFailed", "apply failed")
    other = "reconciler.nodewright.dev/other/Erroring"
    kube.nodes.set_node_condition(n, other, "True", "StageFailed", "another recipe's condition stays")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cp = subprocess.run([sys.executable, "-m", "reconciler", "reset", r, "-y", "--kubeconfig",
                         str(controlplane.kubeconfig)], env=env, capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr[-2000:]
    node = core.read_node(n)
    left = [k for k in {**(node.metadata.annotations or {}), **(node.metadata.labels or {})}
            if r in k or k == RECONCILE_REQUEST_KEY]
    assert not left, left
    types = [c.type for c in node.status.conditions or []]
    assert condition_type(r, "Erroring") not in types and other in types, types


def _metric(body: str, name: str) -> float:
    """The sum of every sample of metric ``name`` (with any labels) in a /metrics text."""
    total = 0.0
    for line in body.splitlines():
        if line.startswith(name) and line[len(name)] in "{ ":
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_a_rollout_with_reboots_is_never_preempted_by_its_own_reboots(
        controlplane: Any, controlplane_reboots: Any, api: Any, make_nodes: Any, test_id: str, replicas: Any) -> None:
    """Every node comes back from the reboot we asked for (NotReady, then Ready with a new bootID):
    those are our own echoes and must not restart the pass; a preemption would be no error anyway
    (no ERROR line, no RolloutError Event, no failed rollout in the metrics)."""
    core = client.CoreV1Api(api)
    nodes = make_nodes(4)
    name = f"rb-{test_id[-4:]}"
    a = replicas("reboots")
    _wait("the controller ready", lambda: a.get("/readyz")[0] == 200, timeout=60)
    rebooted = len(controlplane_reboots.reboots)
    apply(DynamicClient(api), recipe_object(name, test_id, budget=2, runtime_required=False, reboot=True))
    try:
        _wait("the NodeRecipe Current by kstatus", lambda: _kstatus(api, name) == "Current", timeout=240)
        assert len(controlplane_reboots.reboots) - rebooted >= len(nodes)
        assert sorted(_complete(api, nodes, name)) == sorted(nodes)
        time.sleep(2)  # the pass queued by the last node's Ready (not preempting) runs and ends
        code, body = a.get("/metrics", a.metrics)
        assert code == 200
        assert _metric(body, 'node_reconciler_controller_passes_total{outcome="preempted"}') == 0, body
        assert _metric(body, f'node_reconciler_rollouts_total{{recipe="{name}",result="failed"}}') == 0, body
        assert _metric(body, f'node_reconciler_rollout_nodes{{recipe="{name}",state="complete"}}') == len(nodes), body
        log = a.log.read_text(errors="replace")
        errors = [line for line in log.splitlines() if " ERROR " in line]
        assert not errors, errors[:5]
        warnings = [e.reason for e in core.list_namespaced_event(
            "default", field_selector=f"involvedObject.kind=NodeRecipe,involvedObject.name={name}").items
            if e.type == "Warning"]
        assert not warnings, warnings
        for n in nodes:  # kubectl describe node: who cordoned, drained and released it
            said = [(e.reason, e.message) for e in sorted(core.list_namespaced_event(
                "default", field_selector=f"involvedObject.kind=Node,involvedObject.name={n}").items,
                key=lambda e: e.metadata.name) if e.reason in ("Cordoned", "Drained", "Uncordoned")]
            assert [r for r, _ in said] == ["Cordoned", "Drained", "Uncordoned"], (n, said)
            assert all(m.startswith(f"recipe {name}") for _, m in said), said
    except BaseException:
        print(a.tail())
        raise
    finally:
        with contextlib.suppress(Exception):
            client.CustomObjectsApi(api).delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)


def test_the_controller_never_evicts_its_own_pod_and_rolls_out_the_other_nodes(
        controlplane: Any, controlplane_reboots: Any, api: Any, make_nodes: Any, namespace: str, test_id: str,
        replicas: Any) -> None:
    """A pod of the chart's controller (its labels, a Deployment, no local data: evictable by every
    drain rule of kubectl) runs on a managed node: the drain refuses that node with an Event naming
    the reconciler's own pod, the pod is never evicted, and the other nodes are rolled out."""
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    nodes = make_nodes(3)
    host = nodes[0]
    labels = {"app.kubernetes.io/name": "node-reconciler", "app.kubernetes.io/instance": test_id,
              "app.kubernetes.io/component": "controller"}
    apps.create_namespaced_deployment(namespace, {
        "metadata": {"name": "node-reconciler-controller"},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"nodeName": host, "containers": [{"name": "controller", "image": "node-reconciler:test"}]}}}})
    pod = _wait("the controller's pod running", lambda: [
        p for p in core.list_namespaced_pod(namespace, label_selector="app.kubernetes.io/component=controller").items
        if p.status.phase == "Running"], timeout=60)[0]
    name = f"own-{test_id[-4:]}"
    a = replicas("own")
    _wait("the controller ready", lambda: a.get("/readyz")[0] == 200, timeout=60)
    apply(DynamicClient(api), recipe_object(name, test_id, budget=3, runtime_required=False, reboot=True))
    try:
        _wait("the NodeRecipe Failed by kstatus", lambda: _kstatus(api, name) == "Failed", timeout=180)
        assert sorted(_complete(api, nodes, name)) == sorted(nodes[1:])
        assert core.read_namespaced_pod(pod.metadata.name, namespace).metadata.deletion_timestamp is None
        failure = json.loads(core.read_node(host).metadata.annotations[failure_key(name)])
        assert failure["reason"] == "DrainRefused" and "reconciler's own pod" in failure["message"], failure
        assert not core.read_node(host).spec.unschedulable  # refused before any eviction: uncordoned
        events = [e for e in core.list_namespaced_event(
            "default", field_selector=f"involvedObject.kind=Node,involvedObject.name={host}").items
            if "reconciler's own pod" in (e.message or "")]
        assert events and events[0].type == "Warning", [e.message for e in events]
        assert "--retry-failed" not in a.log.read_text(errors="replace")  # no flag `controller` lacks
    except BaseException:
        print(a.tail())
        raise
    finally:
        with contextlib.suppress(Exception):
            client.CustomObjectsApi(api).delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)


def _leader(api: Any) -> str:
    try:
        lease = client.CoordinationV1Api(api).read_namespaced_lease(LEADER, NS)
    except client.exceptions.ApiException:
        return ""
    return str(lease.spec.holder_identity or "").split("/")[0]


def test_the_standby_takes_over_after_sigterm_and_after_a_kill_and_finishes(
        controlplane: Any, api: Any, make_nodes: Any, test_id: str, replicas: Any) -> None:
    dyn = DynamicClient(api)
    nodes = make_nodes(6)
    name = f"ha-{test_id[-4:]}"
    core = client.CoreV1Api(api)

    def run_owners() -> set[str]:
        return {c.metadata.name for c in core.list_namespaced_config_map(NS).items
                if c.metadata.name.startswith("run-")}

    owners_before = run_owners()
    # every stage pod of this recipe created during the test, by (node, package, stage): a stage
    # redone after a takeover would show as a second pod
    created: dict[tuple[str, str, str], set[str]] = {}
    w = watch.Watch()

    def record() -> None:
        with contextlib.suppress(Exception):
            for ev in w.stream(core.list_namespaced_pod, NS, label_selector=f"{RECIPE_LABEL}={name}",
                               timeout_seconds=600):
                pod = ev["object"]
                labels = pod.metadata.labels or {}
                key = (labels.get(NODE_LABEL, ""), labels.get(PACKAGE_LABEL, ""), labels.get(STAGE_LABEL, ""))
                created.setdefault(key, set()).add(pod.metadata.uid)

    threading.Thread(target=record, daemon=True).start()
    reps = {n: replicas(n) for n in ("r1", "r2")}
    # one of these replicas (an earlier test's killed replica may hold the Lease until it expires)
    first = _wait("a leader", lambda: _leader(api) if _leader(api) in reps else "", timeout=60)
    standby = "r2" if first == "r1" else "r1"
    apply(dyn, recipe_object(name, test_id, budget=1, run_for="2s"))
    try:
        _wait("two nodes complete", lambda: len(_complete(api, nodes, name)) >= 2, timeout=180)
        t = time.monotonic()
        reps[first].proc.send_signal(signal.SIGTERM)
        assert reps[first].proc.wait(30) == 0, reps[first].tail()
        stopped_in = time.monotonic() - t
        _wait("the standby leads", lambda: _leader(api) == standby, timeout=20)
        took_over = time.monotonic() - t
        done_before = len(_complete(api, nodes, name))
        _wait("one more node complete under the new leader",
              lambda: len(_complete(api, nodes, name)) > done_before, timeout=120)
        third = replicas("r3")
        # kill -9 the active replica mid-rollout: the Leases expire and r3 resumes
        reps[standby].proc.kill()
        reps[standby].proc.wait(10)
        t = time.monotonic()
        _wait("r3 leads", lambda: _leader(api) == "r3", timeout=60)
        killed_over = time.monotonic() - t
        _wait("every node complete", lambda: len(_complete(api, nodes, name)) == len(nodes), timeout=240)
        _wait("the NodeRecipe Current by kstatus", lambda: _kstatus(api, name) == "Current", timeout=60)
        # the lifecycles the stopped and the killed leader started were released by the passes
        # that resumed and finished them: no run-owner ConfigMap of this rollout is left
        _wait("no run owner left", lambda: not (run_owners() - owners_before), timeout=60)
        w.stop()
        redone = {k: len(v) for k, v in created.items() if len(v) > 1}
        assert created and not redone, f"stages run more than once across the takeovers: {redone}"
        for n in nodes:
            node = core.read_node(n)
            assert failure_key(name) not in (node.metadata.annotations or {}), n
            assert not node.spec.unschedulable, n
        print(f"\nSIGTERM: stopped in {stopped_in:.1f} s, standby leading {took_over:.1f} s after the signal; "
              f"kill -9: r3 leading {killed_over:.1f} s after the kill")
        third.proc.send_signal(signal.SIGTERM)
        assert third.proc.wait(30) == 0, third.tail()
    except BaseException:
        for r in reps.values():
            print(r.name, r.tail())
        raise
    finally:
        with contextlib.suppress(Exception):
            client.CustomObjectsApi(api).delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)


def test_after_a_kill_of_the_leader_with_the_charts_timings_the_next_node_completes_within_20_s(
        controlplane: Any, api: Any, make_nodes: Any, test_id: str, replicas: Any) -> None:
    """Two replicas with the chart's leader-election flags and the default recipe Lease (60 s):
    kill -9 of the leader mid-rollout; the standby leads once the leader Lease expired and takes
    over the old leader's recipe Lease at once (it does not wait the 60 s out), so the next node
    completes within 20 s of the kill (docs/controller.md, High availability)."""
    from tests.e2e.test_chart_e2e import render

    dep = next(d for d in render() if d["kind"] == "Deployment")
    chart = [a for a in dep["spec"]["template"]["spec"]["containers"][0]["args"] if a.startswith("--leader-elect")]
    assert len(chart) == 4, chart
    nodes = make_nodes(5)
    name = f"ko-{test_id[-4:]}"
    reps = {n: replicas(n, *chart, "--lease-duration=60") for n in ("k1", "k2")}
    first = _wait("a leader", lambda: _leader(api), timeout=60)
    apply(DynamicClient(api), recipe_object(name, test_id, budget=1, run_for="2s", runtime_required=False))
    try:
        _wait("a node complete and the next one in flight", lambda: _complete(api, nodes, name) and [
            n for n in _in_flight(api, nodes, name) if n not in _complete(api, nodes, name)], timeout=180, every=0.1)
        done = set(_complete(api, nodes, name))
        reps[first].proc.kill()
        t = time.monotonic()
        reps[first].proc.wait(10)
        _wait("the standby leads", lambda: _leader(api) not in ("", first), timeout=30, every=0.1)
        led = time.monotonic() - t
        _wait("the next node complete", lambda: set(_complete(api, nodes, name)) - done, timeout=90, every=0.1)
        took = time.monotonic() - t
        print(f"\nkill -9 of the leader ({' '.join(chart)}, --lease-duration=60): standby leading after "
              f"{led:.1f} s, next node complete {took:.1f} s after the kill")
        assert took <= 20, f"the next node completed {took:.1f} s after the kill"
        _wait("every node complete", lambda: len(_complete(api, nodes, name)) == len(nodes), timeout=180)
    except BaseException:
        for r in reps.values():
            print(r.name, r.tail())
        raise
    finally:
        with contextlib.suppress(Exception):
            client.CustomObjectsApi(api).delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)


def test_a_new_noderecipe_is_in_progress_until_a_controller_observed_it(
        controlplane: Any, api: Any, sa_kubeconfig: Path, test_id: str) -> None:
    """kstatus calls an object without status Current; the CRD's status default
    (observedGeneration -1) keeps a new NodeRecipe InProgress until the controller writes one."""
    name = f"new-{test_id[-4:]}"
    apply(DynamicClient(api), recipe_object(name, test_id, budget=1))
    try:
        got = _obj(api, name)
        assert got["status"] == {"observedGeneration": -1}
        assert got["metadata"]["generation"] == 1
        assert _kstatus(api, name) == "InProgress"
    finally:
        client.CustomObjectsApi(api).delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)


def test_a_noderecipe_written_from_a_converted_recipe_file_rolls_out(
        controlplane: Any, api: Any, make_nodes: Any, test_id: str, sa_kubeconfig: Path, tmp_path: Path) -> None:
    """A recipe file of the old form (the release in metadata.version) is refused by the API
    server; ``reconciler convert --write`` moves the release to spec.version, the file is then
    applied as it stands, and ``controller --once --source crd`` (the chart's ServiceAccount) rolls
    it out with no deprecation warning."""
    dyn = DynamicClient(api)
    nodes = make_nodes(2)
    name = f"conv-{test_id[-4:]}"
    obj = recipe_object(name, test_id, budget=2, runtime_required=False)
    obj["metadata"]["version"] = obj["spec"].pop("version")
    f = tmp_path / "recipe.yaml"
    f.write_text("# converted by the test\n" + yaml.safe_dump(obj, sort_keys=False))
    with pytest.raises(Exception, match=r"metadata\.version: field not declared in schema"):
        apply(dyn, yaml.safe_load(f.read_text()), dry_run=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "POD_NAMESPACE": NS}
    conv = subprocess.run([sys.executable, "-m", "reconciler", "convert", "--write", str(f)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert conv.returncode == 0 and conv.stdout == f"converted {f}\n", conv.stderr
    text = f.read_text()
    assert text.startswith("# converted by the test\n") and "  version: 2026.12.1\n" in text.split("spec:")[1]
    apply(dyn, yaml.safe_load(text))
    try:
        cp = subprocess.run([sys.executable, "-m", "reconciler", "controller", "--once", "--kubeconfig",
                             str(sa_kubeconfig), "--metrics-bind-address", "0", "--health-probe-bind-address", "0"],
                            env=env, capture_output=True, text=True, timeout=300)
        assert cp.returncode == 0, cp.stderr[-3000:]
        assert sorted(_complete(api, nodes, name)) == sorted(nodes), cp.stderr[-3000:]
        assert "deprecated" not in cp.stderr
        assert _obj(api, name)["status"]["recipeVersion"] == "2026.12.1"
        assert _kstatus(api, name) == "Current"
    finally:
        with contextlib.suppress(Exception):
            client.CustomObjectsApi(api).delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)


def _in_flight(api: Any, nodes: list[str], recipe: str) -> list[str]:
    core = client.CoreV1Api(api)
    return [n for n in nodes if inflight_key(recipe) in (core.read_node(n).metadata.annotations or {})]


def test_batch_gating_and_a_readiness_gate_under_the_controller_then_once_on_a_new_recipe(
        controlplane: Any, api: Any, make_nodes: Any, test_id: str, replicas: Any, sa_kubeconfig: Path) -> None:
    """With the chart's ServiceAccount: a NodeRecipe with budget 1 and a readiness gate is rolled out
    by the serving controller one node at a time (never two in flight); each node is held at the gate
    until the validator's condition appears; then, the controller stopped, ``controller --once``
    reads a new NodeRecipe object and rolls it out."""
    from tests.e2e.test_readiness_gate_e2e import VALIDATED, _validate

    dyn = DynamicClient(api)
    core = client.CoreV1Api(api)
    nodes = make_nodes(2)
    name = f"gate-{test_id[-4:]}"
    obj = recipe_object(name, test_id, budget=1, runtime_required=False)
    obj["spec"]["readinessGate"] = {"conditionType": VALIDATED, "timeout": "10m"}
    a = replicas("gate")
    _wait("the controller ready", lambda: a.get("/readyz")[0] == 200, timeout=60)
    most: list[int] = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            with contextlib.suppress(Exception):
                most[0] = max(most[0], len(_in_flight(api, nodes, name)))
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    apply(dyn, obj)
    once_name = f"once-{test_id[-4:]}"
    try:
        first = _wait("a node held at the readiness gate", lambda: [
            n for n in _in_flight(api, nodes, name)
            if '"readiness-gate"' in (core.read_node(n).metadata.annotations or {}).get(inflight_key(name), "")],
            timeout=120)[0]
        time.sleep(3)  # held: the gate is not passed without the condition, and the budget keeps the other back
        assert _complete(api, nodes, name) == [] and _in_flight(api, nodes, name) == [first]
        _validate(core, first)
        _wait("the validated node complete", lambda: first in _complete(api, nodes, name), timeout=60)
        second = next(n for n in nodes if n != first)
        _wait("the second node held at the gate", lambda: '"readiness-gate"' in (
            core.read_node(second).metadata.annotations or {}).get(inflight_key(name), ""), timeout=120)
        _validate(core, second)
        _wait("the NodeRecipe Current by kstatus", lambda: _kstatus(api, name) == "Current", timeout=120)
        stop.set()
        sampler.join(5)
        assert most[0] == 1, f"{most[0]} nodes in flight at once with a budget of 1"
        a.proc.send_signal(signal.SIGTERM)
        assert a.proc.wait(30) == 0, a.tail()

        # --once: the first LIST of NodeRecipe objects, one pass, its result as the exit code
        apply(dyn, recipe_object(once_name, test_id, budget=2, runtime_required=False))
        env = {**os.environ, "PYTHONPATH": str(ROOT), "POD_NAMESPACE": NS}
        cp = subprocess.run([sys.executable, "-m", "reconciler", "controller", "--once", "--kubeconfig",
                             str(sa_kubeconfig), "--metrics-bind-address", "0", "--health-probe-bind-address", "0"],
                            env=env, capture_output=True, text=True, timeout=300)
        assert cp.returncode == 0, cp.stderr[-3000:]
        assert sorted(_complete(api, nodes, once_name)) == sorted(nodes), cp.stderr[-3000:]
        assert f"recipe {once_name}: succeeded" in cp.stderr
        assert _kstatus(api, once_name) == "Current"
    except BaseException:
        print(a.tail())
        raise
    finally:
        stop.set()
        for n in (name, once_name):
            with contextlib.suppress(Exception):
                client.CustomObjectsApi(api).delete_cluster_custom_object(GROUP, VERSION, PLURAL, n)

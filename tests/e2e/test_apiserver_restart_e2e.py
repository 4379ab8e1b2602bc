"""API server outage (issue #6 §3): kube-apiserver is stopped in the middle of a drain and started
again; ``reconciler apply`` (a separate process) retries with backoff and completes, every node
accounted for.

This module starts its own control plane (tests/controlplane), so the restart never disturbs the
shared one other e2e tests use. The restart stops exactly the kube-apiserver process that control
plane started (SIGTERM), keeps etcd and its data, and starts the apiserver again with the same
flags on the same port.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from reconciler.model.nodestate import inflight_key
from tests.controlplane.cluster import ControlPlane, ControlPlaneError, RebootEmulator

from .test_reliability_e2e import assert_all_complete, recipe_text, reconciler_cmd, wait_for, workload


@pytest.fixture(scope="module")
def own_controlplane(controlplane: Any) -> Iterator[ControlPlane]:
    """A second control plane for this module only (``controlplane`` is requested first so the
    session's skip/fail rules apply), with a reboot emulator."""
    cp = ControlPlane(keep=os.environ.get("RECONCILER_E2E_KEEP") == "1")
    try:
        cp.start()
    except ControlPlaneError as e:
        pytest.fail(f"second control plane did not start: {e}", pytrace=False)
    emu = RebootEmulator(cp).start()
    try:
        yield cp
    finally:
        emu.stop()
        cp.stop()


def restart_apiserver(cp: ControlPlane, down_seconds: float) -> float:
    """Stop kube-apiserver (SIGTERM; SIGKILL after 10 s), keep it down ``down_seconds``, start it again with the
    same arguments and wait for /readyz. Returns the seconds the API was unreachable."""
    proc = next(p for p in cp._procs if p.name == "kube-apiserver")
    args = [str(a) for a in proc.popen.args][1:]  # type: ignore[union-attr]
    t0 = time.monotonic()
    proc.popen.send_signal(signal.SIGTERM)
    try:
        proc.popen.wait(timeout=10)
    except subprocess.TimeoutExpired:  # it stops listening at once but may linger on open watches
        proc.popen.kill()
        proc.popen.wait(timeout=30)
    cp._procs.remove(proc)
    time.sleep(down_seconds)
    cp._spawn("kube-apiserver", args)
    cp._wait("kube-apiserver", time.monotonic() + 90, lambda: cp._api_get("/readyz") == b"ok")
    return time.monotonic() - t0


def test_apiserver_restart_in_the_middle_of_a_drain(own_controlplane: ControlPlane, tmp_path: Path) -> None:
    cp = own_controlplane
    group = "restart"
    nodes = [f"restart-n{i}" for i in range(3)]
    cp.create_nodes(nodes, labels={"e2e.test/group": group})
    with cp.api_client() as api:
        core, apps, pol = client.CoreV1Api(api), client.AppsV1Api(api), client.PolicyV1Api(api)
        ns = "restart-work"
        core.create_namespace({"metadata": {"name": ns}})
        # a PDB that allows no disruption yet: the drain of the first node is held in its eviction loop
        workload(core, apps, pol, ns, group, replicas=3, max_unavailable=0)

    name = "outage"
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(recipe_text(name, group, budget=1))
    log = (tmp_path / "apply.log").open("wb")
    out = tmp_path / "apply.json"
    with out.open("wb") as stdout:
        proc = subprocess.Popen(
            reconciler_cmd("-v", "apply", str(recipe), "--kubeconfig", str(cp.kubeconfig), "--no-status-object",
                           "--poll-seconds", "2", "-o", "json"),
            stdout=stdout, stderr=log)
        try:
            with cp.api_client() as api:
                core = client.CoreV1Api(api)

                def draining() -> list[str]:
                    found = []
                    for n in nodes:
                        ann = core.read_node(n).metadata.annotations or {}
                        if '"phase":"drain"' in ann.get(inflight_key(name), ""):
                            found.append(n)
                    return found

                in_drain = wait_for("a node draining (eviction refused by the PDB)", draining, timeout=120)
            time.sleep(3)  # a few refused evictions
            outage = restart_apiserver(cp, down_seconds=8.0)
            assert outage >= 8.0 and proc.poll() is None  # the run survived the outage
            with cp.api_client() as api:  # now let the drain proceed
                client.PolicyV1Api(api).patch_namespaced_pod_disruption_budget(
                    "web", "restart-work", {"spec": {"maxUnavailable": 1}})
            rc = proc.wait(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
            log.close()
    err = (tmp_path / "apply.log").read_text(errors="replace")
    assert rc == 0, err[-4000:]
    doc = json.loads(out.read_text())
    assert doc["result"] == "succeeded"
    assert {n["name"]: n["state"] for n in doc["nodes"]} == dict.fromkeys(nodes, "complete")
    retries = sum(1 for line in err.splitlines() if "retrying" in line)
    print(f"\napiserver outage {outage:.1f} s; {retries} retried API errors logged; run {doc['durationSeconds']:.0f} s")
    assert retries and ("Connection refused" in err or "connection" in err.lower())
    drained = [e for e in doc["timeline"] if e["event"] == "drained"]
    assert in_drain[0] in {e["node"] for e in drained}
    with cp.api_client() as api:
        assert_all_complete(client.CoreV1Api(api), nodes, name)

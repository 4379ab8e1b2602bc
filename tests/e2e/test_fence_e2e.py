"""Fenced writes on the real control plane (issue 12): a run that lost its Lease writes nothing more,
counted by kube-apiserver's own audit log; and with ``workers > 1`` every observer is called on the
rollout loop's thread.

Run A acts as the least-privilege ServiceAccount (so its writes are told apart in the audit log)
with 4 worker threads; its Lease renewals are cut off (a partition for lease writes only). The
Lease expires on the server; run B, polling it, takes it over as soon as it has expired (as a
correct competitor does) and finishes the rollout. Not one write of A may reach the API server
after B took the Lease — nor after A's own fence deadline.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from pathlib import Path
from typing import Any

from reconciler.adapters.host import SystemClock
from reconciler.adapters.kube.cache import WatchStore
from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.execute.fence import FencedCluster
from reconciler.execute.lock import LeaseGroup, lease_name
from reconciler.execute.rollout import Rollout
from reconciler.load import load_inputs, policy_for
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
from reconciler.testing.faults import Fault, FaultyCluster

from .test_reliability_e2e import NS, assert_all_complete, install_rbac, recipe_text, service_account_kubeconfig

SA_USER = f"system:serviceaccount:{NS}:node-reconciler"


def _ts(text: str) -> float:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_a_run_that_lost_its_lease_writes_nothing_more_by_the_servers_audit_log(
        controlplane: Any, controlplane_reboots: Any, api: Any, make_nodes: Any, test_id: str,
        tmp_path: Path) -> None:
    from kubernetes import client

    core = client.CoreV1Api(api)
    install_rbac(api)
    kc_path = tmp_path / "sa.kubeconfig"
    service_account_kubeconfig(controlplane, api, "node-reconciler", kc_path)
    nodes = make_nodes(4)
    name = f"fence-{test_id[-6:]}"
    recipe_file = tmp_path / f"{name}.yaml"
    recipe_file.write_text(recipe_text(name, test_id, budget=1, stage_seconds="3s"))
    inputs = load_inputs([str(recipe_file)])
    (recipe,) = inputs.recipes
    policy = policy_for(recipe, inputs)

    kube_a = KubeCluster.from_kubeconfig(str(kc_path), store=WatchStore("node-reconciler"))
    admin = KubeCluster.from_kubeconfig(str(controlplane.kubeconfig), store=WatchStore("node-reconciler"))
    watch_a, watch_b = kube_a.watch(), admin.watch()
    clock_a = clock_b = SystemClock()
    try:
        # A: renewals after the first one never reach the server
        lease_path = FaultyCluster(kube_a.ports, clock=clock_a, faults=[Fault("reset", verb="replace_lease", nth=2,
                                                                        times=None)])
        group_a = LeaseGroup(lease_path, clock_a, [recipe.name], "run-a@e2e/1", duration=15)
        group_a.acquire()
        group_b = LeaseGroup(admin.leases, clock_b, [recipe.name], "run-b@e2e/2", duration=15)
        taken: list[float] = []

        def thief() -> None:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                lease = admin.leases.get_lease(lease_name(recipe.name))
                if lease is not None and lease.holder != "run-b@e2e/2" and lease.expires_in(time.time()) < 0:
                    group_b.acquire()
                    taken.append(time.time())
                    return
                time.sleep(0.2)

        t = threading.Thread(target=thief, daemon=True)
        t.start()
        plan = compute_plan(recipe, policy, observe(kube_a.ports))
        ra = Rollout(recipe, policy, plan, FencedCluster(kube_a.ports, group_a), clock_a, changes=watch_a,
                     run_id="run-a", poll_seconds=1.0, on_tick=group_a.tick, workers=4)
        t_start = time.time() - 1.0
        res_a = ra.run()
        t.join(timeout=130)
        assert taken, "run B never saw the lease expire"
        assert "stops writing" in ra.stopped, ra.stopped
        assert res_a.result != "succeeded"
        time.sleep(2.0)  # let the audit backend flush
        events = [e for e in controlplane.audit_events() if e.get("user", {}).get("username") == SA_USER
                  and e.get("stage") == "ResponseComplete"]
        a_writes = [e for e in events if _ts(e["requestReceivedTimestamp"]) >= t_start]
        before = [e for e in a_writes if _ts(e["requestReceivedTimestamp"]) < taken[0]]
        after = [e for e in a_writes if _ts(e["requestReceivedTimestamp"]) >= taken[0]]
        assert before, "run A wrote nothing before its lease was lost: the test proves nothing"
        assert not after, [(e["verb"], e["objectRef"], e["requestReceivedTimestamp"]) for e in after]

        # B finishes, with 4 workers, and every observer call happens on the loop thread
        seen: list[int] = []
        plan_b = compute_plan(recipe, policy, observe(admin.ports))
        rb = Rollout(recipe, policy, plan_b, FencedCluster(admin.ports, group_b), clock_b, changes=watch_b,
                     run_id="run-b", poll_seconds=1.0, on_tick=group_b.tick, workers=4,
                     on_event=lambda ev: seen.append(threading.get_ident()))
        res_b = rb.run()
        group_b.release()
        assert res_b.result == "succeeded", [(n.name, n.state, n.message) for n in res_b.nodes]
        assert seen and set(seen) == {threading.get_ident()}
        assert_all_complete(core, nodes, recipe.name)
    finally:
        watch_a.close()
        watch_b.close()
        kube_a.close()
        admin.close()

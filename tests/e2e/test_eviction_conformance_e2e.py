"""Eviction conformance: every case of tests/eviction_cases.py on a real kube-apiserver (with the
disruption controller of kube-controller-manager, the scheduler and kwok nodes) and on the
simulated fleet must give the table's answer — so the two agree (issue 13).

Per case, on the real side: a Deployment of ``replicas`` pause pods on one kwok node of the test,
the first ``not_ready`` pods (by name) frozen for kwok and patched to Ready=False through the
status subresource, the PDBs, a wait until the disruption controller reports the expected
``currentHealthy``/``expectedPods``, then one eviction through ``KubeCluster.evict_pod``.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.adapters.sim.fleet import SimFleet
from tests.e2e.test_kube_adapter import deployment, running_pods, wait_for
from tests.eviction_cases import CASES, EVICTED, Case, outcome, pdb_objects, pod_names, sim_objects, victim_index


def _real_answer(case: Case, kube: KubeCluster, api: Any, namespace: str, group: str) -> str:
    app = "conf"
    labels = {"app": app}
    core, pol = client.CoreV1Api(api), client.PolicyV1Api(api)
    client.AppsV1Api(api).create_namespaced_deployment(namespace, deployment(app, case.replicas, group, labels))
    pods = sorted(running_pods(kube, namespace, app, case.replicas), key=lambda p: p.name)
    for p in pods[: case.not_ready]:
        core.patch_namespaced_pod(p.name, namespace, {"metadata": {"annotations": {"sim.test/frozen": "true"}}})
        core.patch_namespaced_pod_status(p.name, namespace, {"status": {"conditions": [
            {"type": "Ready", "status": "False", "reason": "ConformanceTest"},
            {"type": "ContainersReady", "status": "False", "reason": "ConformanceTest"}]}})
    for p in pods[: case.not_ready]:
        wait_for(lambda p=p: (q := kube.pods.get_pod(namespace, p.name)) is not None and not q.ready,
                 f"{p.name} not Ready")
    for budget in pdb_objects(case, namespace, app):
        pol.create_namespaced_pod_disruption_budget(namespace, budget)
    mine = lambda: [b for b in kube.pods.list_pdbs() if b.namespace == namespace]  # noqa: E731
    if len(case.pdbs) == 1:
        wait_for(lambda: any(b.expected_pods == case.replicas and b.current_healthy == case.healthy
                             for b in mine()), f"PDB status currentHealthy={case.healthy}")
    else:
        wait_for(lambda: len(mine()) == len(case.pdbs), f"{len(case.pdbs)} PDBs listed")
    victim = kube.pods.get_pod(namespace, pods[victim_index(case)].name)
    assert victim is not None and victim.ready == case.evict_ready
    answer = outcome(lambda: kube.pods.evict_pod(namespace, victim.name, victim.uid, grace_seconds=1))
    after = kube.pods.get_pod(namespace, victim.name)
    assert (after is None or after.deletion_ts is not None) == (answer == EVICTED)
    return answer


def _sim_answer(case: Case) -> str:
    sim = SimFleet(sim_objects(case))
    victim = sim.get_pod("conf", pod_names(case, "app")[victim_index(case)])
    assert victim is not None
    # with the pod's own UID as precondition, as the real side sends it (and kubectl drain does)
    return outcome(lambda: sim.evict_pod("conf", victim.name, victim.uid, grace_seconds=1))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_eviction_answer_is_the_same_on_sim_and_real(
    case: Case, kube: KubeCluster, namespace: str, make_nodes: Any, api: Any, test_id: str,
) -> None:
    make_nodes(1)
    real = _real_answer(case, kube, api, namespace, test_id)
    sim = _sim_answer(case)
    assert (real, sim) == (case.answer, case.answer)

"""Lifecycle and rollout conformance (issue 13): every scenario of tests/lifecycle_cases.py gives
the table's answer on the simulated fleet (``sim``, in the default test run) and on the real
control plane (``real``, with ``--e2e``: kube-apiserver, the disruption controller, the scheduler,
kwok nodes, the reboot emulator), and on the real side the normalised outcome of both must be
equal — events emitted, evictions refused and allowed, final node state and the run's result.

The real side builds the same scenario from real objects: kwok nodes of the test, each app a
Deployment whose pods are all scheduled onto the scenario's node (the other nodes are cordoned
while they start, then uncordoned), the not-Ready pods frozen for kwok and patched Ready=False
through the status subresource, the PDB waited for until the disruption controller reports it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from kubernetes import client

from reconciler.adapters.host import SystemClock
from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.ports import ChangeFeed, Clock
from reconciler.testing.fleetgen import make_pdb, pdb_keywords
from tests.e2e.test_kube_adapter import deployment, running_pods, wait_for
from tests.lifecycle_cases import SCENARIOS, SELECT_KEY, Outcome, Scenario, SimWorld, Workload, run_scenario


class RealWorld:
    """The scenario on the session's control plane (module docstring)."""

    def __init__(self, sc: Scenario, *, api: Any, make_nodes: Any, namespace: str, kube: KubeCluster,
                 test_id: str) -> None:
        self.core, self.policy, self.namespace = client.CoreV1Api(api), client.PolicyV1Api(api), namespace
        self.group = test_id
        self.names: list[str] = []
        for i in range(sc.nodes):
            self.names += make_nodes(1, labels={SELECT_KEY: "yes"} if sc.is_selected(i) else {})
        for w in sc.workloads:
            self._start(w, api, namespace, kube, test_id)
        self.cluster = kube.ports
        self.watch = kube.watch(max_sleep=2.0)
        self.changes: ChangeFeed | None = self.watch
        self.clock: Clock = SystemClock()

    def _start(self, w: Workload, api: Any, namespace: str, kube: KubeCluster, group: str) -> None:
        """The app's Deployment, every pod on node ``w.node``; the not-Ready ones; the PDB."""
        others = [n for n in self.names if n != self.names[w.node]]
        for n in others:
            self.core.patch_node(n, {"spec": {"unschedulable": True}})
        labels = {"app": w.app}
        client.AppsV1Api(api).create_namespaced_deployment(namespace, deployment(w.app, w.replicas, group, labels))
        pods = sorted(running_pods(kube, namespace, w.app, w.replicas), key=lambda p: p.name)
        assert {p.node_name for p in pods} == {self.names[w.node]}, pods
        for n in others:
            self.core.patch_node(n, {"spec": {"unschedulable": None}})
        frozen = {"metadata": {"annotations": {"sim.test/frozen": "true"}}}
        not_ready = {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "ConformanceTest"},
                                               {"type": "ContainersReady", "status": "False",
                                                "reason": "ConformanceTest"}]}}
        for p in pods[: w.not_ready]:
            self.core.patch_namespaced_pod(p.name, namespace, frozen)
            self.core.patch_namespaced_pod_status(p.name, namespace, not_ready)
            wait_for(lambda p=p: (q := kube.pods.get_pod(namespace, p.name)) is not None and not q.ready,
                     f"{p.name} not Ready")
        if w.pdb is None:
            return
        client.PolicyV1Api(api).create_namespaced_pod_disruption_budget(
            namespace, make_pdb(namespace, f"{w.app}-pdb", labels, **pdb_keywords(w.pdb)))
        healthy = w.replicas - w.not_ready
        wait_for(lambda: any(b.namespace == namespace and b.expected_pods == w.replicas
                             and b.current_healthy == healthy for b in kube.pods.list_pdbs()),
                 f"PDB status currentHealthy={healthy}")

    def set_label(self, node: str, key: str, value: str | None) -> None:
        """A label patch by someone else (the admin client)."""
        self.core.patch_node(node, {"metadata": {"labels": {key: value}}})

    def set_pdb(self, app: str, spec: Mapping[str, Any]) -> None:
        """A PDB patch by the admin client."""
        self.policy.patch_namespaced_pod_disruption_budget(f"{app}-pdb", self.namespace, {"spec": dict(spec)})

    def api_event_reasons(self) -> set[tuple[str, str]]:
        """(node, reason) of the Events node-reconciler wrote about the scenario's nodes, as the API has them."""
        out = set()
        for n in self.names:
            for e in self.core.list_namespaced_event("default", field_selector=f"involvedObject.name={n}").items:
                if e.reporting_component == "node-reconciler":
                    out.add((n, e.reason))
        return out


@pytest.fixture
def real_world(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Factory ``real_world(scenario) -> RealWorld`` on the control plane (skipped without --e2e)."""
    request.getfixturevalue("controlplane_reboots")  # reboot interrupts need the emulated host
    deps = {k: request.getfixturevalue(k) for k in ("api", "make_nodes", "namespace", "kube", "test_id")}
    made: list[RealWorld] = []

    def make(sc: Scenario) -> RealWorld:
        made.append(RealWorld(sc, **deps))
        return made[-1]

    try:
        yield make
    finally:
        for w in made:
            with contextlib.suppress(Exception):
                w.watch.close()


SIDES = [pytest.param("sim", marks=pytest.mark.simulated), "real"]


@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("sc", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_lifecycle_scenario_gives_the_same_answer_on_sim_and_real(sc: Scenario, side: str,
                                                                  request: pytest.FixtureRequest) -> None:
    if side == "sim":
        outcome = run_scenario(sc, SimWorld(sc))
        assert outcome.check(sc.expect) == [], outcome
        return
    world = request.getfixturevalue("real_world")(sc)
    real = run_scenario(sc, world, poll_seconds=1.0)
    sim: Outcome = run_scenario(sc, SimWorld(sc))
    assert real.check(sc.expect) == [], real
    assert real == sim
    emitted = {(world.names[i], reason) for i, reason, _type in real.events}
    assert emitted <= world.api_event_reasons()

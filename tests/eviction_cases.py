"""The eviction conformance table: PodDisruptionBudget cases whose Eviction API answer the
simulated fleet (tests/unit/adapters/test_sim_eviction.py) and a real kube-apiserver
(tests/e2e/test_eviction_conformance_e2e.py, ``--e2e``) must both give.

Each case: a workload of ``replicas`` pods of one ReplicaSet (label ``app=<app>``), the first
``not_ready`` of them (by name) Running but not Ready, the PDBs (specs without the selector, which
is always ``app=<app>``), and which pod is evicted: a not-Ready one or a Ready one. ``answer`` is
what kube-apiserver v1.36 does: ``evicted``, ``429`` or ``500``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconciler.errors import ServerError, TooManyRequestsError
from reconciler.testing.fleetgen import make_node, make_pdb, make_pod, pdb_keywords

EVICTED, REFUSED, MULTIPLE = "evicted", "429", "500"
AT = 1796040000.0  # 2026-11-30T12:00:00Z: when the simulated case's objects were created


@dataclass(frozen=True)
class Case:
    """One row of the table (see the module docstring)."""

    id: str
    replicas: int
    not_ready: int
    pdbs: tuple[dict[str, Any], ...]
    evict_ready: bool
    answer: str

    @property
    def healthy(self) -> int:
        """currentHealthy the disruption controller reports before the eviction."""
        return self.replicas - self.not_ready


AA = {"unhealthyPodEvictionPolicy": "AlwaysAllow"}
IHB = {"unhealthyPodEvictionPolicy": "IfHealthyBudget"}

CASES: tuple[Case, ...] = (
    # not Ready, budget not healthy (currentHealthy 1 < desiredHealthy 2)
    Case("notready-unhealthy-budget-no-policy", 2, 1, ({"minAvailable": 2},), False, REFUSED),
    Case("notready-unhealthy-budget-ifhealthy", 2, 1, ({"minAvailable": 2, **IHB},), False, REFUSED),
    Case("notready-unhealthy-budget-alwaysallow", 2, 1, ({"minAvailable": 2, **AA},), False, EVICTED),
    # not Ready, budget healthy (1 >= 1) though it allows no disruption: goes without a decrement
    Case("notready-healthy-budget-no-policy", 2, 1, ({"minAvailable": 1},), False, EVICTED),
    Case("ready-healthy-budget-at-min", 2, 1, ({"minAvailable": 1, **AA},), True, REFUSED),
    # desiredHealthy 0 is not a healthy budget for IfHealthyBudget (desiredHealthy > 0 is required)
    Case("notready-min0-no-policy", 1, 1, ({"minAvailable": 0},), False, REFUSED),
    Case("notready-min0-alwaysallow", 1, 1, ({"minAvailable": 0, **AA},), False, EVICTED),
    # percentages, rounded up, against the ReplicaSet's scale
    Case("notready-maxunavailable-50pct", 3, 1, ({"maxUnavailable": "50%"},), False, EVICTED),
    Case("ready-maxunavailable-1-at-limit", 3, 1, ({"maxUnavailable": 1},), True, REFUSED),
    Case("notready-minavailable-50pct-unhealthy", 3, 2, ({"minAvailable": "50%"},), False, REFUSED),
    Case("ready-minavailable-50pct-allows", 3, 0, ({"minAvailable": "50%"},), True, EVICTED),
    # two PDBs select the pod: 500 whatever the pod's readiness and the budgets
    Case("two-pdbs-ready", 1, 0, ({"minAvailable": 0}, {"minAvailable": 0}), True, MULTIPLE),
    Case("two-pdbs-notready", 1, 1, ({"minAvailable": 0, **AA}, {"maxUnavailable": "100%"}), False, MULTIPLE),
    # no PDB at all
    Case("notready-no-pdb", 1, 1, (), False, EVICTED),
)


def outcome(call: Any) -> str:
    """Run ``call()`` (one eviction) and name its outcome as the table does."""
    try:
        call()
    except TooManyRequestsError as e:
        assert e.disruption_budget, e
        return REFUSED
    except ServerError as e:
        assert e.status == 500, e
        return MULTIPLE
    return EVICTED


def pod_names(case: Case, app: str) -> list[str]:
    """Names of the case's pods in the simulated fleet (sorted; the first ``not_ready`` are not Ready)."""
    return [f"{app}-5d8f7-{i:02d}" for i in range(case.replicas)]


def victim_index(case: Case) -> int:
    """Index (in sorted pod order) of the pod the case evicts."""
    if case.evict_ready:
        assert case.not_ready < case.replicas, case
        return case.not_ready
    assert case.not_ready > 0, case
    return 0


def sim_objects(case: Case, namespace: str = "conf", app: str = "app") -> list[dict[str, Any]]:
    """The case as Kubernetes objects for the simulated fleet: one Ready node, the ReplicaSet's
    pods on it (the first ``not_ready`` Running but not Ready, a grace period of 1 s) and the PDBs,
    created at :data:`AT` (fleetgen's builders)."""
    objs = [make_node("conf-node", {}, created=AT)]
    objs += [make_pod(namespace, name, "conf-node", labels={"app": app}, owner=("ReplicaSet", f"{app}-5d8f7"),
                      ready=i >= case.not_ready, start=AT, grace=1)
             for i, name in enumerate(pod_names(case, app))]
    return objs + pdb_objects(case, namespace, app)


def pdb_objects(case: Case, namespace: str, app: str) -> list[dict[str, Any]]:
    """The case's PodDisruptionBudgets (``<app>-pdb-<j>``, selecting ``app=<app>``), for the
    simulated fleet and for a real API server alike.

    Raises:
        ValueError: a case's PDB spec names a field make_pdb does not write (:func:`pdb_keywords`).
    """
    return [make_pdb(namespace, f"{app}-pdb-{j}", {"app": app}, **pdb_keywords(spec))
            for j, spec in enumerate(case.pdbs)]

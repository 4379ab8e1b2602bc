"""The simulated fleet's Eviction API against the conformance table (tests/eviction_cases.py),
which tests/e2e/test_eviction_conformance_e2e.py runs against a real kube-apiserver too; and the
plan's prediction for the same cases (one rule: reconciler.model.disruption)."""

from __future__ import annotations

import pytest

from reconciler.adapters.sim.fleet import SimFleet
from reconciler.model.observed import ObservedFleet
from reconciler.model.policy import DeploymentPolicy
from reconciler.plan.planner import compute_plan
from reconciler.testing.builders import package, recipe
from tests.eviction_cases import CASES, EVICTED, MULTIPLE, REFUSED, Case, outcome, pod_names, sim_objects, victim_index


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_sim_eviction_answers_as_kube_apiserver(case: Case) -> None:
    sim = SimFleet(sim_objects(case))
    victim = pod_names(case, "app")[victim_index(case)]
    for b in sim.list_pdbs():
        if len(case.pdbs) == 1:
            assert b.current_healthy == case.healthy and b.expected_pods == case.replicas
    writes = sim.writes
    got = outcome(lambda: sim.evict_pod("conf", victim, "", grace_seconds=1))
    assert got == case.answer
    pod = sim.get_pod("conf", victim)
    assert pod is not None
    assert (pod.deletion_ts is not None) == (got == EVICTED)
    assert sim.writes == writes + (got == EVICTED)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_plan_predicts_the_same_answer(case: Case) -> None:
    sim = SimFleet(sim_objects(case))
    victim = pod_names(case, "app")[victim_index(case)]
    fleet = ObservedFleet.build(sim.list_nodes(), [p for p in sim.list_pods() if p.name == victim], sim.list_pdbs())
    r = recipe("r", package("tuned", interrupt="reboot"))
    warnings = compute_plan(r, DeploymentPolicy.legacy("legacy", None), fleet).warnings
    refused = [w for w in warnings if "is refused (429)" in w]
    multiple = [w for w in warnings if "HTTP 500" in w]
    assert bool(refused) == (case.answer == REFUSED), warnings
    assert bool(multiple) == (case.answer == MULTIPLE), warnings
    if refused and not case.evict_ready:
        assert "is not Ready" in refused[0]


def test_drain_of_not_ready_pod_waits_for_a_healthy_budget() -> None:
    """Issue 13's divergence: a not-Ready pod under a PDB with no policy whose budget is not
    healthy is refused (429) until the budget is healthy again, then evicted without a decrement."""
    (case,) = [c for c in CASES if c.id == "notready-unhealthy-budget-no-policy"]
    sim = SimFleet(sim_objects(case))
    ready, not_ready = pod_names(case, "app")[1], pod_names(case, "app")[0]
    assert outcome(lambda: sim.evict_pod("conf", not_ready, "", grace_seconds=1)) == REFUSED
    sim.set_pod_ready("conf", not_ready, True)  # the pod turns Ready ...
    assert sim.list_pdbs()[0].current_healthy == 2 and sim.get_pod("conf", not_ready).ready
    sim.set_pod_ready("conf", not_ready, False)  # ... and not Ready again, with the other one Ready
    assert sim.list_pdbs()[0].current_healthy == 1
    assert outcome(lambda: sim.evict_pod("conf", ready, "", grace_seconds=1)) == REFUSED  # 1 < 2: no disruption


def test_an_admin_relaxing_a_pdb_lets_the_refused_eviction_through() -> None:
    """``SimFleet.set_pdb`` (a test helper, as ``kubectl patch pdb``): the budget is read again."""
    case = next(c for c in CASES if c.id == "ready-healthy-budget-at-min")
    sim = SimFleet(sim_objects(case))
    victim = pod_names(case, "app")[victim_index(case)]
    assert outcome(lambda: sim.evict_pod("conf", victim, "", grace_seconds=1)) == REFUSED
    sim.set_pdb("conf", "app-pdb-0", minAvailable=0)
    (b,) = sim.list_pdbs()
    assert (b.desired_healthy, b.disruptions_allowed) == (0, 1)
    assert sim.pdbs[("conf", "app-pdb-0")]["metadata"]["generation"] == 2
    assert outcome(lambda: sim.evict_pod("conf", victim, "", grace_seconds=1)) == EVICTED
    with pytest.raises(ValueError, match="selector"):
        sim.set_pdb("conf", "app-pdb-0", selector={"matchLabels": {}})

"""The NodeRecipeRollout status writer, checked with the real kstatus library
(sigs.k8s.io/cli-utils ``status.Compute``, via tests/gitops/kstatus)."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.execute.timeline import Event, NodeOutcome, RunResult
from reconciler.model.plan import Plan
from reconciler.model.policy import DeploymentPolicy
from reconciler.model.run import CompartmentResult
from reconciler.plan.planner import compute_plan
from reconciler.report.status import API_VERSION, KIND, RolloutProgress, new_object, rollout_status, waiting_text
from reconciler.testing import budget, fleet, node, package, recipe
from tests.gitops.tools import kstatus

TUNED = package("tuned", "1.0.0", interrupt="reboot")
WAIT_FIRST = "waiting for recipe first (priority 1) on this node"


def make_plan(n: int = 4, installed: int = 1) -> Plan:
    r = recipe("tuning", TUNED, selector={"pool": "gpu"}, budget=budget(count=1), version="2026.1")
    nodes = [
        node(f"n{i}", labels={"pool": "gpu"}, recipe="tuning", installed=[TUNED] if i < installed else [])
        for i in range(n)
    ]
    return compute_plan(r, DeploymentPolicy.legacy("legacy", r.interruptionBudget), fleet(nodes), revision="f00d")


def obj(
    plan: Plan,
    progress: RolloutProgress,
    *,
    generation: int = 1,
    observed: int | None = None,
    paused: bool = False,
    previous: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    o = new_object(plan)
    o["metadata"]["generation"] = generation
    o["status"] = rollout_status(
        progress,
        generation=observed if observed is not None else generation,
        now="2026-11-30T12:00:00Z",
        previous=previous or (),
        paused=paused,
    )
    return o


def result(plan: Plan, states: dict[str, str], verdict: str = "succeeded", halted: tuple[str, ...] = ()) -> RunResult:
    nodes = [
        NodeOutcome(
            name=k,
            state=v,
            compartment="__default__",  # type: ignore[arg-type]
            failed_stage="apply" if v == "failed" else "",
            message="exit 3" if v == "failed" else (WAIT_FIRST if v == "waiting" else ""),
        )
        for k, v in states.items()
    ]
    comps = tuple(CompartmentResult(c, halted=True, halt_reason="failureThreshold") for c in halted)
    return RunResult("run-1", plan.planHash, plan.recipe.name, verdict, nodes, comps, [], 10.0)  # type: ignore[arg-type]


def test_progress_follows_events_and_summary_counts() -> None:
    plan = make_plan()
    p = RolloutProgress(plan)
    assert p.counts() == {
        "total": 4,
        "complete": 1,
        "inProgress": 0,
        "pending": 3,
        "failed": 0,
        "blocked": 0,
        "removed": 0,
    }
    assert p.on_event(Event(1, "n1", "cordon"))
    assert not p.on_event(Event(2, "n1", "stage-start", "apply"))  # same counts: no status write needed
    assert p.on_event(Event(3, "n1", "complete"))
    assert p.on_event(Event(4, "n2", "failed", "apply exit 3"))
    s = rollout_status(p, generation=3, now="2026-11-30T12:00:00Z")
    assert s["summary"] == "2/4 nodes complete, 1 failed, 1 pending"
    assert s["phase"] == "Progressing" and s["observedGeneration"] == 3
    assert s["failures"] == [{"node": "n2", "message": "apply exit 3"}]


def test_kstatus_in_progress_complete_failed_halted_and_unobserved_generation() -> None:
    plan = make_plan()
    running = RolloutProgress(plan)
    running.on_event(Event(1, "n1", "cordon"))
    done = RolloutProgress(plan)
    done.finish(result(plan, {"n1": "complete", "n2": "complete", "n3": "complete"}))
    failed = RolloutProgress(plan)
    failed.finish(result(plan, {"n1": "complete", "n2": "failed", "n3": "untouched"}, "failed"))
    halted = RolloutProgress(plan)
    halted.finish(result(plan, {"n1": "failed", "n2": "untouched", "n3": "untouched"}, "halted", ("__default__",)))
    objects = [
        obj(plan, running),
        obj(plan, done),
        obj(plan, failed),
        obj(plan, halted),
        obj(plan, done, generation=2, observed=1),  # spec changed (new revision), status not yet rewritten
        obj(plan, running, paused=True),
    ]
    got = [(r["status"], r["message"]) for r in kstatus(objects)]
    assert got[0] == ("InProgress", "1/4 nodes complete, 1 in progress, 2 pending")
    assert got[1] == ("Current", "Resource is Ready")
    assert got[2][0] == "Failed" and "failed: n2" in got[2][1]
    assert got[3][0] == "Failed" and "halted compartment(s): __default__" in got[3][1]
    assert got[4][0] == "InProgress" and "generation" in got[4][1].lower()
    assert got[5][0] == "InProgress"
    assert objects[1]["status"]["phase"] == "Complete" and objects[2]["status"]["phase"] == "Failed"
    assert objects[3]["status"]["phase"] == "Halted" and objects[5]["status"]["phase"] == "Paused"
    assert objects[0]["apiVersion"] == API_VERSION and objects[0]["kind"] == KIND


def test_transition_time_kept_while_a_condition_keeps_its_status() -> None:
    plan = make_plan()
    p = RolloutProgress(plan)
    first = rollout_status(p, generation=1, now="2026-11-30T12:00:00Z")
    p.on_event(Event(1, "n1", "cordon"))
    second = rollout_status(p, generation=1, now="2026-11-30T12:05:00Z", previous=first["conditions"])
    assert [c["lastTransitionTime"] for c in second["conditions"]] == ["2026-11-30T12:00:00Z"] * 3
    p.finish(result(plan, {"n1": "complete", "n2": "complete", "n3": "complete"}))
    third = rollout_status(p, generation=1, now="2026-11-30T12:09:00Z", previous=second["conditions"])
    by = {c["type"]: c for c in third["conditions"]}
    assert by["Ready"]["status"] == "True" and by["Ready"]["lastTransitionTime"] == "2026-11-30T12:09:00Z"
    assert by["Stalled"]["lastTransitionTime"] == "2026-11-30T12:00:00Z"


def test_waiting_for_an_earlier_recipe_is_in_progress_not_failed() -> None:
    """Nodes held back by an earlier recipe (sequencing) did nothing wrong and a later run takes
    them up: kstatus InProgress (Reconciling), never Stalled, with the recipe waited for named."""
    plan = make_plan()
    waiting = RolloutProgress(plan)
    waiting.finish(result(plan, {"n1": "complete", "n2": "waiting", "n3": "waiting"}, "waiting"))
    mixed = RolloutProgress(plan)  # a node failed too: Failed wins
    mixed.finish(result(plan, {"n1": "failed", "n2": "waiting", "n3": "complete"}, "failed"))
    objects = [obj(plan, waiting), obj(plan, mixed)]
    got = [(r["status"], r["message"]) for r in kstatus(objects)]
    status = objects[0]["status"]
    assert status["phase"] == "Waiting" and status["failures"] == []
    assert status["summary"] == "2/4 nodes complete, 2 pending; 2 nodes waiting for recipe first (priority 1)"
    by = {c["type"]: c for c in status["conditions"]}
    assert (by["Ready"]["status"], by["Reconciling"]["status"], by["Stalled"]["status"]) == ("False", "True", "False")
    assert by["Reconciling"]["reason"] == "WaitingForRecipe" and "recipe first" in by["Reconciling"]["message"]
    assert got[0] == ("InProgress", status["summary"])
    assert objects[1]["status"]["phase"] == "Failed" and got[1][0] == "Failed"


@pytest.mark.parametrize(
    ("waiting", "text"),
    [
        ({}, ""),
        ({"a": WAIT_FIRST}, "1 node waiting for recipe first (priority 1)"),
        ({"a": "waiting for recipe z to complete on every node (sequencing: all)", "b": WAIT_FIRST, "c": WAIT_FIRST},
         "2 nodes waiting for recipe first (priority 1); 1 node waiting for recipe z to complete on every node "
         "(sequencing: all)"),
    ],
)
def test_waiting_text_groups_nodes_by_the_recipe_they_wait_for(waiting: dict[str, str], text: str) -> None:
    assert waiting_text(waiting) == text


@pytest.mark.parametrize("installed", [4])
def test_nothing_to_do_is_complete_at_once(installed: int) -> None:
    plan = make_plan(installed=installed)
    p = RolloutProgress(plan)
    p.finish(result(plan, {}))
    (r,) = kstatus([obj(plan, p)])
    assert r["status"] == "Current" and obj(plan, p)["status"]["summary"] == "4/4 nodes complete"

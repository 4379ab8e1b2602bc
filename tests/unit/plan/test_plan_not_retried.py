"""Nodes that failed in an earlier run with the same inputs: the plan leaves them failed exactly as
``apply`` does (one rule, :func:`reconciler.model.nodestate.not_retried`), unless ``retry_failed``."""

from __future__ import annotations

from reconciler.model.nodestate import FailureRecord, failure_key, inputs_digest, not_retried, not_retried_message
from reconciler.model.plan import Plan
from reconciler.model.policy import DeploymentPolicy
from reconciler.plan.planner import compute_plan
from reconciler.report.render import render_markdown, render_text
from reconciler.testing import budget, fleet, inflight, node, package, pod, recipe

LEGACY = DeploymentPolicy.legacy("legacy", budget(count=1))
PKG = package("tuned", "1.0.0", interrupt="reboot")
R = recipe("r", PKG, protect={"w": "t"})
SAME = inputs_digest(R, LEGACY)


def failure(inputs: str = SAME, run: str = "run-1") -> FailureRecord:
    return FailureRecord(runId=run, reason="StageFailed", inputs=inputs, stage="apply", package="tuned", exitCode=3,
                         message="tuned 1.0.0 apply failed: exit code 3", logTail="no profile")


def fleet_of(rec: FailureRecord | None, *, ready: bool = True) -> list:
    return [node("n1", recipe="r", failure=rec, inflight=inflight("stages", packages=["tuned"]), cordoned_by_us=True,
                 ready=ready),
            node("n2"), node("n3", recipe="r", installed=[PKG])]


def plan_of(nodes: list, **kw: object) -> Plan:
    return compute_plan(R, LEGACY, fleet(nodes, [pod("web", node="n1", labels={"w": "t"})]), **kw)  # type: ignore[arg-type]


def test_a_node_failed_with_the_same_inputs_is_left_failed_out_of_every_batch() -> None:
    p = plan_of(fleet_of(failure(), ready=False))
    n1 = p.node("n1")
    assert n1 is not None and n1.notRetried == failure()
    assert n1.batch == 0 and n1.steps == () and n1.interrupt is None and not n1.cordon and n1.waitFor == ()
    assert n1.note == not_retried_message(failure(), "r", "n1") and "use --retry-failed" in n1.note
    assert "`reconciler package rerun tuned --recipe r --node n1 --force`" in n1.note  # as apply says it
    assert n1.has_work  # not up to date: no report counts it complete
    assert [b for c in p.compartments for b in c.batches] == [("n2",)]
    assert p.summary.nodesChanging == 1 and p.summary.notRetried == 1
    assert p.summary.interrupts.reboot == 1 and p.summary.actions.install == 1 and p.summary.batches == 1
    # two warnings name it — it is left failed, and it keeps its compartment halted (no failure
    # threshold: one failed node halts it, issue 34) —; those about a lifecycle that does not run are gone
    assert [w for w in p.warnings if "n1" in w] == [
        "1 node(s) failed in an earlier run with these same inputs and are left failed: apply does not retry them "
        "(use --retry-failed): n1",
        "compartment __default__ is halted: 1 of its node(s) failed in an earlier run with these same inputs (n1); "
        "apply starts none of its 1 node(s) to change (lifecycles in flight excepted) until they are retried "
        "(--retry-failed, reset, package rerun), left out (node ignore) or the recipe changes"]


def test_retry_failed_plans_it_as_any_other_node() -> None:
    p = plan_of(fleet_of(failure(), ready=False), retry_failed=True)
    n1 = p.node("n1")
    assert n1 is not None and n1.notRetried is None and n1.batch >= 1 and n1.steps and n1.cordon
    assert n1.waitFor == ("default/web",)
    assert p.summary.nodesChanging == 2 and p.summary.notRetried == 0
    assert not any("left failed" in w for w in p.warnings)
    assert any(w.startswith("node n1 is not Ready: apply waits for it up to timeouts.nodeReady (600 s")
               for w in p.warnings)  # its lifecycle runs


def test_a_failure_with_other_inputs_or_unreadable_does_not_hold_the_node() -> None:
    for rec in (failure(inputs="0123456789abcdef"), failure(inputs="")):
        n1 = plan_of(fleet_of(rec)).node("n1")
        assert n1 is not None and n1.notRetried is None and n1.batch >= 1
    broken = fleet_of(None)
    broken[0] = node("n1", recipe="r", inflight=inflight("stages", packages=["tuned"]), cordoned_by_us=True,
                     annotations={failure_key("r"): "{not json"})
    assert broken[0].annotations[failure_key("r")] == "{not json"
    n1 = plan_of(broken).node("n1")
    assert n1 is not None and n1.notRetried is None and n1.batch >= 1


def test_an_up_to_date_node_with_a_stale_failure_record_stays_up_to_date() -> None:
    """The rollout only looks at nodes of a batch: a node with nothing to do is untouched (and
    counted complete) whatever its failure record says; the plan agrees."""
    nodes = [node("n1", recipe="r", installed=[PKG], failure=failure())]
    n1 = plan_of(nodes).node("n1")
    assert n1 is not None and n1.notRetried is None and not n1.has_work


def test_the_decision_is_the_rollouts_one_rule() -> None:
    n1 = fleet_of(failure())[0]
    assert not_retried(n1, "r", SAME) == failure()
    assert not_retried(n1, "r", SAME, retry_failed=True) is None
    assert not_retried(n1, "r", "another-digest") is None
    assert not_retried(n1, "other-recipe", SAME) is None


def test_hash_covers_the_decision_and_nothing_else() -> None:
    held, retried = plan_of(fleet_of(failure())), plan_of(fleet_of(failure()), retry_failed=True)
    assert held.planHash != retried.planHash  # a plan made with --retry-failed is applied only with it
    # with --retry-failed the failure record changes nothing: the hash of the same fleet without it
    assert retried.planHash == plan_of(fleet_of(None)).planHash == plan_of(fleet_of(None), retry_failed=True).planHash
    # which earlier run failed is not what the plan does
    assert plan_of(fleet_of(failure(run="run-2"))).planHash == held.planHash
    # a fleet with no such node keeps its hash whatever the flag
    clean = [node("n2"), node("n3", recipe="r", installed=[PKG])]
    assert plan_of(clean).planHash == plan_of(clean, retry_failed=True).planHash


def test_views_say_failed_not_retried_not_no_changes() -> None:
    nodes = [fleet_of(failure())[0], node("n3", recipe="r", installed=[PKG])]
    p = plan_of(nodes)
    assert p.summary.nodesChanging == 0 and p.summary.batches == 0
    out = render_text(p, width=200)
    assert ("Nodes: 0 of 2 selected change; 1 failed with the same inputs before: not retried "
            "(use --retry-failed)") in out
    assert "failed, not retried" in out and "No changes" not in out
    md = render_markdown(p)
    assert "**0 of 2 selected nodes change; 1 failed with the same inputs before" in md
    assert "failed, not retried" in md


def test_under_the_controller_the_hint_names_no_apply_flag() -> None:
    """`controller` has no --retry-failed: its messages name `reset` of the node (and `package
    rerun` where it applies), both of which a running controller takes up."""
    apply_msg = not_retried_message(failure(), "tuning", "n1")
    ctl_msg = not_retried_message(failure(), "tuning", "n1", controller=True)
    assert "--retry-failed" in apply_msg
    assert "--retry-failed" not in ctl_msg
    assert "`reconciler reset tuning -l kubernetes.io/hostname=n1` starts it again" in ctl_msg
    assert "reconciler package rerun tuned --recipe tuning --node n1" in ctl_msg

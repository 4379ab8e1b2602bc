"""Lifecycle and rollout scenarios on the simulated fleet (drain-and-scenarios.md §2, ids in names;
semantics-nodewright.md decisions). Every run is checked by the invariants in ``harness.apply``:
budget never exceeded, no protected pod evicted, every node we cordoned uncordoned or recorded
failed, stages in dependency order, at most one interrupt per node."""

from __future__ import annotations

import itertools
from typing import Any

from reconciler.adapters.sim.config import SimConfig, StageFailure
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.model.nodestate import (
    IGNORE_LABEL,
    RUNTIME_REQUIRED_TAINT_KEY,
    cordon_key,
    failure_key,
    inflight_key,
    parse_state,
    state_key,
)
from reconciler.model.recipe import DrainOptions, Timeouts
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
from reconciler.testing.builders import package, policy, recipe
from reconciler.testing.fleetgen import make_node, make_pdb, make_pod

from .harness import GPU, ONE_AT_A_TIME, SHA, TRAINING, apply


def nodes(n: int, **labels: str) -> list[dict[str, Any]]:
    return [make_node(f"n{i}", {"pool": "gpu", **labels}, created=1795000000.0 + i) for i in range(1, n + 1)]


def rs_pod(ns: str, name: str, node: str, app: str, **kw: Any) -> dict[str, Any]:
    return make_pod(ns, name, node, labels={"app": app}, owner=("ReplicaSet", app), **kw)


REBOOT = package("tuned", sha=SHA, interrupt="reboot")
TUNE = recipe("tune", REBOOT, selector=GPU, protect=TRAINING)


def test_full_install_with_reboot_runs_the_lifecycle_in_order() -> None:
    r = recipe("tune", package("base", sha=SHA),
               package("tuned", sha=SHA, depends_on={"base": "1.0.0"}, interrupt="reboot"),
               selector=GPU, protect=TRAINING)
    run = apply(nodes(3) + [rs_pod("web", "web-1", "n1", "web")], r, ONE_AT_A_TIME)
    assert run.result.result == "succeeded"
    kinds = [(e.event, e.detail.split(" ")[0]) for e in run.events("n1")]
    # base (no interrupt) first, on the schedulable node (NodeWright gates only packages with one)
    order = [("stage-start", "base"), ("cordon", ""), ("evict", "web/web-1"), ("drained", "1"),
             ("stage-start", "tuned"), ("interrupt", "reboot"), ("rebooted", "bootID"), ("uncordon", ""),
             ("complete", "")]
    positions = [kinds.index(k) for k in order]
    assert positions == sorted(positions), kinds
    state = parse_state(run.sim.get_node("n1").annotations[state_key("tune")])
    assert {k: (v.stage, v.state) for k, v in state.items()} == {
        "base|1.0.0": ("config", "complete"),
        "tuned|0.9.0" if False else "tuned|1.0.0": ("post-interrupt", "complete"),
    }
    n1 = run.sim.get_node("n1")
    assert not n1.unschedulable and cordon_key("tune") not in n1.annotations
    assert inflight_key("tune") not in n1.annotations
    assert run.watch.max_held["__default__"] == 1


def test_s01_pdb_that_never_allows_a_disruption_fails_the_node_at_the_drain_timeout() -> None:
    objs = nodes(2) + [rs_pod("shop", "web-7c9-a", "n1", "web"),
                       make_pdb("shop", "web", {"app": "web"}, min_available=1)]
    r = recipe("tune", REBOOT, selector=GPU, protect=TRAINING,
               drain=DrainOptions(timeoutSeconds=600, evictionRetrySeconds=5))
    sim = SimFleet(objs, SimConfig())
    calls: list[float] = []
    run = apply(sim, r, ONE_AT_A_TIME, before={"evict_pod": lambda *a: calls.append(sim.now())})
    n1 = run.node("n1")
    assert n1.state == "failed" and n1.reason == "DrainTimeout"
    assert "shop/web-7c9-a" in n1.message and "shop/web" in n1.message and "allowed 0" in n1.message
    assert len(calls) <= 600 / 5 + 1
    assert all(b - a >= 5 for a, b in itertools.pairwise(calls))
    assert not run.events("n1", "stage-start") and not run.events("n1", "interrupt")
    assert run.sim.get_node("n1").unschedulable  # stays cordoned by us, with a failure record
    assert failure_key("tune") in run.sim.get_node("n1").annotations


def test_s02_two_pdbs_fail_the_node_quickly_naming_both() -> None:
    objs = nodes(2) + [
        make_pod("dns", "dc-a", "n1", labels={"app": "dns", "component": "controller"}, owner=("ReplicaSet", "dc")),
        make_pod("dns", "dc-b", "n2", labels={"app": "dns", "component": "controller"}, owner=("ReplicaSet", "dc")),
        make_pdb("dns", "ext", {"app": "dns"}, max_unavailable=1),
        make_pdb("dns", "ctrl", {"component": "controller"}, min_available=1),
    ]
    run = apply(objs, TUNE, policy(count=1, default_strategy="fixed", failureThreshold=1, safetyLimit=100))
    n1 = run.node("n1")
    assert n1.reason == "MultiplePDBs" and "dns/ext" in n1.message and "dns/ctrl" in n1.message
    assert run.events("n1", "failed")[0].t < 10
    assert run.result.result == "halted" and run.node("n2").state == "untouched"


def test_s04_drained_means_the_evicted_pods_are_gone() -> None:
    objs = nodes(1) + [make_pod("db", "pg-0", "n1", labels={"app": "pg"}, owner=("StatefulSet", "pg"), grace=120)]
    run = apply(objs, TUNE, ONE_AT_A_TIME, SimConfig(maxTerminationSeconds=120, rescheduleSeconds=1))
    evicted = run.events("n1", "evict")[0].t
    first_stage = run.events("n1", "stage-start")[0].t
    assert first_stage - evicted >= 120
    assert run.events("n1", "interrupt")[0].t >= evicted + 120


def test_s05_statefulset_replacement_with_the_same_name_counts_as_gone() -> None:
    objs = nodes(2) + [make_pod("web", "web-0", "n1", labels={"app": "w"}, owner=("StatefulSet", "web"))]
    run = apply(objs, recipe("tune", REBOOT, selector={"pool": "gpu", "kubernetes.io/hostname": "n1"},
                             protect=TRAINING), ONE_AT_A_TIME)
    assert run.result.result == "succeeded"
    again = run.sim.get_pod("web", "web-0")
    assert again is not None and again.node_name == "n2"
    assert len(run.events("n1", "evict")) == 1  # the replacement is never evicted


def test_s08_drain_refused_before_any_eviction_releases_our_cordon() -> None:
    objs = nodes(1) + [
        make_pod("default", "debug-shell", "n1"),
        make_pod("web", "cache-1", "n1", owner=("ReplicaSet", "cache"), emptydir=True),
        make_pod("web", "db-2", "n1", owner=("ReplicaSet", "db")),
    ]
    run = apply(objs, TUNE, ONE_AT_A_TIME)
    n1 = run.node("n1")
    assert n1.reason == "DrainRefused"
    assert "default/debug-shell" in n1.message and "web/cache-1" in n1.message
    assert not run.watch.evicted
    node = run.sim.get_node("n1")
    assert not node.unschedulable and cordon_key("tune") not in node.annotations


def test_s09_protected_pods_are_waited_for_never_evicted_and_a_blocked_node_releases_its_slot() -> None:
    objs = nodes(3) + [
        make_pod("ml", "train-7", "n1", labels={"workload": "long-running-training"}, owner=("Job", "t7"),
                 active_deadline=3 * 3600),
        make_pod("ml", "train-8", "n2", labels={"workload": "long-running-training"}, owner=("Job", "t8"),
                 active_deadline=300),
    ]
    r = recipe("tune", REBOOT, selector=GPU, protect=TRAINING, timeouts=Timeouts(waitNonInterrupt=1800))
    run = apply(objs, r, ONE_AT_A_TIME)
    assert run.node("n1").state == "blocked" and "ml/train-7" in run.node("n1").message
    assert run.node("n2").state == "complete" and run.node("n3").state == "complete"
    assert "blocked by ml/train-7" in run.events("n1", "wait")[0].detail
    assert not run.sim.get_node("n1").unschedulable
    # train-8 finished (300 s) while n1 held the only slot; n2 removed it only as a finished pod
    assert ("ml/train-8", {"workload": "long-running-training", }, "Succeeded") in [
        (ref, {k: v for k, v in labels.items() if k == "workload"}, phase) for ref, labels, phase in run.watch.evicted]
    assert run.events("n2", "cordon")[0].t >= run.events("n1", "blocked")[0].t
    assert len(run.events("n1", "blocked")) == 2  # retried once at the end of the compartment, still blocked
    assert run.result.result == "failed"


def test_s10_admin_cordon_is_never_undone_and_counts_against_the_budget() -> None:
    objs = nodes(4)
    objs[2]["spec"]["unschedulable"] = True  # n3, cordoned by an admin before the rollout
    run = apply(objs, TUNE, policy(count=2, default_strategy="fixed", initialBatch=2))
    assert run.node("n3").state == "complete"
    n3 = run.sim.get_node("n3")
    assert n3.unschedulable and cordon_key("tune") not in n3.annotations
    held = run.result.compartments[0].max_disrupted
    assert held <= 2
    # while n3 is unavailable only one more node may be disrupted: no batch has two cordoned-by-us nodes
    assert run.watch.max_held["__default__"] <= 1


def test_s11_node_uncordoned_during_drain_is_recordoned_and_never_interrupted_uncordoned() -> None:
    objs = nodes(1) + [rs_pod("web", "w-1", "n1", "web")]
    sim = SimFleet(objs, SimConfig())
    done: list[bool] = []

    def admin_uncordons(*a: Any) -> None:
        if not done:
            done.append(True)
            sim.set_node("n1", unschedulable=False)

    run = apply(sim, TUNE, ONE_AT_A_TIME, after={"evict_pod": admin_uncordons})
    assert run.result.result == "succeeded"
    assert any("re-cordoned" in e.detail for e in run.events("n1", "cordon"))


def test_s15_reboot_that_never_returns_fails_the_node_keeps_it_cordoned_and_halts() -> None:
    cfg = SimConfig(neverReturns=("n1",), rebootSeconds=60)
    r = recipe("tune", REBOOT, selector=GPU, protect=TRAINING, timeouts=Timeouts(reboot=900))
    run = apply(nodes(5), r, policy(count=1, default_strategy="fixed", failureThreshold=1, safetyLimit=100), cfg)
    n1 = run.node("n1")
    assert n1.state == "failed" and n1.reason == "RebootTimeout"
    assert run.events("n1", "failed")[0].t - run.events("n1", "interrupt")[0].t >= 900
    assert run.sim.get_node("n1").unschedulable
    assert run.result.result == "halted"
    assert all(run.node(f"n{i}").state == "untouched" for i in range(2, 6))


def test_s16_node_deleted_mid_rollout_is_removed_and_releases_its_slot() -> None:
    sim = SimFleet(nodes(3), SimConfig(stageSeconds=50))

    def delete_n1_once_started(spec: Any) -> None:
        if spec.node == "n1":
            sim.delete_node("n1")

    run = apply(sim, TUNE, ONE_AT_A_TIME, check=False,
                after={"start_stage": delete_n1_once_started})
    assert run.node("n1").state == "removed"
    assert run.node("n2").state == "complete" and run.node("n3").state == "complete"


def test_s20_small_pool_percent_budget_moves_one_node_at_a_time() -> None:
    objs = nodes(2) + [make_node("other", {"pool": "cpu"}) for _ in range(1)]
    run = apply(objs, TUNE, policy(percent=33, default_strategy="exponential"))
    assert run.plan.compartments[0].ceiling == 1
    assert run.watch.max_held["__default__"] == 1
    assert run.result.result == "succeeded"


def test_s22_selector_matching_nothing_ends_at_once_with_no_writes() -> None:
    run = apply(nodes(3), recipe("tune", REBOOT, selector={"pool": "storage"}, protect=TRAINING),
                policy(percent=25, default_strategy="exponential"))
    assert run.result.result == "succeeded" and run.sim.writes == 0
    assert all(c.batches == () for c in run.result.compartments)


def test_failed_stage_is_retried_with_backoff_then_terminal_and_reported_with_exit_code() -> None:
    cfg = SimConfig(failures=(StageFailure(node="n2", package="tuned", stage="apply", exitCode=42, times=99,
                                           logTail="modprobe: FATAL: module nvidia_peermem not found"),))
    r = recipe("tune", REBOOT, selector=GPU, protect=TRAINING, timeouts=Timeouts(stageRetries=2, retryBackoff=10))
    run = apply(nodes(4), r, policy(count=2, default_strategy="fixed", initialBatch=2, batchThreshold=50), cfg)
    n2 = run.node("n2")
    assert (n2.state, n2.failed_stage, n2.exit_code) == ("failed", "apply", 42)
    assert "nvidia_peermem" in n2.log_tail
    retries = run.events("n2", "stage-retry")
    assert len(retries) == 2 and "retry in 10 s" in retries[0].detail and "retry in 20 s" in retries[1].detail
    # a failed node never freezes its compartment: the rest is done
    assert [run.node(n).state for n in ("n1", "n3", "n4")] == ["complete"] * 3
    node = run.sim.get_node("n2")
    assert node.unschedulable and node.labels["reconciler.nodewright.dev/status_tune"] == "erroring"
    cond = [c for c in run.sim.nodes["n2"]["status"]["conditions"] if c["type"].endswith("/Erroring")]
    assert cond and cond[0]["status"] == "True"
    assert any(e["reason"] == "Failed" and e["node"] == "n2" for e in run.sim.events)


def test_failure_threshold_halts_and_held_failed_nodes_use_the_budget() -> None:
    cfg = SimConfig(failures=(StageFailure(package="tuned", stage="apply", exitCode=1, times=999),))
    r = recipe("tune", REBOOT, selector=GPU, protect=TRAINING, timeouts=Timeouts(stageRetries=0))
    run = apply(nodes(10), r, policy(count=3, default_strategy="exponential", failureThreshold=2, safetyLimit=50), cfg)
    assert run.result.result == "halted"
    comp = run.result.compartments[0]
    assert comp.halted and len(comp.batches) <= 3
    assert run.watch.max_held["__default__"] <= 3


def test_node_leaving_the_selector_mid_drain_is_released_and_not_started() -> None:
    """Issue 12, finding 5: nothing ran yet, so nothing is owed: released at once, no stage runs."""
    sim = SimFleet(nodes(2) + [make_pod("web", "w1", "n1", owner=("ReplicaSet", "web"), grace=60)],
                   SimConfig(stageSeconds=30))
    def relabel(namespace: str, name: str, uid: str, grace: int | None) -> None:
        sim.set_node("n1", labels={"pool": "cpu"})  # leaves the selector while its pod terminates

    run = apply(sim, TUNE, policy(count=2, default_strategy="fixed", initialBatch=2),
                after={"evict_pod": relabel})
    assert run.node("n1").state == "left"
    assert not run.sim.get_node("n1").unschedulable
    assert not [e for e in run.events("n1") if e.event in ("stage-start", "interrupt")]
    assert inflight_key("tune") not in run.sim.get_node("n1").annotations


def test_node_leaving_the_selector_mid_stages_keeps_the_reboot_it_owes_and_resumes_it_when_back() -> None:
    """Issue 12, finding 5: the running stage finishes, no new stage starts, the owed reboot is
    recorded (the node stays cordoned by us, plan and status say so); back in scope, it reboots."""
    sim = SimFleet(nodes(2), SimConfig(stageSeconds=30))

    def relabel(spec: Any) -> None:
        if spec.node == "n1" and spec.stage == "config":
            sim.set_node("n1", labels={"pool": "cpu"})

    run = apply(sim, TUNE, policy(count=2, default_strategy="fixed", initialBatch=2),
                after={"start_stage": relabel})
    assert run.node("n1").state == "left" and "owes a reboot" in run.node("n1").message
    n1 = run.sim.get_node("n1")
    assert n1.unschedulable and cordon_key("tune") in n1.annotations
    assert not run.events("n1", "interrupt") and run.events("n1", "owed")
    plan = compute_plan(TUNE, policy(count=2, default_strategy="fixed", initialBatch=2), observe(sim))
    assert [(o.name, o.owes) for o in plan.outOfScope] == [("n1", "reboot")]
    assert any("n1" in w and "owes a reboot" in w for w in plan.warnings)
    sim.set_node("n1", labels={"pool": "gpu"})  # back in scope
    again = apply(sim, TUNE, policy(count=2, default_strategy="fixed", initialBatch=2))
    assert again.node("n1").state == "complete" and again.events("n1", "rebooted")
    assert not again.sim.get_node("n1").unschedulable


def test_an_ignored_node_keeps_the_reboot_it_owes_and_the_plan_shows_it_after_unignore() -> None:
    sim = SimFleet(nodes(1), SimConfig(stageSeconds=30))

    def ignore(spec: Any) -> None:
        if spec.stage == "apply":
            sim.set_node("n1", labels={"pool": "gpu", IGNORE_LABEL: "true"})

    run = apply(sim, TUNE, ONE_AT_A_TIME, after={"start_stage": ignore})
    assert run.node("n1").state == "left" and not run.events("n1", "interrupt")
    sim.set_node("n1", labels={"pool": "gpu"})  # un-ignored
    plan = compute_plan(TUNE, ONE_AT_A_TIME, observe(sim))
    n1 = plan.node("n1")
    assert n1 is not None and n1.interrupt is not None and n1.interrupt.type == "reboot"
    assert apply(sim, TUNE, ONE_AT_A_TIME).events("n1", "rebooted")


def test_a_node_that_left_holding_our_cordon_with_nothing_owed_is_released_by_the_next_run() -> None:
    """After a restart such a node is outside the plan's selection: the run still visits it."""
    objs = nodes(2)
    objs[0]["spec"]["unschedulable"] = True
    objs[0]["metadata"]["labels"] = {"pool": "cpu"}
    objs[0]["metadata"]["annotations"] = {cordon_key("tune"): '{"runId":"run-old"}',
                                          inflight_key("tune"): '{"runId":"run-old","planHash":"h","phase":"drain"}'}
    sim = SimFleet(objs)
    plan = compute_plan(TUNE, policy(count=2, default_strategy="fixed"), observe(sim))
    assert [(o.name, o.owes, o.holdsCordon) for o in plan.outOfScope] == [("n1", "", True)]
    run = apply(sim, TUNE, policy(count=2, default_strategy="fixed"))
    n1 = run.sim.get_node("n1")
    assert not n1.unschedulable and cordon_key("tune") not in n1.annotations
    assert inflight_key("tune") not in n1.annotations and run.node("n1").state == "left"


def test_runtime_required_taint_is_removed_when_the_node_is_complete() -> None:
    objs = nodes(1)
    objs[0]["spec"]["taints"] = [{"key": RUNTIME_REQUIRED_TAINT_KEY, "value": "true", "effect": "NoSchedule"},
                                 {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    run = apply(objs, recipe("tune", package("base", sha=SHA), selector=GPU, protect=TRAINING, runtimeRequired=True),
                ONE_AT_A_TIME)
    taints = {t.key for t in run.sim.get_node("n1").taints}
    assert taints == {"dedicated"}


def test_image_pull_failure_fails_the_stage_instead_of_hanging() -> None:
    cfg = SimConfig(failures=(StageFailure(node="n1", package="tuned", stage="apply", reason="ImagePullBackOff",
                                           times=99),))
    run = apply(nodes(1), recipe("tune", REBOOT, selector=GPU, protect=TRAINING, timeouts=Timeouts(stageRetries=1)),
                ONE_AT_A_TIME, cfg)
    assert run.node("n1").reason == "ImagePullBackOff"
    assert run.result.duration < 1800


def test_second_run_with_no_changes_writes_nothing() -> None:
    first = apply(nodes(3), TUNE, ONE_AT_A_TIME)
    second = apply(first.sim, TUNE, ONE_AT_A_TIME)
    assert second.plan.summary.nodesChanging == 0
    assert second.sim.writes == first.sim.writes


def test_same_inputs_leave_a_failed_node_failed_and_retry_failed_retries_it() -> None:
    cfg = SimConfig(failures=(StageFailure(node="n1", package="tuned", stage="apply", exitCode=3, times=1),))
    r = recipe("tune", REBOOT, selector=GPU, protect=TRAINING, timeouts=Timeouts(stageRetries=0))
    first = apply(nodes(2), r, ONE_AT_A_TIME, cfg)
    assert first.node("n1").state == "failed"
    again = apply(first.sim, r, ONE_AT_A_TIME)
    assert again.node("n1").state == "failed" and "--retry-failed" in again.node("n1").message
    # the plan said so: n1 left failed, in no batch, not changing (plan and rollout: one rule)
    planned = again.plan.node("n1")
    assert planned is not None and planned.notRetried is not None and planned.batch == 0
    assert again.plan.summary.notRetried == 1
    assert "n1" not in {n for c in again.plan.compartments for b in c.batches for n in b}
    assert again.plan.node("n1").note == again.node("n1").message  # type: ignore[union-attr]
    retried = apply(first.sim, r, ONE_AT_A_TIME, retry_failed=True)
    assert retried.plan.node("n1").notRetried is None  # type: ignore[union-attr]
    assert retried.node("n1").state == "complete"
    assert failure_key("tune") not in retried.sim.get_node("n1").annotations


def _installed(objs: list[dict[str, Any]], *entries: tuple[str, str, str]) -> None:
    """Mark every node as having ``(name, version, stage)`` complete for recipe ``tune``."""
    import json

    state = {f"{n}|{v}": {"name": n, "version": v, "image": f"ghcr.io/example/{n}", "stage": s, "state": "complete"}
             for n, v, s in entries}
    for o in objs:
        o["metadata"].setdefault("annotations", {})[state_key("tune")] = json.dumps(state)


def test_upgrade_downgrade_and_uninstall_leave_exactly_the_recipe_versions() -> None:
    """An upgrade, a downgrade, an explicit uninstall (``uninstall.apply``), and a package removed
    from the recipe without it: its entry stays as a marker and nothing runs (NodeWright HEAD;
    v0.15 uninstalled it — issue 34, item 9)."""
    objs = nodes(2)
    _installed(objs, ("base", "1.0.0", "config"), ("tuned", "2.0.0", "post-interrupt"),
               ("old-agent", "0.1.0", "config"), ("gone", "0.2.0", "config"))
    r = recipe("tune", package("base", "1.1.0", sha=SHA), package("tuned", "1.5.0", sha=SHA, interrupt="reboot"),
               package("gone", "0.2.0", sha=SHA, uninstall=True), selector=GPU, protect=TRAINING)
    run = apply(objs, r, ONE_AT_A_TIME)
    assert run.result.result == "succeeded"
    actions = {s.package: s.action for s in run.plan.node("n1").steps}
    assert actions == {"base": "upgrade", "tuned": "downgrade", "gone": "uninstall"}
    assert any("old-agent is not in the recipe any more" in w and "marker" in w for w in run.plan.warnings)
    state = parse_state(run.sim.get_node("n1").annotations[state_key("tune")])
    assert sorted(state) == ["base|1.1.0", "old-agent|0.1.0", "tuned|1.5.0"]
    log = [(e[3], e[4], e[5]) for e in run.sim.stage_log if e[1] == "start" and e[2] == "n1"]
    assert ("tuned", "2.0.0", "uninstall") in log and ("tuned", "1.5.0", "apply") in log
    assert ("gone", "0.2.0", "uninstall") in log and not [x for x in log if x[0] == "old-agent"]
    assert ("base", "1.1.0", "upgrade") in log and ("base", "1.1.0", "apply") not in log
    # removals first: the uninstall of the old version ends before the new version's apply starts
    starts = {(p, v, s): t for t, ev, n, p, v, s in run.sim.stage_log if ev == "start" and n == "n1"}
    ends = {(p, v, s): t for t, ev, n, p, v, s in run.sim.stage_log if ev == "succeeded" and n == "n1"}
    assert ends[("tuned", "2.0.0", "uninstall")] <= starts[("tuned", "1.5.0", "apply")]


def test_ignored_nodes_are_never_started_and_a_node_ignored_mid_run_keeps_what_it_owes() -> None:
    objs = nodes(3)
    objs[2]["metadata"]["labels"]["reconciler.nodewright.dev/ignore"] = "true"
    sim = SimFleet(objs, SimConfig(stageSeconds=30))

    def ignore_n1(spec: Any) -> None:
        if spec.node == "n1" and spec.stage == "config":
            sim.set_node("n1", labels={"pool": "gpu", "reconciler.nodewright.dev/ignore": "true"})

    run = apply(sim, TUNE, ONE_AT_A_TIME, after={"start_stage": ignore_n1})
    assert run.plan.node("n3") is None and any("n3" in w for w in run.plan.warnings)
    assert run.node("n1").state == "left" and "ignore" in run.node("n1").message
    # its apply ran: it owes the reboot, so it stays cordoned by us with the record (issue 12) and
    # counts against the budget of 1: n2 waits, the compartment says why
    assert run.sim.get_node("n1").unschedulable and "owes a reboot" in run.node("n1").message
    assert run.node("n2").state == "untouched" and run.result.result == "halted"
    sim.set_node("n1", labels={"pool": "gpu"})  # un-ignored: the reboot runs, then n2
    again = apply(sim, TUNE, ONE_AT_A_TIME)
    assert again.events("n1", "rebooted") and again.node("n2").state == "complete"


def test_a_taint_added_while_the_runtime_required_taint_is_removed_is_kept() -> None:
    """The taint list is replaced as a whole, so the write is conditional on the node we read:
    someone adding a taint between our read and our write makes it fail (409) and be redone."""
    objs = nodes(1)
    required = {"key": RUNTIME_REQUIRED_TAINT_KEY, "value": "true", "effect": "NoSchedule"}
    objs[0]["spec"]["taints"] = [required]
    sim = SimFleet(objs, SimConfig())
    raced: list[str] = []

    def concurrent_taint(name: str, **kw: Any) -> None:
        if kw.get("taints") is not None and not raced:
            raced.append(name)  # another controller taints the node just before our write lands
            sim.set_node(name, taints=[required, {"key": "maintenance", "value": "x", "effect": "NoSchedule"}])

    run = apply(sim, recipe("tune", package("base", sha=SHA), selector=GPU, protect=TRAINING, runtimeRequired=True),
                ONE_AT_A_TIME,
                before={"patch_node": concurrent_taint})
    assert raced == ["n1"]
    assert run.node("n1").state == "complete"
    assert {t.key for t in run.sim.get_node("n1").taints} == {"maintenance"}


def test_the_drain_lists_the_node_pods_once_before_evicting() -> None:
    """kubectl drain lists a node's pods once; the wait for protected pods and the drain share it."""
    sim = SimFleet(nodes(1) + [rs_pod("web", f"web-{i}", "n1", "web") for i in range(3)], SimConfig())
    run = apply(sim, TUNE, ONE_AT_A_TIME)  # run.port records every call through the ports
    assert run.node("n1").state == "complete"
    calls = [f"list {c.target.removeprefix('pods/')}" if c.verb == "list_pods" else f"evict {c.target}"
             for c in run.port.calls if c.verb in ("list_pods", "evict_pod")]
    first_evict = next(i for i, c in enumerate(calls) if c.startswith("evict"))
    assert calls[:first_evict].count("list n1") == 1, calls
    assert sum(c.startswith("evict") for c in calls) == 3


def test_a_node_s_evictions_go_out_together_after_the_drain_is_recorded(monkeypatch: Any) -> None:
    """The drain's evictions are one ``evict_pods`` call per retry round (kubectl drain evicts a
    node's pods in parallel), each made only after the node's record says it is draining; a
    refused pod is asked again alone, on its own retry timer."""
    from reconciler.model.nodestate import InFlight, parse_model
    from reconciler.model.vocab import Phase
    from reconciler.testing.faults import FaultyCluster

    calls: list[tuple[FaultyCluster, list[str], Phase | None]] = []
    orig = FaultyCluster.evict_pods

    def recording(self: FaultyCluster, evictions: Any) -> Any:
        rec = parse_model(InFlight, self.roles.nodes.get_node("n1").annotations.get(inflight_key("tune")))
        calls.append((self, [e.ref for e in evictions], rec.phase if rec is not None else None))
        return orig(self, evictions)

    monkeypatch.setattr(FaultyCluster, "evict_pods", recording)
    objs = nodes(1) + [rs_pod("web", f"web-{i}", "n1", "web") for i in range(3)] + [
        rs_pod("api", "api-0", "n1", "api"), make_pdb("api", "api", {"app": "api"}, min_available=1)]
    r = recipe("tune", REBOOT, selector=GPU, protect=TRAINING,
               drain=DrainOptions(timeoutSeconds=20, evictionRetrySeconds=5))
    run = apply(objs, r, ONE_AT_A_TIME)
    # the rollout's own port (the decorators under it get the pods one by one)
    batches = [(refs, phase) for port, refs, phase in calls if port is run.port]
    assert batches[0] == (["api/api-0", "web/web-0", "web/web-1", "web/web-2"], Phase.DRAIN)
    assert all(b == (["api/api-0"], Phase.DRAIN) for b in batches[1:]) and len(batches) >= 3
    assert run.node("n1").reason == "DrainTimeout"

"""A recipe bumped under a running rollout (issue 34, item 1): the in-flight record is the
contract. A lifecycle finishes what its record committed to — never the newer release's steps —
and takes the newer release up only at a safe point (before any stage ran; or after the owed
interrupt and its post-interrupt stages), planned from what the node really has. Checked on the
simulated fleet at the two points the issue names (a stage pod running, a reboot pending), for
``apply`` after an interrupted run, and by what ``plan`` shows for such a node."""

from __future__ import annotations

import contextlib
from typing import Any

from reconciler.adapters.sim.fleet import SimFleet
from reconciler.errors import CrashInjected
from reconciler.model.nodestate import InFlight, inflight_key, parse_model, parse_state, state_key
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
from reconciler.ports import StageSpec
from reconciler.report.render import render_markdown, render_text
from reconciler.testing.builders import package, recipe
from reconciler.testing.fleetgen import make_node
from reconciler.testing.invariants import check_recorded_ran

from .harness import GPU, ONE_AT_A_TIME, SHA, TRAINING, apply


def release(tuned: str, *, version: str, base_config: str = "a") -> Any:
    return recipe("tune", package("base", sha=SHA, config={"base.conf": base_config}),
                  package("tuned", tuned, sha=SHA, depends_on={"base": "1.0.0"}, interrupt="reboot"),
                  selector=GPU, protect=TRAINING, version=version)


V1 = release("6.8.1", version="2026.1.1")
V2 = release("6.8.2", version="2026.1.2")


def fleet(n: int = 1) -> SimFleet:
    return SimFleet([make_node(f"n{i}", {"pool": "gpu"}, created=1795000000.0 + i) for i in range(1, n + 1)])


def stop_at(sim: SimFleet, when: Any) -> dict[str, Any]:
    """An ``after`` hook on ``start_stage`` that stops the run (as a preempted controller pass or
    a killed ``apply``) right after the stage pod ``when(spec)`` picks was created."""

    def hook(spec: StageSpec) -> None:
        if when(spec):
            raise CrashInjected(f"stopped after {spec.package} {spec.stage} started")

    return {"start_stage": hook}


def run_until(sim: SimFleet, r: Any, when: Any) -> None:
    try:
        apply(sim, r, ONE_AT_A_TIME, check=False, after=stop_at(sim, when))
    except CrashInjected:
        return
    raise AssertionError("the run was not stopped")


def starts(sim: SimFleet, since: int = 0) -> list[tuple[str, str, str]]:
    return [(p, v, s) for _t, ev, _n, p, v, s in sim.stage_log[since:] if ev == "start"]


def entries(sim: SimFleet, node: str = "n1") -> dict[str, tuple[str, str]]:
    st = parse_state(sim.get_node(node).annotations.get(state_key("tune")))
    return {k: (v.stage, v.state) for k, v in st.items()}


def test_bumped_while_a_stage_pod_runs_the_pod_is_awaited_and_the_new_release_runs_whole() -> None:
    """Bumped while n1's 6.8.1 ``config`` pod still ran: 6.8.2's ``upgrade`` pod started beside
    it, and the node was recorded 6.8.2 complete. Now the 6.8.1 pod is awaited (nothing starts
    beside it), its reboot — owed since its stages ran — is done, and then 6.8.2 runs every one
    of its stages (upgrade, config, its reboot, post-interrupt)."""
    sim = fleet()
    run_until(sim, V1, lambda s: s.package == "tuned" and s.stage == "config")
    cut = len(sim.stage_log)
    second = apply(sim, V2, ONE_AT_A_TIME)
    assert second.result.result == "succeeded", second.node("n1").message
    assert not second.watch.overlaps, second.watch.overlaps
    assert starts(sim, cut) == [
        ("tuned", "6.8.1", "interrupt"),
        ("tuned", "6.8.2", "upgrade"), ("tuned", "6.8.2", "config"), ("tuned", "6.8.2", "interrupt"),
        ("tuned", "6.8.2", "post-interrupt")]
    assert entries(sim) == {"base|1.0.0": ("config", "complete"), "tuned|6.8.2": ("post-interrupt", "complete")}
    assert not check_recorded_ran(sim, "tune")
    assert not compute_plan(V2, ONE_AT_A_TIME, observe(sim)).node("n1").has_work  # type: ignore[union-attr]


def test_bumped_right_after_the_reboot_was_requested_never_requests_a_second_one_meanwhile() -> None:
    """Bumped right after n1's 6.8.1 reboot was requested: a second reboot was requested for
    6.8.2 while the first was pending, 6.8.2's post-interrupt ran without its apply and config,
    and the node was recorded "6.8.2 complete" — for good. Now the pending reboot is awaited (not
    requested again), and 6.8.2 then runs whole, with its own reboot."""
    sim = fleet()
    run_until(sim, V1, lambda s: s.stage == "interrupt")
    fl = parse_model(InFlight, sim.get_node("n1").annotations[inflight_key("tune")])
    assert fl is not None and fl.phase == "interrupt" and fl.recipeVersion == V1.version
    cut = len(sim.stage_log)
    second = apply(sim, V2, ONE_AT_A_TIME)
    assert second.result.result == "succeeded", second.node("n1").message
    assert starts(sim, cut) == [
        ("tuned", "6.8.2", "upgrade"), ("tuned", "6.8.2", "config"), ("tuned", "6.8.2", "interrupt"),
        ("tuned", "6.8.2", "post-interrupt")]
    kinds = [e.event for e in second.events("n1")]
    assert kinds.count("rebooted") == 2 and kinds.count("interrupt") == 1  # the pending one, then 6.8.2's
    assert entries(sim) == {"base|1.0.0": ("config", "complete"), "tuned|6.8.2": ("post-interrupt", "complete")}
    assert not check_recorded_ran(sim, "tune")


def test_a_package_the_new_release_kept_is_finished_as_committed() -> None:
    """Only the changed package is superseded: a package the newer release left as it was
    finishes its committed stages within the old lifecycle (here ``base``, stopped before its
    ``config``), and is not run again by the newer release."""
    sim = fleet()
    run_until(sim, V1, lambda s: s.package == "base" and s.stage == "apply")
    cut = len(sim.stage_log)
    second = apply(sim, V2, ONE_AT_A_TIME)
    assert second.result.result == "succeeded", second.node("n1").message
    got = starts(sim, cut)
    assert got[0] == ("base", "1.0.0", "config") and got.count(("base", "1.0.0", "apply")) == 0, got
    assert ("tuned", "6.8.1", "apply") not in got  # superseded before it started: never started
    assert [e.event for e in second.events("n1")].count("interrupt") == 1  # 6.8.1 owed none: nothing of it ran
    assert entries(sim) == {"base|1.0.0": ("config", "complete"), "tuned|6.8.2": ("post-interrupt", "complete")}
    assert not check_recorded_ran(sim, "tune")


def test_a_node_stopped_before_its_first_stage_takes_up_the_new_release_at_once() -> None:
    """Stopped mid-drain (nothing of 6.8.1 ran): the newer release is taken up at once — no 6.8.1
    stage, one reboot."""
    sim = SimFleet([make_node("n1", {"pool": "gpu"}, created=1795000000.0)])
    with contextlib.suppress(CrashInjected):
        apply(sim, V1, ONE_AT_A_TIME, check=False, after={"patch_node": lambda name, **kw: _stop_at_wait(kw)})
    fl = parse_model(InFlight, sim.get_node("n1").annotations[inflight_key("tune")])
    assert fl is not None and fl.phase == "wait"
    second = apply(sim, V2, ONE_AT_A_TIME)
    assert second.result.result == "succeeded"
    assert {v for _p, v, _s in starts(sim)} == {"1.0.0", "6.8.2"}
    assert [e.event for e in second.events("n1")].count("interrupt") == 1


def _stop_at_wait(kw: dict[str, Any]) -> None:
    ann = kw.get("annotations") or {}
    rec = ann.get(inflight_key("tune"))
    if rec and '"phase":"wait"' in rec:
        raise CrashInjected("stopped at the wait")


def test_plan_shows_the_owed_work_then_the_new_release() -> None:
    sim = fleet()
    run_until(sim, V1, lambda s: s.package == "tuned" and s.stage == "config")
    n1 = compute_plan(V2, ONE_AT_A_TIME, observe(sim)).node("n1")
    assert n1 is not None
    assert [(s.package, s.to, s.stages) for s in n1.owed] == [("tuned", "6.8.1", ("config",))]
    assert n1.owedInterrupt is not None and n1.owedInterrupt.type == "reboot"
    assert n1.owedRelease == V1.version
    assert [(s.package, s.action, s.from_, s.to, s.stages) for s in n1.steps] == [
        ("tuned", "upgrade", "6.8.1", "6.8.2", ("upgrade", "config", "post-interrupt"))]
    assert n1.interrupt is not None and n1.cordon
    assert "release 2026.1.1" in n1.note
    text = render_text(plan := compute_plan(V2, ONE_AT_A_TIME, observe(sim)), width=300)
    assert "owed by release 2026.1.1: tuned: install 6.8.1 [config]" in text, text
    assert "reboot (owed), then reboot" in text, text
    assert "owed by release 2026.1.1" in render_markdown(plan)

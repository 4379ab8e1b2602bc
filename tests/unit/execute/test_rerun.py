"""`package rerun` / `reset --package` on a node whose lifecycle failed, then `apply`, on the
simulated fleet (the new-user trial: the rerun's apply read the failed stage pods of the first run
back — stage pod names are deterministic from the lifecycle — and failed again without running
anything).

The rerun leaves the failed lifecycle's in-flight record (its cordon and owed reboot) for the next
apply to resume, counting the package as restarted in it (``InFlight.reruns``, the rerun's one
write): the resumed lifecycle names that package's stage pods anew, so the stage really runs again;
after a crash of that apply too, the count being on the node. Every run is checked by the
invariants of ``harness.apply``."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

import pytest

from reconciler.adapters.sim.config import SimConfig, StageFailure
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.errors import CrashInjected
from reconciler.model.nodestate import (
    InFlight,
    condition_type,
    cordon_key,
    failure_key,
    inflight_key,
    parse_model,
    parse_state,
    state_key,
)
from reconciler.model.observed import NodeInfo
from reconciler.model.recipe import Timeouts
from reconciler.ops.nodeops import rerun_patch, reset_package_patch
from reconciler.ops.patches import NodePatch, plan_node_patches, write_node_patches
from reconciler.ports import StageSpec
from reconciler.testing.builders import package, recipe
from reconciler.testing.fleetgen import make_node
from reconciler.testing.invariants import check_one_interrupt

from .harness import GPU, ONE_AT_A_TIME, SHA, TRAINING, Run, apply

TUNE = recipe("tune", package("base", sha=SHA),
              package("tuned", sha=SHA, depends_on={"base": "1.0.0"}, interrupt="reboot"),
              selector=GPU, protect=TRAINING, timeouts=Timeouts(stageRetries=1, retryBackoff=5))
#: n1's tuned apply fails on both attempts of the first run (then the package is fixed on the host)
FAILS = SimConfig(failures=(StageFailure(node="n1", package="tuned", stage="apply", exitCode=2, times=2,
                                         logTail="tuned: profile not found"),))


@functools.cache
def _failed_once() -> tuple[dict[str, Any], ...]:
    first = apply([make_node("n1", {"pool": "gpu"}, created=1795000001.0)], TUNE, ONE_AT_A_TIME, FAILS)
    assert first.node("n1").state == "failed"
    return tuple(first.sim.to_objects())


def failed_fleet() -> list[dict[str, Any]]:
    """The fleet after a first run in which n1 failed its tuned apply stage: n1 keeps our cordon,
    its in-flight record (phase stages, the reboot owed) and its stage pods — the two failed tuned
    apply pods and the completed base pods."""
    return copy.deepcopy(list(_failed_once()))


def write(sim: SimFleet, op: Callable[[NodeInfo], NodePatch | None]) -> None:
    """An operations verb's write on n1, as the CLI makes it (plan, then conditional writes)."""
    res = write_node_patches(sim, plan_node_patches([sim.get_node("n1")], op), op)
    assert [p.node for p in res.written] == ["n1"]


def rerun(sim: SimFleet, **kw: Any) -> None:
    write(sim, lambda n: rerun_patch(n, "tune", "tuned", force=True, **kw))


def tuned_apply_starts(sim: SimFleet) -> int:
    return sum(1 for e in sim.stage_log if e[1:3] == ("start", "n1") and e[3:6:2] == ("tuned", "apply"))


def assert_complete(run: Run, *, crashed: bool = False) -> None:
    """n1 complete: its records, our cordon released, its stage pods deleted (``crashed``: by the
    run, or by the run a crash stopped after its last record, which leaves pods behind)."""
    n1 = run.sim.get_node("n1")
    if crashed and run.node("n1").state == "untouched":
        assert run.node("n1").message == "no changes"  # the crashed run had completed it
    else:
        assert run.node("n1").state == "complete", run.node("n1").message
    assert not n1.unschedulable and cordon_key("tune") not in n1.annotations
    assert inflight_key("tune") not in n1.annotations and failure_key("tune") not in n1.annotations
    state = parse_state(n1.annotations[state_key("tune")])
    assert {k: (v.stage, v.state) for k, v in state.items()} == {
        "base|1.0.0": ("config", "complete"), "tuned|1.0.0": ("post-interrupt", "complete")}
    if not crashed:
        assert not [s for s in run.sim.stage_pods().values() if s.node == "n1"]  # deleted once complete


def test_rerun_of_a_failed_package_runs_its_stage_again_under_new_pod_names() -> None:
    sim = SimFleet(failed_fleet(), SimConfig())
    old = {name for name, s in sim.stage_pods().items() if s.node == "n1" and s.package == "tuned"}
    assert len(old) == 2  # the failed attempts, kept for their logs
    rerun(sim)
    fl = parse_model(InFlight, sim.get_node("n1").annotations[inflight_key("tune")])
    assert fl is not None and fl.reruns == {"tuned": 1} and fl.phase == "stages"  # the owed reboot stays recorded
    assert fl.interrupt is not None and fl.interrupt["type"] == "reboot"
    created: list[StageSpec] = []
    run = apply(sim, TUNE, ONE_AT_A_TIME, before={"start_stage": created.append})
    assert_complete(run)
    tuned = [s for s in created if s.package == "tuned" and s.stage != "interrupt"]
    assert [s.stage for s in tuned] == ["apply", "config", "post-interrupt"]
    assert all(s.rerun == 1 and s.attempt == 1 and s.pod_name not in old for s in tuned)
    assert not [s for s in created if s.package == "base"]  # what completed is not run again
    assert [e.event for e in run.events("n1") if e.event in ("resume", "stage-retry", "interrupt", "rebooted")] == [
        "resume", "interrupt", "rebooted"]
    assert tuned_apply_starts(sim) == 1  # the rerun (the fleet as saved keeps no log of the first run)
    assert not check_one_interrupt(sim)
    # the node had failed: its Erroring condition is cleared though the rerun removed the failure record
    erroring = sim.get_node("n1").condition(condition_type("tune", "Erroring"))
    assert erroring is not None and erroring.status == "False"


def test_a_node_left_failed_names_both_ways_on() -> None:
    """Same inputs: left failed, and the message names what works — `--retry-failed`, and the
    rerun of the failed package (a stage of the package, not of the node)."""
    run = apply(SimFleet(failed_fleet(), SimConfig()), TUNE, ONE_AT_A_TIME)
    msg = run.node("n1").message
    assert run.node("n1").state == "failed" and "not retried; use --retry-failed, or `reconciler package rerun " \
        "tuned --recipe tune --node n1 --force` to run tuned again)" in msg


def test_reset_package_on_a_failed_node_runs_the_package_again() -> None:
    sim = SimFleet(failed_fleet(), SimConfig())
    write(sim, lambda n: reset_package_patch(n, "tune", "tuned", force=True))
    assert_complete(apply(sim, TUNE, ONE_AT_A_TIME))
    assert tuned_apply_starts(sim) == 1


def test_rerun_of_a_stage_gets_a_fresh_set_of_attempts() -> None:
    """``--stage apply`` on the failed entry (restarts 2): the rerun starts at attempt 1 of a new
    name, with every retry of ``timeouts.stageRetries`` left."""
    cfg = SimConfig(failures=(StageFailure(node="n1", package="tuned", stage="apply", exitCode=2, times=1),))
    sim = SimFleet(failed_fleet(), cfg)  # the rerun's first attempt fails too; its retry succeeds
    rerun(sim, stage="apply")
    run = apply(sim, TUNE, ONE_AT_A_TIME)
    assert_complete(run)
    assert len(run.events("n1", "stage-retry")) == 1 and tuned_apply_starts(sim) == 2


def test_a_second_rerun_renames_the_pods_again() -> None:
    sim = SimFleet(failed_fleet(), SimConfig(failures=FAILS.failures))  # the rerun fails as the first run did
    rerun(sim)
    again = apply(sim, TUNE, ONE_AT_A_TIME)
    assert again.node("n1").state == "failed" and tuned_apply_starts(sim) == 2
    rerun(sim)  # fixed now (the injected failure is used up)
    assert parse_model(InFlight, sim.get_node("n1").annotations[inflight_key("tune")]).reruns == {"tuned": 2}
    assert_complete(apply(sim, TUNE, ONE_AT_A_TIME))
    assert tuned_apply_starts(sim) == 3


def _resumed_after_crash(n: int) -> tuple[SimFleet, SimFleet, Run] | None:
    """Rerun, an apply crashing after its ``n``-th write, then an apply in a new process (the fleet
    as the crash left it, saved and read back, stage pods included); None when no crash came."""
    sim = SimFleet(failed_fleet(), SimConfig())
    rerun(sim)
    sim.crash_after = sim.writes + n
    try:
        apply(sim, TUNE, ONE_AT_A_TIME, check=False)
    except CrashInjected:
        resumed = SimFleet(sim.to_objects(), SimConfig())
        return sim, resumed, apply(resumed, TUNE, ONE_AT_A_TIME)
    return None


def _writes_of_the_rerun_apply() -> int:
    sim = SimFleet(failed_fleet(), SimConfig())
    rerun(sim)
    before = sim.writes
    apply(sim, TUNE, ONE_AT_A_TIME)
    return sim.writes - before


@pytest.mark.slow
def test_a_crash_after_any_write_of_the_rerun_apply_resumes_the_rerun() -> None:
    """Crash safety: rerun, then an apply killed after each of its writes, then another apply in a
    new process: it completes the node, the rerun's tuned apply stage created once across both
    processes (its pod found again, never a second one beside it, never the old failed pods read
    back), one reboot."""
    total = _writes_of_the_rerun_apply()
    assert total > 5
    for n in range(1, total):
        out = _resumed_after_crash(n)
        assert out is not None, f"crash after write {n}: no crash"
        crashed, resumed, run = out
        assert_complete(run, crashed=True)
        starts = tuned_apply_starts(crashed) + tuned_apply_starts(resumed)
        assert starts == 1, f"crash after write {n}: the rerun's apply stage was created {starts} times"
        reboots = [e for sim in (crashed, resumed) for e in sim.stage_log if e[1] == "start" and e[5] == "interrupt"]
        assert len(reboots) <= 1, f"crash after write {n}: {len(reboots)} interrupt pods"

"""The world-moves sweep's own invariants (reconciler/testing/invariants.py) on hand-made
histories: each flags the violation it names, and only that."""

from __future__ import annotations

from reconciler.adapters.sim.fleet import SimFleet
from reconciler.model.nodestate import CordonRecord, cordon_key, dump_model, inflight_key
from reconciler.model.recipe import Interrupt
from reconciler.ports import StageSpec
from reconciler.testing.builders import inflight
from reconciler.testing.fleetgen import make_node
from reconciler.testing.invariants import (
    Watch,
    check_foreign_cordons,
    check_owed_interrupts,
    check_reboots,
    check_retries,
)

REBOOT = Interrupt(type="reboot")


def watch(**node: object) -> Watch:
    return Watch(SimFleet([make_node("n1", {"pool": "gpu"}, **node)]), "tune", {"n1": "c"})  # type: ignore[arg-type]


def spec(stage: str, *, lifecycle: str = "L1", attempt: int = 1) -> StageSpec:
    return StageSpec(recipe="tune", node="n1", package="driver", version="1.1.0", stage=stage,
                     pull_ref="ghcr.io/example/driver:1.1.0", run_id=lifecycle, attempt=attempt,
                     interrupt=REBOOT if stage == "interrupt" else None)


def test_lifting_a_cordon_without_our_claim_is_flagged_and_ours_is_not() -> None:
    w = watch(unschedulable=True)
    w.port.patch_node("n1", unschedulable=False)
    assert check_foreign_cordons(w) == [f"n1: uncordoned at {w.sim.wall():.0f} although cordoned by someone else"]
    ours = watch(unschedulable=True)
    ours.sim.patch_node("n1", annotations={cordon_key("tune"): dump_model(CordonRecord(runId="r", at=""))})
    ours.port.patch_node("n1", unschedulable=False)
    assert check_foreign_cordons(ours) == []


def test_an_interrupt_that_acted_twice_in_one_lifecycle_is_flagged_a_lost_request_is_not() -> None:
    w = watch()
    w.port.start_stage(spec("interrupt"))
    w.sim.advance(2)  # the reboot went down
    w.sim.delete_stage_pod(spec("interrupt").pod_name)
    w.port.start_stage(spec("interrupt"))
    w.sim.advance(200)
    assert check_reboots(w) == ["n1: lifecycle L1 interrupted the machine 2 times"]
    lost = watch()
    lost.port.start_stage(spec("interrupt"))
    lost.sim.delete_stage_pod(spec("interrupt").pod_name)  # before it acted: it asked for nothing
    lost.port.start_stage(spec("interrupt"))
    lost.sim.advance(200)
    assert check_reboots(lost) == [] and len(lost.sim.interrupt_log) == 1
    other = watch()
    other.port.start_stage(spec("interrupt"))
    other.sim.advance(200)
    other.port.start_stage(spec("interrupt", lifecycle="L2"))  # the next commitment's own reboot
    other.sim.advance(200)
    assert check_reboots(other) == []


def test_a_stage_of_an_interrupting_package_owes_an_interrupt_until_one_acts_or_a_record_owes_it() -> None:
    w = watch()
    w.port.start_stage(spec("upgrade"))
    w.sim.advance(100)
    assert check_owed_interrupts(w, ["driver"]) == [
        "n1: driver 1.1.0 upgrade ran (lifecycle L1) and no interrupt acted since, nor does a record owe one"]
    assert check_owed_interrupts(w, ["agent"]) == []  # a package without an interrupt owes none
    w.sim.patch_node("n1", annotations={inflight_key("tune"): dump_model(inflight("stages", interrupt=REBOOT))})
    assert check_owed_interrupts(w, ["driver"]) == []  # recorded owed
    w.sim.patch_node("n1", annotations={inflight_key("tune"): None})
    w.port.start_stage(spec("interrupt"))
    w.sim.advance(200)
    assert check_owed_interrupts(w, ["driver"]) == []  # done
    w.sim.replace_node("n1")
    gone = watch()
    gone.port.start_stage(spec("config"))
    gone.sim.replace_node("n1")  # the machine that owed it is gone
    assert check_owed_interrupts(gone, ["driver"]) == []


def test_more_pods_of_one_stage_than_its_attempts_is_flagged() -> None:
    w = watch()
    for attempt in (1, 2):
        w.port.start_stage(spec("apply", attempt=attempt))
    assert check_retries(w, 1) == []
    w.port.start_stage(spec("apply", attempt=3))
    assert check_retries(w, 1) == ["n1: driver 1.1.0 apply created 3 times in lifecycle L1 (bound 2)"]
    w.port.start_stage(spec("apply", lifecycle="L2"))  # another lifecycle counts from 1
    assert len(check_retries(w, 1)) == 1

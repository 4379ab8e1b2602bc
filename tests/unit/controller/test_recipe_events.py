"""Kubernetes Events on NodeRecipe objects (controller/recipeevents.py): a pass on the simulated
fleet records the rollout's start and end on the object; a held recipe gets a Paused Event; a
recipe that is not an object (no UID) gets none; a rollout that failed is a Warning."""

from __future__ import annotations

from typing import Any

from reconciler.adapters.sim.config import SimConfig, StageFailure
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.controller.loop import Controller, ControllerSettings
from reconciler.controller.source import ObjectSource
from reconciler.errors import TransientError
from reconciler.ops.controls import control_patch, store_for
from reconciler.ports import ClusterPorts
from reconciler.session import Session
from tests.unit.controller.conftest import FLEET, POLICIES, Writer, conditions, recipe_object

TUNING = "gpu-training-tuning"


class Sink:
    def __init__(self, fail: bool = False) -> None:
        self.events: list[tuple[str, str, str, str, str]] = []
        self.fail = fail

    def emit(self, name: str, uid: str, reason: str, message: str, type_: str = "Normal") -> None:
        if self.fail:
            raise TransientError("events API down", 503, "ServiceUnavailable")
        self.events.append((name, uid, reason, message, type_))


def _make(objects: list[dict[str, Any]], sink: Sink, config: SimConfig | None = None) -> tuple[Controller, SimFleet]:
    sim = SimFleet.from_file(FLEET, config)
    source = ObjectSource([POLICIES])
    source.replace(objects)
    ctl = Controller(source, Session(ClusterPorts.of(sim), sim, sim=sim),
                     ControllerSettings(holder="test/1", workers=1, wait_for_lock=0.0),
                     status=(Writer(source), source), events=(sink, source))
    return ctl, sim


def test_a_rollout_records_its_start_and_end_on_the_object() -> None:
    sink = Sink()
    ctl, _ = _make([recipe_object("gpu-training-tuning.yaml")], sink)
    assert ctl.reconcile(["startup"]) == "succeeded"
    reasons = [(n, u, r, t) for n, u, r, _, t in sink.events]
    assert reasons == [(TUNING, f"u-{TUNING}", "RolloutStarted", "Normal"),
                       (TUNING, f"u-{TUNING}", "RolloutSucceeded", "Normal")]
    assert "24 of 24 node(s) change" in sink.events[0][3] and "24 complete, 0 failed" in sink.events[1][3]
    sink.events.clear()
    assert ctl.reconcile(["nothing changed"]) == "succeeded"
    assert sink.events == []  # nothing to do: no Event


def test_a_failed_rollout_is_a_warning_and_a_held_recipe_is_paused() -> None:
    sink = Sink()
    config = SimConfig(failures=[StageFailure(node="gpu-a-001", package="nvidia-tuned", stage="apply",
                                              exitCode=3, times=99)])
    ctl, sim = _make([recipe_object("gpu-training-tuning.yaml")], sink, config)
    ctl.reconcile(["startup"])
    end = sink.events[-1]
    assert end[2] in ("RolloutFailed", "RolloutHalted") and end[4] == "Warning" and "1 failed" in end[3]
    sink.events.clear()
    store = store_for(sim)
    assert store is not None
    patch, _, _ = control_patch(sim, TUNING, "pause", reason="freeze", by="sre")
    assert patch is not None
    patch.write(store)
    ctl.reconcile(["controls changed"])
    assert [(r, t) for _, _, r, _, t in sink.events] == [("Paused", "Normal")]


def test_no_uid_no_event_and_a_failing_sink_is_not_fatal() -> None:
    obj = recipe_object("gpu-training-tuning.yaml")
    del obj["metadata"]["uid"]
    sink = Sink()
    ctl, _ = _make([obj], sink)
    assert ctl.reconcile(["startup"]) == "succeeded" and sink.events == []
    ctl2, _ = _make([recipe_object("gpu-training-tuning.yaml")], Sink(fail=True))
    assert ctl2.reconcile(["startup"]) == "succeeded"


def test_a_recipe_held_back_by_an_earlier_one_is_waiting_not_failed() -> None:
    """gpu-node-stack (priority 100) fails on one node; gpu-training-tuning (200, same nodes) does
    not start there: its end Event is RolloutWaiting (Normal) naming the recipe it waits for, its
    status Waiting (kstatus InProgress, not Stalled), and it is not remembered as halted."""
    sink = Sink()
    config = SimConfig(failures=[StageFailure(node="gpu-a-001", package="base-tools", stage="apply",
                                              exitCode=3, times=99)])
    objects = [recipe_object("gpu-node-stack.yaml"), recipe_object("gpu-training-tuning.yaml")]
    ctl, _ = _make(objects, sink, config)
    assert ctl.reconcile(["startup"]) == "failed"
    ends = {n: (r, t, m) for n, _, r, m, t in sink.events if r != "RolloutStarted"}
    assert ends["gpu-node-stack"][:2] in (("RolloutFailed", "Warning"), ("RolloutHalted", "Warning"))
    reason, type_, message = ends[TUNING]
    assert (reason, type_) == ("RolloutWaiting", "Normal")
    assert "0 failed" in message and "1 node waiting for recipe gpu-node-stack" in message
    status = ctl.source.get(TUNING)["status"]  # type: ignore[index]
    assert status["phase"] == "Waiting"
    assert conditions(status) == {"Ready": "False", "Reconciling": "True", "Stalled": "False"}
    assert TUNING not in ctl.stalled  # taken up again by the next pass

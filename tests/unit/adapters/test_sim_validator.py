"""Node conditions as observed (``NodeInfo.conditions``, for a recipe's readiness gate) and the
simulated external validator of ``SimConfig.validator``: it starts over when a stage starts on a
node, passes the node ``afterSeconds`` after its last stage succeeded (or it came back from a
reboot), never passes the nodes in ``failsOn``, and survives a save and a resume."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from reconciler.adapters.kube.objects import node_from
from reconciler.adapters.sim.config import SimConfig, SimValidator
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.adapters.sim.fromobserved import objects_from_observed
from reconciler.model.observed import NodeCondition
from reconciler.observe.snapshot import observe
from reconciler.ports import StageSpec
from reconciler.testing.fleetgen import make_node

VALIDATED = "example.com/Validated"


def test_node_from_keeps_every_condition_with_its_last_transition_not_its_heartbeat() -> None:
    obj = make_node("n1", {})
    obj["status"]["conditions"] += [
        {"type": VALIDATED, "status": "True", "reason": "Passed", "message": "ok",
         "lastHeartbeatTime": "2026-12-01T10:00:00Z", "lastTransitionTime": "2026-12-01T09:00:00Z"},
        "not a condition",
    ]
    info = node_from(obj)
    assert info.ready is True
    at = 1796115600.0  # 2026-12-01T09:00:00Z: its last transition, not its heartbeat
    assert info.condition(VALIDATED) == NodeCondition(VALIDATED, "True", "Passed", "ok", since=at)
    assert info.condition("Missing") is None
    obj["status"]["conditions"][-2]["lastHeartbeatTime"] = "2026-12-01T10:00:10Z"  # a heartbeat is no change
    assert node_from(obj) == info
    # a simulated copy of an observed fleet keeps the conditions
    obj["status"]["conditions"].pop()
    again = SimFleet(objects_from_observed(observe(SimFleet([obj]))))
    assert again.get_node("n1").condition(VALIDATED) == NodeCondition(VALIDATED, "True", "Passed", "ok", since=at)
    assert again.get_node("n1").condition("Ready") == info.condition("Ready")


def test_set_node_sets_and_removes_conditions_as_a_validator_would() -> None:
    sim = SimFleet([make_node("n1", {})])
    rv = sim.get_node("n1").resource_version
    sim.set_node("n1", conditions={VALIDATED: "True"})
    n = sim.get_node("n1")
    assert n.condition(VALIDATED) is not None and n.condition(VALIDATED).status == "True"  # type: ignore[union-attr]
    assert n.resource_version != rv and n.ready is True and sim.writes == 0  # not a write of ours
    sim.set_node("n1", conditions={VALIDATED: None})
    assert sim.get_node("n1").condition(VALIDATED) is None


def _spec(node: str, stage: str = "apply") -> StageSpec:
    return StageSpec(recipe="r", node=node, package="drv", version="1.0.0", stage=stage, pull_ref="x:1", run_id="run")


def test_the_simulated_validator_passes_a_node_after_its_last_stage(tmp_path: Path) -> None:
    cfg = SimConfig(stageSeconds=10, validator=SimValidator(conditionType=VALIDATED, labels={"nvcre": "pass"},
                                                            afterSeconds=30, failsOn=("n2",)))
    sim = SimFleet([make_node("n1", {}), make_node("n2", {})], cfg)
    for n in ("n1", "n2"):
        sim.start_stage(_spec(n))
    assert sim.get_node("n1").condition(VALIDATED).status == "False"  # type: ignore[union-attr]
    sim.advance(10 + 29)
    assert sim.get_node("n1").condition(VALIDATED).status == "False"  # type: ignore[union-attr]
    # saved and resumed while the validation is pending: it still happens
    path = tmp_path / "fleet.json"
    sim.save(str(path))
    resumed = SimFleet.from_file(str(path), cfg)
    for s in (sim, resumed):
        s.advance(2)
        n1 = s.get_node("n1")
        assert n1.condition(VALIDATED).status == "True" and n1.labels.get("nvcre") == "pass"  # type: ignore[union-attr]
        assert s.get_node("n2").condition(VALIDATED).status == "False"  # type: ignore[union-attr]
        assert "nvcre" not in s.get_node("n2").labels
    # a new stage on n1 voids the pass: validated again only after that stage
    sim.start_stage(_spec("n1", "config"))
    n1 = sim.get_node("n1")
    assert n1.condition(VALIDATED).status == "False" and "nvcre" not in n1.labels  # type: ignore[union-attr]
    sim.advance(35)
    assert sim.get_node("n1").condition(VALIDATED).status == "False"  # type: ignore[union-attr]
    sim.advance(10)
    assert sim.get_node("n1").condition(VALIDATED).status == "True"  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", [
    {"conditionType": "not a type"},
    {"conditionType": VALIDATED, "afterSeconds": "60"},
    {"conditionType": VALIDATED, "afterSeconds": -1},
    {"labels": {"nvcre": "bad value"}},
    {"failsOn": ["UPPER"]},
    {"conditionType": VALIDATED, "extra": 1},
])
def test_the_validator_setting_is_strict(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        SimConfig.model_validate({"validator": bad})

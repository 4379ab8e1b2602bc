"""The readiness gate (issue 15) on the simulated fleet: after its packages, a node is held — still
cordoned by us, still carrying the runtime-required taint — until an external validator (the
simulated one, ``SimConfig.validator``, or a test acting as one) says it is ready; then it is
uncordoned and completes. A validator that never passes fails the node with
``ReadinessGateTimeout`` and the node stays cordoned. A run stopped at the gate resumes waiting
there, its timeout counted from the instant the node first reached it. Every run is checked by
the invariants of ``harness.apply``."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.adapters.sim.config import SimConfig, SimValidator
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.errors import CrashInjected
from reconciler.execute.rollout import Rollout
from reconciler.model.nodestate import (
    RUNTIME_REQUIRED_TAINT_KEY,
    InFlight,
    inflight_key,
    parse_model,
    validate_key,
    validated_key,
)
from reconciler.model.recipe import ReadinessGate
from reconciler.model.selector import LabelSelector
from reconciler.model.vocab import FailureReason, Phase
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
from reconciler.testing.builders import package, policy, recipe
from reconciler.testing.fleetgen import make_node

from .harness import GPU, ONE_AT_A_TIME, SHA, TRAINING, apply

VALIDATED = "example.com/Validated"
GATE = ReadinessGate(conditionType=VALIDATED, timeout="10m")
TAINT = {"key": RUNTIME_REQUIRED_TAINT_KEY, "value": "true", "effect": "NoSchedule"}


def tainted_nodes(n: int) -> list[dict[str, Any]]:
    return [make_node(f"n{i}", {"pool": "gpu"}, created=1795000000.0 + i, taints=[dict(TAINT)])
            for i in range(1, n + 1)]


def gated(gate: ReadinessGate = GATE, **kw: Any) -> Any:
    return recipe("tune", package("driver", sha=SHA, interrupt="reboot"), selector=GPU, protect=TRAINING,
                  runtimeRequired=True, readinessGate=gate, **kw)


class Held:
    """Watches the rollout's node writes through the port (``harness.apply``'s ``before`` hook,
    no patching of the simulated fleet): for each node, its state on the simulated fleet at the
    first write the reconciler makes after the validator's condition turned True — whether it was
    still cordoned and tainted then (what the gate must guarantee) and when."""

    def __init__(self, sim: SimFleet) -> None:
        self.seen: dict[str, tuple[bool, bool, float]] = {}
        self._sim = sim

    def before_patch(self, name: str, **_: Any) -> None:
        info = self._sim.get_node(name)
        passed = any(c.type == VALIDATED and c.status == "True" for c in info.conditions)
        if passed and name not in self.seen:
            tainted = any(t.key == RUNTIME_REQUIRED_TAINT_KEY for t in info.taints)
            self.seen[name] = (info.unschedulable, tainted, self._sim.now())


def test_the_gate_holds_each_node_cordoned_and_tainted_until_the_validator_passes_it() -> None:
    sim = SimFleet(tainted_nodes(2), SimConfig(stageSeconds=30, rebootSeconds=60,
                                               validator=SimValidator(conditionType=VALIDATED, afterSeconds=120)))
    held = Held(sim)
    run = apply(sim, gated(), ONE_AT_A_TIME, before={"patch_node": held.before_patch})
    assert [n.state for n in run.result.nodes] == ["complete", "complete"]
    for name in ("n1", "n2"):
        kinds = [e.event for e in run.events(name)]
        assert kinds.index("gate") < kinds.index("gate-passed") < kinds.index("uncordon") < kinds.index("complete")
        assert held.seen[name][:2] == (True, True)  # cordoned and tainted while the validator worked
        gate_at = run.events(name, "gate")[0].t
        assert run.events(name, "uncordon")[0].t - gate_at >= 100  # held for the validator's 120 s
        info = run.sim.get_node(name)
        assert not info.unschedulable and not info.taints and inflight_key("tune") not in info.annotations
    # the gated node keeps its budget slot: n2 is cordoned only after n1 passed its gate
    assert run.events("n2", "cordon")[0].t >= run.events("n1", "uncordon")[0].t


def test_a_label_gate_passes_when_the_validator_labels_the_node() -> None:
    gate = ReadinessGate(labelSelector=LabelSelector(matchLabels={"nvcre": "pass"}), timeout="10m")
    cfg = SimConfig(stageSeconds=30, validator=SimValidator(labels={"nvcre": "pass"}, afterSeconds=45))
    run = apply(tainted_nodes(1), recipe("tune", package("agent", sha=SHA), selector=GPU, protect=TRAINING,
                                         runtimeRequired=True, readinessGate=gate), ONE_AT_A_TIME,
                cfg)
    assert run.node("n1").state == "complete"
    assert run.events("n1", "gate") and "nvcre=pass match" in run.events("n1", "gate-passed")[0].detail
    assert not run.sim.get_node("n1").taints


def test_a_node_the_validator_never_passes_fails_with_readiness_gate_timeout_and_stays_cordoned() -> None:
    cfg = SimConfig(stageSeconds=30, rebootSeconds=60,
                    validator=SimValidator(conditionType=VALIDATED, afterSeconds=60, failsOn=("n1",)))
    run = apply(tainted_nodes(2), gated(), policy(count=2, default_strategy="fixed", initialBatch=2), cfg)
    n1 = run.node("n1")
    assert n1.state == "failed" and n1.reason == FailureReason.READINESS_GATE_TIMEOUT
    assert "10m" in n1.message and f"{VALIDATED}=False" in n1.message
    info = run.sim.get_node("n1")
    assert info.unschedulable and any(t.key == RUNTIME_REQUIRED_TAINT_KEY for t in info.taints)
    gate_at = run.events("n1", "gate")[0].t
    assert 600 <= run.events("n1", "failed")[0].t - gate_at <= 610
    assert run.node("n2").state == "complete" and not run.sim.get_node("n2").unschedulable


def _stop_at_the_gate(sim: SimFleet) -> None:
    """The first run crashes right after the write that records the node at the gate."""
    orig = sim.patch_node

    def patch_node(name: str, **kw: Any) -> Any:
        out = orig(name, **kw)
        fl = parse_model(InFlight, (kw.get("annotations") or {}).get(inflight_key("tune")))
        if fl is not None and fl.phase is Phase.READINESS_GATE:
            sim.patch_node = orig  # type: ignore[method-assign]
            raise CrashInjected("stopped at the gate")
        return out

    sim.patch_node = patch_node  # type: ignore[method-assign]


@pytest.mark.parametrize(("pause", "passes", "state"), [
    (120, True, "complete"),  # back within the timeout, the validator passes it: completes
    (300, False, "failed"),  # still waiting: the 10 minutes count from the first arrival, not the restart
    (660, False, "failed"),  # past the timeout while no run was there: fails at once, stays cordoned
])
def test_a_run_stopped_at_the_gate_resumes_waiting_there(pause: float, passes: bool, state: str) -> None:
    sim = SimFleet(tainted_nodes(1), SimConfig(stageSeconds=30))  # no simulated validator: the test is it
    _stop_at_the_gate(sim)
    with pytest.raises(CrashInjected):
        apply(sim, gated(), ONE_AT_A_TIME, check=False)
    reached = sim.utc()
    sim.advance(pause)
    sim.mono_offset = 7 * 86400.0  # a new process on another host: another monotonic origin
    plan = compute_plan(gated(), ONE_AT_A_TIME, observe(sim))
    n1 = plan.node("n1")
    assert n1 is not None and not n1.steps and "resumes run" in n1.note and "readiness-gate" in n1.note
    if passes:
        orig = sim.get_node

        def get_node(name: str) -> Any:  # the validator passes the node once the new run looks at it
            sim.set_node(name, conditions={VALIDATED: "True"})
            return orig(name)

        sim.get_node = get_node  # type: ignore[method-assign]
    result = Rollout(gated(), ONE_AT_A_TIME, plan, sim, sim, run_id="run-second").run()
    node = result.nodes[0]
    assert node.state == state
    kinds = [e.event for e in result.timeline if e.node == "n1"]
    assert kinds[0] == "resume" and "stage-start" not in kinds and "cordon" not in kinds
    info = sim.get_node("n1")
    if passes:
        assert not info.unschedulable and not info.taints
    else:
        assert node.reason == FailureReason.READINESS_GATE_TIMEOUT
        assert info.unschedulable and info.taints
        failed_at = sim.utc() - reached
        assert 600 <= failed_at <= max(pause, 600) + 10  # counted from the first arrival at the gate


def test_retry_failed_gives_a_node_that_timed_out_at_the_gate_a_new_timeout() -> None:
    """A node failed at the gate keeps its in-flight record (it stays cordoned); ``--retry-failed``
    starts a new lifecycle there: the gate's timeout counts again from the retry, not from the
    first lifecycle's arrival, and the node completes once the validator passes it."""
    cfg = SimConfig(stageSeconds=30, validator=SimValidator(conditionType=VALIDATED, afterSeconds=60,
                                                            failsOn=("n1",)))
    sim = SimFleet(tainted_nodes(1), cfg)
    first = apply(sim, gated(), ONE_AT_A_TIME)
    assert first.node("n1").reason == FailureReason.READINESS_GATE_TIMEOUT
    again = apply(sim, gated(), ONE_AT_A_TIME)
    assert again.node("n1").state == "failed" and "--retry-failed" in again.node("n1").message
    sim.advance(120)
    orig = sim.get_node
    looks = {"n": 0}

    def get_node(name: str) -> Any:  # the validator passes the node after a few looks of the retry
        looks["n"] += 1
        if looks["n"] == 6:
            sim.set_node(name, conditions={VALIDATED: "True"})
        return orig(name)

    sim.get_node = get_node  # type: ignore[method-assign]
    retried = apply(sim, gated(), ONE_AT_A_TIME, retry_failed=True)
    assert retried.node("n1").state == "complete", retried.node("n1").message
    assert retried.events("n1", "gate") and retried.events("n1", "gate-passed")
    info = orig("n1")
    assert not info.unschedulable and not info.taints


def _stale_validation(sim: SimFleet) -> None:
    """The validator passed the node a month ago, for the last release (its message names it)."""
    sim.nodes["n1"]["status"].setdefault("conditions", []).append(
        {"type": VALIDATED, "status": "True", "reason": "Validated", "message": "driver 1.0.0 passed",
         "lastTransitionTime": "2026-10-01T00:00:00Z"})
    sim._bump(sim.nodes["n1"])
    sim._index.node_changed("n1")


def test_a_validation_left_true_from_an_earlier_release_does_not_pass_the_gate() -> None:
    """Issue 34: a condition left True a month earlier passed the 2.0.0 gate at once. Now the gate
    waits for a validation newer than the work: without one the node times out, held."""
    sim = SimFleet(tainted_nodes(1), SimConfig(stageSeconds=30))  # a validator that does not re-validate
    _stale_validation(sim)
    run = apply(sim, gated(), ONE_AT_A_TIME)
    n1 = run.node("n1")
    assert n1.state == "failed" and n1.reason == FailureReason.READINESS_GATE_TIMEOUT, n1.message
    assert "before the work it gates" in n1.message and "driver 1.0.0" in n1.message
    assert not run.events("n1", "gate-passed") and "before the work it gates" in run.events("n1", "gate")[0].detail
    assert sim.get_node("n1").unschedulable  # held, never released on the old validation


def test_a_validator_that_echoes_the_gates_token_passes_it() -> None:
    """The protocol a validator follows (docs/how-to/readiness-gate.md): the gate writes
    ``validate_<recipe>``; a validator that validated the node afterwards echoes its value in
    ``validated_<recipe>`` (here a test acting as one, whose condition stays True throughout)."""
    sim = SimFleet(tainted_nodes(1), SimConfig(stageSeconds=30))
    _stale_validation(sim)
    orig = sim.get_node

    def get_node(name: str) -> Any:  # validates once asked: echoes the token
        info = orig(name)
        token = info.annotations.get(validate_key("tune"))
        if token and info.annotations.get(validated_key("tune")) != token:
            sim.nodes[name]["metadata"]["annotations"][validated_key("tune")] = token
            sim._bump(sim.nodes[name])
            sim._index.node_changed(name)
        return orig(name)

    sim.get_node = get_node  # type: ignore[method-assign]
    run = apply(sim, gated(), ONE_AT_A_TIME)
    assert run.node("n1").state == "complete", run.node("n1").message
    assert "echoed 1/" in run.events("n1", "gate-passed")[0].detail
    info = orig("n1")
    assert validate_key("tune") not in info.annotations and not info.unschedulable  # the request answered


def test_a_validator_that_resets_its_condition_passes_the_gate_by_its_transition() -> None:
    """NVCRE-like: the condition goes False when the node changes and True once validated again;
    its transition after the last stage started is the fresh validation."""
    cfg = SimConfig(stageSeconds=30, validator=SimValidator(conditionType=VALIDATED, afterSeconds=0))
    sim = SimFleet(tainted_nodes(1), cfg)
    _stale_validation(sim)
    run = apply(sim, gated(), ONE_AT_A_TIME)
    assert run.node("n1").state == "complete", run.node("n1").message

"""The front door (reconciler/session.py, issue 37): a session on the simulated fleet plans,
applies, shows status and runs the operations with the CLI's checks, typed results."""

from __future__ import annotations

from pathlib import Path

import pytest

import reconciler
from reconciler.errors import InputError, PlanMismatchError
from reconciler.model.nodestate import IGNORE_LABEL, state_key
from reconciler.ops.patches import ConfigMapPatch, NodePatch
from reconciler.ops.status import NodeStatus

ROOT = Path(__file__).resolve().parents[2]
RECIPE = [ROOT / "recipes" / "gpu-training-tuning.yaml"]
POLICIES = [ROOT / "policies"]
FLEET = ROOT / "examples" / "fleets" / "gpu-24.yaml"
R = "gpu-training-tuning"


def test_plan_apply_status_reset_on_a_simulated_fleet() -> None:
    with reconciler.simulate(FLEET) as session:
        (plan,) = session.plan(RECIPE, POLICIES)
        changing = sorted(n.name for n in plan.nodes if n.has_work)
        assert changing
        result = session.apply(RECIPE, POLICIES, reviewed=[plan])
        assert result.succeeded and [r.recipe for r in result.results] == [R]
        status = {s.name: s for s in session.status(R)}
        assert all(isinstance(s, NodeStatus) for s in status.values())
        assert {n for n, s in status.items() if s.packages and all(p.state == "complete" for p in s.packages)} \
            == set(changing)
        op = session.reset(R, [changing[0]])
        assert [c.node for c in op.changes if isinstance(c, NodePatch)] == [changing[0]]
        assert op.write() == 1
        assert state_key(R) not in session.cluster.nodes.get_node(changing[0]).annotations


def test_the_cli_checks_hold_in_the_library() -> None:
    session = reconciler.simulate(FLEET)
    with pytest.raises(InputError, match="no node has these labels"):
        session.plan(RECIPE, POLICIES, selector="rack=nowhere")
    with pytest.raises(InputError, match="recipe 'nope' not found"):
        session.status("nope")
    with pytest.raises(InputError, match="not found"):
        session.pause("nope")
    (plan,) = session.plan(RECIPE, POLICIES)
    stale = plan.model_copy(update={"planHash": "0" * 64})
    with pytest.raises(PlanMismatchError, match="stale"):
        session.apply(RECIPE, POLICIES, reviewed=[stale])
    assert not [c for c in session.sim.calls if not c[0].endswith("-lease")]  # type: ignore[union-attr]


def test_operations_are_prepared_then_written() -> None:
    session = reconciler.simulate(FLEET)
    op = session.pause(R, reason="freeze", by="me", new=True)
    assert isinstance(op.changes[0], ConfigMapPatch) and "paused" in op.notes[0]
    assert not session.controls()  # nothing written yet
    assert op.write() == 1
    assert session.controls()[R].paused
    (plan,) = session.plan(RECIPE, POLICIES)
    assert any("is paused" in w for w in plan.warnings)
    assert session.apply(RECIPE, POLICIES).skipped[R].startswith("paused")
    session.resume(R).write()
    node = session.cluster.nodes.list_nodes()[0].name
    ignore = session.ignore([node])
    assert ignore.write() == 1 and session.cluster.nodes.get_node(node).labels[IGNORE_LABEL] == "true"
    assert session.ignore([node]).changes == ()  # nothing left to change
    with pytest.raises(InputError, match="name the nodes"):
        session.ignore()

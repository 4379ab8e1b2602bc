"""The readiness gate (issue 15) where people see it: the plan (text, Markdown, JSON), ``status``
(JSON and the table) and the PR comment (verdict line and the after-merge table), and the
estimate's assumption."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from reconciler.adapters.sim.config import SimConfig, SimValidator
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.cli.status import node_status
from reconciler.load import Inputs
from reconciler.model.nodestate import InFlight, dump_model, inflight_key
from reconciler.model.recipe import ReadinessGate
from reconciler.model.selector import LabelSelector, Requirement
from reconciler.report.compare import compare_revisions
from reconciler.report.prcomment import render_comments
from reconciler.report.render import render_markdown, render_text
from reconciler.testing import budget, fleet, node, package, recipe

GATE = ReadinessGate(conditionType="example.com/Validated", timeout="30m")
TUNED = package("tuned", "1.0.0", interrupt="reboot")
TUNED2 = package("tuned", "1.1.0", interrupt="reboot")


def _recipes(gate: ReadinessGate | None) -> tuple[Any, Any]:
    base = recipe("tuning", TUNED, selector={"pool": "gpu"}, budget=budget(count=3))
    head = recipe("tuning", TUNED2, selector={"pool": "gpu"}, budget=budget(count=3), version="2")
    return base, head.model_copy(update={"readinessGate": gate})


def _compare(gate: ReadinessGate | None) -> Any:
    base, head = _recipes(gate)
    nodes = [node(f"n{i}", labels={"pool": "gpu"}, recipe="tuning", installed=[TUNED]) for i in range(3)]
    return compare_revisions(Inputs(recipes=(base,), policies={}, files=()),
                             Inputs(recipes=(head,), policies={}, files=()), fleet(nodes),
                             changed_files=["recipes/t.yaml"], base_revision="a" * 40, head_revision="b" * 40)


def test_the_plan_shows_the_gate_in_text_markdown_and_json() -> None:
    (r,) = _compare(GATE).recipes
    plan = r.head_plan
    assert plan.readinessGate == GATE
    out = render_text(plan, width=200)
    assert "Readiness gate: condition example.com/Validated=True (timeout 30m): after its packages each node is " \
           "held until then" in out
    assert "ReadinessGateTimeout" in out
    assert "| Readiness gate | condition example.com/Validated=True (timeout 30m)" in render_markdown(plan)
    doc = json.loads(plan.to_json())
    assert doc["readinessGate"] == {"conditionType": "example.com/Validated", "labelSelector": None,
                                    "timeout": "30m"}
    ungated = _compare(None).recipes[0].head_plan
    assert "Readiness gate" not in render_text(ungated) and "Readiness gate" not in render_markdown(ungated)
    assert ungated.readinessGate is None and plan.planHash != ungated.planHash  # the gate is part of the plan


def test_the_pr_comment_names_the_gate_in_the_verdict_and_the_table() -> None:
    (c,) = render_comments(_compare(GATE))
    verdict = c.body.split("\n")[1]
    assert "held at the **readiness gate** (condition example.com/Validated=True (timeout 30m))" in verdict
    assert "| Readiness gate | condition example.com/Validated=True (timeout 30m) (was none) |" in c.body
    (plain,) = render_comments(_compare(None))
    assert "readiness gate" not in plain.body.lower()


def test_the_gate_text_is_escaped_in_markdown() -> None:
    gate = ReadinessGate(labelSelector=LabelSelector(matchExpressions=(
        Requirement(key="example.com/result", operator="In", values=("pass", "waived")),)), timeout="1h")
    (c,) = render_comments(_compare(gate))
    assert "labels example.com/result in (pass,waived)" in c.body


def _gated_node() -> Any:
    fl = InFlight(runId="run-1", planHash="h", phase="readiness-gate", lifecycle="run-1",
                  timers={"readiness-gate": "2026-12-01T10:00:00Z"})
    return node("n1", labels={"pool": "gpu"}, recipe="tuning", installed=[TUNED], cordoned_by_us=True,
                annotations={inflight_key("tuning"): dump_model(fl)})


def test_status_shows_a_node_held_at_the_gate() -> None:
    doc = node_status(_gated_node())
    assert doc["readinessGate"] == [{"recipe": "tuning", "since": "2026-12-01T10:00:00Z"}]
    assert doc["cordonedByUs"] and doc["packages"][0]["state"] == "complete"
    assert node_status(node("n2", labels={"pool": "gpu"}, recipe="tuning", installed=[TUNED]))["readinessGate"] == []


def test_status_table_has_a_row_for_the_gate(capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    from reconciler.adapters.sim.fromobserved import objects_from_observed
    from reconciler.cli.main import main

    path = tmp_path / "fleet.json"
    sim = SimFleet(objects_from_observed(fleet([_gated_node()])))
    sim.save(str(path))
    assert main(["status", "--cluster", f"sim:{path}", "--no-headers"]) == 0
    assert capsys.readouterr().out.split() == ["tuning", "1", "0", "0", "1", "0", "1"]  # 1 node at the gate, cordoned
    assert main(["status", "--cluster", f"sim:{path}", "-o", "wide"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "readiness" in line)
    assert "n1" in row and "tuning" in row and "readiness-gate" in row and "waiting since 2026-12-01T10:00:00Z" in row


def test_an_estimate_assumes_the_gate_passes_at_once_unless_a_validator_is_configured() -> None:
    from reconciler.cli.estimate import assumptions

    _, head = _recipes(GATE)
    cfg, a = assumptions(head, None, argparse.Namespace(sim_config=None), None)
    assert "readiness gate: assumed to pass at once" in a.source
    assumed = cfg.for_estimate(head).validator
    assert assumed is not None and assumed.conditionType == "example.com/Validated" and assumed.afterSeconds == 0
    given = SimConfig(validator=SimValidator(conditionType="example.com/Validated", afterSeconds=300))
    assert given.for_estimate(head) is given
    sel = ReadinessGate(labelSelector=LabelSelector(matchLabels={"a": "1"}, matchExpressions=(
        Requirement(key="b", operator="In", values=("x", "y")), Requirement(key="c", operator="Exists"))))
    v = SimConfig().for_estimate(head.model_copy(update={"readinessGate": sel})).validator
    assert v is not None and v.labels == {"a": "1", "b": "x", "c": "true"} and v.conditionType is None

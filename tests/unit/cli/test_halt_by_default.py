"""Safe by default (issue 34, item 7): a recipe without a failure threshold halts at its first
failed batch — with no DeploymentPolicy (batch threshold 100 %) that is the first failed node —
and only ``failureThreshold: never``, written out, lets a failing package reach every node.
``plan`` (text, JSON, Markdown) and the PR comment state each compartment's rule and warn when a
policy turns halting off. Through ``reconciler apply`` on the simulated fleet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.adapters.sim.fleet import SimFleet
from reconciler.load import load_inputs, policy_for
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
from reconciler.report.compare import compare_revisions
from reconciler.report.prcomment import render_comments
from reconciler.report.render import render_markdown, render_text
from tests.unit.ops.conftest import RunCli

ROOT = Path(__file__).resolve().parents[3]
FLEET = ROOT / "examples" / "fleets" / "gpu-24.yaml"
SHA = "sha256:" + "a" * 64

RECIPE = """\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: NodeRecipe
metadata:
  name: tuning
spec:
  version: "{version}"
  nodeSelector:
    matchLabels:
      nodepool: gpu
{budget}
  packages:
    sysctl:
      version: 1.0.0
      image: ghcr.io/example/sysctl
      containerSHA: {sha}
"""

POLICY = """\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: DeploymentPolicy
metadata:
  name: steady
spec:
  default:
    budget: {{count: 2}}
    strategy:
      fixed:
        initialBatch: 2{threshold}
"""

#: the sysctl package's apply stage fails on every node, every attempt (no interrupt: nothing is
#: cordoned, so only a halt stops it)
FAILING = "failures:\n  - {package: sysctl, stage: apply, exitCode: 3, times: 99}\n"


def _write(tmp_path: Path, *, policy: str | None = None, version: str = "1") -> Path:
    """A recipes directory: the recipe (legacy budget of 1 node without ``policy``, else the policy
    ``steady`` with ``failureThreshold`` set to ``policy``; "" leaves it out)."""
    d = tmp_path / f"recipes-{version}-{policy}"
    d.mkdir()
    if policy is None:
        budget = "  interruptionBudget:\n    count: 1"
    else:
        budget = "  deploymentPolicy: steady"
        threshold = f"\n        failureThreshold: {policy}" if policy else ""
        (d / "policy.yaml").write_text(POLICY.format(threshold=threshold))
    (d / "recipe.yaml").write_text(RECIPE.format(version=version, budget=budget, sha=SHA))
    return d


def _touched(fleet: Path) -> set[str]:
    """Nodes that carry any record of the recipe (a stage ran or was recorded there)."""
    return {n.name for n in SimFleet.from_file(str(fleet)).list_nodes() if any("tuning" in k for k in n.annotations)}


def _apply(cli: RunCli, recipes: Path, tmp_path: Path) -> tuple[int, dict[str, object], Path]:
    config = tmp_path / "failing.yaml"
    config.write_text(FAILING)
    saved = tmp_path / "after.yaml"
    rc, out, _ = cli("apply", str(recipes), "--cluster", f"sim:{FLEET}", "--sim-config", str(config),
                       "--sim-save", str(saved), "-o", "json")
    return rc, json.loads(out), saved


def test_without_a_policy_apply_halts_at_the_first_failed_node(cli: RunCli, tmp_path: Path) -> None:
    rc, result, saved = _apply(cli, _write(tmp_path), tmp_path)
    assert rc == 1  # a halted rollout (docs/reference/exit-codes.md)
    assert result["result"] == "halted"
    (comp,) = result["compartments"]  # type: ignore[attr-defined]
    assert comp["halted"] and comp["batches"][0]["nodes"] == ["gpu-a-001"] and len(comp["batches"]) == 1
    assert comp["haltReason"].startswith("halted after 1 consecutive failed batch(es); its rule: halts after the "
                                         "first failed batch (a batch fails when one of its nodes fails; default: "
                                         "no failureThreshold)")
    states = {n["name"]: n["state"] for n in result["nodes"]}  # type: ignore[attr-defined]
    assert states.pop("gpu-a-001") == "failed"
    assert len(states) == 23 and set(states.values()) == {"untouched"}
    assert _touched(saved) == {"gpu-a-001"}  # the other 23 nodes were never written to


def test_a_policy_without_failure_threshold_halts_at_its_first_failed_batch(cli: RunCli, tmp_path: Path) -> None:
    rc, result, saved = _apply(cli, _write(tmp_path, policy=""), tmp_path)
    assert rc == 1 and result["result"] == "halted"
    assert _touched(saved) == {"gpu-a-001", "gpu-a-002"}  # its first batch of 2, nothing after


def test_failure_threshold_never_lets_a_failing_package_reach_every_node(cli: RunCli, tmp_path: Path) -> None:
    rc, result, saved = _apply(cli, _write(tmp_path, policy="never"), tmp_path)
    assert rc == 1 and result["result"] == "failed"  # NodeWright's unset, written out: nothing halts
    assert len(_touched(saved)) == 24
    assert not result["compartments"][0]["halted"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("policy", "text", "doc"),
    [
        (None, "after the first failed batch (a batch fails when one of its nodes fails; default: no "
               "failureThreshold)", {"failureThreshold": 1, "safetyLimit": 100, "batchThreshold": 100,
                                     "default": True}),
        ("3", "after 3 consecutive failed batches while under 50 % of its nodes are done",
         {"failureThreshold": 3, "safetyLimit": 50, "batchThreshold": 100, "default": False}),
        ("never", "never halts (failureThreshold: never): a failing package can reach every node",
         {"failureThreshold": "never", "safetyLimit": 50, "batchThreshold": 100, "default": False}),
    ],
)
def test_plan_states_the_halting_rule_in_text_and_json(cli: RunCli, tmp_path: Path, policy: str | None, text: str,
                                                       doc: dict[str, object]) -> None:
    recipes = _write(tmp_path, policy=policy)
    rc, out, err = cli("plan", str(recipes), "--cluster", f"sim:{FLEET}")
    assert rc == 0, err
    assert "┃ halts" in out and f"│ {text[:40]}" in out  # the compartments table's column (folded at 120)
    inputs = load_inputs([str(recipes)])
    (recipe,) = inputs.recipes
    plan = compute_plan(recipe, policy_for(recipe, inputs), observe(SimFleet.from_file(str(FLEET))))
    assert text in render_text(plan, width=400)
    warned = "compartment __default__: nothing halts it (policy steady sets failureThreshold: never): a package " \
             "that fails on every node is tried on all 24 node(s) to change"
    assert (warned in out) == (policy == "never")
    rc, out, _ = cli("plan", str(recipes), "--cluster", f"sim:{FLEET}", "-o", "json")
    doc_ = json.loads(out)
    (comp,) = doc_["compartments"]
    assert comp["halt"] == doc
    assert (warned in doc_["warnings"]) == (policy == "never")


def test_plan_says_when_every_node_is_in_the_first_batch(cli: RunCli, tmp_path: Path) -> None:
    """The legacy default budget is 100 %: one batch, so the halt cannot spare any node; the plan
    says so instead of implying a canary."""
    d = tmp_path / "all"
    d.mkdir()
    (d / "recipe.yaml").write_text(RECIPE.format(version="1", budget="", sha=SHA))
    rc, out, err = cli("plan", str(d), "--cluster", f"sim:{FLEET}", "-o", "markdown")
    assert rc == 0, err
    assert ("| Halts | halts after the first failed batch (a batch fails when one of its nodes fails; default: no "
            "failureThreshold); all 24 nodes to change are in its first batch and run before it can halt |") in out


def test_the_pr_comment_states_the_rule_and_warns_when_a_change_turns_halting_off(tmp_path: Path) -> None:
    base = load_inputs([str(_write(tmp_path, policy=""))])
    head = load_inputs([str(_write(tmp_path, policy="never", version="2"))])
    fleet = SimFleet.from_file(str(FLEET))
    cmp = compare_revisions(base, head, observe(fleet), changed_files=["policies/steady.yaml"],
                            base_revision="a" * 40, head_revision="b" * 40)
    (r,) = cmp.recipes
    assert "| Halts | halts after the first failed batch" not in render_markdown(r.head_plan)
    assert "| Halts | never halts (failureThreshold: never)" in render_markdown(r.head_plan)
    (c,) = render_comments(cmp)
    assert ("| Halts | never halts (failureThreshold: never): a failing package can reach every node (was halts "
            "after the first failed batch (a batch fails when one of its nodes fails; default: no "
            "failureThreshold)) |") in c.body
    risks = c.body.split("**Risks", 1)[1].split("\n\n", 2)[1]
    assert "nothing halts it (policy steady sets failureThreshold: never)" in risks
    # and back: the change that restores the default resolves that risk
    (back,) = render_comments(compare_revisions(head, base, observe(fleet), changed_files=["policies/steady.yaml"],
                                                base_revision="b" * 40, head_revision="a" * 40))
    assert "Resolved by this change" in back.body and "nothing halts it" in back.body.split("Resolved", 1)[1]


def test_the_next_apply_stays_halted_until_the_failed_node_is_retried(cli: RunCli, tmp_path: Path) -> None:
    """The halt is found again in the node left failed: a second apply with the same inputs tries no
    other node (before, each apply tried one more batch); plan says the compartment is halted;
    --retry-failed retries the failed node (which fails again and halts again)."""
    recipes = _write(tmp_path)
    rc, _, saved = _apply(cli, recipes, tmp_path)
    assert rc == 1 and _touched(saved) == {"gpu-a-001"}
    rc, out, _ = cli("plan", str(recipes), "--cluster", f"sim:{saved}", "-o", "json")
    assert ("compartment __default__ is halted: 1 of its node(s) failed in an earlier run with these same inputs "
            "(gpu-a-001); apply starts none of its 23 node(s) to change") in " ".join(json.loads(out)["warnings"])
    config = tmp_path / "failing.yaml"
    rc, out, _ = cli("apply", str(recipes), "--cluster", f"sim:{saved}", "--sim-config", str(config),
                     "--sim-save", str(saved), "-o", "json")
    second = json.loads(out)
    assert rc == 1 and second["result"] == "halted" and _touched(saved) == {"gpu-a-001"}
    (comp,) = second["compartments"]
    assert not comp["batches"] and "an earlier run left failed with these inputs (gpu-a-001)" in comp["haltReason"]
    rc, out, _ = cli("apply", str(recipes), "--cluster", f"sim:{saved}", "--sim-config", str(config),
                     "--sim-save", str(saved), "--retry-failed", "-o", "json")
    third = json.loads(out)
    assert rc == 1 and third["result"] == "halted"
    assert third["compartments"][0]["batches"][0]["nodes"] == ["gpu-a-001"] and _touched(saved) == {"gpu-a-001"}

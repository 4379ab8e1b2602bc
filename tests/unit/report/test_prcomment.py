"""PR comment bodies: marker first, summary before details, size budget with an explicit
truncation note, escaping of recipe/cluster text, commit status verdicts."""

from __future__ import annotations

import pytest

from reconciler.load import Inputs
from reconciler.report.compare import compare_revisions
from reconciler.report.prcomment import COMMENT_LIMIT, commit_status, marker, render_comments
from reconciler.testing import budget, fleet, node, package, pdb, pod, recipe

TUNED = package("tuned", "1.0.0", interrupt="reboot")
TUNED2 = package("tuned", "1.1.0", interrupt="reboot")


def compare(n: int, *, pods=(), pdbs=(), head_version: str = "2", name: str = "tuning"):
    base = recipe(name, TUNED, selector={"pool": "gpu"}, budget=budget(count=3))
    head = recipe(name, TUNED2, selector={"pool": "gpu"}, budget=budget(count=3), version=head_version)
    nodes = [node(f"gpu-node-{i:05d}", labels={"pool": "gpu"}, recipe=name, installed=[TUNED]) for i in range(n)]
    return compare_revisions(
        Inputs(recipes=(base,), policies={}, files=()),
        Inputs(recipes=(head,), policies={}, files=()),
        fleet(nodes, pods, pdbs),
        changed_files=["recipes/t.yaml"],
        base_revision="a" * 40,
        head_revision="b" * 40,
    )


def test_summary_first_then_details() -> None:
    (c,) = render_comments(compare(6))
    body = c.body
    assert body.startswith(marker("tuning") + "\n") and c.marker == "<!-- reconciler:pr-plan recipe=tuning -->"
    verdict = body.split("\n")[1]
    assert verdict.startswith("✅ **Ready** · **tuning 1 → 2** · tuned 1.0.0 → 1.1.0 · **6 of 6 node(s)** change")
    assert "**6 reboot(s)**" in verdict and "est. **" in verdict and "(rough)" in verdict  # no simulator given
    assert body.index(verdict) < body.index("<details>")
    assert "| Reboots | 6 (+6) |" in body and "| Batches | 2 (+2) |" in body
    assert body.count("<details>") == body.count("</details>") and "Truncated" not in body
    assert commit_status(compare(6))[0] == "success"


@pytest.mark.slow
def test_huge_fleet_is_truncated_under_the_limit_with_a_note() -> None:
    # every node different (one package each, a different version): grouping cannot help
    base = recipe("tuning", TUNED, selector={"pool": "gpu"}, budget=budget(count=3))
    nodes = [node(f"n{i:05d}-x", labels={"pool": "gpu"}, recipe="tuning",
                  installed=[package("tuned", f"0.{i}.0", interrupt="reboot")]) for i in range(3000)]
    cmp = compare_revisions(
        Inputs(recipes=(base,), policies={}, files=()),
        Inputs(recipes=(recipe("tuning", TUNED2, selector={"pool": "gpu"}, budget=budget(count=3)),), policies={},
               files=()),
        fleet(nodes), changed_files=[], base_revision="a" * 40, head_revision="b" * 40,
    )
    (c,) = render_comments(cmp)
    assert len(c.body) <= COMMENT_LIMIT < 65536
    assert "**Truncated** to stay under the comment size limit" in c.body
    assert "Nodes whose plan changes: " in c.body.split("**Truncated**")[1]
    assert c.body.count("<details>") == c.body.count("</details>")
    assert "**3000 of 3000 node(s)** change" in c.body.split("\n")[1]  # the verdict always survives


def test_recipe_and_cluster_text_cannot_inject_markup() -> None:
    evil = "x<img src=y onerror=alert(1)>|**bold**[link](http://e) @team"
    pods = [pod("train", node="gpu-node-00000", labels={"app": evil})]
    (c,) = render_comments(
        compare(1, pods=pods, pdbs=[pdb("pdb-evil", {"app": evil}, allowed=0)], head_version=evil), scope="prod <b>"
    )
    body = c.body
    assert "<img" not in body and "<b>" not in body and "[link](http" not in body
    assert "&lt;img" in body and "@&#8203;team" in body
    assert "PodDisruptionBudget default/pdb-evil allows 0 disruptions" in body
    assert "```mermaid" not in body  # no simulator, no chart
    assert marker("tuning", "prod <b>") == "<!-- reconciler:pr-plan recipe=tuning scope=prod__b_ -->"


def test_drain_blockers_fail_the_commit_status() -> None:
    bare = [pod("bare", node="gpu-node-00000", owner=None)]
    state, desc = commit_status(compare(1, pods=bare))
    assert state == "failure" and "drain blocked" in desc and len(desc) <= 140


# --------------------------------------------------------------------------------------------
# a comment a reviewer can decide from (issue 16)

import re  # noqa: E402

from reconciler.model.plan import Plan  # noqa: E402
from reconciler.model.policy import DeploymentPolicy  # noqa: E402
from reconciler.model.recipe import Recipe  # noqa: E402
from reconciler.report.estimate import Assumptions, BatchSpan, CompartmentEstimate, Estimate, run_length  # noqa: E402
from reconciler.report.prcomment import group_nodes, render_error_comment  # noqa: E402

SHA1 = "sha256:" + "1" * 64
SHA2 = "sha256:" + "2" * 64


def _fixed_estimator(stage: float = 40.0, reboot: float = 300.0):
    """An estimator that does not simulate: every batch takes 3 stages + a reboot (for size tests;
    the simulator itself is exercised in test_estimate.py)."""

    def est(recipe: Recipe, policy: DeploymentPolicy, plan: Plan) -> Estimate:
        spans, comps = [], []
        for c in plan.compartments:
            t = 0.0
            for i, b in enumerate(c.batches, 1):
                spans.append(BatchSpan(c.name, i, len(b), t, t + 3 * stage + reboot))
                t += 3 * stage + reboot
            comps.append(CompartmentEstimate(c.name, sum(len(b) for b in c.batches), tuple(len(b) for b in c.batches),
                                             t))
        return Estimate(max((c.seconds for c in comps), default=0.0), tuple(comps), tuple(spans), "succeeded",
                        Assumptions(stage, reboot, "recipe annotation"))

    return est


def test_verdict_first_line_names_package_digest_nodes_reboots_and_protected_pods() -> None:
    base = recipe("tuning", package("tuned", "1.0.0", interrupt="reboot", sha=SHA1), selector={"pool": "gpu"},
                  protect={"job": "train"}, budget=budget(count=2), version="2026.11.2")
    head = recipe("tuning", package("tuned", "1.1.0", interrupt="reboot", sha=SHA2), selector={"pool": "gpu"},
                  protect={"job": "train"}, budget=budget(count=2), version="2026.11.2")
    nodes = [node(f"gpu-{i:03d}", labels={"pool": "gpu"}, recipe="tuning",
                  installed=[package("tuned", "1.0.0", interrupt="reboot", sha=SHA1)]) for i in range(1, 7)]
    pods = [pod("train-0", node="gpu-002", labels={"job": "train"})]
    cmp = compare_revisions(
        Inputs(recipes=(base,), policies={}, files=()), Inputs(recipes=(head,), policies={}, files=()),
        fleet(nodes, pods), changed_files=[], base_revision="a" * 40, head_revision="b" * 40,
        estimator=_fixed_estimator(),
    )
    (c,) = render_comments(cmp)
    first = c.body.split("\n")[1]
    assert first.startswith("⚠️ **Review the risks** · **tuning 2026.11.2** · tuned 1.0.0 → 1.1.0 (digest changed)")
    assert "**6 of 6 node(s)** change" in first and "**6 reboot(s)**" in first
    assert "waits on **1 protected pod(s)**" in first and "(simulated)" in first
    assert "2026.11.2 → 2026.11.2" not in c.body  # never "X → X"
    assert not re.search(r"(?<![\w.])([\w.]+) → \1(?![\w.])", c.body), re.findall(r"\S+ → \S+", c.body)
    # digests in the package row, the estimate per compartment with its assumptions, the Gantt
    assert "`111111111111` → `222222222222`" in c.body
    assert "| \\_\\_default\\_\\_ | 6 | 3: 3 x 2 | 21 min | stage 40 s, reboot 5 min |" in c.body
    assert "(from recipe annotation)" in c.body and "```mermaid\ngantt" in c.body
    # one grouped node row, no second copy of the plan
    assert "| gpu-001..006 | 6 |" in c.body and "Head plan" not in c.body and c.body.count("gpu-003") == 0


def test_2000_node_change_stays_under_the_limit_with_the_verdict_first_and_grouped_rows() -> None:
    base = recipe("tuning", TUNED, selector={"pool": "gpu"}, budget=budget(count=3))
    head = recipe("tuning", TUNED2, selector={"pool": "gpu"}, budget=budget(count=3), version="2")
    nodes = [node(f"gpu-{z}-{i:04d}", labels={"pool": "gpu"}, recipe="tuning", installed=[TUNED])
             for z in "ab" for i in range(1000)]
    cmp = compare_revisions(
        Inputs(recipes=(base,), policies={}, files=()), Inputs(recipes=(head,), policies={}, files=()),
        fleet(nodes), changed_files=["recipes/t.yaml"], base_revision="a" * 40, head_revision="b" * 40,
        estimator=_fixed_estimator(),
    )
    (c,) = render_comments(cmp)
    assert len(c.body) < 65_536 and len(c.body) <= COMMENT_LIMIT
    lines = c.body.split("\n")
    assert lines[0] == marker("tuning")
    assert lines[1].startswith("✅ **Ready** · **tuning 1 → 2** · tuned 1.0.0 → 1.1.0 · "
                               "**2000 of 2000 node(s)** change")
    assert "667: 666 x 3, 2" in c.body and "3, 3, 3" not in c.body  # run-length encoded batches
    assert "| gpu-a-0000..0999, gpu-b-0000..0999 | 2000 |" in c.body  # one grouped row
    gantt_lines = c.body.split("```mermaid")[1].split("```")[0].strip().split("\n")
    assert len(gantt_lines) <= 16 and "batches 10-667 · 1973 nodes" in gantt_lines[-1]
    assert "Truncated" not in c.body


def test_run_length_and_grouping_rules() -> None:
    assert run_length([1, 1, 1] + [3] * 333) == "3 x 1, 333 x 3"
    assert run_length([1, 2, 4, 4]) == "1, 2, 2 x 4" and run_length([]) == ""
    cmp = compare(4)
    (r,) = cmp.recipes
    groups = group_nodes(r.nodes)
    assert [len(g) for g, _ in groups] == [4]


def test_changed_fields_and_resolved_risks_are_named() -> None:
    """A head that drops the protected-pod label selector: the field is named, the base's
    protected-pod wait is listed as resolved."""
    base = recipe("tuning", TUNED, selector={"pool": "gpu"}, protect={"job": "train"}, budget=budget(count=3))
    head = recipe("tuning", TUNED2, selector={"pool": "gpu"}, budget=budget(count=3))
    nodes = [node(f"n{i}", labels={"pool": "gpu"}, recipe="tuning") for i in range(3)]
    cmp = compare_revisions(
        Inputs(recipes=(base,), policies={}, files=()), Inputs(recipes=(head,), policies={}, files=()),
        fleet(nodes, [pod("train-0", node="n1", labels={"job": "train"})]),
        changed_files=[], base_revision="a" * 40, head_revision="b" * 40,
    )
    (r,) = cmp.recipes
    assert "spec.podNonInterruptLabels" in r.fields
    assert [k.kind for k in r.removed_risks] == ["protected-pods"] and not r.risks
    (c,) = render_comments(cmp)
    assert "**Resolved by this change (1)**" in c.body and "spec.podNonInterruptLabels" in c.body


def test_error_comment_names_file_and_line_first() -> None:
    from reconciler.report.prcomment import LoadProblem, error_marker

    probs = [LoadProblem("recipes/t.yaml", 12, 7, "spec.packages.x.version", "'1.x' is not semver"),
             LoadProblem("recipes/u.yaml", 3, 1, "", "unknown field 'spce'")]
    c = render_error_comment(error_marker("prod"), probs, side="head", revision="c" * 40)
    first = c.body.split("\n")[1]
    assert c.body.startswith("<!-- reconciler:pr-plan-error scope=prod -->\n")
    assert first.startswith("❌ **Cannot plan: head `cccccccccccc` does not load** · **recipes/t.yaml:12:7**")
    assert "(and 1 more)" in first and "| recipes/u.yaml:3:1 | - | unknown field 'spce' |" in c.body

"""PR comment bodies: marker first, summary before details, size budget with an explicit
truncation note, escaping of recipe/cluster text, commit status verdicts."""

from __future__ import annotations

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
    assert body.index("**6 of 6 selected nodes change**") < body.index("<details>")
    assert "**6 reboot(s)**" in body and "2 batch(es)" in body and "est. " in body
    assert "| Reboots | 0 | 6 | +6 |" in body
    assert body.count("<details>") == body.count("</details>") and "Truncated" not in body
    assert commit_status(compare(6))[0] == "success"


def test_huge_fleet_is_truncated_under_the_limit_with_a_note() -> None:
    (c,) = render_comments(compare(3000))
    assert len(c.body) <= COMMENT_LIMIT < 65536
    assert "**Truncated** to stay under the comment size limit" in c.body
    assert "Nodes whose plan changes: " in c.body.split("**Truncated**")[1]
    assert c.body.count("<details>") == c.body.count("</details>")
    assert "**3000 of 3000 selected nodes change**" in c.body  # the summary always survives


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
    assert marker("tuning", "prod <b>") == "<!-- reconciler:pr-plan recipe=tuning scope=prod__b_ -->"


def test_drain_blockers_fail_the_commit_status() -> None:
    bare = [pod("bare", node="gpu-node-00000", owner=None)]
    state, desc = commit_status(compare(1, pods=bare))
    assert state == "failure" and "drain blocked" in desc and len(desc) <= 140

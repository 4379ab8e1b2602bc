"""Planning a change between two revisions (pure part): which recipes are touched, the uninstall
plan of a deleted recipe, node/package deltas, totals and risks."""

from __future__ import annotations

from reconciler.load import Inputs
from reconciler.model.recipe import Recipe
from reconciler.report.compare import (
    Durations,
    affected_recipes,
    compare_revisions,
    estimate_seconds,
    human_duration,
    uninstall_recipe,
)
from reconciler.testing import budget, fleet, node, package, pdb, pod, recipe

TUNED = package("tuned", "1.0.0", interrupt="reboot")
TUNED2 = package("tuned", "1.1.0", interrupt="reboot")
TOOLS = package("tools", "2.0.0")


def inputs(*recipes: Recipe) -> Inputs:
    return Inputs(recipes=tuple(recipes), policies={}, files=())


def gpu_fleet(installed_on: int = 4, total: int = 4, pods=(), pdbs=()):
    nodes = [
        node(f"n{i}", labels={"pool": "gpu"}, recipe="tuning", installed=[TUNED, TOOLS] if i < installed_on else [])
        for i in range(total)
    ]
    return fleet(nodes, pods, pdbs)


def test_deleted_recipe_becomes_an_uninstall_on_exactly_the_nodes_that_have_it() -> None:
    base = recipe("tuning", TUNED, TOOLS, selector={"pool": "gpu"}, budget=budget(count=1))
    cmp = compare_revisions(
        inputs(base), inputs(), gpu_fleet(installed_on=2),
        changed_files=["recipes/tuning.yaml"], base_revision="a" * 40, head_revision="b" * 40,
    )
    (r,) = cmp.recipes
    assert r.change == "removed" and r.head_version == ""
    touched = {n.name: n for n in r.head_plan.nodes if n.steps}
    assert sorted(touched) == ["n0", "n1"]
    for n in touched.values():
        assert sorted((s.package, s.action, s.from_) for s in n.steps) == [
            ("tools", "uninstall", "2.0.0"),
            ("tuned", "uninstall", "1.0.0"),
        ]
    assert r.head.actions["uninstall"] == 4
    assert {p.name: p.change for p in r.packages} == {"tools": "removed", "tuned": "removed"}
    assert any(k.kind == "uninstall" and "2 node(s)" in k.message for k in r.risks)


def test_uninstall_recipe_marks_every_package() -> None:
    r = uninstall_recipe(recipe("x", TUNED, TOOLS))
    assert all(p.uninstall is not None and p.uninstall.apply and p.uninstall.enabled for p in r.packages.values())


def test_version_bump_alters_every_converged_node_and_reports_reboots_and_batches() -> None:
    base = recipe("tuning", TUNED, TOOLS, selector={"pool": "gpu"}, budget=budget(count=2))
    head = recipe("tuning", TUNED2, TOOLS, selector={"pool": "gpu"}, budget=budget(count=2), version="2")
    cmp = compare_revisions(
        inputs(base), inputs(head), gpu_fleet(),
        changed_files=["recipes/tuning.yaml"], base_revision="a" * 40, head_revision="b" * 40,
    )
    (r,) = cmp.recipes
    assert r.change == "modified" and (r.base_version, r.head_version) == ("1", "2")
    assert r.base.nodes_changing == 0 and r.head.nodes_changing == 4
    assert r.head.reboots == 4 and r.head.batches == 2 and r.head.actions["upgrade"] == 4
    assert [(n.name, n.change) for n in r.nodes] == [(f"n{i}", "added") for i in range(4)]
    assert r.nodes[0].head_interrupt == "reboot" and "tuned: upgrade 1.0.0 → 1.1.0" in r.nodes[0].head_steps[0]
    assert [(p.name, p.change, p.from_, p.to) for p in r.packages] == [("tuned", "version", "1.0.0", "1.1.0")]
    assert cmp.pending
    # two batches of two nodes, each: 2 stages (upgrade, config) + post-interrupt, drain, reboot
    per_node = Durations().stage * 3 + Durations().drain + Durations().reboot
    assert r.head.seconds == 2 * per_node


def test_only_recipes_whose_files_or_policies_changed_are_planned() -> None:
    a = recipe("a", TOOLS, source="/s/recipes/a.yaml")
    b = recipe("b", TOOLS, source="/s/recipes/b.yaml")
    b_head = recipe("b", TOOLS, source="/s/recipes/b.yaml")
    touched = affected_recipes(inputs(a, b), inputs(a, b_head), ["recipes/b.yaml"], rel=lambda s: s[3:])
    assert touched == {"b": ("recipes/b.yaml",)}
    # a recipe whose content differs although its file did not (e.g. an AICR manifest) is planned too
    a2 = recipe("a", TUNED, source="/s/recipes/a.yaml")
    assert set(affected_recipes(inputs(a, b), inputs(a2, b), [], rel=lambda s: s[3:])) == {"a"}
    assert affected_recipes(inputs(a, b), inputs(a, b), [], rel=lambda s: s[3:]) == {}


def test_added_recipe_has_no_base_plan_and_protected_pods_and_zero_pdbs_are_risks() -> None:
    head = recipe("tuning", TUNED, selector={"pool": "gpu"}, protect={"workload": "training"})
    pods = [
        pod("train-0", node="n0", labels={"workload": "training"}),
        pod("web-0", node="n1", labels={"app": "web"}),
    ]
    f = gpu_fleet(installed_on=0, total=2, pods=pods, pdbs=[pdb("web", {"app": "web"}, allowed=0)])
    cmp = compare_revisions(
        inputs(), inputs(head), f, changed_files=["recipes/t.yaml"], base_revision="a" * 40, head_revision="b" * 40
    )
    (r,) = cmp.recipes
    assert r.change == "added" and r.base_plan is None and r.base.nodes_changing == 0
    kinds = {k.kind: k.message for k in r.risks}
    assert "default/train-0" in kinds["protected-pods"]
    assert "default/web allows 0 disruptions" in kinds["pdb-zero"] and "n1" in kinds["pdb-zero"]


def test_estimates_and_durations_render() -> None:
    assert estimate_seconds(None) == 0
    assert human_duration(0) == "0 s" and human_duration(45) == "45 s"
    assert human_duration(12 * 60) == "12 min" and human_duration(130 * 60) == "2 h 10 min"

"""Ordering across recipes (NodeWright ``priority`` and ``sequencing``, semantics §2.8).

Recipes run in ``(priority, name)`` order. A node is ready for recipe S when every earlier recipe
that selects it is complete *on that node* (the earlier recipe's ``sequencing: node``), or when
that earlier recipe is complete on *every* node (``sequencing: all``). Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.model.plan import NodePlan, Plan
from reconciler.model.recipe import Recipe


def _has_work(n: NodePlan) -> bool:
    # a pending runtime-required untaint is not work a later recipe waits for: the taint leaves
    # only when every runtime-required recipe is complete, so waiting on it would deadlock (§2.9);
    # a node left failed (notRetried: its steps are not planned) is not complete either
    return bool(n.steps) or n.interrupt is not None or n.notRetried is not None


def waiting_nodes(recipe: Recipe, plan: Plan, earlier: Sequence[tuple[Recipe, Plan]]) -> dict[str, str]:
    """Nodes of ``plan`` that must wait, with the reason.

    ``earlier``: the recipes ordered before ``recipe`` with their plans *as of now* (after they
    ran): a node still has work in an earlier recipe's plan → not complete there.
    """
    out: dict[str, str] = {}
    for prev, prev_plan in earlier:
        if prev.priority == recipe.priority and prev.name > recipe.name:
            continue
        pending = {n.name for n in prev_plan.nodes if _has_work(n)}
        if not pending:
            continue
        if prev.sequencing == "all":
            for n in plan.nodes:
                out.setdefault(n.name, f"waiting for recipe {prev.name} to complete on every node (sequencing: all)")
        else:
            for n in plan.nodes:
                if n.name in pending:
                    out.setdefault(n.name, f"waiting for recipe {prev.name} (priority {prev.priority}) on this node")
    return {k: v for k, v in out.items() if any(n.name == k and (_has_work(n) or n.untaint) for n in plan.nodes)}

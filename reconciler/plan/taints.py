"""Which nodes ``autoTaintNewNodes`` taints (pure; NodeWright semantics §3.6)."""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.model.nodestate import PREFIX, RUNTIME_REQUIRED_TAINT_KEY
from reconciler.model.observed import NodeInfo, ObservedFleet
from reconciler.model.recipe import Recipe


def is_new_node(node: NodeInfo, recipe: Recipe | None = None) -> bool:
    """A node that carries none of our annotations (never worked on) and no runtime-required taint
    (``recipe``'s, :meth:`~reconciler.model.recipe.Recipe.is_required_taint`; ours without one)."""
    if any(k.startswith(f"{PREFIX}/") for k in node.annotations):
        return False
    if recipe is not None:
        return not any(recipe.is_required_taint(t) for t in node.taints)
    return not any(t.key == RUNTIME_REQUIRED_TAINT_KEY for t in node.taints)


def new_nodes_to_taint(recipes: Sequence[Recipe], fleet: ObservedFleet) -> list[str]:
    """Nodes selected by a recipe with ``runtimeRequired`` and ``autoTaintNewNodes`` that are new
    (:func:`is_new_node`): ``apply`` taints them NoSchedule until every runtime-required recipe is
    complete on them."""
    return [
        name
        for name, node in fleet.nodes.items()
        if any(r.runtimeRequired and r.autoTaintNewNodes and r.nodeSelector.matches(node.labels)
               and is_new_node(node, r) for r in recipes)
    ]

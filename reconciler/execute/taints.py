"""The runtime-required taint on nodes that join (NodeWright ``autoTaintNewNodes``, semantics §3.6)."""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.model.nodestate import AUTO_TAINT_KEY, RUNTIME_REQUIRED_TAINT_KEY
from reconciler.model.observed import ObservedFleet
from reconciler.model.recipe import Recipe
from reconciler.model.selector import Taint
from reconciler.plan.taints import new_nodes_to_taint
from reconciler.ports import NodePort

__all__ = ["AUTO_TAINT_KEY", "RUNTIME_REQUIRED_TAINT", "auto_taint"]
RUNTIME_REQUIRED_TAINT = Taint(key=RUNTIME_REQUIRED_TAINT_KEY, value="true", effect="NoSchedule")


def auto_taint(cluster: NodePort, recipes: Sequence[Recipe], fleet: ObservedFleet) -> list[str]:
    """Taint new nodes (one write each: the taint and an ``autoTaint`` annotation together, so the
    taint is ours to remove) and return their names. The taint keeps workloads off a node until
    every runtime-required recipe is complete on it; the node lifecycle removes it."""
    tainted = []
    for name in new_nodes_to_taint(recipes, fleet):
        node = fleet.nodes[name]
        cluster.patch_node(
            name,
            annotations={AUTO_TAINT_KEY: "true"},
            taints=(*node.taints, RUNTIME_REQUIRED_TAINT),
            resource_version=node.resource_version or None,
        )
        tainted.append(name)
    return tainted

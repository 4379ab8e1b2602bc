"""Re-export of :mod:`reconciler.model.graph` (moved there so ``load``, below ``plan`` in the layer
order of docs/architecture-layers.md, can reject ``dependsOn`` cycles). Import from
``reconciler.model.graph``."""

from reconciler.model.graph import CycleError, dependents, find_cycle, ready, topo_order

__all__ = ["CycleError", "dependents", "find_cycle", "ready", "topo_order"]

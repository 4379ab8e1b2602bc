"""node-reconciler: a GitOps reconciler for host packages on Kubernetes fleets.

Data flow (one sub-package per step): ``load`` (recipes and policies from files) → ``observe``
(a frozen snapshot of the fleet through the ``Cluster`` port) → ``diff`` (per node and package
action) → ``plan`` (dependency order, merged interrupt, compartments and batches) → ``execute``
(node lifecycle and batch-gated rollout) → ``report`` (renderers, status, events).

Only ``reconciler.adapters`` talks to the outside world. The layer order is an import contract
(``lint-imports``, docs/architecture-layers.md).

The library's front door (:mod:`reconciler.session`, docs/api.md): ``reconciler.connect(kubeconfig,
context)`` (a real cluster) or ``reconciler.simulate(path)`` (a simulated fleet) give a ``Session``
with ``plan``, ``apply``, ``status`` and the operations, each with every safety check the CLI has.
Beneath it, the application service (:mod:`reconciler.service`): ``reconciler.plan_recipes``,
``reconciler.apply_recipes`` and ``reconciler.load_inputs``.
"""

from __future__ import annotations

from typing import Any

from reconciler.version import __version__ as __version__

__all__ = ["ApplyResult", "ApplySettings", "Observer", "Operation", "Session", "__version__", "apply_recipes",
           "connect", "load_inputs", "plan_recipes", "simulate"]

_LAZY = {"ApplyResult": "reconciler.service", "ApplySettings": "reconciler.service", "Observer": "reconciler.service",
         "apply_recipes": "reconciler.service", "plan_recipes": "reconciler.service", "load_inputs": "reconciler.load",
         "Session": "reconciler.session", "Operation": "reconciler.session", "connect": "reconciler.session",
         "simulate": "reconciler.session"}


def __getattr__(name: str) -> Any:
    """The public names, imported on first use (``import reconciler`` stays light for the CLI)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'reconciler' has no attribute {name!r}")

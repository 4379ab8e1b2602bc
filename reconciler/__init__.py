"""node-reconciler: a GitOps reconciler for host packages on Kubernetes fleets.

Data flow (one sub-package per step): ``load`` (recipes and policies from files) → ``observe``
(a frozen snapshot of the fleet through the ``Cluster`` port) → ``diff`` (per node and package
action) → ``plan`` (dependency order, merged interrupt, compartments and batches) → ``execute``
(node lifecycle and batch-gated rollout) → ``report`` (renderers, status, events).

Only ``reconciler.adapters`` talks to the outside world. The layer order is an import contract
(``lint-imports``, docs/architecture-layers.md).
"""

from reconciler.version import __version__ as __version__

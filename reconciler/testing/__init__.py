"""Public helpers for tests: one family of builders, a port decorator for faults, invariants.

Which builder for which level:

* **Kubernetes objects** (dicts in the API's shape, as ``kubectl get -o yaml`` prints them):
  :mod:`reconciler.testing.fleetgen` (``make_node``, ``make_pod``, ``make_pdb``, ``gpu_fleet``,
  ``write_fleet``; ``pdb_keywords`` turns a PDB spec in the API's names into ``make_pdb``'s
  keywords; ``resource_version=`` where a test needs one). For the simulated fleet
  (``SimFleet(objects)``, ``--cluster sim:PATH``), a fake API server, a real one's create
  requests (PDBs), ``examples/fleets/`` and benchmarks.
* **Observed records** (:class:`~reconciler.model.observed.NodeInfo`, ``PodInfo``, ``PdbInfo``,
  ``ObservedFleet``), for the pure layers (planner, drain rules, decisions): :func:`node`,
  :func:`pod`, :func:`pdb` and :func:`fleet` here (:mod:`reconciler.testing.builders`). Each
  record is a ``fleetgen`` object read by the adapters' own parser
  (:mod:`reconciler.adapters.kube.objects`), so it is what the kube adapter or the simulated fleet
  would observe from that object.
* **Recipes, packages, policies and node-state records** (the loader's models): :func:`recipe`,
  :func:`package`, :func:`policy`, :func:`budget`, :func:`strategy`, :func:`compartment`,
  :func:`entry`, :func:`inflight`, and :func:`state_annotations` (the annotations the executor
  writes on a node, for a model or an object alike).

:mod:`reconciler.testing.faults` wraps any cluster adapter to inject crashes, API errors and
delays; :mod:`reconciler.testing.invariants` checks a rollout from the outside.
"""

from reconciler.testing.builders import (
    as_interrupt,
    as_selector,
    budget,
    compartment,
    complete_entry,
    entry,
    fleet,
    inflight,
    node,
    package,
    pdb,
    pod,
    policy,
    recipe,
    state_annotations,
    strategy,
)

__all__ = [
    "as_interrupt",
    "as_selector",
    "budget",
    "compartment",
    "complete_entry",
    "entry",
    "fleet",
    "inflight",
    "node",
    "package",
    "pdb",
    "pod",
    "policy",
    "recipe",
    "state_annotations",
    "strategy",
]

"""One observation of the fleet: ``observe(cluster) -> ObservedFleet`` (three LISTs)."""

from __future__ import annotations

from reconciler.model.observed import ObservedFleet
from reconciler.ports import Cluster


def observe(cluster: Cluster) -> ObservedFleet:
    """List nodes, pods and PodDisruptionBudgets once and index them (pods by node).

    Raises:
        ClusterError: the cluster could not be listed.
    """
    return ObservedFleet.build(cluster.list_nodes(), cluster.list_pods(), cluster.list_pdbs())

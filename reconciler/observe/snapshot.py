"""One observation of the fleet: ``observe(cluster) -> ObservedFleet`` (three LISTs, through the
node and pod ports)."""

from __future__ import annotations

from reconciler.model.observed import ObservedFleet
from reconciler.ports import Cluster, ClusterPorts


def observe(cluster: Cluster | ClusterPorts) -> ObservedFleet:
    """List nodes, pods and PodDisruptionBudgets once and index them (pods by node). ``cluster``:
    the role bundle, or one adapter playing every role.

    Raises:
        ClusterError: the cluster could not be listed.
    """
    ports = ClusterPorts.of(cluster)
    return ObservedFleet.of(ports.nodes.list_nodes(), ports.pods.pods_by_node(), ports.pods.list_pdbs())

"""Fenced writes (issue 12, finding 2): no write reaches the cluster unless this run holds its Lease.

:class:`FencedCluster` is a port decorator over the write roles of a
:class:`~reconciler.ports.ClusterPorts` bundle (nodes, pods, stages, events and the control
store): every write first asks the :class:`WriteFence` (the run's
:class:`~reconciler.execute.lock.LeaseGroup`), which raises
:class:`~reconciler.execute.lock.LeaseLostError` when a Lease is no longer held *with margin*: the
deadline is known locally from the last successful renewal (``renewed + duration - margin``, by
the monotonic clock, measured from when the renewal request was *sent*), so a run whose renewals
fail stops writing before another run could take the Lease over — as client-go's leader election
stops at its ``renewDeadline``. Reads pass through unchecked. Lease writes are the lock's own and
do not go through the fence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from reconciler.errors import ClusterError
from reconciler.model.observed import NodeInfo, PdbInfo, PodInfo
from reconciler.model.selector import Taint
from reconciler.ports import (
    Cluster,
    ClusterPorts,
    ConfigMapStore,
    LeaseInfo,
    LeaseSpec,
    NodeInterest,
    PodEviction,
    StageSpec,
    StageStatus,
)


class WriteFence(Protocol):
    """Something that says whether a write may happen now."""

    def check(self) -> None:
        """Return when writing is allowed; raise ``LeaseLostError`` (a ``ReconcilerError``) when not."""
        ...


class FencedCluster:
    """``inner`` (a role bundle, or one adapter playing every role) with every write checked by
    ``fence`` first (module docstring). Plays every role of :class:`~reconciler.ports.Cluster`
    (and ``ConfigMapStore``: the bundle's control store; TypeError when it has none); :attr:`ports` is the
    bundle with the write roles fenced and the Lease store as it was. ``writes`` mirrors the inner
    adapter's count, for reports."""

    def __init__(self, inner: Cluster | ClusterPorts, fence: WriteFence) -> None:
        self.inner = inner
        self.roles = ClusterPorts.of(inner)
        self.fence = fence

    @property
    def ports(self) -> ClusterPorts:
        """The fenced bundle: nodes, pods, stages, events (and controls, when ``inner`` has a
        control store) through this fence; ``leases`` unfenced (the fence *is* the lease); the
        bundle's ``namespace``."""
        r = self.roles
        return ClusterPorts(nodes=self, pods=self, stages=self, leases=r.leases, events=self,
                            controls=self if r.controls is not None else None, namespace=r.namespace)

    @property
    def writes(self) -> int:
        """Writes of the wrapped adapter (0 when it does not count them)."""
        return int(getattr(self.roles.nodes, "writes", 0))

    # reads -------------------------------------------------------------------------------
    def list_nodes(self, *, unschedulable_only: bool = False) -> list[NodeInfo]:
        """See :meth:`NodePort.list_nodes`."""
        return self.roles.nodes.list_nodes(unschedulable_only=unschedulable_only)

    def get_node(self, name: str) -> NodeInfo:
        """See :meth:`Cluster.get_node`."""
        return self.roles.nodes.get_node(name)

    def list_pods(self, node_name: str | None = None) -> list[PodInfo]:
        """See :meth:`Cluster.list_pods`."""
        return self.roles.pods.list_pods(node_name)

    def pods_by_node(self) -> Mapping[str, tuple[PodInfo, ...]]:
        """See :meth:`PodPort.pods_by_node`."""
        return self.roles.pods.pods_by_node()

    def get_pod(self, namespace: str, name: str) -> PodInfo | None:
        """See :meth:`Cluster.get_pod`."""
        return self.roles.pods.get_pod(namespace, name)

    def list_pdbs(self) -> list[PdbInfo]:
        """See :meth:`Cluster.list_pdbs`."""
        return self.roles.pods.list_pdbs()

    def daemonset_exists(self, namespace: str, name: str) -> bool:
        """See :meth:`Cluster.daemonset_exists`."""
        return self.roles.pods.daemonset_exists(namespace, name)

    def stage_status(self, spec: StageSpec, *, log: bool = False) -> StageStatus:
        """See :meth:`Cluster.stage_status`."""
        return self.roles.stages.stage_status(spec, log=log)

    def get_lease(self, name: str) -> LeaseInfo | None:
        """See :meth:`Cluster.get_lease`."""
        return self.roles.leases.get_lease(name)

    def get_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        """See :meth:`ConfigMapStore.get_config_map`."""
        return self._store().get_config_map(namespace, name)

    # writes ------------------------------------------------------------------------------
    def patch_node(
        self,
        name: str,
        *,
        annotations: Mapping[str, str | None] | None = None,
        labels: Mapping[str, str | None] | None = None,
        unschedulable: bool | None = None,
        taints: tuple[Taint, ...] | None = None,
        resource_version: str | None = None,
        uid: str | None = None,
    ) -> NodeInfo:
        """Fenced :meth:`Cluster.patch_node`."""
        self.fence.check()
        return self.roles.nodes.patch_node(name, annotations=annotations, labels=labels, unschedulable=unschedulable,
                                     taints=taints, resource_version=resource_version, uid=uid)

    def forget_node(self, name: str) -> None:
        """:meth:`~reconciler.ports.NodeInterest.forget_node` of the wrapped node role, when it has
        one (not a write: unfenced)."""
        inner = self.roles.nodes
        if isinstance(inner, NodeInterest):
            inner.forget_node(name)

    def set_node_condition(self, name: str, type_: str, status: str, reason: str, message: str) -> None:
        """Fenced :meth:`Cluster.set_node_condition`."""
        self.fence.check()
        self.roles.nodes.set_node_condition(name, type_, status, reason, message)

    def remove_node_conditions(self, name: str, types: Sequence[str]) -> None:
        """Fenced :meth:`Cluster.remove_node_conditions`."""
        self.fence.check()
        self.roles.nodes.remove_node_conditions(name, types)

    def evict_pods(self, evictions: Sequence[PodEviction]) -> list[ClusterError | None]:
        """Fenced :meth:`Cluster.evict_pods`: the fence is asked once, before any is sent (they
        are sent together)."""
        self.fence.check()
        return self.roles.pods.evict_pods(evictions)

    def start_stage(self, spec: StageSpec) -> None:
        """Fenced :meth:`Cluster.start_stage`."""
        self.fence.check()
        self.roles.stages.start_stage(spec)

    def lifecycles(self) -> set[str]:
        """See :meth:`Cluster.lifecycles` (a read: not fenced)."""
        return self.roles.stages.lifecycles()

    def end_run(self, run_id: str, *, if_unused: bool = False) -> None:
        """Fenced :meth:`Cluster.end_run`."""
        self.fence.check()
        self.roles.stages.end_run(run_id, if_unused=if_unused)

    def delete_stage(self, spec: StageSpec) -> None:
        """Fenced :meth:`Cluster.delete_stage`."""
        self.fence.check()
        self.roles.stages.delete_stage(spec)

    def delete_stages(self, recipe: str, node: str) -> None:
        """Fenced :meth:`Cluster.delete_stages`."""
        self.fence.check()
        self.roles.stages.delete_stages(recipe, node)

    def emit_event(self, node: str, reason: str, message: str, type_: str = "Normal") -> None:
        """Fenced :meth:`Cluster.emit_event`."""
        self.fence.check()
        self.roles.events.emit_event(node, reason, message, type_)

    def patch_config_map(self, namespace: str, name: str, data: Mapping[str, str | None]) -> None:
        """Fenced :meth:`ConfigMapStore.patch_config_map`."""
        self.fence.check()
        self._store().patch_config_map(namespace, name, data)

    # the lock's own writes: not fenced (the fence *is* the lease) ---------------------------
    def create_lease(self, name: str, spec: LeaseSpec) -> LeaseInfo:
        """See :meth:`LeaseStore.create_lease` (not fenced)."""
        return self.roles.leases.create_lease(name, spec)

    def replace_lease(self, name: str, spec: LeaseSpec, resource_version: str) -> LeaseInfo:
        """See :meth:`LeaseStore.replace_lease` (not fenced)."""
        return self.roles.leases.replace_lease(name, spec, resource_version)

    def delete_lease(self, name: str, resource_version: str) -> None:
        """See :meth:`LeaseStore.delete_lease` (not fenced)."""
        self.roles.leases.delete_lease(name, resource_version)

    def _store(self) -> ConfigMapStore:
        """The bundle's control store. Raises TypeError when it has none."""
        if self.roles.controls is None:
            raise TypeError(f"{type(self.inner).__name__} keeps no ConfigMaps")
        return self.roles.controls

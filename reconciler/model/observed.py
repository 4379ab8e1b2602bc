"""What the cluster reports: nodes, pods and PodDisruptionBudgets, as small frozen records.

Adapters convert raw API objects (``V1Node``...) or kubectl YAML into these once, at the boundary.
Times are seconds since the epoch (floats); ``None`` when absent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter

from reconciler.model.selector import LabelSelector, Taint, Toleration
from reconciler.model.vocab import UnhealthyPodEvictionPolicy


@dataclass(frozen=True, slots=True)
class NodeCondition:
    """One ``status.conditions`` entry of a node: ``type``, ``status`` (``"True"``, ``"False"`` or
    ``"Unknown"``), ``reason``, ``message`` and ``since``, its ``lastTransitionTime`` as epoch
    seconds (None when absent or unreadable). ``lastHeartbeatTime`` is not kept: a heartbeat is
    no change. ``since`` tells how long a node has been NotReady (a joining node's bounded wait)
    and whether a validator's condition is newer than the work a readiness gate holds."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    since: float | None = None


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """A node as observed. ``ready`` is the Ready condition (None = Unknown/absent);
    ``boot_id`` is ``status.nodeInfo.bootID``; ``resource_version`` supports patch preconditions;
    ``conditions`` are the node's ``status.conditions`` in the API's order (an external
    validator's condition, for a recipe's readiness gate, among them)."""

    name: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    ready: bool | None = True
    boot_id: str = ""
    created: float = 0.0
    resource_version: str = ""
    conditions: tuple[NodeCondition, ...] = ()

    def condition(self, type_: str) -> NodeCondition | None:
        """The condition of type ``type_`` (the last one when a hostile object repeats it), or None."""
        found = None
        for c in self.conditions:
            if c.type == type_:
                found = c
        return found


@dataclass(frozen=True, slots=True)
class OwnerRef:
    """An ownerReference: ``kind``/``name``; ``controller`` marks the managing controller."""

    kind: str
    name: str
    controller: bool = False
    api_version: str = ""
    uid: str = ""


@dataclass(frozen=True, slots=True)
class PodInfo:
    """A pod as observed, with what drain classification needs (drain-and-scenarios.md §1.2).

    ``phase``: Pending/Running/Succeeded/Failed/Unknown. ``deletion_ts``: when the pod was marked
    for deletion (epoch seconds) or None. ``emptydir``: has an emptyDir volume (memory-backed too).
    ``mirror``: carries ``kubernetes.io/config.mirror``. ``active_deadline`` and ``start_time``
    drive the simulated fleet's pod completion.
    """

    namespace: str
    name: str
    uid: str
    node_name: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    phase: str = "Running"
    ready: bool = True
    owners: tuple[OwnerRef, ...] = ()
    emptydir: bool = False
    deletion_ts: float | None = None
    tolerations: tuple[Toleration, ...] = ()
    grace_seconds: int = 30
    start_time: float | None = None
    active_deadline: int | None = None

    @property
    def ref(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    @property
    def controller(self) -> OwnerRef | None:
        """The controller ownerReference, if any."""
        for o in self.owners:
            if o.controller:
                return o
        return None

    @property
    def finished(self) -> bool:
        """Succeeded or Failed."""
        return self.phase in ("Succeeded", "Failed")

    @property
    def mirror(self) -> bool:
        """A mirror pod (API copy of a static pod); cannot be evicted through the API."""
        return "kubernetes.io/config.mirror" in self.annotations


@dataclass(frozen=True, slots=True)
class PdbInfo:
    """A PodDisruptionBudget. ``selector`` None matches nothing (policy/v1); an empty selector
    matches every pod in the namespace. Status fields as the disruption controller writes them;
    ``unhealthy_pod_eviction_policy`` is ``spec.unhealthyPodEvictionPolicy`` (absent: the default,
    ``IfHealthyBudget``). How the Eviction API uses them: :mod:`reconciler.model.disruption`."""

    namespace: str
    name: str
    selector: LabelSelector | None
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    disruptions_allowed: int = 0
    current_healthy: int = 0
    desired_healthy: int = 0
    expected_pods: int = 0
    unhealthy_pod_eviction_policy: UnhealthyPodEvictionPolicy = UnhealthyPodEvictionPolicy.IF_HEALTHY_BUDGET

    @property
    def ref(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    def selects(self, pod: PodInfo) -> bool:
        """Whether this PDB covers ``pod`` (same namespace, selector matches)."""
        return pod.namespace == self.namespace and self.selector is not None and self.selector.matches(pod.labels)


_BY_NAME = attrgetter("name")
_BY_NAMESPACE_NAME = attrgetter("namespace", "name")


@dataclass(frozen=True)
class ObservedFleet:
    """One frozen snapshot of the fleet: nodes by name, pods indexed by node, PDBs.

    Build with :meth:`build`; planning reads only this, never the cluster.
    """

    nodes: Mapping[str, NodeInfo]
    pods_by_node: Mapping[str, tuple[PodInfo, ...]]
    pdbs: tuple[PdbInfo, ...] = ()

    @classmethod
    def build(cls, nodes: list[NodeInfo], pods: list[PodInfo], pdbs: list[PdbInfo]) -> ObservedFleet:
        """Index ``pods`` by ``node_name`` (unbound pods are dropped) and ``nodes`` by name."""
        return cls.of(nodes, group_pods(pods), pdbs)

    @classmethod
    def of(cls, nodes: list[NodeInfo], pods_by_node: Mapping[str, tuple[PodInfo, ...]],
           pdbs: list[PdbInfo]) -> ObservedFleet:
        """The fleet from pods already grouped as :func:`group_pods` groups them (a mapping that
        converts each node's pods when first read is allowed: the planner reads only the pods of
        the nodes it cordons); ``nodes`` indexed by name."""
        return cls(
            nodes={n.name: n for n in sorted(nodes, key=_BY_NAME)},
            pods_by_node=pods_by_node,
            pdbs=tuple(sorted(pdbs, key=_BY_NAMESPACE_NAME)),
        )

    def pods_on(self, node: str) -> tuple[PodInfo, ...]:
        """Pods bound to ``node`` (sorted by namespace/name)."""
        return self.pods_by_node.get(node, ())

    def pdbs_for(self, pod: PodInfo) -> list[PdbInfo]:
        """PDBs selecting ``pod``."""
        return [b for b in self.pdbs if b.selects(pod)]


def group_pods(pods: Iterable[PodInfo]) -> dict[str, tuple[PodInfo, ...]]:
    """``pods`` bound to a node, by node name, each node's sorted by namespace/name; unbound pods
    (no ``spec.nodeName``) are dropped: the shape of :attr:`ObservedFleet.pods_by_node`."""
    by_node: dict[str, list[PodInfo]] = {}
    for p in pods:
        if p.node_name:
            by_node.setdefault(p.node_name, []).append(p)
    return {k: tuple(sorted(v, key=_BY_NAMESPACE_NAME)) for k, v in by_node.items()}

"""Ports: the only ways the reconciler's core reaches the outside world.

The cluster is reached through role ports (issue 13): :class:`NodePort`, :class:`PodPort`,
:class:`StageRunner`, :class:`LeaseStore` (policy-free; the take-over rules live in
``execute.lock``), :class:`EventSink` and :class:`ConfigMapStore` (the control store), handed
around as one :class:`ClusterPorts` bundle. ``adapters.sim.SimFleet`` (in-process simulated fleet:
embedded default, unit tests, what-if) plays every role with one object (:class:`Cluster`);
``adapters.kube.cluster.KubeCluster`` (official ``kubernetes`` client) gives one role adapter
each (``KubeCluster.ports``).
``Clock`` is injected so waits, timeouts and backoff are testable without sleeping.

Every method that changes the cluster is a *write*; each write is one API request
(:meth:`PodPort.evict_pods`: one per pod), so tests can count writes and crash a run after the
N-th (``--sim-crash-after``).
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from reconciler.errors import ClusterError
from reconciler.model.observed import NodeInfo, PdbInfo, PodInfo
from reconciler.model.recipe import EnvVar, Interrupt, Resources
from reconciler.model.selector import Taint, Toleration

StagePhase = Literal["pending", "running", "succeeded", "failed", "missing"]


@dataclass(frozen=True)
class StageSpec:
    """One stage (or interrupt) to run on one node: what a stage pod is made from.

    ``stage`` is one of apply, config, upgrade, uninstall, post-interrupt, interrupt,
    uninstall-interrupt; the check (``<stage>-check``) runs in the same pod after the stage.
    ``attempt`` (1-based) and ``run_id`` (the id of the run that started the node's lifecycle) are
    part of the pod name, so a retry never collides with a failed pod kept for its logs and a
    resumed run finds the pods of the lifecycle it continues. ``rerun`` (0 unless an operations
    verb restarted the package in this lifecycle: ``InFlight.reruns``) is part of it too, so a
    package run again never reads back the pods of its earlier run. ``interrupt`` is set for
    interrupt stages (the merged interrupt).
    ``pull_ref`` is ``image@sha256:…`` or ``image:version``.
    """

    recipe: str
    node: str
    package: str
    version: str
    stage: str
    pull_ref: str
    run_id: str
    attempt: int = 1
    config_map: Mapping[str, str] = field(default_factory=dict)
    env: tuple[EnvVar, ...] = ()
    resources: Resources | None = None
    grace_seconds: int | None = None
    interrupt: Interrupt | None = None
    tolerations: tuple[Toleration, ...] = ()
    agent_image: str | None = None
    timeout_seconds: int = 1800
    rerun: int = 0

    @property
    def pod_name(self) -> str:
        """Deterministic DNS-1123 name (≤ 63 chars): readable prefix + 8 hex of a digest of the
        identifying fields (NodeWright names stage pods the same way, semantics §3.1)."""
        return _stage_pod_name(self.recipe, self.package, self.version, self.stage, self.node, self.attempt,
                               self.run_id, self.rerun)


@functools.lru_cache(maxsize=16384)
def _stage_pod_name(recipe: str, package: str, version: str, stage: str, node: str, attempt: int, run_id: str,
                    rerun: int = 0) -> str:
    """:attr:`StageSpec.pod_name` (memoised: a node's lifecycle asks for the same few names at
    every step). The memo is bounded to the working set of the largest batch (a name per package
    in flight on each node: 1,000 packages on 3 nodes are 3,000, issue 36), not the fleet:
    unbounded it held every name of a run, about 1.7 KB per node (issue 13's 10,000-node
    simulated rollout)."""
    ident = "|".join((recipe, package, version, stage, node, str(attempt), run_id))
    if rerun:  # names of pods never rerun stay as they were
        ident += f"|rerun {rerun}"
    h = hashlib.sha256(ident.encode()).hexdigest()[:8]
    base = re.sub(r"[^a-z0-9-]+", "-", f"{recipe}-{package}-{stage}-{node}".lower())
    return f"{base[:53].strip('-')}-{h}"


@dataclass(frozen=True)
class StageStatus:
    """Observed result of a stage pod. ``phase`` "missing" = no such pod. ``exit_code`` is the
    failing container's exit code (preserved exactly, decision (e)); ``reason`` e.g.
    ``ImagePullBackOff``; ``log_tail`` the last lines of the failing container's log; ``started`` the pod's
    ``status.startTime`` as UTC epoch seconds (None before the kubelet started it); ``deleting``: the
    pod is being deleted (``metadata.deletionTimestamp``), with who can be seen deleting it — its
    ``DisruptionTarget`` condition's reason and message (set by the Eviction API, the pod garbage
    collector, the taint manager, the scheduler's preemption, the kubelet), or that a plain delete
    request names nobody (``""``: not being deleted)."""

    phase: StagePhase
    exit_code: int | None = None
    reason: str = ""
    log_tail: str = ""
    started: float | None = None
    deleting: str = ""


@dataclass(frozen=True)
class LeaseSpec:
    """The ``spec`` of a coordination.k8s.io/v1 Lease as the reconciler writes it: ``holder`` is
    ``spec.holderIdentity`` ("" when nobody holds it), ``duration_seconds``
    ``spec.leaseDurationSeconds``, ``acquired``/``renewed`` ``spec.acquireTime``/``spec.renewTime``
    as UTC epoch seconds (None when unset), ``transitions`` ``spec.leaseTransitions``."""

    holder: str
    duration_seconds: int
    acquired: float | None
    renewed: float | None
    transitions: int = 0


@dataclass(frozen=True)
class LeaseInfo:
    """A coordination.k8s.io/v1 Lease as a :class:`LeaseStore` read or wrote it: ``name``,
    ``namespace``, the spec fields of :class:`LeaseSpec` (UTC epoch seconds, None when unset) and
    ``metadata.resourceVersion`` (what a conditional replace or delete carries)."""

    name: str
    namespace: str
    holder: str
    duration_seconds: int
    acquired: float | None
    renewed: float | None
    transitions: int
    resource_version: str

    def expires_in(self, now: float) -> float:
        """Seconds until the lease expires at UTC epoch ``now`` (negative: expired), judged by
        ``renewTime`` (else ``acquireTime``) + ``leaseDurationSeconds``, as client-go's leader
        election does (clock skew between holders is not corrected)."""
        base = self.renewed or self.acquired or 0.0
        return base + self.duration_seconds - now


class NodePort(Protocol):
    """Nodes: read, list and patch (conditional on resourceVersion). Errors are
    ``reconciler.errors.ClusterError`` subclasses (NotFoundError, ConflictError,
    TooManyRequestsError, ServerError, ForbiddenError, TransientError), as for every role."""

    def list_nodes(self, *, unschedulable_only: bool = False) -> list[NodeInfo]:
        """All nodes (one LIST); with ``unschedulable_only`` only the cordoned ones
        (``spec.unschedulable=true`` as a field selector): what the budget check needs before each
        batch, without listing the whole fleet."""
        ...

    def get_node(self, name: str) -> NodeInfo:
        """One node, fresh. Raises NotFoundError."""
        ...

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
        """One write: merge ``annotations``/``labels`` (None value = remove), set
        ``spec.unschedulable`` and/or replace ``spec.taints``, in a single request, so a cordon and
        its ownership record land together. With ``resource_version`` the write is conditional
        (ConflictError when the node changed); with ``uid`` it is made only to the node object of
        that ``metadata.uid`` (ConflictError when the name is another machine's now: the object
        was deleted and registered again). Returns the node after the write."""
        ...

    def set_node_condition(self, name: str, type_: str, status: str, reason: str, message: str) -> None:
        """One write: set (add or replace by type) a node status condition."""
        ...

    def remove_node_conditions(self, name: str, types: Sequence[str]) -> None:
        """One write: remove the node status conditions of ``types`` (absent ones are no error)."""
        ...


@runtime_checkable
class NodeInterest(Protocol):
    """Optional on a :class:`NodePort`: told when the run is done with a node (its lifecycle
    ended), so an adapter that keeps the nodes it works on current (the real cluster's watch
    cache) can stop doing so: later reads of the node are requests again. Not a write."""

    def forget_node(self, name: str) -> None:
        """The run no longer works on ``name`` (nothing to do when the adapter keeps nothing)."""
        ...


@dataclass(frozen=True)
class PodEviction:
    """One eviction for :meth:`PodPort.evict_pods`: the pod, the UID it must still have (the
    eviction's precondition) and ``grace_seconds`` (None: the pod's own grace period)."""

    namespace: str
    name: str
    uid: str
    grace_seconds: int | None = None

    @property
    def ref(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"


def evict_one_by_one(evict: Callable[[str, str, str, int | None], None],
                     evictions: Sequence[PodEviction]) -> list[ClusterError | None]:
    """:meth:`PodPort.evict_pods` for an adapter that sends one eviction per call
    (``evict(namespace, name, uid, grace_seconds)``, raising a ClusterError when it is refused):
    in the order asked; any other exception (a crash, a read-only fleet, the fence) goes up."""
    out: list[ClusterError | None] = []
    for e in evictions:
        try:
            evict(e.namespace, e.name, e.uid, e.grace_seconds)
            out.append(None)
        except ClusterError as err:
            out.append(err)
    return out


class PodPort(Protocol):
    """Pods and what a drain needs around them: evictions, PodDisruptionBudgets, DaemonSet existence."""

    def list_pods(self, node_name: str | None = None) -> list[PodInfo]:
        """Pods of every namespace, optionally only those bound to ``node_name``
        (field selector ``spec.nodeName``)."""
        ...

    def pods_by_node(self) -> Mapping[str, tuple[PodInfo, ...]]:
        """Every pod bound to a node, by node name, each node's sorted by namespace/name, as one
        observation (:func:`reconciler.model.observed.group_pods` of all pods: one LIST on a real
        cluster). A mapping that converts a node's pods when first read is allowed where nothing
        can change them meanwhile (the read-only simulated fleet ``plan`` reads)."""
        ...

    def get_pod(self, namespace: str, name: str) -> PodInfo | None:
        """One pod, or None when it does not exist."""
        ...

    def list_pdbs(self) -> list[PdbInfo]:
        """All PodDisruptionBudgets (policy/v1)."""
        ...

    def daemonset_exists(self, namespace: str, name: str) -> bool:
        """Whether a DaemonSet exists (kubectl drain's orphaned-DaemonSet-pod check)."""
        ...

    def evict_pods(self, evictions: Sequence[PodEviction]) -> list[ClusterError | None]:
        """Writes, one per pod: POST a policy/v1 Eviction with ``preconditions.uid`` (and the grace
        period when given) for each, sent together where the adapter can (``kubectl drain`` evicts
        a node's pods in parallel; drain-and-scenarios.md §1.4/§1.6); their order does not matter.

        Returns, in the order asked, None for an accepted eviction or the error that refused it:
        NotFoundError (gone), ConflictError (UID changed: the pod we meant is gone),
        TooManyRequestsError (PodDisruptionBudget or throttling), ServerError (500: several PDBs
        select the pod), ForbiddenError (namespace terminating, RBAC), TransientError. Raises only
        what stops every eviction (the write fence's LeaseLostError, before any is sent)."""
        ...


class StageRunner(Protocol):
    """Stage pods: start, read, clean up."""

    def start_stage(self, spec: StageSpec) -> None:
        """One write: create the stage pod for ``spec`` on its node; no-op if it already exists."""
        ...

    def stage_status(self, spec: StageSpec, *, log: bool = False) -> StageStatus:
        """Read the stage pod's state (``missing`` when it does not exist). ``log``: a failed pod's
        ``log_tail`` is its failing container's log (one more request on a real cluster; without
        it, a failed pod's ``log_tail`` is empty)."""
        ...

    def delete_stage(self, spec: StageSpec) -> None:
        """One write: delete the stage pod of ``spec`` (absent is fine): a stage given up on while
        its pod still runs (its timeout, an image that never pulls), so no pod of it runs beside
        the next attempt's."""
        ...

    def delete_stages(self, recipe: str, node: str) -> None:
        """One write: delete every stage pod of ``recipe`` on ``node`` (a delete-collection by
        labels), once the node is complete; failed nodes keep theirs for the logs."""
        ...

    def lifecycles(self) -> set[str]:
        """Ids of the lifecycles whose shared objects exist now (the kube adapter's run-owner
        ConfigMaps; one LIST by labels); what a finished run may release besides its own."""
        ...

    def end_run(self, run_id: str, *, if_unused: bool = False) -> None:
        """Release what the stage pods of lifecycle ``run_id`` shared (the kube adapter deletes the
        run's owner object; the garbage collector removes its shared ConfigMaps and any pod left).
        Called only when none of that lifecycle's nodes in the caller's run failed, so failed pods
        keep their logs. ``if_unused``: release only when no stage pod of the lifecycle is left (a
        lifecycle an earlier run started may have failed nodes outside this run; pods being deleted do
        not count); one read."""
        ...


class LeaseStore(Protocol):
    """coordination.k8s.io/v1 Leases in the reconciler's namespace, without policy: who may take,
    renew or release a Lease is decided once, in :mod:`reconciler.execute.lock`. Each write is one
    request; replace and delete are conditional on the resourceVersion read."""

    def get_lease(self, name: str) -> LeaseInfo | None:
        """The Lease ``name``, or None."""
        ...

    def create_lease(self, name: str, spec: LeaseSpec) -> LeaseInfo:
        """One write: create the Lease (labelled managed-by node-reconciler). Raises ConflictError
        (409 AlreadyExists) when it exists."""
        ...

    def replace_lease(self, name: str, spec: LeaseSpec, resource_version: str) -> LeaseInfo:
        """One write: replace the Lease's spec if its resourceVersion is still ``resource_version``.
        Raises ConflictError (it changed), NotFoundError (deleted)."""
        ...

    def delete_lease(self, name: str, resource_version: str) -> None:
        """One write: delete the Lease if its resourceVersion is still ``resource_version``.
        Raises ConflictError (it changed), NotFoundError (already gone)."""
        ...


class EventSink(Protocol):
    """Kubernetes Events about nodes."""

    def emit_event(self, node: str, reason: str, message: str, type_: str = "Normal") -> None:
        """One write: a Kubernetes Event on the node (reportingController = node-reconciler)."""
        ...


@runtime_checkable
class ConfigMapStore(Protocol):
    """The control store: small node-independent records in ConfigMaps (the recipe control
    switches of ``reconciler pause``/``disable``, :mod:`reconciler.ops.controls`). Implemented by
    the simulated fleet and, for the real cluster, by
    :class:`reconciler.adapters.kube.configmaps.KubeConfigMaps`."""

    def get_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        """The ``data`` of a ConfigMap, or None when it does not exist."""
        ...

    def patch_config_map(self, namespace: str, name: str, data: Mapping[str, str | None]) -> None:
        """One write: merge ``data`` into the ConfigMap (None value = remove the key), creating it
        (labelled ``app.kubernetes.io/managed-by: node-reconciler``) when absent."""
        ...


#: The control-store role under its role name.
ControlStore = ConfigMapStore


class Cluster(NodePort, PodPort, StageRunner, LeaseStore, EventSink, Protocol):
    """An adapter that plays every cluster role with one object (``SimFleet``, ``KubeCluster``,
    the decorators :class:`~reconciler.testing.faults.FaultyCluster` and
    :class:`~reconciler.execute.fence.FencedCluster`); :meth:`ClusterPorts.of` makes the bundle
    from it."""


@dataclass(frozen=True)
class ClusterPorts:
    """The cluster roles one piece of work is given, explicitly (issue 13). One adapter may fill
    several roles (:meth:`of`); a decorator may wrap some (the write fence wraps the writers).
    ``controls`` is None when the adapter keeps no control store; ``namespace`` is the
    reconciler's namespace on the cluster ("": the default one)."""

    nodes: NodePort
    pods: PodPort
    stages: StageRunner
    leases: LeaseStore
    events: EventSink
    controls: ConfigMapStore | None = None
    namespace: str = ""

    @classmethod
    def of(cls, adapter: Cluster | ClusterPorts, controls: ConfigMapStore | None = None) -> ClusterPorts:
        """Every role played by ``adapter`` (a bundle is returned as it is). ``controls`` defaults
        to ``adapter`` itself when it is a ``ConfigMapStore`` (the simulated fleet)."""
        if isinstance(adapter, ClusterPorts):
            return adapter
        if controls is None and isinstance(adapter, ConfigMapStore):
            controls = adapter
        return cls(nodes=adapter, pods=adapter, stages=adapter, leases=adapter, events=adapter, controls=controls)


class Clock(Protocol):
    """Time source with two readings (issue 12): :meth:`now` is monotonic, for deadlines and
    cadences inside one process, and is never persisted; :meth:`utc` is the UTC wall clock, for
    anything written to the cluster and compared by another process (RFC 3339 in node records,
    :mod:`reconciler.model.utctime`). What changed meanwhile is not the clock's to say: that is
    the :class:`ChangeFeed`."""

    def now(self) -> float:
        """Monotonic seconds with an arbitrary origin (``time.monotonic()`` for a real cluster,
        simulated seconds plus a per-process offset for the simulated fleet)."""
        ...

    def utc(self) -> float:
        """UTC wall-clock time as epoch seconds (``time.time()`` for a real cluster; the simulated
        instant for the simulated fleet)."""
        ...

    def wait(self, seconds: float) -> None:
        """Let ``seconds`` pass (sleep; the simulated fleet runs its world forward)."""
        ...


class ChangeFeed(Protocol):
    """Which nodes changed: a real cluster's watch streams
    (:class:`reconciler.adapters.kube.watch.KubeWatch`). The rollout waits on it instead of the
    clock when it has one, and then looks only at the nodes it names (and at those whose own timer
    is due) rather than at every node in progress."""

    def changed(self, within: float) -> Collection[str] | None:
        """Wait at most ``within`` seconds for a change of a node the run works on; the names of
        the nodes that changed since the last call (empty: none), or None when it cannot tell
        (a stream not in sync): the caller looks at every node."""
        ...

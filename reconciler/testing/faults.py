"""Fault injection around any ``Cluster`` adapter: crashes, API errors and delays, call by call.

:class:`FaultyCluster` implements :class:`reconciler.ports.Cluster` by delegating to another
adapter (the simulated fleet, or :class:`~reconciler.adapters.kube.cluster.KubeCluster` on a real control
plane) and, on the way, can

* **kill the run** right after the N-th successful write (``crash_after_writes=N``): raises
  :class:`~reconciler.errors.CrashInjected`, a ``BaseException`` nothing in the executor catches,
  the way ``kill -9`` stops a process between two API requests;
* **fail calls** with the errors the adapters raise for an HTTP answer (``Fault.error``): 409
  ``conflict``, 429 ``throttle``, 500 ``server``, 503 ``unavailable``, a read ``timeout``, a
  connection ``reset``, 403 ``forbidden``, 404 ``notfound``, 422 ``invalid``; either the N-th matching call
  (``Fault(nth=N)``) or every call matching a verb/target pattern. ``after=True`` lets the request
  reach the server first (the write is applied, the answer is lost: a timeout after the fact);
* **delay calls** by ``Fault.delay`` seconds of the injected :class:`~reconciler.ports.Clock`
  (with the simulated fleet this advances simulated time, so the world moves on while the call is
  "in flight"; with the real clock it sleeps).

Calls are numbered from 1 in the order they are made (``calls``); writes are the port methods that
change the cluster (:data:`WRITE_METHODS`), each one API request. ``injected`` lists every fault
that fired, so a sweep can report how many faults it injected.

Errors carry the same type, HTTP status and reason as :func:`reconciler.adapters.kube.api.translate_api_error`
gives for the real answer, so the executor cannot tell an injected error from a real one.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from reconciler.errors import (
    ClusterError,
    ConflictError,
    CrashInjected,
    ForbiddenError,
    NotFoundError,
    ServerError,
    TooManyRequestsError,
    TransientError,
)
from reconciler.model.observed import NodeInfo, PdbInfo, PodInfo
from reconciler.model.selector import Taint
from reconciler.ports import (
    Clock,
    Cluster,
    ClusterPorts,
    LeaseInfo,
    LeaseSpec,
    PodEviction,
    StageSpec,
    StageStatus,
    evict_one_by_one,
)

FaultKind = Literal[
    "conflict", "throttle", "server", "unavailable", "timeout", "reset", "forbidden", "notfound", "invalid"
]

#: Every fault kind, in a stable order (for sweeps and reports).
FAULT_KINDS: tuple[FaultKind, ...] = (
    "conflict", "throttle", "server", "unavailable", "timeout", "reset", "forbidden", "notfound", "invalid",
)

#: Port methods that change the cluster (one API request each).
WRITE_METHODS = frozenset({
    "patch_node", "set_node_condition", "evict_pod", "start_stage", "delete_stages",
    "emit_event", "create_lease", "replace_lease", "delete_lease",
})

#: Port methods that only read.
READ_METHODS = frozenset({
    "list_nodes", "get_node", "list_pods", "pods_by_node", "get_pod", "list_pdbs", "daemonset_exists",
    "stage_status", "get_lease",
})


def make_error(kind: FaultKind, what: str, *, retry_after: float | None = None) -> ClusterError:
    """The error an adapter raises for ``kind`` on the call described by ``what`` (e.g.
    ``patch node n1``): same class, HTTP status and reason as the kube adapter's translation.

    ``retry_after`` (seconds) is set on 429 and 503 answers when given (the server's Retry-After).
    """
    if kind == "conflict":
        return ConflictError(
            f"{what}: Operation cannot be fulfilled: the object has been modified; please apply your changes "
            "to the latest version and try again (injected)", 409, "Conflict")
    if kind == "throttle":
        return TooManyRequestsError(f"{what}: the server has received too many requests and has asked us to try "
                                    "again later (injected)", retry_after=retry_after)
    if kind == "server":
        return ServerError(f"{what}: Internal error occurred: etcdserver: request timed out (injected)", 500,
                           "InternalError")
    if kind == "unavailable":
        return TransientError(f"{what}: the server is currently unable to handle the request (injected)", 503,
                              "ServiceUnavailable", retry_after)
    if kind == "timeout":
        return TransientError(f"{what}: ReadTimeoutError: Read timed out. (read timeout=30) (injected)", 0,
                              "Unavailable")
    if kind == "reset":
        return TransientError(f"{what}: ProtocolError: ('Connection aborted.', ConnectionResetError(104, "
                              "'Connection reset by peer')) (injected)", 0, "Unavailable")
    if kind == "forbidden":
        return ForbiddenError(f"{what}: forbidden (injected)", 403, "Forbidden")
    if kind == "notfound":
        return NotFoundError(f"{what}: not found (injected)", 404, "NotFound")
    if kind == "invalid":
        return ClusterError(f"{what}: Pod is invalid: spec.initContainers[1].env[0].name: Invalid value (injected)",
                            422, "Invalid")
    raise ValueError(f"unknown fault kind {kind!r}")


@dataclass
class Fault:
    """One injection rule.

    Matching: ``verb`` is an fnmatch pattern on the port method name (``patch_node``,
    ``evict_pod``, ``*_lease``...) or one of ``"write"``, ``"read"``, ``"*"``; ``target`` an fnmatch
    pattern on the call's target (``node/<name>``, ``pod/<ns>/<name>``,
    ``stage/<node>/<package>/<stage>``, ``stages/<recipe>/<node>``, ``pods/<node>``, ``pods/*``,
    ``pdbs``, ``nodes``, ``daemonset/<ns>/<name>``, ``lease/<name>``).

    Firing: with ``nth`` the rule fires on the ``nth`` matching call (1-based) and then ``times -
    1`` more matching calls; without it, on every matching call up to ``times`` (None: no limit).
    ``error`` None makes a delay-only rule. ``after``: the call is made first and its answer
    replaced by the error (writes applied, answer lost); when the call itself fails, the rule waits
    for the next matching call. ``delay``: clock seconds spent before the
    call (a delay-only rule never fails the call). ``for_seconds``: once the rule first fires, it
    fires on every matching call for that many clock seconds (an outage measured in time, as a
    real one is; ``times`` is then ignored).
    """

    error: FaultKind | None = None
    verb: str = "*"
    target: str = "*"
    nth: int | None = None
    times: int | None = 1
    after: bool = False
    delay: float = 0.0
    retry_after: float | None = None
    for_seconds: float | None = None
    matched: int = field(default=0, init=False)
    first_fired_at: float | None = field(default=None, init=False)
    fired: int = field(default=0, init=False)

    def matches(self, verb: str, target: str) -> bool:
        """Whether a call of ``verb`` on ``target`` is one this rule looks at."""
        if self.verb == "write":
            ok = verb in WRITE_METHODS
        elif self.verb == "read":
            ok = verb in READ_METHODS
        else:
            ok = fnmatch.fnmatchcase(verb, self.verb)
        return ok and fnmatch.fnmatchcase(target, self.target)

    def fires(self, verb: str, target: str, now: float = 0.0) -> bool:
        """Count the call if it matches; True when the rule fires on it (``now``: clock seconds,
        for ``for_seconds``)."""
        if not self.matches(verb, target):
            return False
        self.matched += 1
        if self.for_seconds is not None and self.first_fired_at is not None:
            if now >= self.first_fired_at + self.for_seconds:
                return False
            self.fired += 1
            return True
        if self.times is not None and self.fired >= self.times and self.for_seconds is None:
            return False
        if self.nth is not None and self.matched < self.nth:
            return False
        self.fired += 1
        if self.first_fired_at is None:
            self.first_fired_at = now
        return True


@dataclass(frozen=True)
class Call:
    """One call through :class:`FaultyCluster`: 1-based ``n``, whether it is a write, the port
    method, its target and what happened (``ok``, ``failed:<kind>``, ``failed-after:<kind>``,
    ``error:<class>`` for a real error of the wrapped adapter, ``crash``); ``at`` the clock's
    monotonic reading when the call was made (None without a clock), so a test can see *when*
    calls happened through the decorator instead of patching the adapter."""

    n: int
    write: bool
    verb: str
    target: str
    outcome: str
    at: float | None = None


class FaultyCluster:
    """A ``Cluster`` that forwards every call to ``inner`` and injects faults (module docstring).

    Args:
        inner: the adapter to wrap (``SimFleet``, ``KubeCluster``, or another wrapper), or a
            role bundle (:class:`~reconciler.ports.ClusterPorts`); every role goes through this
            one decorator (``ClusterPorts.of(faulty)``).
        clock: clock for delays (defaults to ``inner`` when it is also a clock, as the simulated
            fleet is).
        faults: the rules, tried in order; the first that fires on a call decides its error.
        crash_after_writes: raise ``CrashInjected`` right after this many successful writes.
        before, after: hooks by port method name, called with the call's own arguments on the
            calling thread — ``before`` ahead of the request (when no fault failed it first),
            ``after`` once it succeeded. They let a test make the world move on around a call
            (an admin uncordons the node right after an eviction) or watch the calls (their
            arguments, thread, clock time), through the port instead of patching the adapter.

    Attributes: ``writes`` (successful writes so far), ``calls`` (every :class:`Call`),
    ``injected`` (the calls a fault fired on, as :class:`Call`), ``delayed`` (clock seconds of
    injected delay).
    """

    def __init__(
        self,
        inner: Cluster | ClusterPorts,
        *,
        clock: Clock | None = None,
        faults: Sequence[Fault] = (),
        crash_after_writes: int | None = None,
        before: Mapping[str, Callable[..., object]] | None = None,
        after: Mapping[str, Callable[..., object]] | None = None,
    ) -> None:
        self.inner = inner
        self.before = dict(before or {})
        self.after = dict(after or {})
        self.roles = ClusterPorts.of(inner)
        self.clock: Clock | None = clock if clock is not None else (inner if _is_clock(inner) else None)  # type: ignore[assignment]
        self.faults = list(faults)
        self.crash_after_writes = crash_after_writes
        self.writes = 0
        self.calls: list[Call] = []
        self.injected: list[Call] = []
        self.delayed = 0.0

    # ------------------------------------------------------------------ machinery
    def _delay(self, seconds: float) -> None:
        if seconds <= 0 or self.clock is None:
            return
        end = self.clock.now() + seconds
        while self.clock.now() < end:
            self.clock.wait(end - self.clock.now())
        self.delayed += seconds

    def _call(self, verb: str, target: str, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` (the wrapped role's method) with the faults, hooks and records."""
        write = verb in WRITE_METHODS
        n = len(self.calls) + 1
        at = self.clock.now() if self.clock is not None else None
        fault: Fault | None = None
        for f in self.faults:
            if f.fires(verb, target, at if at is not None else 0.0):
                if f.delay:
                    self._delay(f.delay)
                if f.error is not None:
                    fault = f
                    break
        if fault is not None and not fault.after:
            assert fault.error is not None
            call = Call(n, write, verb, target, f"failed:{fault.error}", at)
            self.calls.append(call)
            self.injected.append(call)
            raise make_error(fault.error, what, retry_after=fault.retry_after)
        before, after = self.before.get(verb), self.after.get(verb)
        if before is not None:
            before(*args, **kwargs)
        try:
            out = fn(*args, **kwargs)
        except ClusterError as e:
            self.calls.append(Call(n, write, verb, target, f"error:{type(e).__name__}", at))
            if fault is not None:  # an "after" fault needs an answer to lose: it fires on the next match
                fault.fired -= 1
            raise
        if write:
            self.writes += 1
        if fault is not None:
            assert fault.error is not None
            call = Call(n, write, verb, target, f"failed-after:{fault.error}", at)
            self.calls.append(call)
            self.injected.append(call)
            self._maybe_crash()
            raise make_error(fault.error, what, retry_after=fault.retry_after)
        self.calls.append(Call(n, write, verb, target, "ok", at))
        if after is not None:
            after(*args, **kwargs)
        self._maybe_crash()
        return out

    def _maybe_crash(self) -> None:
        if self.crash_after_writes is not None and self.writes >= self.crash_after_writes and self.calls and (
            self.calls[-1].write
        ):
            last = self.calls[-1]
            self.calls[-1] = Call(last.n, last.write, last.verb, last.target, last.outcome + "+crash", last.at)
            raise CrashInjected(f"injected crash after write {self.writes} ({last.verb} {last.target})")

    @property
    def write_calls(self) -> list[Call]:
        """The write calls made so far (successful or not)."""
        return [c for c in self.calls if c.write]

    # ------------------------------------------------------------------ reads
    def list_nodes(self, *, unschedulable_only: bool = False) -> list[NodeInfo]:
        """Forwarded ``NodePort.list_nodes``."""
        out: list[NodeInfo] = self._call(
            "list_nodes", "nodes", "list unschedulable nodes" if unschedulable_only else "list nodes",
            self.roles.nodes.list_nodes, unschedulable_only=unschedulable_only,
        )
        return out

    def get_node(self, name: str) -> NodeInfo:
        """Forwarded ``Cluster.get_node``."""
        out: NodeInfo = self._call("get_node", f"node/{name}", f"get node {name}",
                                   self.roles.nodes.get_node, name)
        return out

    def list_pods(self, node_name: str | None = None) -> list[PodInfo]:
        """Forwarded ``Cluster.list_pods``."""
        out: list[PodInfo] = self._call("list_pods", f"pods/{node_name or '*'}", f"list pods on {node_name}",
                                        self.roles.pods.list_pods, node_name)
        return out

    def pods_by_node(self) -> Mapping[str, tuple[PodInfo, ...]]:
        """Forwarded ``PodPort.pods_by_node`` (target ``pods/*``, as listing every pod)."""
        out: Mapping[str, tuple[PodInfo, ...]] = self._call("pods_by_node", "pods/*", "list pods",
                                                            self.roles.pods.pods_by_node)
        return out

    def get_pod(self, namespace: str, name: str) -> PodInfo | None:
        """Forwarded ``Cluster.get_pod``."""
        out: PodInfo | None = self._call("get_pod", f"pod/{namespace}/{name}", f"get pod {namespace}/{name}",
                                         self.roles.pods.get_pod, namespace, name)
        return out

    def list_pdbs(self) -> list[PdbInfo]:
        """Forwarded ``Cluster.list_pdbs``."""
        out: list[PdbInfo] = self._call("list_pdbs", "pdbs", "list poddisruptionbudgets", self.roles.pods.list_pdbs)
        return out

    def daemonset_exists(self, namespace: str, name: str) -> bool:
        """Forwarded ``Cluster.daemonset_exists``."""
        out: bool = self._call("daemonset_exists", f"daemonset/{namespace}/{name}", f"get daemonset {namespace}/{name}",
                               self.roles.pods.daemonset_exists, namespace, name)
        return out

    def stage_status(self, spec: StageSpec, *, log: bool = False) -> StageStatus:
        """Forwarded ``Cluster.stage_status``."""
        out: StageStatus = self._call("stage_status", _stage_target(spec), f"get pod {spec.pod_name}",
                                      self.roles.stages.stage_status, spec, log=log)
        return out

    def get_lease(self, name: str) -> LeaseInfo | None:
        """Forwarded ``Cluster.get_lease``."""
        out: LeaseInfo | None = self._call("get_lease", f"lease/{name}", f"get lease {name}",
                                           self.roles.leases.get_lease, name)
        return out

    # ------------------------------------------------------------------ writes
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
        """Forwarded ``Cluster.patch_node``."""
        out: NodeInfo = self._call(
            "patch_node", f"node/{name}", f"patch node {name}",
            self.roles.nodes.patch_node, name, annotations=annotations, labels=labels, unschedulable=unschedulable,
            taints=taints, resource_version=resource_version, uid=uid,
        )
        return out

    def set_node_condition(self, name: str, type_: str, status: str, reason: str, message: str) -> None:
        """Forwarded ``Cluster.set_node_condition``."""
        self._call("set_node_condition", f"node/{name}", f"set condition {type_} on node {name}",
                   self.roles.nodes.set_node_condition, name, type_, status, reason, message)

    def remove_node_conditions(self, name: str, types: Sequence[str]) -> None:
        """Forwarded ``Cluster.remove_node_conditions``."""
        self._call("remove_node_conditions", f"node/{name}", f"remove conditions {', '.join(types)} of node {name}",
                   self.roles.nodes.remove_node_conditions, name, types)

    def evict_pods(self, evictions: Sequence[PodEviction]) -> list[ClusterError | None]:
        """Forwarded ``Cluster.evict_pods``, one pod per call (:meth:`evict_pod`), so faults and
        hooks apply to each eviction (verb ``evict_pod``, target ``pod/<namespace>/<name>``)."""
        return evict_one_by_one(self.evict_pod, evictions)

    def evict_pod(self, namespace: str, name: str, uid: str, grace_seconds: int | None) -> None:
        """One eviction (verb ``evict_pod``), forwarded as ``evict_pods`` of that pod alone;
        raises its error."""
        def one(*_: object) -> None:
            err = self.roles.pods.evict_pods([PodEviction(namespace, name, uid, grace_seconds)])[0]
            if err is not None:
                raise err

        self._call("evict_pod", f"pod/{namespace}/{name}", f"evict pod {namespace}/{name}",
                   one, namespace, name, uid, grace_seconds)

    def start_stage(self, spec: StageSpec) -> None:
        """Forwarded ``Cluster.start_stage``."""
        self._call("start_stage", _stage_target(spec), f"create stage pod {spec.pod_name}",
                   self.roles.stages.start_stage, spec)

    def lifecycles(self) -> set[str]:
        """Forwarded ``Cluster.lifecycles``."""
        out: set[str] = self._call("lifecycles", "run/*", "list run owners", self.roles.stages.lifecycles)
        return out

    def end_run(self, run_id: str, *, if_unused: bool = False) -> None:
        """Forwarded ``Cluster.end_run``."""
        self._call("end_run", f"run/{run_id}", f"end run {run_id}", self.roles.stages.end_run, run_id,
                   if_unused=if_unused)

    def delete_stage(self, spec: StageSpec) -> None:
        """Forwarded ``Cluster.delete_stage``."""
        self._call("delete_stage", f"stage/{spec.node}/{spec.package}/{spec.stage}", f"delete pod {spec.pod_name}",
                   self.roles.stages.delete_stage, spec)

    def delete_stages(self, recipe: str, node: str) -> None:
        """Forwarded ``Cluster.delete_stages``."""
        self._call("delete_stages", f"stages/{recipe}/{node}", f"delete stage pods of {recipe} on {node}",
                   self.roles.stages.delete_stages, recipe, node)

    def emit_event(self, node: str, reason: str, message: str, type_: str = "Normal") -> None:
        """Forwarded ``Cluster.emit_event``."""
        self._call("emit_event", f"node/{node}", f"create event {reason} on node {node}",
                   self.roles.events.emit_event, node, reason, message, type_)

    def create_lease(self, name: str, spec: LeaseSpec) -> LeaseInfo:
        """Forwarded ``LeaseStore.create_lease``."""
        out: LeaseInfo = self._call("create_lease", f"lease/{name}", f"create lease {name}",
                                    self.roles.leases.create_lease, name, spec)
        return out

    def replace_lease(self, name: str, spec: LeaseSpec, resource_version: str) -> LeaseInfo:
        """Forwarded ``LeaseStore.replace_lease``."""
        out: LeaseInfo = self._call("replace_lease", f"lease/{name}", f"update lease {name}",
                                    self.roles.leases.replace_lease, name, spec, resource_version)
        return out

    def delete_lease(self, name: str, resource_version: str) -> None:
        """Forwarded ``LeaseStore.delete_lease``."""
        self._call("delete_lease", f"lease/{name}", f"delete lease {name}",
                   self.roles.leases.delete_lease, name, resource_version)


def _stage_target(spec: StageSpec) -> str:
    return f"stage/{spec.node}/{spec.package}/{spec.stage}"


def _is_clock(obj: object) -> bool:
    return callable(getattr(obj, "now", None)) and callable(getattr(obj, "wait", None))

"""The simulated fleet: an in-process ``Cluster`` and ``Clock`` (the embedded default, unit tests
and what-if runs).

Loaded from plain Kubernetes objects — a ``v1 List`` or multi-document YAML of Nodes, Pods,
PodDisruptionBudgets (and optionally DaemonSets) exactly as ``kubectl get nodes,pods,pdb -A -o yaml``
prints them — so a user can snapshot a real cluster and plan or rehearse against it offline.

Behaviour (rules in :mod:`reconciler.adapters.simconfig`), all on a simulated clock that jumps
from event to event (a 10,000-second rollout takes well under a second):

* stage pods run ``stageSeconds`` and exit 0, or fail as injected (exit code, image pull);
* a reboot interrupt takes the node NotReady and back with a new bootID after ``rebootSeconds``
  (never, for ``neverReturns`` nodes); other interrupts take ``interruptSeconds``;
* the Eviction API follows kube-apiserver and the disruption controller, with the rules written
  once in :mod:`reconciler.model.disruption` (also used by the plan's warnings): PDB status from
  healthy pods (Ready, not terminating), ``minAvailable``/``maxUnavailable`` int or percent
  (rounded up), ``unhealthyPodEvictionPolicy`` (IfHealthyBudget, the default, and AlwaysAllow)
  for pods that are not Ready, 429 when the budget allows no disruption, 500 when several PDBs
  select the pod, UID preconditions (409), no budget check for pods Pending, Succeeded, Failed or
  already terminating;
* evicted pods terminate after their grace period (capped by ``maxTerminationSeconds``); pods of a
  ReplicaSet/StatefulSet/Job controller are recreated on another schedulable node after
  ``rescheduleSeconds`` and become Ready ``podStartSeconds`` later; DaemonSet pods are never moved;
* the simulated scheduler binds a re-created pod to the schedulable node (not cordoned, Ready not
  False, taints tolerated) with the fewest pods, then by name; indexes
  (:mod:`reconciler.adapters.simindex`) keep every step independent of the fleet's size;
* pods with ``spec.activeDeadlineSeconds`` end (Succeeded) that many seconds after
  ``status.startTime`` (or after the start of the simulation);
* ``crash_after=N`` raises :class:`~reconciler.errors.CrashInjected` right after the N-th write.

``save(path)`` writes the fleet back in the same kubectl YAML form so a later run continues from it.
"""

from __future__ import annotations

import copy
import heapq
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from dataclasses import field as dc_field
from functools import partial
from typing import Any

from reconciler.adapters.kubeobjects import format_time, parse_time, pod_from
from reconciler.adapters.simconfig import SimConfig
from reconciler.adapters.simindex import FleetIndex
from reconciler.adapters.simsaved import CLOCK_NAME, SIM_ANN, STAGE_NS, parse_clock
from reconciler.errors import (
    ConflictError,
    CrashInjected,
    LeaseHeldError,
    NotFoundError,
    ServerError,
    TooManyRequestsError,
)
from reconciler.model.disruption import EvictionAnswer, eviction_answer
from reconciler.model.observed import NodeInfo, PdbInfo, PodInfo
from reconciler.model.selector import Taint
from reconciler.ports import StageSpec, StageStatus

Obj = dict[str, Any]
KINDS = ("Node", "Pod", "PodDisruptionBudget", "DaemonSet", "ConfigMap")
# SIM_ANN (the annotation carrying the simulation's pending timers on saved objects, so a saved
# fleet resumes), CLOCK_NAME and STAGE_NS live in reconciler.adapters.simsaved with their checks.
RECREATED_BY = ("ReplicaSet", "StatefulSet", "ReplicationController", "Job")


@dataclass(frozen=True)
class SimLease:
    """A Lease in the simulated fleet (the ``reconciler.ports.LeaseInfo`` shape); epoch seconds."""

    name: str
    holder: str
    duration_seconds: int
    acquired: float | None
    renewed: float | None
    transitions: int
    resource_version: str
    wall: Callable[[], float] | None = dc_field(default=None, compare=False, repr=False)

    def expires_in(self, now: float | None = None) -> float:
        """Seconds until expiry at epoch ``now`` (default: the fleet's simulated time; negative: expired)."""
        base = self.renewed or self.acquired or 0.0
        if now is None:
            now = self.wall() if self.wall is not None else base
        return base + self.duration_seconds - now


class SimFleet:
    """In-process simulated cluster implementing ``reconciler.ports.Cluster`` and ``Clock``.

    Args:
        objects: raw Kubernetes object dicts (Nodes, Pods, PDBs, DaemonSets); others are ignored.
            Trusted: :meth:`from_file` validates a file's objects before they get here.
        config: behaviour; defaults as in :class:`SimConfig`.
        crash_after: raise ``CrashInjected`` right after this many writes (None: never); every
            write counts — node patches and conditions, events, evictions, stage pods, Lease
            acquire/renew/release, ConfigMap patches.
        copy_objects: copy ``objects`` (False: take ownership of them, as :meth:`from_file` does).

    ``save_on_crash`` (a path, default None): when set, the fleet as the crash left it is saved
    there right before ``CrashInjected`` is raised, wherever the write happened (``--sim-save``
    with ``--sim-crash-after``), so the next run can resume from it.
    """

    def __init__(self, objects: list[Obj], config: SimConfig | None = None, crash_after: int | None = None,
                 *, copy_objects: bool = True):
        self._copy_objects = copy_objects
        self.config = config or SimConfig()
        self.crash_after = crash_after
        self.save_on_crash: str | None = None
        self.writes = 0
        self.mono_offset = 0.0  # see now(): the origin of this "process's" monotonic clock
        self.calls: list[tuple[str, str]] = []  # (verb, target) of every write, for tests
        self.nodes: dict[str, Obj] = {}
        self.pods: dict[tuple[str, str], Obj] = {}
        self.pdbs: dict[tuple[str, str], Obj] = {}
        self.daemonsets: set[tuple[str, str]] = set()
        self.config_maps: dict[tuple[str, str], Obj] = {}  # ConfigMapStore (recipe controls), saved with the fleet
        self.events: list[Obj] = []
        self._stages: dict[str, Obj] = {}
        self.stage_log: list[tuple[float, str, str, str, str, str]] = []  # (t, event, node, package, version, stage)
        self._failures_used: dict[int, int] = {}
        self._queue: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0
        self._uid = 0
        self._rv = 0
        self._now = 0.0
        self._saved_clock: Obj | None = None
        self._saved_stages: list[Obj] = []
        self.leases: dict[str, SimLease] = {}  # in memory only: a saved fleet carries no lease
        for obj in objects:
            self._add(obj)
        self._assign_resource_versions()
        self._index = FleetIndex(self.nodes, self.pods, self.pdbs)
        self.epoch: float
        if self._saved_clock is not None:
            now, uids = parse_clock(self._saved_clock)
            self.epoch = now
            self._uid = max(self._uid, uids)
        else:
            start = parse_time(self.config.startTime) if self.config.startTime else None
            self.epoch = start if start is not None else self._newest_timestamp()
        self._schedule_deadlines()
        self._restore_timers()

    def _assign_resource_versions(self) -> None:
        """Every object of a fake API server has a resourceVersion: keep the snapshot's (numeric, as
        Kubernetes writes them), give the others new ones above the highest, so a conditional write
        decided from a read always has a version to compare. One pass; linear in objects."""
        highest = self._rv
        missing: list[Obj] = []
        for group in (self.nodes, self.pods, self.pdbs, self.config_maps):
            for o in group.values():
                meta = o.get("metadata")
                rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
                if isinstance(rv, str) and rv.isdigit() and len(rv) < 20:
                    n = int(rv)
                    if n > highest:
                        highest = n
                else:
                    missing.append(o)
        self._rv = highest
        for o in missing:
            o.setdefault("metadata", {})
            self._bump(o)

    # ---------------------------------------------------------------- loading / saving
    @classmethod
    def from_file(cls, path: str, config: SimConfig | None = None, crash_after: int | None = None) -> SimFleet:
        """Load a fleet from a snapshot file: kubectl JSON or YAML (a ``List``, several documents)
        or a fleet saved by :meth:`save`; every object and the saved simulation state validated
        first (:mod:`reconciler.load.snapshot`, :mod:`reconciler.adapters.simsaved`).

        Raises:
            InputError: unreadable, malformed or invalid file, positioned (file:line:column, object, field).
        """
        from reconciler.adapters.simsaved import check_saved_state
        from reconciler.load.snapshot import load_snapshot
        from reconciler.load.snapshotfile import paused_gc

        with paused_gc():
            snap = load_snapshot(path)
            check_saved_state(snap)
            return cls(snap.objects, config, crash_after, copy_objects=False)

    def to_objects(self, *, copy_objects: bool = True) -> list[Obj]:
        """Every object, as Kubernetes dicts, nodes first then pods and PDBs (sorted by name), then
        the stage pods and a ConfigMap holding the simulated clock, so :meth:`from_file` resumes
        the simulation where it stopped (pending reboots, terminations and stages included).
        ``copy_objects=False`` returns the fleet's own dicts (for writing them out at once)."""
        out: list[Obj] = [self.nodes[k] for k in sorted(self.nodes)]
        out += [self.pods[k] for k in sorted(self.pods)]
        out += [self.pdbs[k] for k in sorted(self.pdbs)]
        out += [self.config_maps[k] for k in sorted(self.config_maps)]
        if copy_objects:
            out = copy.deepcopy(out)
        cms = out[len(out) - len(self.config_maps):]
        del out[len(out) - len(self.config_maps):]
        for name in sorted(self._stages):
            out.append(self._stage_object(name, self._stages[name]))
        out += cms
        out.append({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": CLOCK_NAME[0], "name": CLOCK_NAME[1]},
            "data": {"now": repr(self.wall()), "uids": str(self._uid)},
        })
        return out

    def _stage_object(self, name: str, rec: Obj) -> Obj:
        spec: StageSpec = rec["spec"]
        state = {
            "recipe": spec.recipe, "package": spec.package, "version": spec.version, "stage": spec.stage,
            "runId": spec.run_id, "attempt": spec.attempt, "pullRef": spec.pull_ref,
            "interrupt": spec.interrupt.type if spec.interrupt else None,
            "interruptServices": list(spec.interrupt.services) if spec.interrupt else [],
            "phase": rec["phase"], "exit": rec["exit"], "reason": rec["reason"], "log": rec["log"],
            "started": self.epoch + rec["started"], "doneAt": rec.get("done_at"),
            "pendingExit": rec.get("pending_exit", 0), "pendingReason": rec.get("pending_reason", ""),
            "pendingLog": rec.get("pending_log", ""),
        }
        return {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": STAGE_NS, "name": name,
                         "labels": {"app.kubernetes.io/managed-by": "node-reconciler"},
                         "annotations": {SIM_ANN: json.dumps(state, sort_keys=True)}},
            "spec": {"nodeName": spec.node, "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]},
        }

    def _restore_timers(self) -> None:
        from reconciler.model.recipe import Interrupt

        for obj in self._saved_stages:
            st = json.loads(obj["metadata"]["annotations"][SIM_ANN])
            spec = StageSpec(
                recipe=st["recipe"], node=obj["spec"]["nodeName"], package=st["package"], version=st["version"],
                stage=st["stage"], pull_ref=st.get("pullRef", ""), run_id=st["runId"], attempt=int(st["attempt"]),
                interrupt=Interrupt(type=st["interrupt"], services=tuple(st.get("interruptServices") or ()))
                if st.get("interrupt") else None,
            )
            rec: Obj = {"spec": spec, "phase": st["phase"], "started": float(st["started"]) - self.epoch,
                        "exit": st["exit"], "reason": st["reason"], "log": st["log"], "done_at": st.get("doneAt")}
            self._stages[spec.pod_name] = rec
            if rec["phase"] == "running" and st.get("doneAt") is not None and st.get("interrupt") == "reboot":
                self._at(max(self._now, float(st["doneAt"]) - self.epoch),
                         partial(self._reboot_down, spec.node, spec.pod_name))
            elif rec["phase"] == "running" and st.get("doneAt") is not None:
                out = (int(st.get("pendingExit", 0)), st.get("pendingReason", ""), st.get("pendingLog", ""))
                rec.update(pending_exit=out[0], pending_reason=out[1], pending_log=out[2])
                self._at(max(self._now, float(st["doneAt"]) - self.epoch),
                         partial(self._stage_done, spec.pod_name, *out))
        for name, node in self.nodes.items():
            up = ((node["metadata"].get("annotations") or {}).get(SIM_ANN))
            if up:
                at = float(json.loads(up).get("rebootUpAt", 0)) - self.epoch
                self._at(max(self._now, at), partial(self._reboot_up, name))
        for key, pod in self.pods.items():
            ann = (pod["metadata"].get("annotations") or {}).get(SIM_ANN)
            if not ann:
                continue
            timers = json.loads(ann)
            uid = pod["metadata"]["uid"]
            if "removeAt" in timers:
                self._at(max(self._now, float(timers["removeAt"]) - self.epoch), partial(self._remove_pod, key, uid))
            if "startAt" in timers:
                self._at(max(self._now, float(timers["startAt"]) - self.epoch), partial(self._start_pod, key, uid))

    @staticmethod
    def _set_timer(obj: Obj, **timers: float | None) -> None:
        ann = obj["metadata"].setdefault("annotations", {}) or {}
        obj["metadata"]["annotations"] = ann
        cur = json.loads(ann.get(SIM_ANN, "{}"))
        for k, v in timers.items():
            if v is None:
                cur.pop(k, None)
            else:
                cur[k] = v
        if cur:
            ann[SIM_ANN] = json.dumps(cur, sort_keys=True)
        else:
            ann.pop(SIM_ANN, None)
            if not ann:
                del obj["metadata"]["annotations"]

    def save(self, path: str) -> None:
        """Write the fleet as a ``v1 List`` (simulated time written into the objects' timestamps, so
        a later run continues from it): JSON when ``path`` ends in ``.json``, else YAML; both through
        C encoders (:func:`reconciler.adapters.simwrite.write_list`), replacing ``path`` atomically."""
        from reconciler.adapters.simwrite import write_list

        write_list(path, self.to_objects(copy_objects=False))

    def _add(self, obj: Obj) -> None:
        kind = obj.get("kind")
        if kind not in KINDS:
            return
        if self._copy_objects:
            obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if kind == "ConfigMap":
            if (meta.get("namespace"), meta.get("name")) == CLOCK_NAME:
                self._saved_clock = dict(obj.get("data") or {})
            else:
                self.config_maps[(meta.get("namespace") or "default", meta["name"])] = obj
            return
        if kind == "Pod" and SIM_ANN in (meta.get("annotations") or {}) and meta.get("namespace") == STAGE_NS:
            self._saved_stages.append(obj)
            return
        if kind == "Node":
            self._ensure_uid(meta)
            self.nodes[meta["name"]] = obj
        elif kind == "Pod":
            meta.setdefault("namespace", "default")
            self._ensure_uid(meta)
            self.pods[(meta["namespace"], meta["name"])] = obj
        elif kind == "PodDisruptionBudget":
            meta.setdefault("namespace", "default")
            self.pdbs[(meta["namespace"], meta["name"])] = obj
        else:
            self.daemonsets.add((meta.get("namespace") or "default", meta["name"]))

    def _ensure_uid(self, meta: Obj) -> None:
        """Give an object without a uid a new one; the counter advances either way (uids stay the
        same as when every object drew one)."""
        if "uid" in meta:
            self._uid += 1
        else:
            meta["uid"] = self._new_uid()

    def _newest_timestamp(self) -> float:
        # canonical UTC stamps (2026-11-30T12:00:00Z, as kubectl prints them) order as text: only
        # the newest of those and any other spelling are parsed
        canonical = ""
        newest = 0.0
        for o in [*self.nodes.values(), *self.pods.values()]:
            status = o.get("status") or {}
            for v in (
                (o.get("metadata") or {}).get("creationTimestamp"),
                status.get("startTime"),
                *[c.get("lastTransitionTime") for c in status.get("conditions") or ()],
            ):
                if not v:
                    continue
                if isinstance(v, str) and len(v) == 20 and v[19] == "Z":
                    if v > canonical:
                        canonical = v
                    continue
                t = parse_time(v)
                if t and t > newest:
                    newest = t
        t = parse_time(canonical)
        if t and t > newest:
            newest = t
        return newest or 1767225600.0  # 2026-01-01T00:00:00Z

    def _schedule_deadlines(self) -> None:
        for key, pod in self.pods.items():
            deadline = (pod.get("spec") or {}).get("activeDeadlineSeconds")
            if deadline is None or (pod.get("status") or {}).get("phase") not in ("Running", "Pending"):
                continue
            start = parse_time((pod.get("status") or {}).get("startTime"))
            at = (start - self.epoch if start is not None else 0.0) + float(deadline)
            uid = pod["metadata"]["uid"]
            self._at(max(at, self._now), partial(self._finish_pod, key, uid))

    # ---------------------------------------------------------------- clock
    def now(self) -> float:
        """The monotonic reading: simulated seconds since the start of the simulation plus
        :attr:`mono_offset`. A real process's monotonic clock has an arbitrary origin; set
        ``mono_offset`` (e.g. before resuming a saved fleet) to act as a fresh process on another
        host, which is how tests prove nothing persisted depends on it."""
        return self._now + self.mono_offset

    def utc(self) -> float:
        """UTC epoch seconds of the current simulated instant (the same as :meth:`wall`)."""
        return self.epoch + self._now

    def wait(self, seconds: float) -> None:
        """Advance simulated time to the next event or by ``seconds``, whichever comes first,
        running every event due by then."""
        target = self._now + max(0.0, seconds)
        if self._queue and self._queue[0][0] < target:
            target = self._queue[0][0]
        self._now = max(self._now, target)
        while self._queue and self._queue[0][0] <= self._now:
            _, _, fn = heapq.heappop(self._queue)
            fn()

    def advance(self, seconds: float) -> None:
        """Run the simulation for exactly ``seconds`` (every event due by then)."""
        target = self._now + seconds
        while self._now < target:
            self.wait(target - self._now)

    def wall(self) -> float:
        """Epoch seconds of the current simulated instant."""
        return self.epoch + self._now

    def _at(self, t: float, fn: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (t, self._seq, fn))

    def _new_uid(self) -> str:
        self._uid += 1
        return str(uuid.uuid5(uuid.NAMESPACE_OID, f"sim/{self._uid}"))  # deterministic, varied

    def _write(self, verb: str, target: str) -> None:
        self.writes += 1
        self.calls.append((verb, target))

    def _after_write(self) -> None:
        if self.crash_after is not None and self.writes >= self.crash_after:
            if self.save_on_crash:
                self.save(self.save_on_crash)
            raise CrashInjected(f"simulated crash after {self.writes} writes")

    def _bump(self, obj: Obj) -> str:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        return str(self._rv)

    # ---------------------------------------------------------------- reads
    def list_nodes(self) -> list[NodeInfo]:
        """All nodes."""
        return [self._index.node(k) for k in sorted(self.nodes)]

    def list_unschedulable_nodes(self) -> list[NodeInfo]:
        """Cordoned nodes only."""
        return [n for n in self.list_nodes() if n.unschedulable]

    def get_node(self, name: str) -> NodeInfo:
        """One node. Raises NotFoundError."""
        if name not in self.nodes:
            raise NotFoundError(f"node {name} not found", 404)
        return self._index.node(name)

    def list_pods(self, node_name: str | None = None) -> list[PodInfo]:
        """All pods, or those bound to ``node_name``."""
        keys = sorted(self.pods) if node_name is None else self._index.pods_of_node(node_name)
        return [self._index.pod(k) for k in keys]

    def get_pod(self, namespace: str, name: str) -> PodInfo | None:
        """One pod or None."""
        return self._index.pod((namespace, name)) if (namespace, name) in self.pods else None

    def list_pdbs(self) -> list[PdbInfo]:
        """All PDBs, with status computed like the disruption controller."""
        return [self._refresh_pdb_status(key) for key in sorted(self.pdbs)]

    def daemonset_exists(self, namespace: str, name: str) -> bool:
        """Whether the DaemonSet exists; a fleet file without DaemonSet objects counts every
        DaemonSet that owns a pod as existing (a dump of pods only)."""
        if not self.daemonsets:
            return True
        return (namespace, name) in self.daemonsets

    # ---------------------------------------------------------------- node writes
    def patch_node(
        self,
        name: str,
        *,
        annotations: Mapping[str, str | None] | None = None,
        labels: Mapping[str, str | None] | None = None,
        unschedulable: bool | None = None,
        taints: tuple[Taint, ...] | None = None,
        resource_version: str | None = None,
    ) -> NodeInfo:
        """One write: merge annotations/labels (None removes), set unschedulable and/or taints."""
        if name not in self.nodes:
            raise NotFoundError(f"node {name} not found", 404)
        node = self.nodes[name]
        meta = node["metadata"]
        if resource_version is not None and str(meta.get("resourceVersion", "")) != resource_version:
            raise ConflictError(f"node {name} was modified (resourceVersion {resource_version} is stale)", 409)
        self._write("patch", f"node/{name}")
        for field, patch in (("annotations", annotations), ("labels", labels)):
            if patch:
                cur = meta.setdefault(field, {}) or {}
                meta[field] = cur
                for k, v in patch.items():
                    if v is None:
                        cur.pop(k, None)
                    else:
                        cur[k] = v
        spec = node.setdefault("spec", {})
        if unschedulable is not None:
            if unschedulable:
                spec["unschedulable"] = True
            else:
                spec.pop("unschedulable", None)
        if taints is not None:
            spec["taints"] = [
                {k: v for k, v in (("key", t.key), ("value", t.value), ("effect", t.effect)) if v} for t in taints
            ]
            if not spec["taints"]:
                del spec["taints"]
        self._bump(node)
        self._index.node_changed(name)
        info = self._index.node(name)
        self._after_write()
        return info

    def set_node_condition(self, name: str, type_: str, status: str, reason: str, message: str) -> None:
        """One write: add or replace a node condition by type."""
        if name not in self.nodes:
            raise NotFoundError(f"node {name} not found", 404)
        self._write("patch-status", f"node/{name}")
        conds = self.nodes[name].setdefault("status", {}).setdefault("conditions", [])
        ts = format_time(self.wall())
        new = {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": ts,
            "lastHeartbeatTime": ts,
        }
        for i, c in enumerate(conds):
            if c.get("type") == type_:
                if c.get("status") == status:
                    new["lastTransitionTime"] = c.get("lastTransitionTime", ts)
                conds[i] = new
                break
        else:
            conds.append(new)
        self._bump(self.nodes[name])
        self._index.node_changed(name)
        self._after_write()

    def emit_event(self, node: str, reason: str, message: str, type_: str = "Normal") -> None:
        """One write: record an Event on the node."""
        self._write("create-event", f"node/{node}")
        self.events.append({"node": node, "reason": reason, "message": message, "type": type_, "t": self._now})
        self._after_write()

    # ---------------------------------------------------------------- pods and PDBs
    def _refresh_pdb_status(self, key: tuple[str, str]) -> PdbInfo:
        """The PDB with its status computed now (the disruption controller's rules), also written
        into its object (so a saved fleet carries it)."""
        pdb = self.pdbs[key]
        info = self._index.pdb_info(key)
        pdb["status"] = {
            "currentHealthy": info.current_healthy,
            "desiredHealthy": info.desired_healthy,
            "disruptionsAllowed": info.disruptions_allowed,
            "expectedPods": info.expected_pods,
            "observedGeneration": (pdb["metadata"].get("generation") or 1),
        }
        return info

    def evict_pod(self, namespace: str, name: str, uid: str, grace_seconds: int | None) -> None:
        """One write: the Eviction API (rules: :func:`reconciler.model.disruption.eviction_answer`,
        PDB status: :func:`reconciler.model.disruption.budget_status`).

        Raises:
            NotFoundError: no such pod (404). ConflictError: ``uid`` is not the pod's (409).
            TooManyRequestsError: the PDB allows no disruption now (429, ``disruption_budget``).
            ServerError: more than one PDB selects the pod (500).
        """
        key = (namespace, name)
        pod = self.pods.get(key)
        if pod is None:
            raise NotFoundError(f'pods "{name}" not found', 404)
        if uid and pod["metadata"]["uid"] != uid:
            raise ConflictError(
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: {pod['metadata']['uid']}", 409
            )
        phase = str((pod.get("status") or {}).get("phase") or "Pending")  # the API server defaults it
        terminating = bool(pod["metadata"].get("deletionTimestamp"))
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (pod.get("status") or {}).get("conditions") or ())
        covering = [] if terminating or phase in ("Pending", "Succeeded", "Failed") else [
            self._refresh_pdb_status(k) for k in self._index.pdbs_selecting(key)]
        answer = eviction_answer(phase, terminating, ready, covering)
        if answer is EvictionAnswer.MULTIPLE_BUDGETS:
            raise ServerError(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                500,
            )
        if answer is EvictionAnswer.REFUSED:
            b = covering[0]
            raise TooManyRequestsError(
                "Cannot evict pod as it would violate the pod's disruption budget. "
                f"The disruption budget {b.name} needs {b.desired_healthy} healthy pods "
                f"and has {b.current_healthy} currently",
                disruption_budget=True,
            )
        self._write("evict", f"pod/{namespace}/{name}")
        if not terminating:
            grace = grace_seconds if grace_seconds is not None else int((pod.get("spec") or {}).get(
                "terminationGracePeriodSeconds", 30))
            grace_s = min(float(grace), self.config.maxTerminationSeconds)
            pod["metadata"]["deletionTimestamp"] = format_time(self.wall() + grace)
            self._bump(pod)
            if phase in ("Pending", "Succeeded", "Failed"):
                grace_s = 0.0
            self._set_timer(pod, removeAt=self.wall() + grace_s)
            self._index.pod_changed(key, pod)
            self._at(self._now + grace_s, lambda: self._remove_pod(key, uid or pod["metadata"]["uid"]))
        self._after_write()

    def _remove_pod(self, key: tuple[str, str], uid: str) -> None:
        pod = self.pods.get(key)
        if pod is None or pod["metadata"]["uid"] != uid:
            return
        del self.pods[key]
        self._index.remove_pod(key, pod)
        ctrl = next((o for o in pod["metadata"].get("ownerReferences") or () if o.get("controller")), None)
        if ctrl and ctrl.get("kind") in RECREATED_BY and (pod.get("status") or {}).get("phase") not in (
            "Succeeded",
            "Failed",
        ):
            self._at(self._now + self.config.rescheduleSeconds, lambda: self._recreate(pod, ctrl["kind"]))

    def _recreate(self, old: Obj, kind: str) -> None:
        new = copy.deepcopy(old)
        meta = new["metadata"]
        meta.pop("deletionTimestamp", None)
        self._set_timer(new, removeAt=None)
        meta["uid"] = self._new_uid()
        meta["creationTimestamp"] = format_time(self.wall())
        if kind != "StatefulSet":
            base = meta["name"].rsplit("-", 1)[0] if "-" in meta["name"] else meta["name"]
            meta["name"] = f"{base}-r{self._uid:05d}"
        key = (meta.get("namespace") or "default", meta["name"])
        target = self._index.pick_node(pod_from(new).tolerations)
        spec = new.setdefault("spec", {})
        if target is None:
            spec.pop("nodeName", None)
            new["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]}
            self.pods[key] = new
            self._index.add_pod(key, new)
            self._at(self._now + 30.0, lambda: self._retry_schedule(key, meta["uid"]))
            return
        spec["nodeName"] = target
        new["status"] = {"phase": "Pending", "conditions": []}
        self._set_timer(new, startAt=self.wall() + self.config.podStartSeconds)
        self.pods[key] = new
        self._index.add_pod(key, new)
        uid = meta["uid"]
        self._at(self._now + self.config.podStartSeconds, lambda: self._start_pod(key, uid))

    def _retry_schedule(self, key: tuple[str, str], uid: str) -> None:
        pod = self.pods.get(key)
        if pod is None or pod["metadata"]["uid"] != uid:
            return
        del self.pods[key]
        self._index.remove_pod(key, pod)
        self._recreate(pod, "StatefulSet")  # keep its name

    def _start_pod(self, key: tuple[str, str], uid: str) -> None:
        pod = self.pods.get(key)
        if pod is None or pod["metadata"]["uid"] != uid:
            return
        ts = format_time(self.wall())
        self._set_timer(pod, startAt=None)
        pod["status"] = {
            "phase": "Running",
            "startTime": ts,
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": ts}],
        }
        self._index.pod_changed(key, pod)

    def _finish_pod(self, key: tuple[str, str], uid: str) -> None:
        pod = self.pods.get(key)
        if pod is None or pod["metadata"]["uid"] != uid:
            return
        st = pod.setdefault("status", {})
        if st.get("phase") in ("Succeeded", "Failed"):
            return
        st["phase"] = "Succeeded"
        st["conditions"] = [{"type": "Ready", "status": "False", "reason": "PodCompleted"}]
        self._index.pod_changed(key, pod)

    # ---------------------------------------------------------------- stages
    def _failure_for(self, spec: StageSpec) -> tuple[int, Any] | None:
        for i, f in enumerate(self.config.failures):
            if f.matches(spec.node, spec.package, spec.stage) and self._failures_used.get(i, 0) < f.times:
                return i, f
        return None

    def start_stage(self, spec: StageSpec) -> None:
        """One write: create the stage pod; it runs by the behaviour rules. Existing → no-op."""
        if spec.node not in self.nodes:
            raise NotFoundError(f"node {spec.node} not found", 404)
        if spec.pod_name in self._stages:
            return
        self._write("create-pod", f"pod/{spec.pod_name}")
        rec: Obj = {"spec": spec, "phase": "running", "started": self._now, "exit": None, "reason": "", "log": ""}
        self.stage_log.append((self._now, "start", spec.node, spec.package, spec.version, spec.stage))
        self._stages[spec.pod_name] = rec
        name = spec.pod_name
        if spec.stage in ("interrupt", "uninstall-interrupt") and spec.interrupt is not None:
            if spec.interrupt.type == "reboot":
                rec.update(done_at=self.wall() + 1.0)
                self._at(self._now + 1.0, lambda: self._reboot_down(spec.node, name))
            else:
                rec.update(done_at=self.wall() + self.config.interruptSeconds)
                self._at(self._now + self.config.interruptSeconds, lambda: self._stage_done(name, 0, "", ""))
        else:
            code, reason, log = 0, "", ""
            hit = self._failure_for(spec)
            if hit:
                idx, f = hit
                self._failures_used[idx] = self._failures_used.get(idx, 0) + 1
                code, reason = f.exitCode, f.reason
                log = f.logTail or f"{spec.stage}: simulated failure (exit {f.exitCode})"
            if reason in ("ImagePullBackOff", "ErrImagePull"):
                rec.update(phase="pending", reason=reason)  # never starts
            else:
                delay = self.config.stage_duration(spec.stage)
                rec.update(done_at=self.wall() + delay, pending_exit=code, pending_reason=reason, pending_log=log)
                self._at(self._now + delay, lambda: self._stage_done(name, code, reason, log))
        self._after_write()

    def _stage_done(self, name: str, code: int, reason: str, log: str) -> None:
        rec = self._stages.get(name)
        if rec is None or rec["phase"] != "running":
            return
        rec.update(phase="succeeded" if code == 0 else "failed", exit=code, reason=reason, log=log)
        spec = rec["spec"]
        self.stage_log.append((self._now, rec["phase"], spec.node, spec.package, spec.version, spec.stage))

    def _reboot_down(self, node: str, stage_name: str) -> None:
        n = self.nodes.get(node)
        if n is None:
            return
        if node not in self.config.neverReturns:
            self._set_timer(n, rebootUpAt=self.wall() + self.config.rebootSeconds)
        self._set_ready(n, False, "KubeletNotReady", "simulated reboot")
        rec = self._stages.get(stage_name)
        if rec is not None:  # the interrupt pod dies with the host (exit 143), as on real nodes
            rec.update(phase="failed", exit=143, reason="Error", log="terminated by host shutdown")
        if node in self.config.neverReturns:
            return
        self._at(self._now + self.config.rebootSeconds, lambda: self._reboot_up(node))

    def _reboot_up(self, node: str) -> None:
        n = self.nodes.get(node)
        if n is None:
            return
        self._set_timer(n, rebootUpAt=None)
        info = n.setdefault("status", {}).setdefault("nodeInfo", {})
        info["bootID"] = self._new_uid()
        self._set_ready(n, True, "KubeletReady", "kubelet is posting ready status")

    def _set_ready(self, n: Obj, ready: bool, reason: str, message: str) -> None:
        conds = n.setdefault("status", {}).setdefault("conditions", [])
        ts = format_time(self.wall())
        new = {"type": "Ready", "status": "True" if ready else "False", "reason": reason, "message": message,
               "lastTransitionTime": ts, "lastHeartbeatTime": ts}
        for i, c in enumerate(conds):
            if c.get("type") == "Ready":
                conds[i] = new
                break
        else:
            conds.append(new)
        self._bump(n)
        self._index.node_changed(n["metadata"]["name"])

    def stage_status(self, spec: StageSpec) -> StageStatus:
        """The stage pod's state."""
        rec = self._stages.get(spec.pod_name)
        if rec is None:
            return StageStatus("missing")
        return StageStatus(rec["phase"], rec["exit"], rec["reason"], rec["log"], self.epoch + rec["started"])

    def delete_stage(self, spec: StageSpec) -> None:
        """One write: delete the stage pod (absent is fine: no write)."""
        if spec.pod_name not in self._stages:
            return
        self._write("delete-pod", f"pod/{spec.pod_name}")
        del self._stages[spec.pod_name]
        self._after_write()

    def end_run(self, run_id: str) -> None:
        """Nothing shared to release in the simulated fleet (stage pods go with ``delete_stages``)."""

    def delete_stages(self, recipe: str, node: str) -> None:
        """One write: delete every stage pod of ``recipe`` on ``node``."""
        names = [k for k, v in self._stages.items() if v["spec"].recipe == recipe and v["spec"].node == node]
        if not names:
            return
        self._write("delete-pods", f"pods/{recipe}/{node}")
        for k in names:
            del self._stages[k]
        self._after_write()

    # ---------------------------------------------------------------- leases (reconciler.execute.lock)
    def get_lease(self, name: str) -> SimLease | None:
        """The Lease ``name`` or None (simulated wall time; leases are not saved with the fleet)."""
        return self.leases.get(name)

    def acquire_lease(self, name: str, holder: str, duration_seconds: int) -> SimLease:
        """One write: create the Lease, renew it for its holder, or take it over once expired
        (as ``KubeCluster.acquire_lease``). Raises LeaseHeldError while another holder's lease runs."""
        now = self.wall()
        cur = self.leases.get(name)
        if cur is not None and cur.holder and cur.holder != holder and cur.expires_in(now) > 0:
            raise LeaseHeldError(f"{STAGE_NS}/{name}", cur.holder, cur.expires_in(now))
        taking_over = cur is None or cur.holder != holder
        self._write("create-lease" if cur is None else "update-lease", f"lease/{name}")
        self._rv += 1
        self.leases[name] = SimLease(
            name, holder, duration_seconds,
            acquired=now if taking_over or cur is None else (cur.acquired or now), renewed=now,
            transitions=0 if cur is None else cur.transitions + (1 if taking_over and cur.holder else 0),
            resource_version=str(self._rv), wall=self.wall,
        )
        self._after_write()
        return self.leases[name]

    def renew_lease(self, name: str, holder: str, duration_seconds: int | None = None) -> SimLease:
        """One write: renewTime = now. Raises NotFoundError (no lease), LeaseHeldError (another holder)."""
        cur = self.leases.get(name)
        if cur is None:
            raise NotFoundError(f"lease {STAGE_NS}/{name} does not exist", 404, "NotFound")
        if cur.holder != holder:
            raise LeaseHeldError(f"{STAGE_NS}/{name}", cur.holder or "nobody", cur.expires_in(self.wall()))
        self._write("update-lease", f"lease/{name}")
        self._rv += 1
        self.leases[name] = replace(cur, duration_seconds=duration_seconds or cur.duration_seconds,
                                    renewed=self.wall(), resource_version=str(self._rv))
        self._after_write()
        return self.leases[name]

    def release_lease(self, name: str, holder: str) -> None:
        """One write: delete the Lease if ``holder`` holds it (otherwise nothing)."""
        cur = self.leases.get(name)
        if cur is None or cur.holder != holder:
            return
        self._write("delete-lease", f"lease/{name}")
        del self.leases[name]
        self._after_write()

    # ---------------------------------------------------------------- ConfigMapStore (reconciler.ops.controls)
    def get_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        """The ``data`` of a ConfigMap, or None."""
        cm = self.config_maps.get((namespace, name))
        return None if cm is None else {str(k): str(v) for k, v in (cm.get("data") or {}).items()}

    def patch_config_map(self, namespace: str, name: str, data: Mapping[str, str | None]) -> None:
        """One write: merge ``data`` (None removes a key), creating the ConfigMap when absent."""
        self._write("patch-configmap", f"configmap/{namespace}/{name}")
        cm = self.config_maps.setdefault((namespace, name), {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": namespace, "name": name,
                         "labels": {"app.kubernetes.io/managed-by": "node-reconciler"}},
        })
        cur = cm.setdefault("data", {}) or {}
        cm["data"] = cur
        for k, v in data.items():
            if v is None:
                cur.pop(k, None)
            else:
                cur[k] = v
        self._bump(cm)
        self._after_write()

    # ---------------------------------------------------------------- helpers for tests
    def set_node(self, name: str, **changes: Any) -> None:
        """Test helper (not a write): change a node directly, e.g. ``labels={...}``, ``ready=False``
        or ``taints=[{"key": ..., "value": ..., "effect": ...}]`` (replaces the list)."""
        n = self.nodes[name]
        if "labels" in changes:
            n["metadata"]["labels"] = dict(changes["labels"])
        if "unschedulable" in changes:
            n.setdefault("spec", {})["unschedulable"] = bool(changes["unschedulable"])
        if "ready" in changes:
            self._set_ready(n, bool(changes["ready"]), "Test", "set by test")
        if "taints" in changes:
            n.setdefault("spec", {})["taints"] = [dict(t) for t in changes["taints"]]
        self._bump(n)
        self._index.node_changed(name)

    def delete_node(self, name: str) -> None:
        """Test helper (not a write): the node disappears (scale-in)."""
        self.nodes.pop(name, None)
        self._index.node_changed(name)

    def stage_pods(self) -> dict[str, StageSpec]:
        """Stage pods that exist now, by pod name."""
        return {k: v["spec"] for k, v in self._stages.items()}

    def dump_state(self) -> str:
        """A canonical JSON of nodes and pods (for comparing final states in tests)."""
        return json.dumps(
            {"nodes": [self.nodes[k] for k in sorted(self.nodes)], "pods": sorted(self.pods)},
            sort_keys=True,
            default=str,
        )

"""The simulated fleet: an in-process ``Cluster`` and ``Clock`` (the embedded default, unit tests
and what-if runs).

Loaded from plain Kubernetes objects — a ``v1 List`` or multi-document YAML of Nodes, Pods,
PodDisruptionBudgets (and optionally DaemonSets) exactly as ``kubectl get nodes,pods,pdb -A -o yaml``
prints them — so a user can snapshot a real cluster and plan or rehearse against it offline.

Behaviour (rules in :mod:`reconciler.adapters.sim.config`), all on a simulated clock that jumps
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
* evicted pods terminate after their grace period (capped by ``maxTerminationSeconds``); a
  ReplicaSet/StatefulSet/Job controller replaces each at once with a Pending pod that the scheduler
  binds to another node after ``rescheduleSeconds`` and that is Ready ``podStartSeconds`` later;
  DaemonSet pods are never moved;
* the simulated scheduler binds a re-created pod to the schedulable node (not cordoned, Ready not
  False, taints tolerated) with the fewest pods, then by name; indexes
  (:mod:`reconciler.adapters.sim.index`) keep every step independent of the fleet's size;
* pods with ``spec.activeDeadlineSeconds`` end (Succeeded) that many seconds after
  ``status.startTime`` (or after the start of the simulation);
* ``crash_after=N`` raises :class:`~reconciler.errors.CrashInjected` right after the N-th write.

``save(path)`` writes the fleet back in the same kubectl YAML form so a later run continues from it.

The parts, each a base class of :class:`SimFleet` over the state and primitives of
:class:`reconciler.adapters.sim.core.SimCore`: nodes and events (:mod:`~reconciler.adapters.sim.nodes`),
pods, PDBs, evictions and the scheduler (:mod:`~reconciler.adapters.sim.pods`), stage pods and reboots
(:mod:`~reconciler.adapters.sim.kubelet`), Leases and ConfigMaps (:mod:`~reconciler.adapters.sim.store`),
indexes (:mod:`~reconciler.adapters.sim.index`); this module loads, saves and resumes the fleet.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from functools import partial

from reconciler.adapters.kube.objects import format_time, parse_time
from reconciler.adapters.sim.config import SimConfig
from reconciler.adapters.sim.core import Obj
from reconciler.adapters.sim.index import FleetIndex
from reconciler.adapters.sim.kubelet import SimKubelet
from reconciler.adapters.sim.nodes import SimNodes
from reconciler.adapters.sim.pods import RECREATED_BY, SimPods
from reconciler.adapters.sim.saved import CLOCK_NAME, SIM_ANN, STAGE_NS, parse_clock
from reconciler.adapters.sim.store import SimStore
from reconciler.errors import InputError
from reconciler.fileio.writing import Output
from reconciler.model.utctime import SIM_START_WORDS, sim_start_ok
from reconciler.ports import LeaseInfo, StageSpec

__all__ = ["KINDS", "RECREATED_BY", "SimFleet"]


def _instant(epoch: float) -> str:
    """``epoch`` as RFC 3339 when it is one, else in seconds (a message about an instant out of range)."""
    from datetime import UTC, datetime

    try:
        return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (ValueError, OverflowError, OSError):
        return f"{epoch:.0f} s from 1970-01-01T00:00:00Z"

KINDS = ("Node", "Pod", "PodDisruptionBudget", "DaemonSet", "ConfigMap")
# SIM_ANN (the annotation carrying the simulation's pending timers on saved objects, so a saved
# fleet resumes), CLOCK_NAME and STAGE_NS live in reconciler.adapters.sim.saved with their checks.


class SimFleet(SimNodes, SimPods, SimKubelet, SimStore):
    """In-process simulated cluster implementing ``reconciler.ports.Cluster`` and ``Clock``.

    Args:
        objects: raw Kubernetes object dicts (Nodes, Pods, PDBs, DaemonSets); others are ignored.
            Trusted: :meth:`from_file` validates a file's objects before they get here.
        config: behaviour; defaults as in :class:`SimConfig`.
        crash_after: raise ``CrashInjected`` right after this many writes (None: never); every
            write counts — node patches and conditions, events, evictions, stage pods, Lease
            create/replace/delete, ConfigMap patches.
        copy_objects: copy ``objects`` (False: take ownership of them, as :meth:`from_file` does).
        read_only: the fleet is only read, its clock never advanced (``plan``): the pending timers
            of a saved fleet's nodes and pods and the pods' ``activeDeadlineSeconds`` are not
            scheduled (its stage pods are restored as usual).

    ``save_on_crash`` (a path, default None): when set, the fleet as the crash left it is saved
    there right before ``CrashInjected`` is raised, wherever the write happened (``--sim-save``
    with ``--sim-crash-after``), so the next run can resume from it.
    """

    def __init__(self, objects: list[Obj], config: SimConfig | None = None, crash_after: int | None = None,
                 *, copy_objects: bool = True, read_only: bool = False):
        self._copy_objects = copy_objects
        self._read_only = read_only
        self.config = config or SimConfig()
        self.crash_after = crash_after
        self.save_on_crash: str | Output | None = None
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
        self._pod_parts: dict[tuple[object, ...], Obj] = {}  # see SimKubelet._share_parts
        self.stage_log: list[tuple[float, str, str, str, str, str]] = []  # (t, event, node, package, version, stage)
        self.machine_log_start: dict[str, int] = {}  # node → stage_log index where its machine began (replace_node)
        self.interrupt_log: list[tuple[float, str, str, str]] = []  # (wall t, node, node UID, pod): an interrupt acted
        self._failures_used: dict[int, int] = {}
        self._queue: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0
        self._uid = 0
        self._rv = 0
        self._now = 0.0
        self._saved_clock: Obj | None = None
        self._saved_stages: list[Obj] = []
        self.leases: dict[str, LeaseInfo] = {}  # in memory only: a saved fleet carries no lease
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
            if not sim_start_ok(self.epoch):  # what it computes from there must stay within 0001-9999
                where = ("--sim-config startTime" if start is not None else
                         "the fleet snapshot's newest timestamp (the simulated clock starts there)")
                raise InputError(f"{where} is {self.config.startTime or _instant(self.epoch)}: a simulated "
                                 f"rollout starts {SIM_START_WORDS} (set --sim-config startTime)")
        if not read_only:
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
    def from_file(cls, path: str, config: SimConfig | None = None, crash_after: int | None = None, *,
                  read_only: bool = False) -> SimFleet:
        """Load a fleet from a snapshot file: kubectl JSON or YAML (a ``List``, several documents)
        or a fleet saved by :meth:`save`; every object and the saved simulation state validated
        first (:mod:`reconciler.load.snapshot`, :mod:`reconciler.adapters.sim.saved`).

        ``read_only``: the fleet will only be read (``plan``), never saved nor its clock advanced:
        its objects may hold only the fields the reconciler reads (a JSON dump is then read by
        :mod:`reconciler.load.snapshotfast`) and no timer is scheduled; reads give the same records
        either way.

        Raises:
            InputError: unreadable, malformed or invalid file, positioned (file:line:column, object, field).
        """
        from reconciler.adapters.sim.saved import check_saved_state
        from reconciler.load.snapshot import load_snapshot
        from reconciler.load.snapshotfile import paused_gc

        with paused_gc():
            snap = load_snapshot(path, prune=read_only)
            check_saved_state(snap)
            return cls(snap.objects, config, crash_after, copy_objects=False, read_only=read_only)

    def to_objects(self, *, copy_objects: bool = True) -> list[Obj]:
        """Every object, as Kubernetes dicts, nodes first then pods and PDBs (sorted by name), then
        the stage pods and a ConfigMap holding the simulated clock, so :meth:`from_file` resumes
        the simulation where it stopped (pending reboots, terminations and stages included).
        ``copy_objects=False`` returns the fleet's own dicts (for writing them out at once). PDB
        statuses are computed first, as the disruption controller (which never lags here) would
        have written them: a saved fleet carries the counts of the pods it saves."""
        for key in self.pdbs:
            self._refresh_pdb_status(key)
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
        """The stage Pod as it is, carrying in :data:`SIM_ANN` what resuming needs (its StageSpec
        fields, outcome and pending timer)."""
        spec: StageSpec = rec["spec"]
        st = self.stage_status(spec)
        state = {
            "recipe": spec.recipe, "package": spec.package, "version": spec.version, "stage": spec.stage,
            "runId": spec.run_id, "attempt": spec.attempt, "pullRef": spec.pull_ref,
            "interrupt": spec.interrupt.type if spec.interrupt else None,
            "interruptServices": list(spec.interrupt.services) if spec.interrupt else [],
            "phase": st.phase, "exit": st.exit_code, "reason": st.reason, "log": rec["log"],
            "started": self.epoch + rec["started"], "doneAt": rec.get("done_at"),
            "pendingExit": rec.get("pending_exit", 0), "pendingReason": rec.get("pending_reason", ""),
            "pendingLog": rec.get("pending_log", ""),
        }
        if spec.rerun:
            state["rerun"] = spec.rerun
        pod: Obj = copy.deepcopy(self._pod_with_status(rec))
        pod["metadata"]["annotations"][SIM_ANN] = json.dumps(state, sort_keys=True)
        return pod

    def _restore_timers(self) -> None:
        from reconciler.model.recipe import Interrupt

        for obj in self._saved_stages:
            st = json.loads(obj["metadata"]["annotations"][SIM_ANN])
            spec = StageSpec(
                recipe=st["recipe"], node=obj["spec"]["nodeName"], package=st["package"], version=st["version"],
                stage=st["stage"], pull_ref=st.get("pullRef", ""), run_id=st["runId"], attempt=int(st["attempt"]),
                rerun=int(st.get("rerun", 0)),
                interrupt=Interrupt(type=st["interrupt"], services=tuple(st.get("interruptServices") or ()))
                if st.get("interrupt") else None,
            )
            rec = self._new_stage_pod(spec, started=float(st["started"]) - self.epoch)
            rec.update(log=st["log"], done_at=st.get("doneAt"))
            if st["phase"] != "running":
                self._set_stage(rec, st["phase"], exit_code=st["exit"] or 0, reason=st["reason"])
            if st["phase"] == "running" and st.get("doneAt") is not None and st.get("interrupt") == "reboot":
                self._at(max(self._now, float(st["doneAt"]) - self.epoch),
                         partial(self._reboot_down, spec.node, spec.pod_name))
            elif st["phase"] == "running" and st.get("doneAt") is not None:
                out = (int(st.get("pendingExit", 0)), st.get("pendingReason", ""), st.get("pendingLog", ""))
                rec.update(pending_exit=out[0], pending_reason=out[1], pending_log=out[2])
                self._at(max(self._now, float(st["doneAt"]) - self.epoch),
                         partial(self._stage_done, spec.pod_name, *out))
        if self._read_only:
            return
        for name, node in self.nodes.items():
            up = ((node["metadata"].get("annotations") or {}).get(SIM_ANN))
            if up:
                timers = json.loads(up)
                if "rebootUpAt" in timers:
                    at = float(timers["rebootUpAt"]) - self.epoch
                    self._at(max(self._now, at), partial(self._reboot_up, name))
                if "validateAt" in timers:
                    self._at(max(self._now, float(timers["validateAt"]) - self.epoch),
                             partial(self._validated, name, timers["validateAt"]))
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
            if "scheduleAt" in timers:
                self._at(max(self._now, float(timers["scheduleAt"]) - self.epoch), partial(self._schedule, key, uid))

    def save(self, path: str | Output) -> None:
        """Write the fleet as a ``v1 List`` (simulated time written into the objects' timestamps, so
        a later run continues from it): JSON when ``path`` ends in ``.json``, else YAML; both through
        C encoders (:func:`reconciler.adapters.sim.write.write_list`), through the one output writer
        (a regular file replaced atomically; ``path`` an output the CLI checked before any work).

        Raises:
            InputError, OutputError: the file cannot be written (it is left as it was)."""
        from reconciler.adapters.sim.write import write_list

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

    def replace_node(self, name: str, *, ready: bool = True, unschedulable: bool = False,
                     taints: list[Obj] | None = None, labels: dict[str, str] | None = None) -> str:
        """Test helper (not a write): the machine behind node ``name`` is replaced under the same
        name, as a cloud provider replaces an instance: the Node object is deleted and the new
        machine's kubelet registers it again — a new UID and bootID, a new ``creationTimestamp``,
        none of the old object's annotations (our records went with it), its labels (or
        ``labels``), registered ``ready`` (False: it joins NotReady), ``unschedulable``
        (``--register-unschedulable``) and with ``taints`` (``--register-with-taints``). The pods
        bound to the old node are deleted, as the pod garbage collector deletes the pods of a
        deleted node (their controllers replace them elsewhere); so are its stage pods, and the
        old machine's pending reboot never reaches the new one. Returns the new UID.

        Raises:
            KeyError: no node ``name``.
        """
        old = self.nodes[name]
        meta = old["metadata"]
        self._collect_pods(name)
        uid = self._new_uid()
        new: Obj = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": uid, "creationTimestamp": format_time(self.wall()),
                         "labels": dict(meta.get("labels") or {}) if labels is None else dict(labels)},
            "spec": {k: v for k, v in (old.get("spec") or {}).items() if k == "providerID"},
            "status": {"conditions": [],
                       "nodeInfo": {**((old.get("status") or {}).get("nodeInfo") or {}), "bootID": self._new_uid()}},
        }
        if unschedulable:
            new["spec"]["unschedulable"] = True
        if taints:
            new["spec"]["taints"] = [dict(t) for t in taints]
        self._set_ready(new, ready, "KubeletReady" if ready else "KubeletNotReady", "registered by the new machine")
        self._bump(new)
        self.nodes[name] = new
        self._index.node_changed(name)
        self.machine_log_start[name] = len(self.stage_log)
        return uid

    def delete_node(self, name: str) -> None:
        """Test helper (not a write): the node disappears (scale-in, or its machine terminated), and
        the pod garbage collector deletes the pods bound to it (their controllers replace them
        elsewhere) and its stage pods."""
        if name in self.nodes:
            self._collect_pods(name)
        super().delete_node(name)

    def _collect_pods(self, name: str) -> None:
        """The pod garbage collector's work for a deleted node ``name``: its pods and stage pods go."""
        for key in sorted(self._index.pods_of_node(name)):
            pod = self.pods.get(key)
            if pod is not None:
                self._remove_pod(key, pod["metadata"]["uid"])
        for pod_name in [k for k, v in self._stages.items() if v["spec"].node == name]:
            del self._stages[pod_name]

    def dump_state(self) -> str:
        """A canonical JSON of nodes and pods (for comparing final states in tests)."""
        return json.dumps(
            {"nodes": [self.nodes[k] for k in sorted(self.nodes)], "pods": sorted(self.pods)},
            sort_keys=True,
            default=str,
        )

"""The simulated fleet's pods (:mod:`reconciler.adapters.sim.fleet`): reads, the Eviction API and the
disruption controller (rules in :mod:`reconciler.model.disruption`, counts in
:mod:`reconciler.adapters.sim.index`), termination after the grace period, the controllers'
re-creation and the scheduler, pods that start and pods that end (``activeDeadlineSeconds``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from reconciler.adapters.kube.objects import format_time, parse_time, pod_from
from reconciler.adapters.sim.core import Obj, SimCore
from reconciler.adapters.sim.index import NodePods
from reconciler.errors import ClusterError, ConflictError, NotFoundError, ServerError, TooManyRequestsError
from reconciler.model.disruption import EvictionAnswer, eviction_answer
from reconciler.model.observed import PdbInfo, PodInfo, group_pods
from reconciler.ports import PodEviction, evict_one_by_one

#: Controllers whose pods the simulated fleet re-creates after an eviction (DaemonSet pods stay).
RECREATED_BY = ("ReplicaSet", "StatefulSet", "ReplicationController", "Job")


class SimPods(SimCore):
    """Pods, PodDisruptionBudgets and evictions of the simulated fleet (part of ``SimFleet``)."""

    def list_pods(self, node_name: str | None = None) -> list[PodInfo]:
        """All pods, or those bound to ``node_name``."""
        keys = sorted(self.pods) if node_name is None else self._index.pods_of_node(node_name)
        return [self._index.pod(k) for k in keys]

    def pods_by_node(self) -> Mapping[str, tuple[PodInfo, ...]]:
        """Every bound pod by node (:meth:`PodPort.pods_by_node`). A read-only fleet (``plan``),
        which refuses writes, hands out a view that converts a node's pods when first read: the
        planner reads only the pods of the nodes it would cordon (a tenth of a 10,000-node
        fleet's 30,000 pods in ``bench/snapshot.py``)."""
        if self._read_only:
            return NodePods(self._index)
        return group_pods(self.list_pods())

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

    def _schedule_deadlines(self) -> None:
        for key, pod in self.pods.items():
            deadline = (pod.get("spec") or {}).get("activeDeadlineSeconds")
            if deadline is None or (pod.get("status") or {}).get("phase") not in ("Running", "Pending"):
                continue
            start = parse_time((pod.get("status") or {}).get("startTime"))
            at = (start - self.epoch if start is not None else 0.0) + float(deadline)
            uid = pod["metadata"]["uid"]
            self._at(max(at, self._now), partial(self._finish_pod, key, uid))

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

    def set_pod_ready(self, namespace: str, name: str, ready: bool) -> None:
        """Test helper (not a write): the kubelet reports the pod Ready or not (its ``Ready``
        condition, added when missing); the simulated disruption controller counts it at the next
        read or eviction, as with :meth:`set_pdb`.

        Raises:
            KeyError: no such pod.
        """
        key = (namespace, name)
        pod = self.pods[key]
        self._put_ready(pod, {"type": "Ready", "status": "True" if ready else "False",
                              "lastTransitionTime": format_time(self.wall())})
        self._index.pod_changed(key, pod)

    def add_pdb(self, pdb: Obj) -> None:
        """Test helper (not a write): an admin creates the PodDisruptionBudget ``pdb`` (an object,
        e.g. :func:`~reconciler.testing.fleetgen.make_pdb`); the next read or eviction sees it.

        Raises:
            ValueError: a PDB of that name exists.
        """
        meta = pdb["metadata"]
        key = (meta.get("namespace") or "default", meta["name"])
        if key in self.pdbs:
            raise ValueError(f"PodDisruptionBudget {key[0]}/{key[1]} exists")
        obj = copy.deepcopy(pdb)
        obj["metadata"]["namespace"] = key[0]
        self._bump(obj)
        self.pdbs[key] = obj
        self._index.pdb_added(key, obj)

    def set_pdb(self, namespace: str, name: str, **spec: Any) -> None:
        """Test helper (not a write): change a PDB's spec as an admin would, e.g. ``minAvailable=0``
        (a None value removes the field); ``metadata.generation`` goes up. The simulated disruption
        controller never lags: the next read or eviction sees the new budget.

        Raises:
            KeyError: no such PDB. ValueError: the change touches the selector (not supported).
        """
        if "selector" in spec:
            raise ValueError("set_pdb cannot change a PodDisruptionBudget's selector")
        key = (namespace, name)
        pdb = self.pdbs[key]
        body = pdb.setdefault("spec", {})
        for k, v in spec.items():
            if v is None:
                body.pop(k, None)
            else:
                body[k] = v
        pdb["metadata"]["generation"] = int(pdb["metadata"].get("generation") or 1) + 1
        self._bump(pdb)
        self._index.pdb_changed(key, pdb)

    def evict_pods(self, evictions: Sequence[PodEviction]) -> list[ClusterError | None]:
        """Writes: :meth:`evict_pod` for each, in the order asked (the simulated API server answers
        one request at a time)."""
        return evict_one_by_one(self.evict_pod, evictions)

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
        """The terminated pod is gone; its controller (:data:`RECREATED_BY`) replaces it at once."""
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
            self._replace(pod, str(ctrl["kind"]))

    def _replace(self, old: Obj, kind: str) -> None:
        """The controller's replacement for ``old``: a new pod (new uid; a new name unless a
        StatefulSet's), Pending and not bound to a node, that the scheduler binds after
        ``rescheduleSeconds`` (:meth:`_schedule`). Saved with the fleet as a Pod with the
        ``scheduleAt`` timer, so a resumed fleet still has it."""
        new = copy.deepcopy(old)
        meta = new["metadata"]
        meta.pop("deletionTimestamp", None)
        self._set_timer(new, removeAt=None, startAt=None)
        meta["uid"] = self._new_uid()
        meta["creationTimestamp"] = format_time(self.wall())
        if kind != "StatefulSet":
            base = meta["name"].rsplit("-", 1)[0] if "-" in meta["name"] else meta["name"]
            meta["name"] = f"{base}-r{self._uid:05d}"
        key = (meta.get("namespace") or "default", meta["name"])
        new.setdefault("spec", {}).pop("nodeName", None)
        new["status"] = {"phase": "Pending"}
        self._set_timer(new, scheduleAt=self.wall() + self.config.rescheduleSeconds)
        self._bump(new)
        self.pods[key] = new
        self._index.add_pod(key, new)
        self._at(self._now + self.config.rescheduleSeconds, partial(self._schedule, key, meta["uid"]))

    def _schedule(self, key: tuple[str, str], uid: str) -> None:
        """The scheduler binds the pending pod to the schedulable node with the fewest pods whose
        taints it tolerates (:meth:`reconciler.adapters.sim.index.FleetIndex.pick_node`); it starts
        ``podStartSeconds`` later. No node fits: PodScheduled False (Unschedulable), tried again
        after 30 s."""
        pod = self.pods.get(key)
        if pod is None or pod["metadata"]["uid"] != uid or pod["metadata"].get("deletionTimestamp"):
            return
        target = self._index.pick_node(pod_from(pod).tolerations)
        if target is None:
            pod["status"] = {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                 "lastTransitionTime": format_time(self.wall())}]}
            self._set_timer(pod, scheduleAt=self.wall() + 30.0)
            self._bump(pod)
            self._index.pod_changed(key, pod)
            self._at(self._now + 30.0, partial(self._schedule, key, uid))
            return
        self._index.remove_pod(key, pod)
        pod.setdefault("spec", {})["nodeName"] = target
        pod["status"] = {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": format_time(self.wall())}]}
        self._set_timer(pod, scheduleAt=None, startAt=self.wall() + self.config.podStartSeconds)
        self._bump(pod)
        self._index.add_pod(key, pod)
        self._at(self._now + self.config.podStartSeconds, partial(self._start_pod, key, uid))

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

"""The simulated fleet's kubelet (:mod:`reconciler.adapters.sim.fleet`): stage pods that run for
``stageSeconds`` and succeed or fail as injected, interrupts, and reboots (NotReady, then Ready
with a new bootID after ``rebootSeconds``; never for ``neverReturns`` nodes).

Stage pods are the Pods the kube adapter creates (:func:`~reconciler.adapters.kube.stagepod.build_stage_pod`),
their status written as a kubelet writes it (:func:`stage_pod_status`: init containers running,
terminated, or waiting on an image pull) and read back with the kube adapter's interpreter
(:func:`~reconciler.adapters.kube.stagepod.stage_status_from_pod`), so the default test suite runs both.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import partial
from typing import Any

from reconciler.adapters.kube.objects import format_time
from reconciler.adapters.kube.stagepod import IMAGE_PULL_FAILURES, build_stage_pod, stage_status_from_pod
from reconciler.adapters.sim.core import Obj, SimCore
from reconciler.adapters.sim.nodes import GATE_REQUEST
from reconciler.adapters.sim.saved import SIM_ANN, STAGE_NS
from reconciler.errors import NotFoundError
from reconciler.model.nodestate import validated_key
from reconciler.model.redact import redact
from reconciler.ports import StageSpec, StageStatus


class SimKubelet(SimCore):
    """Stage pods and reboots of the simulated fleet (part of ``SimFleet``)."""

    def _failure_for(self, spec: StageSpec) -> tuple[int, Any] | None:
        for i, f in enumerate(self.config.failures):
            if f.matches(spec.node, spec.package, spec.stage) and self._failures_used.get(i, 0) < f.times:
                return i, f
        return None

    def start_stage(self, spec: StageSpec) -> None:
        """One write: create the stage pod — the Pod the kube adapter would create
        (:func:`~reconciler.adapters.kube.stagepod.build_stage_pod`), with a status the simulated kubelet
        advances as a real one would; it runs by the behaviour rules. Existing → no-op."""
        if spec.node not in self.nodes:
            raise NotFoundError(f"node {spec.node} not found", 404)
        if spec.pod_name in self._stages:
            return
        self._write("create-pod", f"pod/{spec.pod_name}")
        self._validator_restarts(spec.node)
        rec = self._new_stage_pod(spec)
        self.stage_log.append((self._now, "start", spec.node, spec.package, spec.version, spec.stage))
        name = spec.pod_name
        if spec.stage in ("interrupt", "uninstall-interrupt") and spec.interrupt is not None:
            if spec.interrupt.type == "reboot":
                rec.update(done_at=self.wall() + 1.0)
                self._at(self._now + 1.0, lambda: self._reboot_down(spec.node, name, rec))
            else:
                rec.update(done_at=self.wall() + self.config.interruptSeconds)
                self._at(self._now + self.config.interruptSeconds, lambda: self._stage_done(name, 0, "", "", rec))
        else:
            code, reason, log = 0, "", ""
            hit = self._failure_for(spec)
            if hit:
                idx, f = hit
                self._failures_used[idx] = self._failures_used.get(idx, 0) + 1
                code, reason = f.exitCode, f.reason
                log = f.logTail or f"{spec.stage}: simulated failure (exit {f.exitCode})"
            if reason in IMAGE_PULL_FAILURES:  # never starts: the first init container waits
                rec["log"] = log
                self._set_stage(rec, "pending", reason=reason)
            else:
                delay = self.config.stage_duration(spec.stage)
                rec.update(done_at=self.wall() + delay, pending_exit=code, pending_reason=reason, pending_log=log)
                self._at(self._now + delay, lambda: self._stage_done(name, code, reason, log, rec))
        self._after_write()

    def _new_stage_pod(self, spec: StageSpec, started: float | None = None) -> Obj:
        """The record of a new stage pod: its StageSpec, the Pod (running since ``started``,
        simulated seconds; default now) and the log tail a failure leaves."""
        at = self._now if started is None else started
        pod = build_stage_pod(spec, namespace=STAGE_NS)
        self._share_parts(spec, pod)
        pod["metadata"]["creationTimestamp"] = format_time(self.epoch + at)
        rec: Obj = {"spec": spec, "pod": pod, "started": at, "log": ""}
        self._set_stage(rec, "running")
        self._stages[spec.pod_name] = rec
        return rec

    def _share_parts(self, spec: StageSpec, pod: Obj) -> None:
        """Memory: the containers, volumes and tolerations of a stage pod depend only on the
        package, stage and run (not on the node), so pods that would hold equal lists share one
        (never written after creation; a saved fleet copies them). A spec whose fields cannot be
        hashed keeps its own."""
        key = (spec.recipe, spec.package, spec.version, spec.stage, spec.pull_ref, spec.run_id,
               tuple(sorted(spec.config_map.items())), spec.env, spec.resources, spec.interrupt, spec.tolerations,
               spec.agent_image)
        body = pod["spec"]
        try:
            shared = self._pod_parts.get(key)
        except TypeError:
            return
        if shared is None:
            self._pod_parts[key] = {k: body[k] for k in ("initContainers", "containers", "volumes", "tolerations")}
        else:
            body.update(shared)

    def _set_stage(self, rec: Obj, phase: str, *, exit_code: int = 0, reason: str = "") -> None:
        """Advance the stage Pod's status (:func:`stage_pod_status`) and read it back with the kube
        adapter's interpreter once: ``rec["status"]`` is what :meth:`stage_status` answers until
        the next change (``started`` unrounded, ``log_tail`` the failure's log). Memory: the Pod
        keeps no ``status`` dict; ``rec["kubelet"]`` holds what makes it again (:meth:`stage_pod`)."""
        rec["kubelet"] = (phase, exit_code, reason)
        st = stage_status_from_pod(self._pod_with_status(rec))[0]
        rec["status"] = StageStatus(st.phase, st.exit_code, st.reason, redact(rec["log"] or st.log_tail),
                                    self.epoch + rec["started"], st.deleting)

    def _stage_done(self, name: str, code: int, reason: str, log: str, made: Obj | None = None) -> None:
        """The stage pod ``name`` (the record ``made``, when known) ends with exit ``code``."""
        rec = self._stages.get(name)
        if rec is None or rec["status"].phase != "running" or rec["status"].deleting:
            return  # gone, ended, or being deleted (its containers are being stopped: the stage does not end)
        if made is not None and rec is not made:
            return  # deleted and made again under the same name: the new pod has its own timer
        phase = "succeeded" if code == 0 else "failed"
        rec["log"] = log
        self._set_stage(rec, phase, exit_code=code, reason=reason or "Error")
        spec = rec["spec"]
        if code == 0:
            self._validator_schedules(spec.node)
            if spec.stage in ("interrupt", "uninstall-interrupt") and spec.node in self.nodes:
                self.interrupt_log.append((self.wall(), spec.node, self.nodes[spec.node]["metadata"]["uid"], name))
        self.stage_log.append((self._now, phase, spec.node, spec.package, spec.version, spec.stage))

    def _reboot_down(self, node: str, stage_name: str, made: Obj | None = None) -> None:
        """The interrupt pod ``stage_name`` (the record ``made``, when known) reboots its node."""
        n = self.nodes.get(node)
        if n is None or stage_name not in self._stages:  # the interrupt pod went first (its machine replaced)
            return
        if made is not None and self._stages[stage_name] is not made:
            return  # deleted before it acted; a pod of the same name made since has its own timer
        self.interrupt_log.append((self.wall(), node, n["metadata"]["uid"], stage_name))
        if node not in self.config.neverReturns:
            self._set_timer(n, rebootUpAt=self.wall() + self.config.rebootSeconds)
        self._set_ready(n, False, "KubeletNotReady", "simulated reboot")
        rec = self._stages.get(stage_name)
        if rec is not None:  # the interrupt pod dies with the host (exit 143), as on real nodes
            rec["log"] = "terminated by host shutdown"
            self._set_stage(rec, "failed", exit_code=143, reason="Error")
        if node in self.config.neverReturns:
            return
        self._at(self._now + self.config.rebootSeconds, lambda: self._reboot_up(node))

    def _reboot_up(self, node: str) -> None:
        n = self.nodes.get(node)
        timers = json.loads(((n or {}).get("metadata", {}).get("annotations") or {}).get(SIM_ANN, "{}"))
        if n is None or "rebootUpAt" not in timers:  # gone, or replaced by another machine meanwhile
            return
        self._set_timer(n, rebootUpAt=None)
        info = n.setdefault("status", {}).setdefault("nodeInfo", {})
        info["bootID"] = self._new_uid()
        self._set_ready(n, True, "KubeletReady", "kubelet is posting ready status")
        self._validator_schedules(node)

    # ---------------------------------------------------------------- the simulated validator
    def _validator_restarts(self, node: str) -> None:
        """A stage starts on ``node``: the simulated validator (``SimConfig.validator``) starts over."""
        v = self.config.validator
        n = self.nodes.get(node)
        if v is None or n is None:
            return
        self._set_timer(n, validateAt=None, validated=None)
        if v.conditionType is not None:
            self._set_condition(n, v.conditionType, "False", "Validating", "simulated validator: node changed")
        labels = n["metadata"].get("labels") or {}
        for k in v.labels:
            labels.pop(k, None)

    def _validator_schedules(self, node: str) -> None:
        """A stage succeeded on (or a reboot brought back) ``node``: validated ``afterSeconds`` later."""
        v = self.config.validator
        n = self.nodes.get(node)
        if v is None or n is None:
            return
        at = self.wall() + v.afterSeconds
        self._set_timer(n, validateAt=at)
        self._at(self._now + v.afterSeconds, partial(self._validated, node, at))

    def _validated(self, node: str, at: float) -> None:
        v = self.config.validator
        n = self.nodes.get(node)
        if v is None or n is None or node in v.failsOn:
            return
        timers = json.loads((n["metadata"].get("annotations") or {}).get(SIM_ANN, "{}"))
        if timers.get("validateAt") != at:  # a stage started since: this validation is void
            return
        self._set_timer(n, validateAt=None, validated=at)
        if v.labels:
            n["metadata"].setdefault("labels", {}).update(v.labels)
        self._echo_gate_requests(n)
        if v.conditionType is not None:
            self._set_condition(n, v.conditionType, "True", "Validated", "simulated validator: node passed")
        else:
            self._bump(n)
            self._index.node_changed(node)

    def _echo_gate_requests(self, n: Obj) -> None:
        """The readiness-gate protocol a validator follows (docs/how-to/readiness-gate.md): every
        request on the node (``validate_<recipe>``) is echoed (``validated_<recipe>``, same value)
        by the validation that passed after it was made."""
        ann = n["metadata"].get("annotations") or {}
        for k, v in list(ann.items()):
            if k.startswith(GATE_REQUEST) and ann.get(validated_key(k[len(GATE_REQUEST):])) != v:
                ann[validated_key(k[len(GATE_REQUEST):])] = v

    def _answer_gate_requests(self, node: str) -> None:
        """A request written after the validator's last pass, with nothing changed on the node since:
        that pass answers it at once."""
        n = self.nodes.get(node)
        if self.config.validator is None or n is None or node in self.config.validator.failsOn:
            return
        timers = json.loads((n["metadata"].get("annotations") or {}).get(SIM_ANN, "{}"))
        if "validated" not in timers:
            return
        before = dict(n["metadata"].get("annotations") or {})
        self._echo_gate_requests(n)
        if n["metadata"].get("annotations") != before:
            self._bump(n)
            self._index.node_changed(node)

    def stage_status(self, spec: StageSpec, *, log: bool = False) -> StageStatus:
        """The stage pod's state, read from the Pod as the kube adapter reads it
        (:func:`~reconciler.adapters.kube.stagepod.stage_status_from_pod`); ``log``: with the
        failure's log tail (as the kube adapter, a failed pod's is empty without it)."""
        rec = self._stages.get(spec.pod_name)
        if rec is None:
            return StageStatus("missing")
        status: StageStatus = rec["status"]
        if not log and status.phase == "failed" and status.log_tail:
            return replace(status, log_tail="")
        return status

    def stage_pod(self, name: str) -> Obj | None:
        """Test helper: the stage Pod object ``name`` (as the kube adapter would create it, with
        the simulated kubelet's status), or None."""
        rec = self._stages.get(name)
        return self._pod_with_status(rec) if rec is not None else None

    def _pod_with_status(self, rec: Obj) -> Obj:
        """The stage Pod with its current ``status`` (a new top-level dict; the rest shared), and the
        ``DisruptionTarget`` condition of whoever is deleting it (:meth:`delete_stage_pod`)."""
        phase, exit_code, reason = rec["kubelet"]
        pod: Obj = rec["pod"]
        status = stage_pod_status(pod["spec"], format_time(self.epoch + rec["started"]), phase,
                                  exit_code=exit_code, reason=reason)
        if rec.get("disruption"):
            why, message = rec["disruption"]
            status["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": why, "message": message}]
        return {**pod, "status": status}

    def delete_stage_pod(self, name: str, *, by: tuple[str, str] | None = None, grace: float = 0.0) -> None:
        """Test helper (not a write of ours): someone else deletes the stage pod ``name`` (a janitor,
        ``kubectl delete``, an eviction, the pod garbage collector). ``by``: the ``(reason, message)``
        of the ``DisruptionTarget`` condition the deleting component sets (None: a plain delete,
        which names nobody); ``grace``: seconds it stays terminating (``deletionTimestamp`` set)
        before it is gone. A stage it ran is not finished by it; an interrupt pod deleted before
        the reboot it asks for takes the reboot with it."""
        rec = self._stages.get(name)
        if rec is None:
            return
        if grace <= 0:
            del self._stages[name]
            return
        pod = rec["pod"]
        pod["metadata"] = {**pod["metadata"], "deletionTimestamp": format_time(self.wall())}
        rec["disruption"] = by
        phase, exit_code, reason = rec["kubelet"]
        self._set_stage(rec, phase, exit_code=exit_code, reason=reason)

        def gone() -> None:
            if self._stages.get(name) is rec:
                del self._stages[name]

        self._at(self._now + grace, gone)

    def lifecycles(self) -> set[str]:
        """None: the simulated fleet keeps no shared objects per lifecycle."""
        return set()

    def end_run(self, run_id: str, *, if_unused: bool = False) -> None:
        """Nothing shared to release in the simulated fleet (stage pods go with ``delete_stages``)."""

    def delete_stage(self, spec: StageSpec) -> None:
        """One write: delete the stage pod of ``spec`` (absent: no write, as a 404)."""
        if spec.pod_name not in self._stages:
            return
        self._write("delete-pod", f"pod/{spec.pod_name}")
        del self._stages[spec.pod_name]
        self._after_write()

    def delete_stages(self, recipe: str, node: str) -> None:
        """One write: delete every stage pod of ``recipe`` on ``node``."""
        names = [k for k, v in self._stages.items() if v["spec"].recipe == recipe and v["spec"].node == node]
        if not names:
            return
        self._write("delete-pods", f"pods/{recipe}/{node}")
        for k in names:
            del self._stages[k]
        self._after_write()

    def stage_pods(self) -> dict[str, StageSpec]:
        """Stage pods that exist now, by pod name."""
        return {k: v["spec"] for k, v in self._stages.items()}


def stage_pod_status(spec: Obj, start_time: str, phase: str, *, exit_code: int = 0, reason: str = "") -> Obj:
    """The ``status`` a kubelet (and kwok, tests/controlplane/kwok-stages.yaml) gives a stage pod
    with Pod ``spec``, started at ``start_time`` (RFC 3339), in ``phase``: ``running`` — Pending,
    the first init container running; ``succeeded`` — Running, every init container terminated 0
    and the pause container running; ``failed`` — Failed, the stage's container (the second init
    container, or the only one) terminated with ``exit_code`` and ``reason``; ``pending`` —
    Pending, the first init container waiting with ``reason`` (an image-pull failure)."""
    inits = [c["name"] for c in spec.get("initContainers") or ()]
    status: Obj = {"startTime": start_time}
    now = start_time
    done = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}}
    initializing = {"waiting": {"reason": "PodInitializing"}}
    if phase == "running":
        status.update(phase="Pending", initContainerStatuses=[
            {"name": n, "state": {"running": {"startedAt": now}} if i == 0 else initializing}
            for i, n in enumerate(inits)])
    elif phase == "pending":
        status.update(phase="Pending", initContainerStatuses=[
            {"name": n, "state": {"waiting": {"reason": reason if i == 0 else "PodInitializing"}}}
            for i, n in enumerate(inits)])
    elif phase == "succeeded":
        status.update(phase="Running", initContainerStatuses=[{"name": n, "state": done} for n in inits],
                      containerStatuses=[{"name": c["name"], "state": {"running": {"startedAt": now}}}
                                         for c in spec.get("containers") or ()])
    else:
        failing = 1 if len(inits) > 1 else 0
        term = {"terminated": {"exitCode": exit_code, "reason": reason or "Error", "startedAt": now, "finishedAt": now}}
        status.update(phase="Failed", initContainerStatuses=[
            {"name": n, "state": done if i < failing else term if i == failing else initializing}
            for i, n in enumerate(inits)])
    return status

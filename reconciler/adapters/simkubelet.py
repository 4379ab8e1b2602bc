"""The simulated fleet's kubelet (:mod:`reconciler.adapters.sim`): stage pods that run for
``stageSeconds`` and succeed or fail as injected, interrupts, and reboots (NotReady, then Ready
with a new bootID after ``rebootSeconds``; never for ``neverReturns`` nodes).
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from reconciler.adapters.simcore import Obj, SimCore
from reconciler.adapters.simsaved import SIM_ANN
from reconciler.errors import NotFoundError
from reconciler.ports import StageSpec, StageStatus


class SimKubelet(SimCore):
    """Stage pods and reboots of the simulated fleet (part of ``SimFleet``)."""

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
        self._validator_restarts(spec.node)
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
        if code == 0:
            self._validator_schedules(spec.node)
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
        self._validator_schedules(node)

    # ---------------------------------------------------------------- the simulated validator
    def _validator_restarts(self, node: str) -> None:
        """A stage starts on ``node``: the simulated validator (``SimConfig.validator``) starts over."""
        v = self.config.validator
        n = self.nodes.get(node)
        if v is None or n is None:
            return
        self._set_timer(n, validateAt=None)
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
        self._set_timer(n, validateAt=None)
        if v.labels:
            n["metadata"].setdefault("labels", {}).update(v.labels)
        if v.conditionType is not None:
            self._set_condition(n, v.conditionType, "True", "Validated", "simulated validator: node passed")
        else:
            self._bump(n)
            self._index.node_changed(node)

    def stage_status(self, spec: StageSpec) -> StageStatus:
        """The stage pod's state."""
        rec = self._stages.get(spec.pod_name)
        if rec is None:
            return StageStatus("missing")
        return StageStatus(rec["phase"], rec["exit"], rec["reason"], rec["log"], self.epoch + rec["started"])

    def lifecycles(self) -> set[str]:
        """None: the simulated fleet keeps no shared objects per lifecycle."""
        return set()

    def end_run(self, run_id: str, *, if_unused: bool = False) -> None:
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

    def stage_pods(self) -> dict[str, StageSpec]:
        """Stage pods that exist now, by pod name."""
        return {k: v["spec"] for k, v in self._stages.items()}

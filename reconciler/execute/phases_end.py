"""How a node run ends: uncordon (complete), failed (recorded), blocked, left the scope
(owed work kept). Pure."""

from __future__ import annotations

from reconciler.execute.decide import decide_release
from reconciler.execute.effects import (
    DeleteStages,
    EmitEvent,
    Log,
    LogLevel,
    SetCondition,
)
from reconciler.execute.memory import Outcome
from reconciler.execute.stepcore import StepCore
from reconciler.model.nodestate import (
    FailureRecord,
    condition_type,
    cordon_claims,
    cordon_key,
    dump_model,
    dump_state,
    failure_key,
    holds_claim,
    inflight_key,
    readiness,
    state_key,
    status_key,
    validate_key,
)
from reconciler.model.recipe import Interrupt
from reconciler.model.vocab import (
    EventKind,
    FailureReason,
    NodeStatus,
    Phase,
)


class EndPhases(StepCore):
    """How a node run ends (module docstring)."""

    # ------------------------------------------------------------------ endings
    def _phase_uncordon(self) -> float | None:
        self._checkpoint()
        m = self.m
        node = self._read()
        if node.ready is not True:
            if (wake := self._ready_wait(node)) is not None:
                return wake
            return self._fail(FailureReason.NODE_NOT_READY,
                              f"node is not Ready at the end of its lifecycle after {self.recipe.timeouts.nodeReady} s "
                              f"(Ready={readiness(node.ready)}); it stays cordoned, retried once its readiness "
                              "changes", keep_cordon=True)
        name = self.recipe.name
        ann: dict[str, str | None] = {
            inflight_key(name): None,
            failure_key(name): None,
            cordon_key(name): None,
            status_key(name): NodeStatus.COMPLETE,
            state_key(name): dump_state(m.state),
        }
        if validate_key(name) in node.annotations:
            ann[validate_key(name)] = None  # the readiness gate's request is answered
        release = decide_release(node, name, owns_cordon=m.owns_cordon, runtime_required=self.recipe.runtimeRequired,
                                 runtime_required_recipes=self.ctx.runtime_required,
                                 required_taint=self.recipe.is_required_taint)
        others, uncordon, taints = release.others, release.uncordon, release.taints
        self._patch(annotations=ann, labels={status_key(name): NodeStatus.COMPLETE},
                    unschedulable=False if uncordon else None, taints=taints)
        if uncordon:
            self._event(EventKind.UNCORDON)
        elif m.owns_cordon and others:
            self._event(EventKind.UNCORDON, f"claim released; still cordoned for {', '.join(others)}")
        m.owns_cordon = False
        self._write(DeleteStages(name))
        erroring = node.condition(condition_type(name, "Erroring"))
        if failure_key(name) in node.annotations or (erroring is not None and erroring.status == "True"):
            # it had failed (its failure record may be gone: `package rerun`): clear its Erroring condition
            self._write(SetCondition(condition_type(name, "Erroring"), "False", "Complete", f"recipe {name} complete"))
        m.outcome = Outcome.COMPLETE
        self._event(EventKind.COMPLETE, "untainted runtime-required" if taints is not None else "")
        return None

    def _fail(
        self,
        reason: str,
        message: str,
        *,
        keep_cordon: bool = True,
        stage: str = "",
        package: str = "",
        exit_code: int | None = None,
        log_tail: str = "",
    ) -> float | None:
        """End the node as FAILED: record why (failure record, Erroring condition, event). When the
        API refuses the records, the phase becomes ``failing`` and recording is retried within the
        retry bounds; past them the run still reports the failure and the node keeps what was
        recorded before (its cordon claim and in-flight record)."""
        self.m.failure_args = (reason, message, {"keep_cordon": keep_cordon, "stage": stage, "package": package,
                                                 "exit_code": exit_code, "log_tail": log_tail})
        self.m.phase = Phase.FAILING
        return self._phase_failing()

    def _phase_failing(self) -> float | None:
        self._checkpoint()
        m = self.m
        assert m.failure_args is not None
        reason, message, kw = m.failure_args
        reason = str(reason)  # a FailureReason's value: records and API objects carry plain strings
        name = self.recipe.name
        node = m.node  # the node as last read: the machine and readiness the failure belongs to
        rec = FailureRecord(runId=self.ctx.run_id, inputs=self.ctx.inputs, reason=reason, stage=kw["stage"],
                            package=kw["package"], exitCode=kw["exit_code"], message=message[:2000],
                            logTail=kw["log_tail"][-2000:], uid=node.uid if node is not None else "",
                            ready=readiness(node.ready) if node is not None else "")
        if not m.give_up_recording:
            ann: dict[str, str | None] = {
                failure_key(name): dump_model(rec),
                status_key(name): NodeStatus.ERRORING,
                state_key(name): dump_state(m.state),
            }
            unsched: bool | None = None
            if not kw["keep_cordon"]:
                ann[inflight_key(name)] = None
                if m.owns_cordon:
                    self._refresh()
                    ann[cordon_key(name)] = None
                    unsched = False
            self._patch(annotations=ann, labels={status_key(name): NodeStatus.ERRORING}, unschedulable=unsched)
            if unsched is False:
                m.owns_cordon = False
                self._event(EventKind.UNCORDON, "released: nothing was disrupted")
            self._write(SetCondition(condition_type(name, "Erroring"), "True", reason, message[:1000]))
            self._write(EmitEvent("Failed", f"recipe {name}: {message[:900]}", "Warning"))
        else:
            self._effect(Log(LogLevel.ERROR, f"node {self.name}: failed ({reason}) but the failure could not be "
                                             "recorded on the node"))
        m.failure = rec
        m.message = message
        m.outcome = Outcome.FAILED
        self._event(EventKind.FAILED, f"{reason}: {message}")
        return None

    def _not_started(self, message: str) -> float | None:
        """End a node that was never started (nothing of this lifecycle written, nothing changed on
        it) as WAITING: not a failure, out of its batch's count, taken up by a later pass."""
        m = self.m
        m.message = message
        m.outcome = Outcome.WAITING
        self._event(EventKind.NOT_STARTED, message)
        return None

    def _block(self, message: str) -> float | None:
        """Protected pods outlived the wait: release what we hold; retried in a later pass (S09)."""
        self._checkpoint()
        m = self.m
        name = self.recipe.name
        self._refresh()
        ann: dict[str, str | None] = {inflight_key(name): None, status_key(name): NodeStatus.BLOCKED}
        if m.owns_cordon:
            ann[cordon_key(name)] = None
        self._patch(annotations=ann, labels={status_key(name): NodeStatus.BLOCKED},
                    unschedulable=False if m.owns_cordon else None)
        if m.owns_cordon:
            self._event(EventKind.UNCORDON, "released while blocked")
        m.owns_cordon = False
        m.inflight = None
        m.message = message
        m.outcome = Outcome.BLOCKED
        self._event(EventKind.BLOCKED, message)
        return None

    def _owed_interrupt(self) -> Interrupt | None:
        """The interrupt this node still owes if it stopped now: the plan's (or the record's) merged
        interrupt once a stage ran or may have run in this lifecycle (conservative after a restart:
        the lifecycle reached its stages), until the interrupt is confirmed."""
        m = self.m
        fl = m.inflight
        recorded = Interrupt.model_validate(fl.interrupt) if fl is not None and fl.interrupt else None
        interrupt = self.plan.interrupt or recorded
        if interrupt is None:
            return None
        if m.runs and m.phase is Phase.STAGES:
            return interrupt if any(r.running or r.done or r.index > 0 for r in m.runs) else None
        return recorded if fl is not None and fl.owes else None

    def _leave(self, message: str) -> float | None:
        """The node left the recipe's scope (its selector, or the ignore label): start nothing new.
        What it owes is never dropped: a node that owes an interrupt keeps its in-flight record and
        our cordon (the plan and ``status`` show it; back in scope, the lifecycle resumes and runs the
        interrupt). A node that owes nothing is released: our claim goes, and it is uncordoned when
        ours was the last claim — decided from a fresh read, conditional on its resourceVersion."""
        self._checkpoint()
        m = self.m
        name = self.recipe.name
        owed = self._owed_interrupt()
        if owed is not None:
            note = (f"{message}; it owes a {owed.type} (recorded): it stays cordoned until it is back in "
                    "scope or `reconciler node reset --force`")
            if m.inflight is None or not m.inflight.interrupt:
                self._patch(annotations={inflight_key(name): self._inflight(
                    m.phase if m.phase in (Phase.STAGES, Phase.INTERRUPT) else Phase.STAGES)})
            m.message = note
            m.outcome = Outcome.LEFT
            self._event(EventKind.OWED, note)
            return None
        node = self._refresh()
        m.owns_cordon = holds_claim(node.annotations, name, node.uid)
        others = cordon_claims(node.annotations, name, node.uid)
        uncordon = m.owns_cordon and node.unschedulable and not others
        ann: dict[str, str | None] = {inflight_key(name): None}
        if m.owns_cordon:
            ann[cordon_key(name)] = None
        if m.inflight is not None or m.owns_cordon or inflight_key(name) in node.annotations:
            self._patch(annotations=ann, unschedulable=False if uncordon else None)
        if uncordon:
            self._event(EventKind.UNCORDON, "released: node left the recipe's scope")
        elif m.owns_cordon and others:
            self._event(EventKind.UNCORDON, f"claim released; still cordoned for {', '.join(others)}")
        m.owns_cordon = False
        m.inflight = None
        m.message = message
        m.outcome = Outcome.LEFT
        self._event(EventKind.LEFT, message)
        return None

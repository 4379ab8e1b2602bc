"""The readiness gate (issue 15): after a node's packages — and its interrupt and post-interrupt
stages — are complete, a recipe with ``readinessGate`` holds the node where it is (our cordon,
the runtime-required taint) until an external validator (such as NVIDIA's NVCRE) says it is
ready: a node condition True and/or labels that match (:func:`reconciler.execute.decide.judge_gate`).
The node is read afresh on every poll. The phase is recorded in the in-flight record with the
UTC instant it was first reached (``InFlight.timers["readiness-gate"]``), so a restarted run
resumes waiting and the timeout counts from that instant; past ``readinessGate.timeout`` the node
fails with ``ReadinessGateTimeout`` and stays cordoned.

Issue 34: the gate passes only on a validation newer than the work it holds
(:func:`reconciler.execute.decide.judge_freshness`): the validator echoed the token written at the
gate (``validate_<recipe>``), or it was seen not passing since the gate opened, or its condition
changed after the last stage pod started. A condition left True a month ago does not pass. Pure."""

from __future__ import annotations

from reconciler.execute.decide import judge_freshness, judge_gate
from reconciler.execute.stepcore import StepCore
from reconciler.model.nodestate import dump_model, dump_state, inflight_key, state_key, validate_key
from reconciler.model.utctime import from_rfc3339, to_rfc3339
from reconciler.model.vocab import EventKind, FailureReason, Phase

#: In-flight timers of the gate: the start of the work it holds the node for, and when it was
#: first seen not passing (the validator at work: what it says next is newer than the work).
GATE_WORK = "readiness-gate-work"
GATE_ARMED = "readiness-gate-armed"


class GatePhases(StepCore):
    """The readiness-gate phase between the last stage and the uncordon (module docstring)."""

    def _after_stages(self) -> float | None:
        """Every stage is done: when they were an older release's, the recipe's release is taken up
        (the safe point); else on to the readiness gate when the recipe has one, else to the end."""
        if self.m.superseded is not None:
            return self._take_up()
        if self.recipe.readinessGate is not None:
            self.m.phase = Phase.READINESS_GATE
            return self._phase_gate()
        self.m.phase = Phase.UNCORDON
        return self._phase_uncordon()

    def _phase_gate(self) -> float | None:
        self._checkpoint()
        m = self.m
        gate = self.recipe.readinessGate
        if gate is None:  # the recipe dropped its gate while the node waited (a resumed lifecycle)
            m.phase = Phase.UNCORDON
            return self._phase_uncordon()
        node = self._read()
        fl = m.inflight
        name = self.recipe.name
        if (why := self._out_of_scope(node)) is not None:
            return self._leave(f"{why} (at the readiness gate)")
        verdict = judge_gate(node, gate)
        # first arrival in this lifecycle (a retried failed node starts a new one: its timer starts again)
        first = fl is None or fl.phase is not Phase.READINESS_GATE or (fl.lifecycle or fl.runId) != m.lifecycle
        token = f"{self.recipe.version}/{m.lifecycle or self.ctx.run_id}"
        work = self._work_start() if first or fl is None else from_rfc3339(fl.timers.get(GATE_WORK))
        fresh = judge_freshness(node, gate, recipe=name, token="" if first else token,
                                work_start=self._utc if work is None else work,
                                armed=not first and fl is not None and GATE_ARMED in fl.timers)
        if verdict.ready and fresh.fresh:
            self._event(EventKind.GATE_PASSED, f"{verdict.detail} ({fresh.detail})")
            m.phase = Phase.UNCORDON
            return self._phase_uncordon()
        seen = verdict.detail if not verdict.ready else f"{verdict.detail}, but {fresh.detail}"
        if first:
            # the phase, its start, the work it holds and the request to the validator are recorded
            # before the node is held for it
            timers = {GATE_WORK: to_rfc3339(self._utc if work is None else work)}
            if not verdict.ready:
                timers[GATE_ARMED] = self._stamp()
            self._patch(annotations={inflight_key(name): self._gate_record(timers),
                                     state_key(name): dump_state(m.state), validate_key(name): token})
            self._event(EventKind.GATE, f"waiting for {gate.describe()}: {seen}")
            return self._now + self.ctx.poll_seconds
        assert fl is not None
        if not verdict.ready and GATE_ARMED not in fl.timers:
            # the validator is at work: whatever it says next is newer than the work (one write)
            self._patch(annotations={inflight_key(name): self._gate_record({GATE_ARMED: self._stamp()})})
        limit = gate.timeout_seconds
        waited = self._elapsed(Phase.READINESS_GATE, fl.timers.get(Phase.READINESS_GATE))
        if waited >= limit:
            return self._fail(FailureReason.READINESS_GATE_TIMEOUT,
                              f"readiness gate not passed within {gate.timeout} ({gate.describe()}): {seen}; "
                              "the node stays cordoned", keep_cordon=True)
        return self._now + min(self.ctx.poll_seconds, limit - waited)

    def _gate_record(self, timers: dict[str, str]) -> str:
        """The in-flight record at the gate with ``timers`` added (its own start kept)."""
        self._inflight(Phase.READINESS_GATE)
        fl = self.m.inflight
        assert fl is not None
        self.m.inflight = fl.model_copy(update={"timers": {**fl.timers, **timers}})
        return dump_model(self.m.inflight)

    def _work_start(self) -> float | None:
        """When the last change the gate holds the node for began (UTC epoch seconds): the latest
        start of a stage pod this process ran or looked at in the lifecycle, else the reboot's
        request (a run resumed after its stages); None when neither is known."""
        starts = [r.started for r in self.m.runs if r.started is not None]
        if starts:
            return max(starts)
        fl = self.m.inflight
        return from_rfc3339(fl.requestedAt) if fl is not None and fl.requestedAt else None

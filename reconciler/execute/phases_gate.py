"""The readiness gate (issue 15): after a node's packages — and its interrupt and post-interrupt
stages — are complete, a recipe with ``readinessGate`` holds the node where it is (our cordon,
the runtime-required taint) until an external validator (such as NVIDIA's NVCRE) says it is
ready: a node condition True and/or labels that match (:func:`reconciler.execute.decide.judge_gate`).
The node is read afresh on every poll. The phase is recorded in the in-flight record with the
UTC instant it was first reached (``InFlight.timers["readiness-gate"]``), so a restarted run
resumes waiting and the timeout counts from that instant; past ``readinessGate.timeout`` the node
fails with ``ReadinessGateTimeout`` and stays cordoned. Pure."""

from __future__ import annotations

from reconciler.execute.decide import judge_gate
from reconciler.execute.stepcore import StepCore
from reconciler.model.nodestate import dump_state, inflight_key, state_key
from reconciler.model.vocab import EventKind, FailureReason, Phase


class GatePhases(StepCore):
    """The readiness-gate phase between the last stage and the uncordon (module docstring)."""

    def _after_stages(self) -> float | None:
        """Every stage is done: on to the readiness gate when the recipe has one, else to the end."""
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
        if (why := self._out_of_scope(node)) is not None:
            return self._leave(f"{why} (at the readiness gate)")
        verdict = judge_gate(node, gate)
        if verdict.ready:
            self._event(EventKind.GATE_PASSED, verdict.detail)
            m.phase = Phase.UNCORDON
            return self._phase_uncordon()
        if fl is None or fl.phase is not Phase.READINESS_GATE or (fl.lifecycle or fl.runId) != m.lifecycle:
            # first arrival in this lifecycle (a retried failed node starts a new one: its timer
            # starts again): the phase and its start are recorded before the node is held for it
            self._patch(annotations={inflight_key(self.recipe.name): self._inflight(Phase.READINESS_GATE),
                                     state_key(self.recipe.name): dump_state(m.state)})
            self._event(EventKind.GATE, f"waiting for {gate.describe()}: {verdict.detail}")
            return self._now + self.ctx.poll_seconds
        limit = gate.timeout_seconds
        waited = self._elapsed(Phase.READINESS_GATE, fl.timers.get(Phase.READINESS_GATE))
        if waited >= limit:
            return self._fail(FailureReason.READINESS_GATE_TIMEOUT,
                              f"readiness gate not passed within {gate.timeout} ({gate.describe()}): {verdict.detail}; "
                              "the node stays cordoned", keep_cordon=True)
        return self._now + min(self.ctx.poll_seconds, limit - waited)

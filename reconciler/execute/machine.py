"""The per-node lifecycle as a pure transition function (issue 12).

``cordon → wait for protected pods → drain → stages (+checks, dependency order) → merged
interrupt → post-interrupt stages → readiness gate (when the recipe has one) → uncordon``
(architecture.md §1; semantics-nodewright.md §2 with our decisions; the gate: issue 15).

:func:`step` ``(memory, view, plan, context, now, utc) -> Transition`` reads nothing but its
arguments: the node run's :class:`Memory`, what the interpreter observed (:class:`~reconciler.execute.effects.View`),
the node's plan, the run's fixed :class:`StepContext` and the two clock readings. It answers with
the effects to perform (data, :mod:`reconciler.execute.effects`) and the new memory, or with the
reads it needs first. A step that needs a read returns nothing else; the interpreter performs the
reads and calls it again with the same memory, so a step is a deterministic replay up to the point
where it has all it needs. A read needed after a write of the same step is never answered from
before the write: the step commits what it decided up to there and asks to be called again.

Crash safety: every step is recorded on the node *before* its effect (package state entry
``in_progress``, the :class:`~reconciler.model.nodestate.InFlight` record with the phase, the
pre-reboot bootID and the owed interrupt) and *after* it (``complete``). A run killed anywhere and
started again re-plans from those annotations and continues: completed stages are never re-run
(a stage pod that already succeeded is recognised by its deterministic name), a cordon is never
taken to mean "drained" (the drain is re-checked), a requested reboot is not sent twice, failures
stay recorded.
"""

from __future__ import annotations

from collections.abc import Callable

from reconciler.execute.effects import (
    Announce,
    DeleteStages,
    Transition,
    View,
)
from reconciler.execute.memory import MAX_RECORDONS, EvictTrack, Memory, Outcome, StepContext
from reconciler.execute.phases_drain import DrainPhases
from reconciler.execute.phases_end import EndPhases
from reconciler.execute.phases_gate import GatePhases
from reconciler.execute.phases_release import ReleasePhases
from reconciler.execute.phases_stages import StagePhases
from reconciler.execute.stepcore import _Need, _Raise, _Replaced
from reconciler.model.observed import NodeInfo
from reconciler.model.plan import NodePlan
from reconciler.model.vocab import EventKind, Phase
from reconciler.plan.nodework import node_work, work_plan

__all__ = ["MAX_RECORDONS", "EvictTrack", "Memory", "Outcome", "StepContext", "step"]


def step(memory: Memory, view: View, plan: NodePlan, ctx: StepContext, now: float, utc: float) -> Transition[Memory]:
    """Decide the node run's next move (module docstring). ``now``: monotonic clock seconds (wake
    times are on this clock); ``utc``: UTC epoch seconds (everything persisted or compared with the
    cluster's timestamps). Pure: the same arguments give the same transition, ``memory`` is not
    changed. API errors of the previous transition (``view.error``) go through
    :func:`reconciler.execute.retry.classify`: retried with bounded backoff, then a named failure; a
    node that disappeared ends as REMOVED."""
    return _Step(memory, view, plan, ctx, now, utc).run()


class _Step(EndPhases, GatePhases, ReleasePhases, StagePhases, DrainPhases):
    """One invocation of :func:`step`: the phases (mixins over :class:`~reconciler.execute.stepcore.StepCore`)
    and the driver that turns their answer into a :class:`~reconciler.execute.effects.Transition`."""

    # ------------------------------------------------------------------ driver
    def run(self) -> Transition[Memory]:
        if self.m.outcome is not Outcome.RUNNING:
            return Transition(memory=self.m, wake=None)
        base_streak = self.m.streak
        try:
            if self.v.error is not None:
                wake = self._on_error(self.v.error)
            else:
                wake = self._handler()()
                self.m.streak = 0  # the rollbacks keep the streak: a failed write counts on
        except _Need as need:
            if not self._wrote:
                return Transition(memory=self.m0, needs=need.reads)  # replayed from m0 once the reads are in
            # a read after a write of this step: commit up to here, step again after the effects
            if self.v.error is None:
                self.m.streak = 0
            return self._transition(wake=self._now, again=True)
        except _Raise as r:
            self.m.streak = base_streak
            return Transition(memory=self.m, raise_=r.error)
        except _Replaced as r:
            return self._replaced(r.node)
        return self._transition(wake=wake, again=self._again)

    def _replaced(self, node: NodeInfo) -> Transition[Memory]:
        """A read shows another machine under the node's name (another UID: the Node object was
        deleted and registered again). Nothing this lifecycle knew applies to it — not its state,
        its cordon claim (a cordon the new machine registered with is not ours) nor what it owed
        (it went with the old machine): the lifecycle starts again from the start, the node
        planned from scratch from what the new machine records (:func:`~reconciler.plan.nodework.node_work`).
        The effects this step decided are dropped (none is a write: a read after a write of the
        same step is never answered from the view). The old lifecycle's stage pods on the node are
        deleted first: one created after the machine was replaced (between two of our requests)
        runs on the new machine, and no pod of the new lifecycle may start beside it (issue 34:
        one lifecycle's pods on a node at a time); a failed delete keeps the old memory, so the
        next step finds the new machine again and deletes again."""
        old = self.m0
        # a lifecycle of its own: no stage pod of the old machine's (which may outlive it until the
        # pod garbage collector removes it) is ever taken for one of the new machine's
        fresh = Memory(uid=node.uid, plan=work_plan(self._run_plan, node_work(self.recipe, node)),
                       lifecycle=f"{self.ctx.run_id}-{node.uid[:8]}")
        detail = f"uid {old.uid[:8] or '?'} -> {node.uid[:8]}: another machine under this name; planned from scratch"
        return Transition(memory=fresh, effects=(Announce(EventKind.REPLACED, detail), DeleteStages(self.recipe.name)),
                          rollbacks={1: old}, wake=self._now, again=True)

    def _transition(self, *, wake: float | None, again: bool = False) -> Transition[Memory]:
        if self.m.outcome is not Outcome.RUNNING:
            wake, again = None, False
        return Transition(memory=self.m, effects=tuple(self.effects), rollbacks=dict(self.rollbacks),
                          wake=wake, again=again)

    def _handler(self) -> Callable[[], float | None]:
        """The phase's handler (every :class:`~reconciler.model.vocab.Phase` has one)."""
        return getattr(self, _HANDLERS[self.m.phase])  # type: ignore[no-any-return]


#: Each phase's handler method of :class:`_Step` (a table made once, not at every step).
_HANDLERS: dict[Phase, str] = {
    Phase.START: "_phase_start",
    Phase.PRE_CORDON: "_phase_pre_cordon",
    Phase.CORDON: "_phase_cordon",
    Phase.WAIT: "_phase_wait",
    Phase.DRAIN: "_phase_drain",
    Phase.STAGES: "_phase_stages",
    Phase.INTERRUPT: "_phase_interrupt",
    Phase.POST_INTERRUPT: "_phase_post_interrupt",
    Phase.READINESS_GATE: "_phase_gate",
    Phase.UNCORDON: "_phase_uncordon",
    Phase.FAILING: "_phase_failing",
}

"""A lifecycle in flight for an older release (issue 34, "the in-flight record is the contract";
the rule: :mod:`reconciler.plan.owed`): it finishes what its record owes — a running stage pod of a
package the newer release changed is awaited, never started again; the packages it kept finish
their committed stages; the committed interrupt is requested once or awaited — and takes the
recipe's release up at a safe point, planned from what the node really has, in a lifecycle of its
own (new stage pod names; the cordon it holds is kept). Pure."""

from __future__ import annotations

from dataclasses import replace

from reconciler.execute.stepcore import StepCore
from reconciler.model.nodestate import dump_state, inflight_key, state_key
from reconciler.model.observed import NodeInfo
from reconciler.model.plan import NodePlan, Step
from reconciler.model.vocab import EventKind
from reconciler.plan.interrupts import describe
from reconciler.plan.nodework import node_work, work_plan
from reconciler.plan.owed import Owed, settle


def _steps_text(steps: tuple[Step, ...]) -> str:
    return ", ".join(f"{s.package} {s.to or s.from_} [{', '.join(s.stages)}]" for s in steps)


class ReleasePhases(StepCore):
    """Finishing an older release's commitment, and the safe point (module docstring)."""

    def _finish_owed(self, owed: Owed, node: NodeInfo) -> float | None:
        """Resume a lifecycle whose record is of another release: carry out what it owes."""
        m = self.m
        fl = m.inflight
        m.superseded, m.awaited = owed.superseded, owed.awaited
        m.plan = NodePlan(name=self.name, compartment=self._run_plan.compartment, batch=self._run_plan.batch,
                          steps=owed.steps, interrupt=owed.interrupt, cordon=bool(fl is not None and fl.interrupt))
        parts = [_steps_text(owed.steps)] if owed.steps else []
        if owed.interrupt is not None:
            parts.append(f"its {describe(owed.interrupt)}")
        owes = "; ".join(parts) or "nothing"
        self._event(EventKind.SUPERSEDED, f"release {owed.release or '?'} of run {owed.run} owes {owes}; "
                                          f"release {self.recipe.version} follows")
        if owed.nothing:
            return self._take_up(node)
        m.phase = owed.phase
        return self._now

    def _take_up(self, node: NodeInfo | None = None) -> float | None:
        """The safe point: the older release's commitment is done as far as it was kept (or nothing
        of it ran). The node is planned from what it records now (the record's own commitment left
        out: it is done) with the planner's function, and the lifecycle carries that out under a new
        lifecycle id (the cordon, if held, is kept: the cordon phase checks it again)."""
        self._checkpoint()
        m = self.m
        node = node if node is not None else self._read()
        name = self.recipe.name
        m.state = settle(m.state, m.superseded or ())
        after = {k: v for k, v in node.annotations.items() if k != inflight_key(name)}
        after[state_key(name)] = dump_state(m.state)  # written with the new commitment
        work = node_work(self.recipe, replace(node, annotations=after))
        old = m.lifecycle or self.ctx.run_id
        m.lifecycle = self.ctx.run_id if self.ctx.run_id != old else f"{old}-r"
        m.plan = work_plan(self._run_plan, work)
        m.superseded, m.awaited = None, ()
        m.runs, m.evictions, m.recordons, m.waiting_logged = [], {}, 0, False
        todo = _steps_text(work.steps) or "nothing to do"
        if work.interrupt is not None:
            todo += f", then {describe(work.interrupt)}"
        self._event(EventKind.RELEASE, f"release {self.recipe.version}: {todo}")
        return self._begin()

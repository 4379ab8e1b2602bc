"""The lifecycle phases up to a drained node: start (read, scope, resume), cordon, wait for
protected pods, drain (evictions and their answers, kubectl drain rules). Pure."""

from __future__ import annotations

from reconciler.execute.decide import (
    CordonAction,
    decide_cordon,
)
from reconciler.execute.effects import (
    Evict,
    EvictAnswer,
    EvictResult,
)
from reconciler.execute.memory import MAX_RECORDONS, EvictTrack
from reconciler.execute.stagework import build_runs, commit_state
from reconciler.execute.stepcore import StepCore
from reconciler.model.nodestate import (
    CordonRecord,
    cordon_key,
    dump_model,
    dump_state,
    failure_key,
    holds_claim,
    inflight_key,
    of_another_machine,
    readiness,
    recipe_keys,
    state_key,
    status_key,
)
from reconciler.model.observed import PodInfo
from reconciler.model.run import REMOVED_SUFFIX
from reconciler.model.vocab import (
    EventKind,
    FailureReason,
    NodeStatus,
    Phase,
)
from reconciler.plan.nodework import free_steps, node_work, work_plan
from reconciler.plan.owed import owed_work


class DrainPhases(StepCore):
    """The lifecycle phases up to a drained node (module docstring)."""

    # ------------------------------------------------------------------ phases
    def _phase_start(self) -> float | None:
        self._checkpoint()
        m = self.m
        node = self._read()
        if not m.uid:
            m.uid = node.uid
        name = self.recipe.name
        if of_another_machine(node.annotations, name, node.uid):
            # our records were written on another machine under this name: void; planned from scratch
            self._event(EventKind.REPLACED, "records of another machine under this name are void")
            m.state, m.inflight = {}, None
            m.pending.update({k: None for k in recipe_keys(name) if k in node.annotations})
            m.plan = work_plan(self.plan, node_work(self.recipe, node))
            node = self._know(node)
        m.owns_cordon = holds_claim(node.annotations, name, node.uid)
        if (why := self._out_of_scope(node)) is not None:
            return self._leave(why)
        fl = m.inflight
        retry = failure_key(self.recipe.name) in node.annotations
        if fl is not None and not retry:
            m.lifecycle = fl.lifecycle or fl.runId
        else:
            # a new lifecycle: stage attempts count from 1 again, under new stage pod names (a
            # replaced machine's lifecycle was named when it was found: machine.py ``_replaced``)
            m.lifecycle = m.lifecycle or self.ctx.run_id
            for k, e in list(m.state.items()):
                if e.restarts:
                    m.state[k] = e.model_copy(update={"restarts": 0})
            if m.plan is None:  # committed from what the node records now, with the planner's own function
                m.plan = work_plan(self._run_plan, node_work(self.recipe, node))
        if fl is not None:
            if not retry and (owed := owed_work(self.recipe, fl, m.state)) is not None:
                self._event(EventKind.RESUME, f"resuming at {fl.phase} (run {fl.runId})")
                return self._finish_owed(owed, node)  # the record is of an older release
            resume = {Phase.PRE_CORDON: Phase.PRE_CORDON, Phase.INTERRUPT: Phase.INTERRUPT,
                      Phase.POST_INTERRUPT: Phase.POST_INTERRUPT,
                      Phase.READINESS_GATE: Phase.READINESS_GATE, Phase.UNCORDON: Phase.UNCORDON}.get(fl.phase)
            if resume is None and (fl.phase is Phase.STAGES or not self.plan.cordon):
                resume = Phase.STAGES
            if resume is not None:
                self._event(EventKind.RESUME, f"resuming at {fl.phase} (run {fl.runId})")
                m.phase = resume
                return self._now
            # cordon/wait/drain: re-check everything; cordoned never means drained
        if node.ready is not True:
            # a node joins NotReady for minutes (drivers loading): waited for, within timeouts.nodeReady
            if (wake := self._ready_wait(node)) is not None:
                return wake
            limit = self.recipe.timeouts.nodeReady
            if fl is None:
                return self._not_started(f"waiting for the node to be Ready ({FailureReason.NODE_NOT_READY}: not "
                                         f"Ready within {limit} s; nothing was started, it is taken up once Ready)")
            return self._fail(FailureReason.NODE_NOT_READY,
                              f"node {self.name} is not Ready after {limit} s, before its drain (Ready="
                              f"{readiness(node.ready)}); retried once its readiness changes", keep_cordon=True)
        m.waiting_logged = False
        if fl is not None:
            self._event(EventKind.RESUME, f"resuming at {fl.phase} (run {fl.runId})")
        return self._begin()

    def _begin(self) -> float | None:
        """Carry out the plan: the stages of packages without an interrupt first, before any
        cordon (``pre-cordon``), when the node also has packages with one; else on to the cordon
        (which a plan without an interrupt skips)."""
        if self.plan.cordon and free_steps(self.plan.steps):
            self.m.phase = Phase.PRE_CORDON
            return self._phase_pre_cordon()
        self.m.phase = Phase.CORDON
        return self._phase_cordon()

    def _phase_pre_cordon(self) -> float | None:
        """The stages of the packages without an interrupt (:func:`free_steps`), on the node as it
        is — schedulable, its pods running (NodeWright gates only packages with an interrupt). The
        commitment is recorded with the first of them (phase ``pre-cordon``: nothing owed yet; a
        node that leaves the scope now is released); then the cordon, the wait and the drain."""
        m = self.m
        if not m.runs:
            name = self.recipe.name
            if self._fresh_commit():
                m.state = commit_state(m.state, self.plan.steps)
                self._defer({inflight_key(name): self._inflight(Phase.PRE_CORDON),
                             status_key(name): NodeStatus.IN_PROGRESS, state_key(name): dump_state(m.state)})
                m.pending_labels[status_key(name)] = NodeStatus.IN_PROGRESS
            m.runs = build_runs(self.recipe, m.state, free_steps(self.plan.steps))
        return self._drive(self._pre_cordon_done)

    def _pre_cordon_done(self) -> float | None:
        self.m.runs = []  # the stages phase plans every step again from the node's state
        self.m.phase = Phase.CORDON
        return self._phase_cordon()

    def _phase_cordon(self) -> float | None:
        self._checkpoint()
        m = self.m
        node = self._refresh()
        name = self.recipe.name
        # decided from the node as it is now: our claim there (a cordon whose answer was lost) is ours
        m.owns_cordon = holds_claim(node.annotations, name, node.uid)
        if self._fresh_commit():
            m.state = commit_state(m.state, self.plan.steps)
        if not self.plan.cordon:
            # nothing disruptive happens before the first stage: its record carries these too
            self._defer({inflight_key(name): self._inflight(Phase.STAGES), status_key(name): NodeStatus.IN_PROGRESS,
                         state_key(name): dump_state(m.state)})
            m.pending_labels[status_key(name)] = NodeStatus.IN_PROGRESS
            m.phase = Phase.STAGES
            return self._phase_stages()
        ann: dict[str, str | None] = {
            inflight_key(name): self._inflight(Phase.WAIT),
            status_key(name): NodeStatus.IN_PROGRESS,
            state_key(name): dump_state(m.state),
        }
        decision = decide_cordon(node, name)  # pure (execute/decide.py), from the fresh read
        if decision.claim:
            ann[cordon_key(name)] = dump_model(CordonRecord(runId=self.ctx.run_id, at=self._stamp(), uid=node.uid))
        self._patch(annotations=ann, labels={status_key(name): NodeStatus.IN_PROGRESS},
                    unschedulable=True if decision.cordon else None)
        m.owns_cordon = decision.action in (CordonAction.CORDON, CordonAction.SHARE, CordonAction.OURS)
        self._event(EventKind.CORDON, decision.detail)
        m.phase = Phase.WAIT
        return self._phase_wait()

    def _phase_wait(self) -> float | None:
        m = self.m
        pods = self._list_pods()
        cls = self._classify(pods, daemonsets=False)
        if cls.protected:
            names = ", ".join(p.ref for p in cls.protected)
            if not m.waiting_logged:
                self._event(EventKind.WAIT, f"blocked by {names}")
                m.waiting_logged = True
            limit = self.recipe.timeouts.waitNonInterrupt
            elapsed = self._elapsed(Phase.WAIT, m.inflight.timers.get(Phase.WAIT) if m.inflight else None)
            if elapsed >= limit:
                return self._block(f"protected pods still running after {limit} s: {names}")
            return self._now + min(self.ctx.poll_seconds * 6, limit - elapsed)
        m.phase = Phase.DRAIN
        return self._phase_drain(listed=pods)  # kubectl drain, too, lists the node's pods once

    def _phase_drain(self, listed: list[PodInfo] | None = None) -> float | None:
        """Evict what the drain removes and wait until it is gone. ``listed``: the node's pods as
        the wait phase just listed them (saves a second LIST)."""
        self._checkpoint()
        m = self.m
        m.own_evictions()  # the tracks are changed below (copy on write: Memory.copy shares them)
        now = self._now
        opts = self.recipe.drain
        answered = {ref for ref, t in m.evictions.items() if t.asked}
        if answered:
            if (failed := self._answers()) is not None:
                return failed
        elif not m.evictions:
            pods = listed if listed is not None else self._list_pods()
            cls = self._classify(pods, daemonsets=True)
            if cls.protected:  # a protected pod appeared after the wait: wait again, evict nothing
                m.phase = Phase.WAIT
                m.waiting_logged = False
                return self._phase_wait()
            if cls.blockers:
                detail = "; ".join(f"{p.ref}: {why}" for p, why in cls.blockers)
                return self._fail(FailureReason.DRAIN_REFUSED, f"drain refused before any eviction: {detail}",
                                  keep_cordon=False)
            for p in cls.to_remove:
                m.evictions[f"{p.namespace}/{p.name}"] = EvictTrack(p)
            if not m.evictions:
                return self._drained()
            # the drain's start is recorded so its timeout survives a restart
            self._patch(annotations={inflight_key(self.recipe.name): self._inflight(Phase.DRAIN)})
        asked = False
        for ref, tr in sorted(m.evictions.items()):
            if tr.evicted or tr.gone or tr.next_try > now or ref in answered:  # one try per pod per cycle
                continue
            tr.asked = True
            asked = True
            self._effect(Evict(tr.pod.namespace, tr.pod.name, tr.pod.uid, opts.gracePeriodSeconds))
        if asked:
            self._again = True  # the answers come back in the next step's view, in this cycle
            return self._now
        return self._drain_wait()

    def _answers(self) -> float | None:
        """Fold the answers to the evictions the last transition sent (kubectl drain's handling:
        404 gone; 409 gone only when the UID precondition failed; 429 retried after
        ``evictionRetrySeconds`` or the server's Retry-After; 500 with two PodDisruptionBudgets a
        failure, else retried; 403 NamespaceTerminating retried, else a failure)."""
        m = self.m
        now = self._now
        opts = self.recipe.drain
        for ref, tr in sorted(m.evictions.items()):
            if not tr.asked:
                continue
            res = self.v.evictions.get(ref)
            if res is None:
                tr.asked = False
                continue
            if res.answer is EvictAnswer.ACCEPTED:
                tr.evicted = True
                self._event(EventKind.EVICT, f"{ref}{REMOVED_SUFFIX}" if tr.pod.finished else ref)
            elif res.answer is EvictAnswer.NOT_FOUND:
                tr.gone = True
            elif res.answer is EvictAnswer.CONFLICT:
                cur = self._get_pod(tr.pod.namespace, tr.pod.name)
                if cur is None or cur.uid != tr.pod.uid:
                    tr.gone = True
                else:
                    tr.last_error = res.message
                    tr.next_try = now + opts.evictionRetrySeconds
            elif res.answer is EvictAnswer.TOO_MANY:
                tr.attempts += 1
                tr.last_error = res.message
                wait = opts.evictionRetrySeconds if res.disruption_budget else max(
                    opts.evictionRetrySeconds, res.retry_after or 0)
                tr.next_try = now + wait
                if tr.attempts == 1:  # said once per pod and drain, as kubectl drain says it (it repeats it)
                    self._event(EventKind.EVICT_REFUSED, _refusal(ref, res, wait, opts.timeoutSeconds))
            elif res.answer is EvictAnswer.SERVER:
                pdbs = [b.ref for b in self._pdbs() if b.selects(tr.pod)]
                if len(pdbs) < 2:  # not the several-PDBs refusal: an API server error, retried (§1.9)
                    tr.last_error = res.message
                    tr.next_try = now + opts.evictionRetrySeconds
                else:
                    self._clear_asked()
                    return self._fail(FailureReason.MULTIPLE_PDBS,
                                      f"eviction of {ref} refused: {res.message} PodDisruptionBudgets: "
                                      f"{', '.join(pdbs) or 'unknown'}", keep_cordon=True)
            elif res.answer is EvictAnswer.FORBIDDEN and res.reason == "NamespaceTerminating":
                tr.next_try = now + opts.evictionRetrySeconds
            elif res.answer is EvictAnswer.FORBIDDEN:
                self._clear_asked()
                return self._fail(FailureReason.FORBIDDEN, f"eviction of {ref} forbidden: {res.message}",
                                  keep_cordon=True)
            else:
                tr.last_error = res.message
                tr.next_try = now + opts.evictionRetrySeconds
            tr.asked = False
        return None

    def _clear_asked(self) -> None:
        for t in self.m.evictions.values():
            t.asked = False

    def _drain_wait(self) -> float | None:
        """Drained = every evicted pod is gone (absent, or a new UID), not "eviction accepted"; one
        look at the node's pods answers for all of them (kubectl GETs each pod; on a real cluster
        the watch store answers it: no request)."""
        m = self.m
        now = self._now
        opts = self.recipe.drain
        waiting = [tr for tr in m.evictions.values() if tr.evicted and not tr.gone]
        on_node = {(p.namespace, p.name): p for p in self._list_pods()} if waiting else {}
        for tr in waiting:
            cur = on_node.get((tr.pod.namespace, tr.pod.name))
            if cur is None or cur.uid != tr.pod.uid or (
                opts.skipWaitForDeleteTimeoutSeconds
                and cur.deletion_ts is not None
                and self._utc - cur.deletion_ts > opts.skipWaitForDeleteTimeoutSeconds
            ):
                tr.gone = True
        pending = [tr for tr in m.evictions.values() if not tr.gone]
        if not pending:
            return self._drained()
        elapsed = self._elapsed(Phase.DRAIN, m.inflight.timers.get(Phase.DRAIN) if m.inflight else None)
        if elapsed >= opts.timeoutSeconds:
            parts = []
            budgets = self._pdbs()
            for tr in pending:
                covering = [f"{b.ref} (allowed {b.disruptions_allowed})" for b in budgets if b.selects(tr.pod)]
                why = "still terminating" if tr.evicted else (tr.last_error or "not evicted")
                pdb_text = f"; PodDisruptionBudget {', '.join(covering)}" if covering else ""
                parts.append(f"{tr.pod.ref}: {why}{pdb_text}")
            return self._fail(FailureReason.DRAIN_TIMEOUT,
                              f"drain timed out after {opts.timeoutSeconds} s: " + "; ".join(parts),
                              keep_cordon=True)
        nxt = [tr.next_try for tr in pending if not tr.evicted]
        wake = min([*nxt, now + self.ctx.poll_seconds])
        return max(wake, now + 0.001)

    def _drained(self) -> float | None:
        self._checkpoint()
        m = self.m
        # S11: someone uncordoned the node during the drain: re-cordon and drain again (bounded)
        node = self._read()
        if m.owns_cordon and not node.unschedulable:
            m.recordons += 1
            if m.recordons > MAX_RECORDONS:
                return self._fail(FailureReason.EXTERNALLY_UNCORDONED,
                                  f"node was uncordoned by someone else {m.recordons} times during the drain")
            # the cordon goes with our claim when the node lost it (``reset`` removed our records and
            # released the node): never a cordon of ours without its record (decision (c))
            claim: dict[str, str | None] = {}
            if cordon_key(self.recipe.name) not in node.annotations:
                claim[cordon_key(self.recipe.name)] = dump_model(
                    CordonRecord(runId=self.ctx.run_id, at=self._stamp(), uid=node.uid))
            self._patch(annotations=claim or None, unschedulable=True)
            self._event(EventKind.CORDON, "re-cordoned: the node was uncordoned by someone else during the drain")
            m.evictions.clear()
            return self._now
        self._event(EventKind.DRAINED, f"{len(m.evictions)} pods gone")
        self._defer({inflight_key(self.recipe.name): self._inflight(Phase.STAGES)})
        m.phase = Phase.STAGES
        return self._phase_stages()


def _refusal(ref: str, res: EvictResult, wait: float, timeout: float) -> str:
    """The detail of an :attr:`EventKind.EVICT_REFUSED` event: the pod, why the API server refused
    its eviction (429: a PodDisruptionBudget, with the budget's own words, or throttling) and what
    happens next (``kubectl drain``: "error when evicting ... (will retry after 5s)")."""
    why = res.message.strip() or ("a PodDisruptionBudget forbids it" if res.disruption_budget else "too many requests")
    return f"{ref}: {why}; retrying every {wait:g} s until the drain timeout ({timeout:g} s)"

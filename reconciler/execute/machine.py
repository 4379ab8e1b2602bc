"""The per-node lifecycle as a pure transition function (issue 12).

``cordon → wait for protected pods → drain → stages (+checks, dependency order) → merged
interrupt → post-interrupt stages → uncordon`` (architecture.md §1; semantics-nodewright.md §2 with
our decisions).

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

from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from reconciler.diff import config_digest
from reconciler.errors import ClusterError, ForbiddenError, NotFoundError, TransientError
from reconciler.execute.decide import (
    CordonAction,
    StageVerdict,
    cordon_claims,
    decide_cordon,
    decide_release,
    judge_stage,
    reboot_confirmed,
)
from reconciler.execute.effects import (
    Announce,
    DaemonSetExists,
    DeleteStages,
    Effect,
    EmitEvent,
    Evict,
    EvictAnswer,
    GetPod,
    ListPdbs,
    ListPods,
    Log,
    LogLevel,
    PatchNode,
    Read,
    ReadNode,
    ReadStage,
    SetCondition,
    StartStage,
    Transition,
    View,
)
from reconciler.execute.retry import DEFAULT_BOUNDS, Fail, Gone, Retry, RetryBounds, classify
from reconciler.execute.stagework import StageRun, build_runs, interrupt_packages, interrupt_spec, stage_spec
from reconciler.model.nodestate import (
    IGNORE_LABEL,
    CordonRecord,
    FailureRecord,
    InFlight,
    PackageState,
    condition_type,
    config_key,
    cordon_key,
    dump_config_digests,
    dump_model,
    dump_state,
    failure_key,
    inflight_key,
    is_ignored,
    parse_config_digests,
    parse_model,
    parse_state,
    state_key,
    status_key,
)
from reconciler.model.observed import NodeInfo, PdbInfo, PodInfo
from reconciler.model.plan import NodePlan, Step
from reconciler.model.recipe import Interrupt, Recipe
from reconciler.model.utctime import elapsed_since, to_rfc3339
from reconciler.model.vocab import (
    IMAGE_PULL_REASONS,
    EventKind,
    FailureReason,
    InterruptType,
    NodeStatus,
    PackageStatus,
    Phase,
    Stage,
)
from reconciler.plan.drain import classify_pods
from reconciler.ports import StageSpec, StageStatus

MAX_RECORDONS = 3


class Outcome(Enum):
    """Where a node run ended (RUNNING while it has not)."""

    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"
    BLOCKED = "blocked"
    REMOVED = "removed"
    LEFT = "left"


@dataclass(frozen=True)
class StepContext:
    """What every step of one ``apply`` shares (fixed for the run; no ports, no clock).

    ``poll_seconds``: how long to wait between looks at something that has no event;
    ``image_pull_grace``: seconds an image pull may fail before the stage fails (s);
    ``runtime_required``: names of every runtime-required recipe that selects nodes of this run
    (the taint leaves a node only when each of them is complete on it, semantics §3.6);
    ``inputs``: digest of the recipe and policy (failure records carry it).
    """

    recipe: Recipe
    run_id: str
    plan_hash: str
    poll_seconds: float = 5.0
    image_pull_grace: float = 60.0
    agent_image: str | None = None
    inputs: str = ""
    runtime_required: tuple[str, ...] = ()
    retry_bounds: RetryBounds = DEFAULT_BOUNDS


@dataclass
class EvictTrack:
    """One pod the drain removes: evicted (accepted), gone (404 or a new UID), when to try again
    (monotonic clock), the last refusal and how many 429s it got."""

    pod: PodInfo
    evicted: bool = False
    gone: bool = False
    next_try: float = 0.0
    last_error: str = ""
    attempts: int = 0
    asked: bool = False  # an eviction was sent in the last transition; its answer is in View.evictions

    def copy(self) -> EvictTrack:
        """An independent copy."""
        return replace(self)


@dataclass
class Memory:
    """Everything a node run knows that is not on the node: the phase, what it holds, its stage and
    eviction progress, deferred records, and how it ended. :func:`step` never changes a Memory it
    is given; it returns a new one."""

    phase: Phase = Phase.START
    outcome: Outcome = Outcome.RUNNING
    failure: FailureRecord | None = None
    message: str = ""
    owns_cordon: bool = False
    node: NodeInfo | None = None  # the node as last read or written (with deferred records merged)
    state: dict[str, PackageState] = field(default_factory=dict)
    inflight: InFlight | None = None
    evictions: dict[str, EvictTrack] = field(default_factory=dict)
    recordons: int = 0
    runs: list[StageRun] = field(default_factory=list)
    waiting_logged: bool = False
    lifecycle: str = ""
    pending: dict[str, str | None] = field(default_factory=dict)
    pending_labels: dict[str, str | None] = field(default_factory=dict)
    local_start: dict[str, float] = field(default_factory=dict)
    streak: int = 0  # consecutive API errors (execute/retry.py bounds them)
    streak_start: float = 0.0
    failure_args: tuple[str, str, dict[str, Any]] | None = None
    give_up_recording: bool = False

    def copy(self) -> Memory:
        """An independent copy (containers copied; the records in them are immutable)."""
        return replace(
            self,
            state=dict(self.state),
            evictions={k: t.copy() for k, t in self.evictions.items()},
            runs=[r.copy() for r in self.runs],
            pending=dict(self.pending),
            pending_labels=dict(self.pending_labels),
            local_start=dict(self.local_start),
        )


class _Need(Exception):
    """Raised inside a step when it needs reads the view does not hold."""

    def __init__(self, *reads: Read) -> None:
        super().__init__()
        self.reads = reads


def step(memory: Memory, view: View, plan: NodePlan, ctx: StepContext, now: float, utc: float) -> Transition[Memory]:
    """Decide the node run's next move (module docstring). ``now``: monotonic clock seconds (wake
    times are on this clock); ``utc``: UTC epoch seconds (everything persisted or compared with the
    cluster's timestamps). Pure: the same arguments give the same transition, ``memory`` is not
    changed. API errors of the previous transition (``view.error``) go through
    :func:`reconciler.execute.retry.classify`: retried with bounded backoff, then a named failure; a
    node that disappeared ends as REMOVED."""
    return _Step(memory, view, plan, ctx, now, utc).run()


class _Step:
    """One invocation of :func:`step`: works on a copy of the memory and collects effects."""

    def __init__(self, memory: Memory, view: View, plan: NodePlan, ctx: StepContext, now: float, utc: float) -> None:
        self.m0 = memory
        self.m = memory.copy()
        self.v = view
        self.plan = plan
        self.ctx = ctx
        self.recipe = ctx.recipe
        self.name = plan.name
        self._now = now
        self._utc = utc
        self.effects: list[Effect] = []
        self.rollbacks: dict[int, Memory] = {}
        self.fresh: NodeInfo | None = view.fresh
        self._nodes_used = 0
        self._lists_used = 0
        self._wrote = False
        self._again = False

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
        return self._transition(wake=wake, again=self._again)

    def _transition(self, *, wake: float | None, again: bool = False) -> Transition[Memory]:
        if self.m.outcome is not Outcome.RUNNING:
            wake, again = None, False
        return Transition(memory=self.m, effects=tuple(self.effects), rollbacks=dict(self.rollbacks),
                          wake=wake, again=again)

    def _handler(self) -> Any:
        return getattr(self, f"_phase_{self.m.phase.value.replace('-', '_')}")

    # ------------------------------------------------------------------ reads
    def _fetch(self) -> NodeInfo:
        """A new GET of the node (deferred records merged: they are part of what we know of it)."""
        if self._wrote or self._nodes_used >= len(self.v.nodes):
            raise _Need(ReadNode())
        node = self.v.nodes[self._nodes_used]
        self._nodes_used += 1
        if node is None:  # an optional read's 404 was consumed by the existence check; read again
            raise _Need(ReadNode())
        return self._know(node)

    def _know(self, node: NodeInfo) -> NodeInfo:
        if self.m.pending:
            ann = {**node.annotations, **self.m.pending}
            node = replace(node, annotations={k: v for k, v in ann.items() if v is not None})
        self.m.node = node
        self.fresh = node
        return node

    def _node_exists(self) -> bool:
        if self._nodes_used >= len(self.v.nodes):
            raise _Need(ReadNode(optional=True))
        node = self.v.nodes[self._nodes_used]
        self._nodes_used += 1
        return node is not None

    def _refresh(self) -> NodeInfo:
        """The node as it is now (read in this cycle, or as the last write returned it), for a
        decision about ownership (cordon, uncordon, taints); our in-memory package state is kept."""
        if self.fresh is not None and not self._wrote:
            return self._know(self.fresh) if self.m.node is not self.fresh else self.fresh
        return self._fetch()

    def _read(self) -> NodeInfo:
        """Read the node and our records on it (package state, in-flight record) afresh."""
        node = self._fetch()
        self.m.state = parse_state(node.annotations.get(state_key(self.recipe.name)), node=self.name,
                                   key=state_key(self.recipe.name))
        self.m.inflight = parse_model(InFlight, node.annotations.get(inflight_key(self.recipe.name)))
        return node

    def _list_pods(self) -> list[PodInfo]:
        if self._wrote or self._lists_used >= len(self.v.pod_lists):
            raise _Need(ListPods())
        pods = self.v.pod_lists[self._lists_used]
        self._lists_used += 1
        return list(pods)

    def _get_pod(self, namespace: str, name: str) -> PodInfo | None:
        key = (namespace, name)
        if self._wrote or key not in self.v.pods:
            raise _Need(GetPod(namespace, name))
        return self.v.pods[key]

    def _pdbs(self) -> tuple[PdbInfo, ...]:
        if self._wrote or self.v.pdbs is None:
            raise _Need(ListPdbs())
        return self.v.pdbs

    def _stage_status(self, spec: StageSpec) -> StageStatus:
        st = self.v.stages.get(spec.pod_name)
        if self._wrote or st is None:
            raise _Need(ReadStage(spec))
        return st

    def _classify(self, pods: list[PodInfo], *, daemonsets: bool) -> Any:
        missing: list[Read] = []

        def exists(ns: str, name: str) -> bool:
            if (ns, name) in self.v.daemonsets:
                return self.v.daemonsets[(ns, name)]
            missing.append(DaemonSetExists(ns, name))
            return True

        kw: dict[str, Any] = {"daemonset_exists": exists} if daemonsets else {}
        cls = classify_pods(pods, self.recipe.drain, self.recipe.podNonInterruptLabels, now_wall=self._utc, **kw)
        if missing:
            raise _Need(*dict.fromkeys(missing))
        return cls

    # ------------------------------------------------------------------ effects
    def _effect(self, effect: Effect) -> None:
        self.effects.append(effect)

    def _write(self, effect: Effect, rollback: Memory | None = None) -> None:
        """A cluster write; if it fails, the memory is ``rollback`` (default: as it is now)."""
        self.rollbacks[len(self.effects)] = rollback if rollback is not None else self.m.copy()
        self.effects.append(effect)
        self._wrote = True

    def _event(self, kind: EventKind, detail: str = "") -> None:
        self._effect(Announce(kind, detail))

    def _stamp(self) -> str:
        """The current UTC instant as persisted (RFC 3339)."""
        return to_rfc3339(self._utc)

    def _elapsed(self, timer: str, persisted: str | None) -> float:
        """Seconds since ``persisted`` (an RFC 3339 instant from a node record) by the UTC clock, so
        the timeout survives a restart in another process; when the record has no readable instant
        (written by an older version), counted from when this process first asked about ``timer``."""
        e = elapsed_since(persisted, self._utc)
        if e is not None:
            return e
        first = self.m.local_start.setdefault(timer, self._now)
        return self._now - first

    def _patch(
        self,
        annotations: dict[str, str | None] | None = None,
        labels: dict[str, str | None] | None = None,
        unschedulable: bool | None = None,
        taints: Any = None,
    ) -> None:
        """Write to the node, with the deferred records. Ownership changes (cordon, uncordon, the
        taint list replaced whole) are conditional on the node they were decided from: a 409 means
        the node changed; the next step reads again and decides again."""
        rollback = self.m.copy()  # a failed write keeps the deferred records for the retry
        if self.m.pending:
            annotations = {**self.m.pending, **(annotations or {})}
            self.m.pending = {}
        if self.m.pending_labels:
            labels = {**self.m.pending_labels, **(labels or {})}
            self.m.pending_labels = {}
        # plain strings on the wire (vocabulary members are str subclasses)
        annotations = {k: None if v is None else str(v) for k, v in annotations.items()} if annotations else annotations
        labels = {k: None if v is None else str(v) for k, v in labels.items()} if labels else labels
        decided = taints is not None or unschedulable is not None
        rv = self.m.node.resource_version if decided and self.m.node is not None else None
        self._write(PatchNode(annotations=annotations, labels=labels, unschedulable=unschedulable,
                              taints=tuple(taints) if taints is not None else None, resource_version=rv or None),
                    rollback)
        if self.m.node is not None:  # what the node will be once written (the answer replaces it)
            ann = {**self.m.node.annotations, **(annotations or {})}
            lab = {**self.m.node.labels, **(labels or {})}
            self.m.node = replace(
                self.m.node,
                annotations={k: v for k, v in ann.items() if v is not None},
                labels={k: v for k, v in lab.items() if v is not None},
                unschedulable=self.m.node.unschedulable if unschedulable is None else unschedulable,
                taints=self.m.node.taints if taints is None else tuple(taints),
            )

    def _annotation(self, key: str) -> str | None:
        """The value of one of our annotations as we last wrote or deferred it."""
        if key in self.m.pending:
            return self.m.pending[key]
        return self.m.node.annotations.get(key) if self.m.node else None

    def _defer(self, annotations: dict[str, str | None]) -> None:
        """Record to be written with the node's next write. Used for "after" records (a stage
        completed) whose next effect is always preceded by a write: the completed stage pod stays
        until the node is complete, so a run that stops before the write finds it and records it."""
        self.m.pending.update(annotations)

    def _inflight(self, phase: Phase, **extra: Any) -> str:
        fl = self.m.inflight
        base = fl.model_dump() if fl else {}
        lifecycle = self.m.lifecycle or self.ctx.run_id
        stamp = self._stamp()
        timers = dict(base.get("timers") or {}) if base.get("lifecycle", lifecycle) == lifecycle else {}
        if phase in (Phase.WAIT, Phase.DRAIN):
            timers.setdefault(phase, stamp)  # its timeout counts from the first start, across restarts
        base.update(runId=self.ctx.run_id, planHash=self.ctx.plan_hash, phase=phase, since=stamp,
                    lifecycle=lifecycle, timers=timers)
        if phase in (Phase.WAIT, Phase.DRAIN, Phase.STAGES) and self.plan.interrupt is not None:
            # the interrupt is owed from the start, so a restart after the stages never loses it
            base.update(interrupt=self.plan.interrupt.model_dump(mode="json"),
                        interruptPackages=interrupt_packages(self.plan.steps), requestedAt=None)
        base.update(extra)
        self.m.inflight = InFlight.model_validate(base)
        return dump_model(self.m.inflight)

    def _set_entry(self, key: str, name: str, version: str, stage: str, state: str, step: Step,
                   restarts: int | None = None) -> None:
        old = self.m.state.get(key)
        image, sha = self._image_of(step, version)
        self.m.state[key] = PackageState(
            name=name,
            version=version,
            image=image or (old.image if old else ""),
            containerSHA=sha if sha is not None else (old.containerSHA if old else None),
            stage=stage,
            state=state,
            restarts=restarts if restarts is not None else (old.restarts if old else 0),
        )

    def _image_of(self, step: Step, version: str) -> tuple[str, str | None]:
        pkg = self.recipe.packages.get(step.package)
        if pkg is not None and pkg.version == version:
            return pkg.image, pkg.containerSHA
        old = self.m.state.get(f"{step.package}|{version}")
        return (old.image, old.containerSHA) if old else ("", None)

    # ------------------------------------------------------------------ errors
    def _on_error(self, e: ClusterError) -> float | None:
        m = self.m
        if m.phase is Phase.FAILING and isinstance(e, ForbiddenError):
            # RBAC refuses even the failure record: nothing can be recorded on any node; the run
            # stops with the API's one-line reason (exit 4) rather than fail nodes it cannot mark
            raise _Raise(e)
        if m.phase is Phase.FAILING and isinstance(e, NotFoundError):
            m.give_up_recording = True  # the node is gone: the failure is reported, not recorded
            return self._phase_failing()
        now = self._now
        if m.streak == 0:
            m.streak_start = now
        m.streak += 1
        decision = classify(e, m.streak, now - m.streak_start, self.ctx.retry_bounds)
        if isinstance(decision, Gone):
            if m.node is not None and not self._node_exists():
                m.outcome = Outcome.REMOVED
                m.message = f"node {self.name} was deleted during the run"
                self._event(EventKind.REMOVED, m.message)
                return None
            # something the step needed is missing (not the node): retried within the same bounds
            decision = classify(TransientError(str(e), e.status, e.reason), m.streak, now - m.streak_start,
                                self.ctx.retry_bounds)
        if isinstance(decision, Fail):
            if m.phase is Phase.FAILING:  # recording the failure itself keeps failing: report it, stop trying
                m.give_up_recording = True
                return self._phase_failing()
            m.streak, m.streak_start = 0, now  # recording the failure gets bounds of its own
            return self._fail(decision.reason, decision.message)
        assert isinstance(decision, Retry)
        self._effect(Log(LogLevel.INFO, f"node {self.name}: {e}; retry {m.streak} in {decision.after:.0f} s"))
        return now + decision.after

    def _out_of_scope(self, node: NodeInfo) -> str | None:
        """Why the node must not be (further) worked on: it left the selector or was ignored."""
        if not self.recipe.nodeSelector.matches(node.labels):
            return "node no longer matches the recipe's nodeSelector"
        if is_ignored(node.labels):
            return f"node is labelled {IGNORE_LABEL}=true"
        return None

    # ------------------------------------------------------------------ phases
    def _phase_start(self) -> float | None:
        m = self.m
        node = self._read()
        m.owns_cordon = cordon_key(self.recipe.name) in node.annotations
        if (why := self._out_of_scope(node)) is not None:
            return self._leave(why)
        fl = m.inflight
        retry = failure_key(self.recipe.name) in node.annotations
        if fl is not None and not retry:
            m.lifecycle = fl.lifecycle or fl.runId
        else:
            # a new lifecycle: stage attempts count from 1 again, under new stage pod names
            m.lifecycle = self.ctx.run_id
            for k, e in list(m.state.items()):
                if e.restarts:
                    m.state[k] = e.model_copy(update={"restarts": 0})
        if fl is not None:
            self._event(EventKind.RESUME, f"resuming at {fl.phase} (run {fl.runId})")
            resume = {Phase.INTERRUPT: Phase.INTERRUPT, Phase.POST_INTERRUPT: Phase.POST_INTERRUPT,
                      Phase.UNCORDON: Phase.UNCORDON}.get(fl.phase)
            if resume is None and (fl.phase is Phase.STAGES or not self.plan.cordon):
                resume = Phase.STAGES
            if resume is not None:
                m.phase = resume
                return self._now
            # cordon/wait/drain: re-check everything; cordoned never means drained
        if node.ready is not True:
            return self._fail(FailureReason.NODE_NOT_READY,
                              f"node {self.name} is not Ready; nothing was started", keep_cordon=True)
        m.phase = Phase.CORDON
        return self._phase_cordon()

    def _phase_cordon(self) -> float | None:
        m = self.m
        node = self._refresh()
        name = self.recipe.name
        # decided from the node as it is now: our claim there (a cordon whose answer was lost) is ours
        m.owns_cordon = cordon_key(name) in node.annotations
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
            ann[cordon_key(name)] = dump_model(CordonRecord(runId=self.ctx.run_id, at=self._stamp()))
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
        m = self.m
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
                self._event(EventKind.EVICT, f"{ref} (finished: removed)" if tr.pod.finished else ref)
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
        """Drained = every evicted pod is gone (404 or a new UID), not "eviction accepted"; one LIST
        of the node's pods answers for all of them (kubectl GETs each pod)."""
        m = self.m
        now = self._now
        opts = self.recipe.drain
        waiting = [tr for tr in m.evictions.values() if tr.evicted and not tr.gone]
        on_node: dict[tuple[str, str], PodInfo] = {}
        if len(waiting) > 1:
            on_node = {(p.namespace, p.name): p for p in self._list_pods()}
        for tr in waiting:
            cur = on_node.get((tr.pod.namespace, tr.pod.name)) if len(waiting) > 1 else self._get_pod(
                tr.pod.namespace, tr.pod.name)
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
        m = self.m
        # S11: someone uncordoned the node during the drain: re-cordon and drain again (bounded)
        node = self._read()
        if m.owns_cordon and not node.unschedulable:
            m.recordons += 1
            if m.recordons > MAX_RECORDONS:
                return self._fail(FailureReason.EXTERNALLY_UNCORDONED,
                                  f"node was uncordoned by someone else {m.recordons} times during the drain")
            self._patch(unschedulable=True)
            self._event(EventKind.CORDON, "re-cordoned: the node was uncordoned by someone else during the drain")
            m.evictions.clear()
            return self._now
        self._event(EventKind.DRAINED, f"{len(m.evictions)} pods gone")
        self._defer({inflight_key(self.recipe.name): self._inflight(Phase.STAGES)})
        m.phase = Phase.STAGES
        return self._phase_stages()

    # ------------------------------------------------------------------ stages
    def _spec(self, run: StageRun, stage: str) -> StageSpec:
        return stage_spec(self.recipe, self.name, run, stage, lifecycle=self.m.lifecycle or self.ctx.run_id,
                          agent_image=self.ctx.agent_image)

    def _phase_stages(self) -> float | None:
        if not self.m.runs and self.plan.steps:
            self.m.runs = build_runs(self.recipe, self.m.state, self.plan.steps)
        return self._drive(self._stages_done)

    def _stages_done(self) -> float | None:
        if self.plan.interrupt is not None:
            self.m.phase = Phase.INTERRUPT
            return self._phase_interrupt()
        self.m.phase = Phase.UNCORDON
        return self._phase_uncordon()

    def _drive(self, on_done: Any) -> float | None:
        """Advance every runnable step (its ``after`` packages done) by its stages, in parallel.
        Before any new stage starts, the node's scope is checked on a fresh read: out of scope, the
        running stages finish and nothing new starts; then the node leaves (:meth:`_leave`).
        Every running stage's status is read first, in one round of reads."""
        m = self.m
        runs = m.runs
        now = self._now
        why = None
        if any(not r.done and not r.running for r in runs):
            why = self._out_of_scope(self._refresh())
            if why is not None and not any(r.running for r in runs):
                return self._leave(why)
        looks = [ReadStage(self._spec(r, r.stages[r.index])) for r in runs
                 if r.running and not r.done and r.launched != now
                 and (r.retry_at is None or r.retry_at <= now)
                 and self._spec(r, r.stages[r.index]).pod_name not in self.v.stages]
        if looks and not self._wrote:
            raise _Need(*looks)
        done_pkgs = {r.step.package for r in runs if r.done}
        wakes: list[float] = []
        for run in runs:
            if run.done or (why is not None and not run.running):  # out of scope: let what runs finish
                continue
            if any(dep not in done_pkgs for dep in run.step.after if any(r.step.package == dep for r in runs)):
                continue
            if run.retry_at is not None and run.retry_at > now:
                wakes.append(run.retry_at)
                continue
            if run.running and run.launched == now:  # created in this cycle: looked at after a poll
                wakes.append(now + self.ctx.poll_seconds)
                continue
            w = self._drive_one(run)
            if m.outcome is not Outcome.RUNNING:
                return None
            if w is not None:
                wakes.append(w)
        if all(r.done for r in runs):
            return self._leave(why) if why is not None else on_done()
        if why is not None and not any(r.running for r in runs):
            return self._leave(why)
        if any(r.done for r in runs) and not wakes:
            return now  # a dependency finished: start its dependents now
        return min(wakes) if wakes else now + self.ctx.poll_seconds

    def _drive_one(self, run: StageRun) -> float | None:
        now = self._now
        stage = run.stages[run.index]
        spec = self._spec(run, stage)
        if not run.running and run.attempt > self.recipe.timeouts.stageRetries + 1:
            return self._fail(FailureReason.STAGE_FAILED,
                              f"{run.step.package} {run.version} {stage} failed {run.attempt - 1} "
                              "time(s); no attempts left", keep_cordon=True, stage=stage, package=run.step.package)
        if not run.running:
            self._set_entry(run.key, run.step.package, run.version, stage, PackageStatus.IN_PROGRESS, run.step,
                            restarts=run.attempt - 1)
            self._patch(annotations={state_key(self.recipe.name): dump_state(self.m.state)})
            self._write(StartStage(spec))
            run.running, run.started, run.retry_at, run.launched = True, self._utc, None, now
            self._event(EventKind.STAGE_START, f"{run.step.package} {run.version} {stage} (attempt {run.attempt})")
            return now + self.ctx.poll_seconds
        st = self._stage_status(spec)
        utc = self._utc
        if run.started is None:  # resumed: the pod's own start time (UTC) keeps the timeout across restarts
            run.started = st.started if st.started is not None else utc
        j = judge_stage(st.phase, st.reason, utc - run.started, timeout=self.recipe.timeouts.stage,
                        pull_grace=self.ctx.image_pull_grace)  # pure (execute/decide.py)
        if j.verdict is StageVerdict.MISSING:
            self._write(StartStage(spec))
            run.started, run.launched = utc, now
            return now + self.ctx.poll_seconds
        if j.verdict is StageVerdict.SUCCEEDED:
            return self._stage_succeeded(run)
        if j.verdict is StageVerdict.FAILED:
            return self._stage_failed(run, st.exit_code, j.reason, st.log_tail)
        return now + min(self.ctx.poll_seconds, j.wake_in)

    def _stage_succeeded(self, run: StageRun) -> float | None:
        stage = run.stages[run.index]
        m = self.m
        self._event(EventKind.STAGE_END, f"{run.step.package} {run.version} {stage} ok")
        name = self.recipe.name
        ann: dict[str, str | None] = {}
        if stage == Stage.UNINSTALL:
            m.state.pop(run.key, None)
            digests = parse_config_digests(self._annotation(config_key(name)))
            if digests.pop(run.step.package, None) is not None:
                ann[config_key(name)] = dump_config_digests(digests)
        else:
            self._set_entry(run.key, run.step.package, run.version, stage, PackageStatus.COMPLETE, run.step, restarts=0)
        if stage == Stage.UPGRADE:  # other versions of the package are replaced (semantics §2.3)
            for k in [k for k in m.state if k.startswith(f"{run.step.package}|") and k != run.key]:
                del m.state[k]
        pkg = self.recipe.packages.get(run.step.package)
        if stage == Stage.CONFIG and pkg is not None and pkg.version == run.version:
            digests = parse_config_digests(self._annotation(config_key(name)))
            digests[pkg.name] = config_digest(pkg)
            ann[config_key(name)] = dump_config_digests(digests)
        run.index += 1
        run.attempt = 1
        run.running = False
        run.launched = None
        if run.index >= len(run.stages):
            run.done = True
        ann[state_key(name)] = dump_state(m.state)
        self._defer(ann)
        return self._now

    def _stage_failed(self, run: StageRun, code: int | None, reason: str, tail: str) -> float | None:
        stage = run.stages[run.index]
        now = self._now
        retries = self.recipe.timeouts.stageRetries
        self._set_entry(run.key, run.step.package, run.version, stage, PackageStatus.ERRORING, run.step,
                        restarts=run.attempt)
        if run.attempt <= retries:
            self._patch(annotations={state_key(self.recipe.name): dump_state(self.m.state)})
            delay = min(300.0, self.recipe.timeouts.retryBackoff * (2 ** (run.attempt - 1)))
            self._event(EventKind.STAGE_RETRY,
                        f"{run.step.package} {stage} failed (exit {code}, {reason}); retry in {delay:.0f} s")
            run.attempt += 1
            run.running = False
            run.launched = None
            run.retry_at = now + delay
            return run.retry_at
        return self._fail(
            FailureReason(reason) if reason in (FailureReason.STAGE_TIMEOUT, *IMAGE_PULL_REASONS)
            else FailureReason.STAGE_FAILED,
            f"{run.step.package} {run.version} {stage} failed after {run.attempt} attempt(s): "
            f"exit code {code}, {reason}",
            keep_cordon=True,
            stage=stage,
            package=run.step.package,
            exit_code=code,
            log_tail=tail,
        )

    # ------------------------------------------------------------------ interrupt
    def _interrupt_stage(self, interrupt: Interrupt) -> StageSpec:
        return interrupt_spec(self.recipe, self.name, self.plan.steps, interrupt,
                              lifecycle=self.m.lifecycle or self.ctx.run_id, agent_image=self.ctx.agent_image)

    def _phase_interrupt(self) -> float | None:
        m = self.m
        now = self._now
        fl = m.inflight
        node = self._read()
        if fl is None or fl.phase is not Phase.INTERRUPT or fl.requestedAt is None:
            interrupt = self.plan.interrupt
            if interrupt is None:
                m.phase = Phase.UNCORDON
                return self._phase_uncordon()
            if (why := self._out_of_scope(node)) is not None:
                return self._leave(f"{why} (before the interrupt)")
            if self.plan.cordon and not node.unschedulable:
                # S11: never interrupt a node that is not cordoned
                self._patch(unschedulable=True)
                self._event(EventKind.CORDON, "re-cordoned before the interrupt")
                m.phase = Phase.DRAIN
                m.evictions.clear()
                return self._now
            pkgs = interrupt_packages(self.plan.steps)
            for s in self.plan.steps:
                if s.package in pkgs and s.to:
                    self._set_entry(f"{s.package}|{s.to}", s.package, s.to, Stage.INTERRUPT,
                                    PackageStatus.IN_PROGRESS, s)
            ann: dict[str, str | None] = {
                inflight_key(self.recipe.name): self._inflight(
                    Phase.INTERRUPT,
                    interrupt=interrupt.model_dump(mode="json"),
                    interruptPackages=pkgs,
                    bootID=node.boot_id,
                    requestedAt=self._stamp(),
                ),
                state_key(self.recipe.name): dump_state(m.state),
            }
            self._patch(annotations=ann)
            self._write(StartStage(self._interrupt_stage(interrupt)))
            services = f" {','.join(interrupt.services)}" if interrupt.services else ""
            self._event(EventKind.INTERRUPT, f"{interrupt.type}{services}")
            return now + self.ctx.poll_seconds
        interrupt = Interrupt.model_validate(fl.interrupt) if fl.interrupt else self.plan.interrupt
        if interrupt is None:
            m.phase = Phase.POST_INTERRUPT
            return self._now
        spec = self._interrupt_stage(interrupt)
        if interrupt.type == InterruptType.REBOOT:
            if reboot_confirmed(node, fl.bootID):
                self._event(EventKind.REBOOTED, f"bootID {fl.bootID[:8]} -> {node.boot_id[:8]}")
                return self._interrupt_done()
            st = self._stage_status(spec)
            if st.phase == "missing" and node.boot_id == fl.bootID and node.ready is True:
                # the request never reached the node (we stopped between the record and the pod)
                self._write(StartStage(spec))
            waited = self._elapsed(Phase.INTERRUPT, fl.requestedAt)
            if waited >= self.recipe.timeouts.reboot:
                return self._fail(FailureReason.REBOOT_TIMEOUT,
                                  f"node did not come back from the reboot within {self.recipe.timeouts.reboot} s "
                                  f"(bootID still {node.boot_id[:8] or 'unknown'}, Ready={node.ready})",
                                  keep_cordon=True, stage=Stage.INTERRUPT)
            return now + min(self.ctx.poll_seconds, self.recipe.timeouts.reboot - waited)
        st = self._stage_status(spec)
        if st.phase == "missing":
            self._write(StartStage(spec))
            return now + self.ctx.poll_seconds
        if st.phase == "succeeded":
            return self._interrupt_done()
        if st.phase == "failed" or self._elapsed(Phase.INTERRUPT, fl.requestedAt) >= self.recipe.timeouts.stage:
            return self._fail(FailureReason.INTERRUPT_FAILED,
                              f"{interrupt.type} interrupt failed: exit {st.exit_code} {st.reason}",
                              keep_cordon=True, stage=Stage.INTERRUPT, exit_code=st.exit_code, log_tail=st.log_tail)
        return now + self.ctx.poll_seconds

    def _interrupt_done(self) -> float | None:
        m = self.m
        pkgs = m.inflight.interruptPackages if m.inflight else ()
        for s in self.plan.steps:
            if s.package in pkgs and s.to:
                self._set_entry(f"{s.package}|{s.to}", s.package, s.to, Stage.INTERRUPT, PackageStatus.COMPLETE, s)
        self._defer({
            inflight_key(self.recipe.name): self._inflight(Phase.POST_INTERRUPT),
            state_key(self.recipe.name): dump_state(m.state),
        })
        m.phase = Phase.POST_INTERRUPT
        return self._now

    def _phase_post_interrupt(self) -> float | None:
        m = self.m
        if not m.runs or m.runs[0].stages != [Stage.POST_INTERRUPT]:
            if m.node is None or m.inflight is None:
                self._read()
            pkgs = m.inflight.interruptPackages if m.inflight else interrupt_packages(self.plan.steps)
            steps = [s for s in self.plan.steps if s.package in pkgs and s.to]
            m.runs = []
            for s in steps:
                run = build_runs(self.recipe, m.state,
                                 [s.model_copy(update={"stages": (Stage.POST_INTERRUPT,), "after": ()})])[0]
                run.stages = [Stage.POST_INTERRUPT]
                entry = m.state.get(run.key)
                run.index, run.done, run.running, run.attempt = 0, False, False, 1
                if entry is not None and entry.stage == Stage.POST_INTERRUPT:
                    run.done = entry.state == PackageStatus.COMPLETE
                    run.running = entry.state == PackageStatus.IN_PROGRESS
                    run.attempt = entry.restarts + 1
                m.runs.append(run)
        return self._drive(self._post_done)

    def _post_done(self) -> float | None:
        self.m.phase = Phase.UNCORDON
        return self._phase_uncordon()

    # ------------------------------------------------------------------ endings
    def _phase_uncordon(self) -> float | None:
        m = self.m
        node = self._read()
        if node.ready is not True:
            return self._fail(FailureReason.NODE_NOT_READY,
                              "node is not Ready at the end of its lifecycle; it stays cordoned", keep_cordon=True)
        name = self.recipe.name
        ann: dict[str, str | None] = {
            inflight_key(name): None,
            failure_key(name): None,
            cordon_key(name): None,
            status_key(name): NodeStatus.COMPLETE,
            state_key(name): dump_state(m.state),
        }
        release = decide_release(node, name, owns_cordon=m.owns_cordon, runtime_required=self.recipe.runtimeRequired,
                                 runtime_required_recipes=self.ctx.runtime_required)
        others, uncordon, taints = release.others, release.uncordon, release.taints
        self._patch(annotations=ann, labels={status_key(name): NodeStatus.COMPLETE},
                    unschedulable=False if uncordon else None, taints=taints)
        if uncordon:
            self._event(EventKind.UNCORDON)
        elif m.owns_cordon and others:
            self._event(EventKind.UNCORDON, f"claim released; still cordoned for {', '.join(others)}")
        m.owns_cordon = False
        self._write(DeleteStages(name))
        if failure_key(name) in node.annotations:  # it had failed: clear its Erroring condition
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
        m = self.m
        assert m.failure_args is not None
        reason, message, kw = m.failure_args
        reason = str(reason)  # a FailureReason's value: records and API objects carry plain strings
        name = self.recipe.name
        rec = FailureRecord(runId=self.ctx.run_id, inputs=self.ctx.inputs, reason=reason, stage=kw["stage"],
                            package=kw["package"], exitCode=kw["exit_code"], message=message[:2000],
                            logTail=kw["log_tail"][-2000:])
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

    def _block(self, message: str) -> float | None:
        """Protected pods outlived the wait: release what we hold; retried in a later pass (S09)."""
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
        m.owns_cordon = cordon_key(name) in node.annotations
        others = cordon_claims(node, name)
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


class _Raise(Exception):
    def __init__(self, error: ClusterError) -> None:
        super().__init__(str(error))
        self.error = error

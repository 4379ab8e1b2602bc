"""The interpreter of the node lifecycle: the only place the lifecycle touches the cluster (issue 12).

:func:`reconciler.execute.machine.step` decides; :class:`NodeRun` carries a node's
:class:`~reconciler.execute.machine.Memory` from step to step and performs what the steps ask for.
One *cycle* (:meth:`NodeRun.advance`, or :meth:`NodeRun.begin` / :meth:`NodeRun.perform` /
:meth:`NodeRun.resume` when the rollout loop spreads the I/O over worker threads) takes the two clock
readings once, then alternates:

1. **decide** (the caller's thread — the rollout loop's): ``step(memory, view, plan, ctx, now, utc)``;
2. **perform** (any thread; I/O only, no decision): the reads the step needs, or its effects in order
   (a failed write stops the rest: the memory becomes that write's rollback snapshot and the
   error is the next step's ``view.error``; eviction answers are data, not errors);
3. back on the deciding thread: timeline announcements and log lines of the effects that took
   place, the new memory, and the next step when the step asked for it.

Writes go through the role ports the run was given (:class:`~reconciler.ports.ClusterPorts`: nodes,
pods, stages, events) — in ``apply`` fenced by :class:`~reconciler.execute.fence.FencedCluster`, so
no write happens without the Lease.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, field

from reconciler.errors import (
    ClusterError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    ServerError,
    TooManyRequestsError,
)
from reconciler.execute.effects import (
    Announce,
    DaemonSetExists,
    DeleteStage,
    DeleteStages,
    EmitEvent,
    Evict,
    EvictAnswer,
    EvictResult,
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
from reconciler.execute.machine import Memory, Outcome, StepContext, step
from reconciler.execute.retry import DEFAULT_BOUNDS, RetryBounds
from reconciler.execute.timeline import Timeline
from reconciler.model.nodestate import FailureRecord, InFlight, PackageState
from reconciler.model.observed import NodeInfo, PodInfo
from reconciler.model.plan import NodePlan
from reconciler.model.recipe import Recipe
from reconciler.model.vocab import Phase
from reconciler.ports import Clock, ClusterPorts, StageStatus

__all__ = ["MAX_STEPS_PER_CYCLE", "NodeRun", "Outcome", "RunContext"]

log = logging.getLogger(__name__)

#: A cycle that keeps asking for more is a bug, never a reason to spin: it stops with an error.
MAX_STEPS_PER_CYCLE = 1000


@dataclass
class RunContext:
    """What every node run of one ``apply`` shares: the ports (``ports``: the cluster roles, ``clock``), the
    ``timeline`` observers listen to, and the fixed settings of :class:`~reconciler.execute.machine.StepContext`.

    Times: ``clock.now()`` (monotonic) for in-process wake-ups only; ``clock.utc()`` for everything
    persisted or compared with the cluster's timestamps (pod deletion and start times, node records).
    """

    recipe: Recipe
    ports: ClusterPorts
    clock: Clock
    run_id: str
    plan_hash: str
    timeline: Timeline
    poll_seconds: float = 5.0
    image_pull_grace: float = 60.0
    agent_image: str | None = None
    inputs: str = ""
    runtime_required: tuple[str, ...] = ()
    retry_bounds: RetryBounds = DEFAULT_BOUNDS
    _step: StepContext | None = field(default=None, repr=False)

    @property
    def step_context(self) -> StepContext:
        """The pure settings the steps see (built once)."""
        if self._step is None:
            self._step = StepContext(
                recipe=self.recipe, run_id=self.run_id, plan_hash=self.plan_hash, poll_seconds=self.poll_seconds,
                image_pull_grace=self.image_pull_grace, agent_image=self.agent_image, inputs=self.inputs,
                runtime_required=self.runtime_required, retry_bounds=self.retry_bounds)
        return self._step


# ------------------------------------------------------------------------------ I/O jobs


@dataclass(frozen=True)
class ReadJob:
    """Reads a step asked for."""

    reads: tuple[Read, ...]


@dataclass(frozen=True)
class EffectJob:
    """A step's effects, to be performed in order."""

    transition: Transition[Memory]


Job = ReadJob | EffectJob


@dataclass(frozen=True)
class ReadAnswer:
    """Answers to ``reads`` in the order asked; ``error`` stops at the first failed read."""

    reads: tuple[Read, ...]
    answers: tuple[object, ...]
    error: ClusterError | None = None


@dataclass(frozen=True)
class EffectAnswer:
    """``done``: effects performed (the index of the failed write when ``error`` is set);
    ``fresh``: the node as the last patch returned it; ``evictions``: answers by ``ns/name``."""

    done: int
    fresh: NodeInfo | None = None
    evictions: dict[str, EvictResult] = field(default_factory=dict)
    error: ClusterError | None = None


Answer = ReadAnswer | EffectAnswer


def _evict_result(e: ClusterError) -> EvictResult:
    if isinstance(e, NotFoundError):
        return EvictResult(EvictAnswer.NOT_FOUND, e.message)
    if isinstance(e, ConflictError):
        return EvictResult(EvictAnswer.CONFLICT, e.message)
    if isinstance(e, TooManyRequestsError):
        return EvictResult(EvictAnswer.TOO_MANY, e.message, retry_after=e.retry_after,
                           disruption_budget=e.disruption_budget)
    if isinstance(e, ServerError):
        return EvictResult(EvictAnswer.SERVER, e.message)
    if isinstance(e, ForbiddenError):
        return EvictResult(EvictAnswer.FORBIDDEN, e.message, reason=e.reason or "")
    return EvictResult(EvictAnswer.OTHER, e.message)


#: The view a cycle starts from (and a node run holds between cycles): nothing read yet.
_EMPTY_VIEW = View()


class NodeRun:
    """One node's lifecycle in one run. Call :meth:`advance` (or the begin/perform/resume triple)
    until :attr:`outcome` is no longer RUNNING.

    ``outcome`` ends as COMPLETE, FAILED (stays cordoned by us, recorded), BLOCKED (protected pods
    did not finish in time; released), REMOVED (node deleted) or LEFT (left the selector).
    """

    def __init__(self, ctx: RunContext, plan: NodePlan) -> None:
        self.ctx = ctx
        self.plan = plan
        self.memory = Memory()
        self.wake: float | None = None
        self._view = _EMPTY_VIEW
        self._now = 0.0
        self._utc = 0.0
        self._steps = 0
        self._pending: Transition[Memory] | None = None  # the transition whose effects are in flight

    # ------------------------------------------------------------------ what the loop reads
    @property
    def name(self) -> str:
        """The node name."""
        return self.plan.name

    @property
    def outcome(self) -> Outcome:
        """Where the run is (RUNNING until it ends)."""
        return self.memory.outcome

    @property
    def phase(self) -> Phase:
        """The lifecycle phase."""
        return self.memory.phase

    @property
    def holds_cordon(self) -> bool:
        """True while this node counts against the budget because we hold it cordoned."""
        return self.memory.owns_cordon

    @property
    def message(self) -> str:
        """Why the run ended as it did ('' while running or complete)."""
        return self.memory.message

    @property
    def failure(self) -> FailureRecord | None:
        """The failure record of a FAILED run."""
        return self.memory.failure

    @property
    def lifecycle(self) -> str:
        """Id of the run that started the node's lifecycle (stage pod names carry it)."""
        return self.memory.lifecycle

    @property
    def node(self) -> NodeInfo | None:
        """The node as last read or written."""
        return self.memory.node

    @property
    def state(self) -> dict[str, PackageState]:
        """Our package state for the node, as this run knows it."""
        return self.memory.state

    @property
    def inflight(self) -> InFlight | None:
        """The in-flight record as this run knows it."""
        return self.memory.inflight

    # ------------------------------------------------------------------ one cycle
    def advance(self) -> float | None:
        """One whole cycle on the calling thread. Returns the clock time to be called again, or None
        when the node run has ended (see :attr:`outcome`)."""
        job = self.begin()
        while job is not None:
            job = self.resume(self.perform(job))
        return self.wake

    def begin(self) -> Job | None:
        """Start a cycle (deciding thread): read the clocks, take the first step. Returns the I/O to
        perform, or None when the cycle is over (:attr:`wake` says when to come back)."""
        self._now = self.ctx.clock.now()
        self._utc = self.ctx.clock.utc()
        self._view = _EMPTY_VIEW
        self._steps = 0
        return self._decide()

    def _decide(self) -> Job | None:
        self._steps += 1
        if self._steps > MAX_STEPS_PER_CYCLE:
            raise RuntimeError(f"node {self.name}: lifecycle step loop did not settle in phase {self.phase}")
        t = step(self.memory, self._view, self.plan, self.ctx.step_context, self._now, self._utc)
        if t.raise_ is not None:
            raise t.raise_
        if t.needs:
            return ReadJob(t.needs)
        if any(not isinstance(e, (Announce, Log)) for e in t.effects):
            self._pending = t
            return EffectJob(t)
        return self._settle(t, EffectAnswer(done=len(t.effects)))

    def perform(self, job: Job) -> Answer:
        """Do the job's I/O through the cluster ports (any thread). Announcements and log lines are
        left to :meth:`resume` (the deciding thread)."""
        ports = self.ctx.ports
        if isinstance(job, ReadJob):
            answers: list[object] = []
            for r in job.reads:
                try:
                    answers.append(self._read(ports, r))
                except ClusterError as e:
                    return ReadAnswer(job.reads, tuple(answers), e)
            return ReadAnswer(job.reads, tuple(answers))
        fresh: NodeInfo | None = None
        evictions: dict[str, EvictResult] = {}
        effects = job.transition.effects
        for i, eff in enumerate(effects):
            try:
                if isinstance(eff, Evict):
                    if eff.ref not in evictions:
                        # evictions in a row go out together (kubectl drain evicts a node's pods in
                        # parallel), in their place among the effects (after the drain's record);
                        # a refusal is an answer for the next step, not an error that stops the rest
                        asked = [e for e in itertools.takewhile(lambda e: isinstance(e, Evict), effects[i:])
                                 if isinstance(e, Evict)]
                        for ev, err in zip(asked, ports.pods.evict_pods(asked), strict=True):
                            evictions[ev.ref] = EvictResult(EvictAnswer.ACCEPTED) if err is None else _evict_result(err)
                elif isinstance(eff, PatchNode):
                    fresh = ports.nodes.patch_node(
                        self.name, annotations=dict(eff.annotations) if eff.annotations is not None else None,
                        labels=dict(eff.labels) if eff.labels is not None else None, unschedulable=eff.unschedulable,
                        taints=eff.taints, resource_version=eff.resource_version, uid=eff.uid)
                elif isinstance(eff, StartStage):
                    ports.stages.start_stage(eff.spec)
                elif isinstance(eff, DeleteStage):
                    ports.stages.delete_stage(eff.spec)
                elif isinstance(eff, DeleteStages):
                    ports.stages.delete_stages(eff.recipe, self.name)
                elif isinstance(eff, SetCondition):
                    ports.nodes.set_node_condition(self.name, eff.type_, eff.status, eff.reason, eff.message)
                elif isinstance(eff, EmitEvent):
                    try:
                        ports.events.emit_event(self.name, eff.reason, eff.message, eff.type_)
                    except ClusterError as err:
                        if not eff.notice:
                            raise
                        log.warning("node %s: Event %s not written: %s", self.name, eff.reason, err)
            except ClusterError as err:
                return EffectAnswer(done=i, fresh=fresh, evictions=evictions, error=err)
        return EffectAnswer(done=len(effects), fresh=fresh, evictions=evictions)

    def _read(self, ports: ClusterPorts, r: Read) -> object:
        if isinstance(r, ReadNode):
            if not r.optional:
                return ports.nodes.get_node(self.name)
            try:
                return ports.nodes.get_node(self.name)
            except NotFoundError:
                return None
        if isinstance(r, ListPods):
            return tuple(ports.pods.list_pods(self.name))
        if isinstance(r, GetPod):
            return ports.pods.get_pod(r.namespace, r.name)
        if isinstance(r, ListPdbs):
            return tuple(ports.pods.list_pdbs())
        if isinstance(r, DaemonSetExists):
            return ports.pods.daemonset_exists(r.namespace, r.name)
        assert isinstance(r, ReadStage)
        return ports.stages.stage_status(r.spec, log=r.log)

    def resume(self, answer: Answer) -> Job | None:
        """Take the job's answer (deciding thread) and decide the next move."""
        if isinstance(answer, ReadAnswer):
            self._view = self._with_reads(answer)
            return self._decide()
        t, self._pending = self._pending, None
        assert t is not None
        return self._settle(t, answer)

    def _with_reads(self, answer: ReadAnswer) -> View:
        v = self._view
        nodes, lists = list(v.nodes), list(v.pod_lists)
        pods, ds, stages, logs = dict(v.pods), dict(v.daemonsets), dict(v.stages), dict(v.logs)
        pdbs = v.pdbs
        for r, a in zip(answer.reads, answer.answers, strict=False):
            if isinstance(r, ReadNode):
                nodes.append(a if isinstance(a, NodeInfo) else None)
            elif isinstance(r, ListPods):
                lists.append(a)  # type: ignore[arg-type]
            elif isinstance(r, GetPod):
                pods[(r.namespace, r.name)] = a if isinstance(a, PodInfo) else None
            elif isinstance(r, ListPdbs):
                pdbs = a  # type: ignore[assignment]
            elif isinstance(r, DaemonSetExists):
                ds[(r.namespace, r.name)] = bool(a)
            elif isinstance(r, ReadStage) and isinstance(a, StageStatus):
                stages[r.spec.pod_name] = a
                if r.log:
                    logs[r.spec.pod_name] = a.log_tail
        return View(nodes=tuple(nodes), fresh=v.fresh, pod_lists=tuple(lists), pods=pods,
                    pdbs=pdbs if pdbs is None else tuple(pdbs), daemonsets=ds, stages=stages, logs=logs,
                    evictions=v.evictions, error=answer.error or v.error)

    def _settle(self, t: Transition[Memory], answer: EffectAnswer) -> Job | None:
        for e in t.effects[:answer.done]:
            if isinstance(e, Announce):
                self.ctx.timeline.add(self._now, self.name, e.kind, e.detail)
            elif isinstance(e, Log):
                (log.error if e.level is LogLevel.ERROR else log.info)("%s", e.message)
        if answer.error is not None:
            self.memory = t.rollbacks.get(answer.done, self.memory)
            self._view = View(error=answer.error)
            return self._decide()
        self.memory = t.memory
        if t.again:
            fresh = answer.fresh  # the node as written; with no patch, the last read of this cycle
            if fresh is None and not any(isinstance(e, PatchNode) for e in t.effects):
                fresh = next((n for n in reversed(self._view.nodes) if n is not None), self._view.fresh)
            self._view = View(fresh=fresh, evictions=answer.evictions)
            return self._decide()
        self.wake = t.wake
        self._view = _EMPTY_VIEW  # the cycle's reads are not kept between cycles (nor after the run)
        return None


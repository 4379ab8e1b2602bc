"""The per-node lifecycle as an explicit, resumable state machine.

``cordon → wait for protected pods → drain → stages (+checks, dependency order) → merged
interrupt → post-interrupt stages → uncordon`` (architecture.md §1; semantics-nodewright.md §2 with
our decisions). :class:`NodeRun` never blocks: :meth:`NodeRun.advance` does what can be done now
and returns when to be called again, so one rollout loop drives many nodes at once.

Crash safety: every step is recorded on the node *before* its effect (package state entry
``in_progress``, the :class:`~reconciler.model.nodestate.InFlight` record with the phase, the
pre-reboot bootID and the owed interrupt) and *after* it (``complete``). A run killed anywhere and
started again re-plans from those annotations and continues: completed stages are never re-run
(a stage pod that already succeeded is recognised by its deterministic name), a cordon is never
taken to mean "drained" (the drain is re-checked), a requested reboot is not sent twice, failures
stay recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from reconciler.diff import config_digest
from reconciler.errors import (
    ClusterError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    ServerError,
    TooManyRequestsError,
    TransientError,
)
from reconciler.execute.decide import (
    CordonAction,
    StageVerdict,
    cordon_claims,
    decide_cordon,
    decide_release,
    judge_stage,
    reboot_confirmed,
)
from reconciler.execute.retry import DEFAULT_BOUNDS, Fail, Gone, Retry, RetryBounds, classify
from reconciler.execute.timeline import Timeline
from reconciler.model.nodestate import (
    IGNORE_LABEL,
    RUNTIME_REQUIRED_TAINT_KEY,
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
from reconciler.model.observed import NodeInfo, PodInfo
from reconciler.model.plan import NodePlan, Step
from reconciler.model.recipe import Interrupt, Package, Recipe, parse_duration
from reconciler.model.selector import UNSCHEDULABLE_TAINT_KEY, Toleration
from reconciler.model.utctime import elapsed_since, to_rfc3339
from reconciler.model.vocab import IMAGE_PULL_REASONS, EventKind, FailureReason, Phase
from reconciler.plan.drain import classify_pods
from reconciler.ports import Clock, Cluster, StageSpec

log = logging.getLogger(__name__)

MAX_RECORDONS = 3


class Outcome(Enum):
    """Where a node run ended (RUNNING while it has not)."""

    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"
    BLOCKED = "blocked"
    REMOVED = "removed"
    LEFT = "left"


@dataclass
class RunContext:
    """What every node run of one ``apply`` shares.

    ``poll_seconds``: how long to wait between looks at something that has no event (real
    cluster); the simulated clock returns earlier at its next event. Times: ``clock.now()``
    (monotonic) for in-process wake-ups only; ``clock.utc()`` for everything persisted or compared
    with the cluster's timestamps (pod deletion and start times, node records).
    ``runtime_required``: names of every runtime-required recipe that selects nodes of this run;
    the runtime-required taint leaves a node only when each of them is complete on it
    (semantics §3.6).
    """

    recipe: Recipe
    cluster: Cluster
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


@dataclass
class _StageRun:
    """One step's progress through its stages on the node. A downgrade's ``uninstall`` stage works on
    the installed (old) version's entry and image; every other stage on the step's target version."""

    step: Step
    stages: list[str]
    new_version: str
    new_pull: str
    old_version: str = ""
    old_pull: str = ""
    index: int = 0
    attempt: int = 1
    started: float | None = None  # UTC epoch seconds: the stage pod's start
    retry_at: float | None = None
    done: bool = False
    running: bool = False
    last_exit: int | None = None

    @property
    def _on_old(self) -> bool:
        return (
            self.step.action == "downgrade"
            and self.index < len(self.stages)
            and self.stages[self.index] == "uninstall"
        )

    @property
    def version(self) -> str:
        """Version the current stage works on."""
        return self.old_version if self._on_old else self.new_version

    @property
    def pull_ref(self) -> str:
        """Image the current stage pulls."""
        return self.old_pull if self._on_old else self.new_pull

    @property
    def key(self) -> str:
        """Node-state key (``name|version``) the current stage writes to."""
        return f"{self.step.package}|{self.version}"


@dataclass
class _EvictTrack:
    pod: PodInfo
    evicted: bool = False
    gone: bool = False
    next_try: float = 0.0
    last_error: str = ""
    attempts: int = 0


@dataclass
class NodeRun:
    """One node's lifecycle in one run. Create, then call :meth:`advance` until it returns None.

    ``outcome`` ends as COMPLETE, FAILED (stays cordoned by us, recorded), BLOCKED (protected pods
    did not finish in time; released), REMOVED (node deleted) or LEFT (left the selector).
    """

    ctx: RunContext
    plan: NodePlan
    outcome: Outcome = Outcome.RUNNING
    phase: Phase = Phase.START
    failure: FailureRecord | None = None
    message: str = ""
    owns_cordon: bool = False
    node: NodeInfo | None = None
    state: dict[str, PackageState] = field(default_factory=dict)
    inflight: InFlight | None = None
    _evictions: dict[str, _EvictTrack] = field(default_factory=dict)
    _recordons: int = 0
    _runs: list[_StageRun] = field(default_factory=list)
    _waiting_logged: bool = False
    lifecycle: str = ""
    _pending: dict[str, str | None] = field(default_factory=dict)
    _pending_labels: dict[str, str | None] = field(default_factory=dict)
    _local_start: dict[str, float] = field(default_factory=dict)
    _fresh: bool = False  # self.node was read in the current advance
    _streak: int = 0  # consecutive API errors (execute/retry.py bounds them)
    _streak_start: float = 0.0
    _failure_args: tuple[str, str, dict[str, Any]] | None = None
    _give_up_recording: bool = False

    # ------------------------------------------------------------------ plumbing
    @property
    def name(self) -> str:
        """The node name."""
        return self.plan.name

    @property
    def recipe(self) -> Recipe:
        """The recipe being applied."""
        return self.ctx.recipe

    @property
    def holds_cordon(self) -> bool:
        """True while this node counts against the budget because we hold it cordoned."""
        return self.owns_cordon

    def _now(self) -> float:
        return self.ctx.clock.now()

    def _utc(self) -> float:
        return self.ctx.clock.utc()

    def _stamp(self) -> str:
        """The current UTC instant as persisted (RFC 3339)."""
        return to_rfc3339(self._utc())

    def _elapsed(self, timer: str, persisted: str | None) -> float:
        """Seconds since ``persisted`` (an RFC 3339 instant from a node record) by the UTC clock, so
        the timeout survives a restart in another process; when the record has no readable instant
        (written by an older version), counted from when this process first asked about ``timer``."""
        e = elapsed_since(persisted, self._utc())
        if e is not None:
            return e
        first = self._local_start.setdefault(timer, self._now())
        return self._now() - first

    def _event(self, event: EventKind, detail: str = "") -> None:
        self.ctx.timeline.add(self._now(), self.name, event, detail)

    def _fetch(self) -> NodeInfo:
        """GET the node; records not written yet (deferred) are part of what we know of it."""
        node = self.ctx.cluster.get_node(self.name)
        if self._pending:
            ann = {**node.annotations, **self._pending}
            node = replace(node, annotations={k: v for k, v in ann.items() if v is not None})
        self.node = node
        self._fresh = True
        return node

    def _refresh(self) -> NodeInfo:
        """The node as it is now (read again unless already read in this advance), for a decision
        about ownership (cordon, uncordon, taints); our in-memory package state is kept."""
        if self._fresh and self.node is not None:
            return self.node
        return self._fetch()

    def _read(self) -> NodeInfo:
        """Read the node and our records on it (package state, in-flight record) afresh."""
        node = self._fetch()
        self.state = parse_state(node.annotations.get(state_key(self.recipe.name)), node=self.name,
                                 key=state_key(self.recipe.name))
        self.inflight = parse_model(InFlight, node.annotations.get(inflight_key(self.recipe.name)))
        return node

    def _patch(
        self,
        annotations: dict[str, str | None] | None = None,
        labels: dict[str, str | None] | None = None,
        unschedulable: bool | None = None,
        taints: Any = None,
    ) -> None:
        pending, pending_labels = self._pending, self._pending_labels
        if pending:
            annotations = {**pending, **(annotations or {})}
            self._pending = {}
        if pending_labels:
            labels = {**pending_labels, **(labels or {})}
            self._pending_labels = {}
        try:
            # ownership changes (cordon, uncordon, the taint list replaced whole) are conditional on the
            # node they were decided from: a 409 means the node changed; read again, decide again
            decided = taints is not None or unschedulable is not None
            rv = self.node.resource_version if decided and self.node is not None else None
            self.node = self.ctx.cluster.patch_node(
                self.name, annotations=annotations, labels=labels, unschedulable=unschedulable, taints=taints,
                resource_version=rv or None,
            )
        except ClusterError:
            self._pending = {**pending, **self._pending}  # not written: keep the deferred records for the retry
            self._pending_labels = {**pending_labels, **self._pending_labels}
            self._fresh = False  # whatever we knew of the node may be stale now
            raise

    def _annotation(self, key: str) -> str | None:
        """The value of one of our annotations as we last wrote or deferred it."""
        if key in self._pending:
            return self._pending[key]
        return self.node.annotations.get(key) if self.node else None

    def _defer(self, annotations: dict[str, str | None]) -> None:
        """Record to be written with the node's next write. Used for "after" records (a stage
        completed) whose next effect is always preceded by a write: the completed stage pod stays
        until the node is complete, so a run that stops before the write finds it and records it."""
        self._pending.update(annotations)

    def _inflight(self, phase: str, **extra: Any) -> str:
        base = self.inflight.model_dump() if self.inflight else {}
        lifecycle = self.lifecycle or self.ctx.run_id
        stamp = self._stamp()
        timers = dict(base.get("timers") or {}) if base.get("lifecycle", lifecycle) == lifecycle else {}
        if phase in ("wait", "drain"):
            timers.setdefault(phase, stamp)  # its timeout counts from the first start, across restarts
        base.update(runId=self.ctx.run_id, planHash=self.ctx.plan_hash, phase=phase, since=stamp,
                    lifecycle=lifecycle, timers=timers)
        if phase in ("wait", "drain", "stages") and self.plan.interrupt is not None:
            # the interrupt is owed from the start, so a restart after the stages never loses it
            base.update(interrupt=self.plan.interrupt.model_dump(mode="json"),
                        interruptPackages=self._interrupt_packages(), requestedAt=None)
        base.update(extra)
        self.inflight = InFlight.model_validate(base)
        return dump_model(self.inflight)

    def _state_annotation(self) -> str:
        return dump_state(self.state)

    def _set_entry(self, key: str, name: str, version: str, stage: str, state: str, step: Step,
                   restarts: int | None = None) -> None:
        old = self.state.get(key)
        image, sha = self._image_of(step, version)
        self.state[key] = PackageState(
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
        old = self.state.get(f"{step.package}|{version}")
        return (old.image, old.containerSHA) if old else ("", None)

    # ------------------------------------------------------------------ driver
    def advance(self) -> float | None:
        """Do what can be done now. Returns the clock time to be called again, or None when the
        node run has ended (see :attr:`outcome`). API errors go through
        :func:`reconciler.execute.retry.classify`: retried with bounded backoff (count and time,
        ``RunContext.retry_bounds``), then a named failure; a node that disappears ends as REMOVED."""
        if self.outcome is not Outcome.RUNNING:
            return None
        self._fresh = False  # the node is read again before any ownership decision of this advance
        try:
            handler: Callable[[], float | None] = getattr(self, f"_phase_{self.phase.value.replace('-', '_')}")
            wake = handler()
        except ClusterError as e:
            return self._on_error(e)
        self._streak = 0
        return wake

    def _on_error(self, e: ClusterError) -> float | None:
        if isinstance(e, ForbiddenError) and self.phase is Phase.FAILING:
            # RBAC refuses even the failure record: nothing can be recorded on any node; the run
            # stops with the API's one-line reason (exit 4) rather than fail nodes it cannot mark
            raise e
        now = self._now()
        if self._streak == 0:
            self._streak_start = now
        self._streak += 1
        decision = classify(e, self._streak, now - self._streak_start, self.ctx.retry_bounds)
        if isinstance(decision, Gone):
            if self.node is not None and self._node_gone():
                self.outcome = Outcome.REMOVED
                self.message = f"node {self.name} was deleted during the run"
                self._event(EventKind.REMOVED, self.message)
                return None
            # something the step needed is missing (not the node): retried within the same bounds
            decision = classify(TransientError(str(e), e.status, e.reason), self._streak, now - self._streak_start,
                                self.ctx.retry_bounds)
        if isinstance(decision, Fail):
            if self.phase is Phase.FAILING:  # recording the failure itself keeps failing: report it, stop trying
                self._give_up_recording = True
                return self._phase_failing()
            self._streak, self._streak_start = 0, now  # recording the failure gets bounds of its own
            try:
                return self._fail(decision.reason, decision.message)
            except ClusterError as again:
                return self._on_error(again)
        assert isinstance(decision, Retry)
        log.info("node %s: %s; retry %d in %.0f s", self.name, e, self._streak, decision.after)
        return now + decision.after

    def _node_gone(self) -> bool:
        try:
            self.ctx.cluster.get_node(self.name)
        except NotFoundError:
            return True
        return False

    def _out_of_scope(self, node: NodeInfo) -> str | None:
        """Why the node must not be (further) worked on: it left the selector or was ignored."""
        if not self.recipe.nodeSelector.matches(node.labels):
            return "node no longer matches the recipe's nodeSelector"
        if is_ignored(node.labels):
            return f"node is labelled {IGNORE_LABEL}=true"
        return None

    # ------------------------------------------------------------------ phases
    def _phase_start(self) -> float | None:
        node = self._read()
        self.owns_cordon = cordon_key(self.recipe.name) in node.annotations
        if (why := self._out_of_scope(node)) is not None:
            return self._leave(why)
        fl = self.inflight
        retry = failure_key(self.recipe.name) in node.annotations
        if fl is not None and not retry:
            self.lifecycle = fl.lifecycle or fl.runId
        else:
            # a new lifecycle: stage attempts count from 1 again, under new stage pod names
            self.lifecycle = self.ctx.run_id
            for k, e in list(self.state.items()):
                if e.restarts:
                    self.state[k] = e.model_copy(update={"restarts": 0})
        if fl is not None:
            self._event(EventKind.RESUME, f"resuming at {fl.phase} (run {fl.runId})")
            if fl.phase == "interrupt":
                self.phase = Phase.INTERRUPT
                return self._now()
            if fl.phase == "post-interrupt":
                self.phase = Phase.POST_INTERRUPT
                return self._now()
            if fl.phase == "uncordon":
                self.phase = Phase.UNCORDON
                return self._now()
            if fl.phase == "stages" or not self.plan.cordon:
                self.phase = Phase.STAGES
                return self._now()
            # cordon/wait/drain: re-check everything; cordoned never means drained
        if node.ready is not True and not (fl and fl.phase in ("interrupt",)):
            return self._fail(FailureReason.NODE_NOT_READY,
                f"node {self.name} is not Ready; nothing was started", keep_cordon=True)
        self.phase = Phase.CORDON
        return self._phase_cordon()

    def _phase_cordon(self) -> float | None:
        node = self._refresh()
        # decided from the node as it is now: our claim there (a cordon whose answer was lost) is ours
        self.owns_cordon = cordon_key(self.recipe.name) in node.annotations
        if not self.plan.cordon:
            # nothing disruptive happens before the first stage: its record carries these too
            self._defer({inflight_key(self.recipe.name): self._inflight("stages"),
                         status_key(self.recipe.name): "in_progress",
                         state_key(self.recipe.name): self._state_annotation()})
            self._pending_labels[status_key(self.recipe.name)] = "in_progress"
            self.phase = Phase.STAGES
            return self._phase_stages()
        ann: dict[str, str | None] = {
            inflight_key(self.recipe.name): self._inflight("wait"),
            status_key(self.recipe.name): "in_progress",
            state_key(self.recipe.name): self._state_annotation(),
        }
        decision = decide_cordon(node, self.recipe.name)  # pure (execute/decide.py), from the fresh read
        if decision.claim:
            ann[cordon_key(self.recipe.name)] = dump_model(CordonRecord(runId=self.ctx.run_id, at=self._stamp()))
        self._patch(annotations=ann, labels={status_key(self.recipe.name): "in_progress"},
                    unschedulable=True if decision.cordon else None)
        self.owns_cordon = decision.action in (CordonAction.CORDON, CordonAction.SHARE, CordonAction.OURS)
        self._event(EventKind.CORDON, decision.detail)
        self.phase = Phase.WAIT
        return self._phase_wait()

    def _phase_wait(self) -> float | None:
        pods = self.ctx.cluster.list_pods(self.name)
        cls = classify_pods(pods, self.recipe.drain, self.recipe.podNonInterruptLabels, now_wall=self._utc())
        if cls.protected:
            names = ", ".join(p.ref for p in cls.protected)
            if not self._waiting_logged:
                self._event(EventKind.WAIT, f"blocked by {names}")
                self._waiting_logged = True
            limit = self.recipe.timeouts.waitNonInterrupt
            elapsed = self._elapsed("wait", self.inflight.timers.get("wait") if self.inflight else None)
            if elapsed >= limit:
                return self._block(f"protected pods still running after {limit} s: {names}")
            return self._now() + min(self.ctx.poll_seconds * 6, limit - elapsed)
        self.phase = Phase.DRAIN
        return self._phase_drain(listed=pods)  # kubectl drain, too, lists the node's pods once

    def _phase_drain(self, listed: list[PodInfo] | None = None) -> float | None:
        """Evict what the drain removes and wait until it is gone. ``listed``: the node's pods as
        the wait phase just listed them (saves a second LIST)."""
        now = self._now()
        opts = self.recipe.drain
        if not self._evictions:
            pods = listed if listed is not None else self.ctx.cluster.list_pods(self.name)
            cls = classify_pods(
                pods,
                opts,
                self.recipe.podNonInterruptLabels,
                now_wall=self._utc(),
                daemonset_exists=self.ctx.cluster.daemonset_exists,
            )
            if cls.protected:  # a protected pod appeared after the wait: wait again, evict nothing
                self.phase = Phase.WAIT
                self._waiting_logged = False
                return self._phase_wait()
            if cls.blockers:
                detail = "; ".join(f"{p.ref}: {why}" for p, why in cls.blockers)
                return self._fail(FailureReason.DRAIN_REFUSED, f"drain refused before any eviction: {detail}",
                                  keep_cordon=False)
            for p in cls.to_remove:
                self._evictions[f"{p.namespace}/{p.name}"] = _EvictTrack(p)
            if not self._evictions:
                return self._drained()
            # the drain's start is recorded so its timeout survives a restart
            self._patch(annotations={inflight_key(self.recipe.name): self._inflight("drain")})
        for ref, tr in sorted(self._evictions.items()):
            if tr.evicted or tr.gone or tr.next_try > now:
                continue
            try:
                self.ctx.cluster.evict_pod(tr.pod.namespace, tr.pod.name, tr.pod.uid, opts.gracePeriodSeconds)
                tr.evicted = True
                self._event(EventKind.EVICT, f"{ref} (finished: removed)" if tr.pod.finished else ref)
            except NotFoundError:
                tr.gone = True
            except ConflictError as e:
                # gone only when our UID precondition failed (a new pod has the name); any other 409: retry
                cur = self.ctx.cluster.get_pod(tr.pod.namespace, tr.pod.name)
                if cur is None or cur.uid != tr.pod.uid:
                    tr.gone = True
                else:
                    tr.last_error = e.message
                    tr.next_try = now + opts.evictionRetrySeconds
            except TooManyRequestsError as e:
                tr.attempts += 1
                tr.last_error = e.message
                wait = opts.evictionRetrySeconds if e.disruption_budget else max(
                    opts.evictionRetrySeconds, e.retry_after or 0)
                tr.next_try = now + wait
            except ServerError as e:
                pdbs = [b.ref for b in self.ctx.cluster.list_pdbs() if b.selects(tr.pod)]
                if len(pdbs) < 2:  # not the several-PDBs refusal: an API server error, retried (§1.9)
                    tr.last_error = e.message
                    tr.next_try = now + opts.evictionRetrySeconds
                    continue
                return self._fail(
                    FailureReason.MULTIPLE_PDBS,
                    f"eviction of {ref} refused: {e.message} PodDisruptionBudgets: {', '.join(pdbs) or 'unknown'}",
                    keep_cordon=True,
                )
            except ForbiddenError as e:
                if e.reason == "NamespaceTerminating":
                    tr.next_try = now + opts.evictionRetrySeconds
                    continue
                return self._fail(FailureReason.FORBIDDEN,
                    f"eviction of {ref} forbidden: {e.message}", keep_cordon=True)
        # drained = every evicted pod is gone (404 or a new UID), not "eviction accepted";
        # one LIST of the node's pods answers for all of them (kubectl GETs each pod)
        waiting = [tr for tr in self._evictions.values() if tr.evicted and not tr.gone]
        on_node: dict[tuple[str, str], PodInfo] = {}
        if len(waiting) > 1:
            on_node = {(p.namespace, p.name): p for p in self.ctx.cluster.list_pods(self.name)}
        for tr in waiting:
            if len(waiting) > 1:
                cur = on_node.get((tr.pod.namespace, tr.pod.name))
            else:
                cur = self.ctx.cluster.get_pod(tr.pod.namespace, tr.pod.name)
            if cur is None or cur.uid != tr.pod.uid or (
                opts.skipWaitForDeleteTimeoutSeconds
                and cur.deletion_ts is not None
                and self._utc() - cur.deletion_ts > opts.skipWaitForDeleteTimeoutSeconds
            ):
                tr.gone = True
        pending = [tr for tr in self._evictions.values() if not tr.gone]
        if not pending:
            return self._drained()
        elapsed = self._elapsed("drain", self.inflight.timers.get("drain") if self.inflight else None)
        if elapsed >= opts.timeoutSeconds:
            parts = []
            budgets = self.ctx.cluster.list_pdbs()
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
        # S11: someone uncordoned the node during the drain: re-cordon and drain again (bounded)
        node = self._read()
        if self.owns_cordon and not node.unschedulable:
            self._recordons += 1
            if self._recordons > MAX_RECORDONS:
                return self._fail(FailureReason.EXTERNALLY_UNCORDONED,
                                  f"node was uncordoned by someone else {self._recordons} times during the drain")
            self._patch(unschedulable=True)
            self._event(EventKind.CORDON, "re-cordoned: the node was uncordoned by someone else during the drain")
            self._evictions.clear()
            return self._now()
        self._event(EventKind.DRAINED, f"{len(self._evictions)} pods gone")
        self._defer({inflight_key(self.recipe.name): self._inflight("stages")})
        self.phase = Phase.STAGES
        return self._phase_stages()

    # ------------------------------------------------------------------ stages
    def _pull_of(self, package: str, version: str) -> str:
        pkg = self.recipe.packages.get(package)
        if pkg is not None and pkg.version == version:
            return pkg.pull_ref
        old = self.state.get(f"{package}|{version}")
        if old and old.containerSHA:
            return f"{old.image}@{old.containerSHA}"
        return f"{old.image}:{version}" if old else f"{package}:{version}"

    def _build_runs(self, steps: tuple[Step, ...] | list[Step]) -> list[_StageRun]:
        runs = []
        for st in steps:
            version = (st.from_ or "") if st.action == "uninstall" else (st.to or "")
            old = (st.from_ or "") if st.action == "downgrade" else ""
            stages = [s for s in st.stages if s != "post-interrupt"]
            run = _StageRun(step=st, stages=stages, new_version=version, new_pull=self._pull_of(st.package, version),
                            old_version=old, old_pull=self._pull_of(st.package, old) if old else "")
            # resume inside a step: skip the stages the node already recorded complete
            for i, stage in enumerate(stages):
                run.index = i
                entry = self.state.get(run.key)
                if entry is None or entry.stage != stage:
                    continue
                run.index = i + 1 if entry.state == "complete" else i
                run.attempt = entry.restarts + 1
                run.running = entry.state == "in_progress"  # the stage pod may exist already: look first
                break
            else:
                run.index = 0
                if st.action == "downgrade" and f"{st.package}|{old}" not in self.state:
                    run.index = 1  # the old version is already uninstalled
            if run.index >= len(stages):
                run.done = True
            runs.append(run)
        return runs

    def _spec(self, run: _StageRun, stage: str, interrupt: Interrupt | None = None) -> StageSpec:
        pkg: Package | None = self.recipe.packages.get(run.step.package)
        same = pkg is not None and pkg.version == run.version
        grace = None
        if same and pkg is not None and pkg.gracefulShutdown:
            grace = int(parse_duration(pkg.gracefulShutdown))
        return StageSpec(
            recipe=self.recipe.name,
            node=self.name,
            package=run.step.package,
            version=run.version,
            stage=stage,
            pull_ref=run.pull_ref,
            run_id=self.lifecycle or self.ctx.run_id,
            attempt=run.attempt,
            config_map=dict(pkg.configMap) if same and pkg is not None else {},
            env=pkg.env if same and pkg is not None else (),
            resources=pkg.resources if same and pkg is not None else None,
            grace_seconds=grace,
            interrupt=interrupt,
            tolerations=self._tolerations(),
            agent_image=(pkg.agentImageOverride if same and pkg is not None else None) or self.ctx.agent_image,
            timeout_seconds=self.recipe.timeouts.stage,
        )

    def _tolerations(self) -> tuple[Toleration, ...]:
        base = (
            Toleration(key=UNSCHEDULABLE_TAINT_KEY, operator="Exists"),
            Toleration(key=RUNTIME_REQUIRED_TAINT_KEY, operator="Exists"),
        )
        return base + tuple(self.recipe.additionalTolerations)

    def _phase_stages(self) -> float | None:
        if not self._runs and self.plan.steps:
            self._runs = self._build_runs(self.plan.steps)
        return self._drive(self._runs, self._stages_done)

    def _stages_done(self) -> float | None:
        if self.plan.interrupt is not None:
            self.phase = Phase.INTERRUPT
            return self._phase_interrupt()
        self.phase = Phase.UNCORDON
        return self._phase_uncordon()

    def _drive(self, runs: list[_StageRun], on_done: Callable[[], float | None]) -> float | None:
        """Advance every runnable step (its ``after`` packages done) by its stages, in parallel.
        Before any new stage starts, the node's scope is checked on a fresh read: out of scope, the
        running stages finish and nothing new starts; then the node leaves (:meth:`_leave`)."""
        now = self._now()
        why = None
        if any(not r.done and not r.running for r in runs):
            why = self._out_of_scope(self._refresh())
            if why is not None and not any(r.running for r in runs):
                return self._leave(why)
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
            w = self._drive_one(run)
            if self.outcome is not Outcome.RUNNING:
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

    def _drive_one(self, run: _StageRun) -> float | None:
        now = self._now()
        stage = run.stages[run.index]
        spec = self._spec(run, stage)
        if not run.running and run.attempt > self.recipe.timeouts.stageRetries + 1:
            return self._fail(FailureReason.STAGE_FAILED,
                f"{run.step.package} {run.version} {stage} failed {run.attempt - 1} "
                              "time(s); no attempts left", keep_cordon=True, stage=stage, package=run.step.package)
        if not run.running:
            self._set_entry(run.key, run.step.package, run.version, stage, "in_progress", run.step,
                            restarts=run.attempt - 1)
            self._patch(annotations={state_key(self.recipe.name): self._state_annotation()})
            self.ctx.cluster.start_stage(spec)
            run.running, run.started, run.retry_at = True, self._utc(), None
            self._event(EventKind.STAGE_START, f"{run.step.package} {run.version} {stage} (attempt {run.attempt})")
            return now + self.ctx.poll_seconds
        st = self.ctx.cluster.stage_status(spec)
        utc = self._utc()
        if run.started is None:  # resumed: the pod's own start time (UTC) keeps the timeout across restarts
            run.started = st.started if st.started is not None else utc
        j = judge_stage(st.phase, st.reason, utc - run.started, timeout=self.recipe.timeouts.stage,
                        pull_grace=self.ctx.image_pull_grace)  # pure (execute/decide.py)
        if j.verdict is StageVerdict.MISSING:
            self.ctx.cluster.start_stage(spec)
            run.started = utc
            return now + self.ctx.poll_seconds
        if j.verdict is StageVerdict.SUCCEEDED:
            return self._stage_succeeded(run, spec)
        if j.verdict is StageVerdict.FAILED:
            return self._stage_failed(run, spec, st.exit_code, j.reason, st.log_tail)
        return now + min(self.ctx.poll_seconds, j.wake_in)

    def _stage_succeeded(self, run: _StageRun, spec: StageSpec) -> float | None:
        stage = run.stages[run.index]
        self._event(EventKind.STAGE_END, f"{run.step.package} {run.version} {stage} ok")
        name = self.recipe.name
        ann: dict[str, str | None] = {}
        if stage == "uninstall":
            self.state.pop(run.key, None)
            digests = parse_config_digests(self._annotation(config_key(name)))
            if digests.pop(run.step.package, None) is not None:
                ann[config_key(name)] = dump_config_digests(digests)
        else:
            self._set_entry(run.key, run.step.package, run.version, stage, "complete", run.step, restarts=0)
        if stage == "upgrade":  # other versions of the package are replaced (semantics §2.3)
            for k in [k for k in self.state if k.startswith(f"{run.step.package}|") and k != run.key]:
                del self.state[k]
        pkg = self.recipe.packages.get(run.step.package)
        if stage == "config" and pkg is not None and pkg.version == run.version:
            digests = parse_config_digests(self._annotation(config_key(name)))
            digests[pkg.name] = config_digest(pkg)
            ann[config_key(name)] = dump_config_digests(digests)
        run.index += 1
        run.attempt = 1
        run.running = False
        if run.index >= len(run.stages):
            run.done = True
        ann[state_key(name)] = self._state_annotation()
        self._defer(ann)
        return self._now()

    def _stage_failed(self, run: _StageRun, spec: StageSpec, code: int | None, reason: str, tail: str) -> float | None:
        stage = run.stages[run.index]
        now = self._now()
        retries = self.recipe.timeouts.stageRetries
        self._set_entry(run.key, run.step.package, run.version, stage, "erroring", run.step, restarts=run.attempt)
        if run.attempt <= retries:
            self._patch(annotations={state_key(self.recipe.name): self._state_annotation()})
            delay = min(300.0, self.recipe.timeouts.retryBackoff * (2 ** (run.attempt - 1)))
            self._event(EventKind.STAGE_RETRY,
                        f"{run.step.package} {stage} failed (exit {code}, {reason}); retry in {delay:.0f} s")
            run.attempt += 1
            run.running = False
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
    def _owner_package(self, interrupt: Interrupt) -> Step | None:
        holders = [s for s in self.plan.steps if s.interrupt is not None and s.interrupt.type == interrupt.type]
        pool = holders or [s for s in self.plan.steps if s.interrupt is not None] or list(self.plan.steps)
        return sorted(pool, key=lambda s: s.package)[0] if pool else None

    def _interrupt_packages(self) -> tuple[str, ...]:
        return tuple(sorted(s.package for s in self.plan.steps if s.interrupt is not None))

    def _phase_interrupt(self) -> float | None:
        now = self._now()
        fl = self.inflight
        node = self._read()
        if fl is None or fl.phase != "interrupt" or fl.requestedAt is None:
            interrupt = self.plan.interrupt
            if interrupt is None:
                self.phase = Phase.UNCORDON
                return self._phase_uncordon()
            if (why := self._out_of_scope(node)) is not None:
                return self._leave(f"{why} (before the interrupt)")
            if self.plan.cordon and not node.unschedulable:
                # S11: never interrupt a node that is not cordoned
                self._patch(unschedulable=True)
                self._event(EventKind.CORDON, "re-cordoned before the interrupt")
                self.phase = Phase.DRAIN
                self._evictions.clear()
                return self._now()
            pkgs = self._interrupt_packages()
            for s in self.plan.steps:
                if s.package in pkgs and s.to:
                    self._set_entry(f"{s.package}|{s.to}", s.package, s.to, "interrupt", "in_progress", s)
            ann: dict[str, str | None] = {
                inflight_key(self.recipe.name): self._inflight(
                    "interrupt",
                    interrupt=interrupt.model_dump(mode="json"),
                    interruptPackages=pkgs,
                    bootID=node.boot_id,
                    requestedAt=self._stamp(),
                ),
                state_key(self.recipe.name): self._state_annotation(),
            }
            self._patch(annotations=ann)
            fl = self.inflight
            assert fl is not None
            spec = self._interrupt_stage(interrupt)
            self.ctx.cluster.start_stage(spec)
            services = f" {','.join(interrupt.services)}" if interrupt.services else ""
            self._event(EventKind.INTERRUPT, f"{interrupt.type}{services}")
            return now + self.ctx.poll_seconds
        interrupt = Interrupt.model_validate(fl.interrupt) if fl.interrupt else self.plan.interrupt
        if interrupt is None:
            self.phase = Phase.POST_INTERRUPT
            return self._now()
        spec = self._interrupt_stage(interrupt)
        if interrupt.type == "reboot":
            if reboot_confirmed(node, fl.bootID):
                self._event(EventKind.REBOOTED, f"bootID {fl.bootID[:8]} -> {node.boot_id[:8]}")
                return self._interrupt_done(spec)
            st = self.ctx.cluster.stage_status(spec)
            if st.phase == "missing" and node.boot_id == fl.bootID and node.ready is True:
                # the request never reached the node (we stopped between the record and the pod)
                self.ctx.cluster.start_stage(spec)
            waited = self._elapsed("interrupt", fl.requestedAt)
            if waited >= self.recipe.timeouts.reboot:
                return self._fail(FailureReason.REBOOT_TIMEOUT,
                                  f"node did not come back from the reboot within {self.recipe.timeouts.reboot} s "
                                  f"(bootID still {node.boot_id[:8] or 'unknown'}, Ready={node.ready})",
                                  keep_cordon=True, stage="interrupt")
            return now + min(self.ctx.poll_seconds, self.recipe.timeouts.reboot - waited)
        st = self.ctx.cluster.stage_status(spec)
        if st.phase == "missing":
            self.ctx.cluster.start_stage(spec)
            return now + self.ctx.poll_seconds
        if st.phase == "succeeded":
            return self._interrupt_done(spec)
        if st.phase == "failed" or self._elapsed("interrupt", fl.requestedAt) >= self.recipe.timeouts.stage:
            return self._fail(FailureReason.INTERRUPT_FAILED,
                f"{interrupt.type} interrupt failed: exit {st.exit_code} {st.reason}",
                              keep_cordon=True, stage="interrupt", exit_code=st.exit_code, log_tail=st.log_tail)
        return now + self.ctx.poll_seconds

    def _interrupt_stage(self, interrupt: Interrupt) -> StageSpec:
        owner = self._owner_package(interrupt)
        pkg = self.recipe.packages.get(owner.package) if owner else None
        fake = _StageRun(
            step=owner or Step(package="node", action="reconfigure", stages=(), reason="interrupt"),
            stages=["interrupt"],
            new_version=(pkg.version if pkg else ""),
            new_pull=(pkg.pull_ref if pkg else ""),
        )
        return self._spec(fake, "interrupt", interrupt)

    def _interrupt_done(self, spec: StageSpec) -> float | None:
        fl = self.inflight
        pkgs = fl.interruptPackages if fl else ()
        for s in self.plan.steps:
            if s.package in pkgs and s.to:
                self._set_entry(f"{s.package}|{s.to}", s.package, s.to, "interrupt", "complete", s)
        self._defer({
            inflight_key(self.recipe.name): self._inflight("post-interrupt"),
            state_key(self.recipe.name): self._state_annotation(),
        })
        self.phase = Phase.POST_INTERRUPT
        return self._now()

    def _phase_post_interrupt(self) -> float | None:
        if not self._runs or self._runs[0].stages != ["post-interrupt"]:
            if self.node is None or self.inflight is None:
                self._read()
            pkgs = self.inflight.interruptPackages if self.inflight else self._interrupt_packages()
            steps = [s for s in self.plan.steps if s.package in pkgs and s.to]
            self._runs = []
            for s in steps:
                run = self._build_runs([s.model_copy(update={"stages": ("post-interrupt",), "after": ()})])[0]
                run.stages = ["post-interrupt"]
                entry = self.state.get(run.key)
                run.index, run.done, run.running, run.attempt = 0, False, False, 1
                if entry is not None and entry.stage == "post-interrupt":
                    run.done = entry.state == "complete"
                    run.running = entry.state == "in_progress"
                    run.attempt = entry.restarts + 1
                self._runs.append(run)
        return self._drive(self._runs, self._post_done)

    def _post_done(self) -> float | None:
        self.phase = Phase.UNCORDON
        return self._phase_uncordon()

    # ------------------------------------------------------------------ endings
    def _phase_uncordon(self) -> float | None:
        node = self._read()
        if node.ready is not True:
            return self._fail(FailureReason.NODE_NOT_READY,
                "node is not Ready at the end of its lifecycle; it stays cordoned",
                              keep_cordon=True)
        name = self.recipe.name
        ann: dict[str, str | None] = {
            inflight_key(name): None,
            failure_key(name): None,
            cordon_key(name): None,
            status_key(name): "complete",
            state_key(name): self._state_annotation(),
        }
        release = decide_release(node, name, owns_cordon=self.owns_cordon, runtime_required=self.recipe.runtimeRequired,
                                 runtime_required_recipes=self.ctx.runtime_required)
        others, uncordon, taints = release.others, release.uncordon, release.taints
        self._patch(annotations=ann, labels={status_key(name): "complete"},
                    unschedulable=False if uncordon else None, taints=taints)
        if uncordon:
            self._event(EventKind.UNCORDON)
        elif self.owns_cordon and others:
            self._event(EventKind.UNCORDON, f"claim released; still cordoned for {', '.join(others)}")
        self.owns_cordon = False
        self.ctx.cluster.delete_stages(name, self.name)
        if failure_key(name) in node.annotations:  # it had failed: clear its Erroring condition
            self.ctx.cluster.set_node_condition(self.name, condition_type(name, "Erroring"), "False",
                                                "Complete", f"recipe {name} complete")
        self.outcome = Outcome.COMPLETE
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
        self._failure_args = (reason, message, {"keep_cordon": keep_cordon, "stage": stage, "package": package,
                                                 "exit_code": exit_code, "log_tail": log_tail})
        return self._phase_failing()

    def _phase_failing(self) -> float | None:
        assert self._failure_args is not None
        reason, message, kw = self._failure_args
        reason = str(reason)  # a FailureReason's value: records and API objects carry plain strings
        name = self.recipe.name
        rec = FailureRecord(runId=self.ctx.run_id, inputs=self.ctx.inputs, reason=reason, stage=kw["stage"],
                            package=kw["package"], exitCode=kw["exit_code"], message=message[:2000],
                            logTail=kw["log_tail"][-2000:])
        ann: dict[str, str | None] = {
            failure_key(name): dump_model(rec),
            status_key(name): "erroring",
            state_key(name): self._state_annotation(),
        }
        unsched: bool | None = None
        if not kw["keep_cordon"]:
            ann[inflight_key(name)] = None
            if self.owns_cordon:
                self._refresh()
                ann[cordon_key(name)] = None
                unsched = False
        try:
            self._patch(annotations=ann, labels={status_key(name): "erroring"}, unschedulable=unsched)
            if unsched is False:
                self.owns_cordon = False
                self._event(EventKind.UNCORDON, "released: nothing was disrupted")
            self.ctx.cluster.set_node_condition(self.name, condition_type(name, "Erroring"), "True", reason,
                                                message[:1000])
            self.ctx.cluster.emit_event(self.name, "Failed", f"recipe {name}: {message[:900]}", "Warning")
        except NotFoundError:
            pass
        except ClusterError as e:
            if not self._give_up_recording:
                self.phase = Phase.FAILING  # retried (bounded) by advance()
                raise
            log.error("node %s: failed (%s) but the failure could not be recorded on the node: %s",
                      self.name, reason, e)
        self.failure = rec
        self.message = message
        self.outcome = Outcome.FAILED
        self._event(EventKind.FAILED, f"{reason}: {message}")
        return None

    def _block(self, message: str) -> float | None:
        """Protected pods outlived the wait: release what we hold; retried in a later pass (S09)."""
        name = self.recipe.name
        self._refresh()
        ann: dict[str, str | None] = {inflight_key(name): None, status_key(name): "blocked"}
        if self.owns_cordon:
            ann[cordon_key(name)] = None
        self._patch(annotations=ann, labels={status_key(name): "blocked"},
                    unschedulable=False if self.owns_cordon else None)
        if self.owns_cordon:
            self._event(EventKind.UNCORDON, "released while blocked")
        self.owns_cordon = False
        self.inflight = None
        self.message = message
        self.outcome = Outcome.BLOCKED
        self._event(EventKind.BLOCKED, message)
        return None

    def _owed_interrupt(self) -> Interrupt | None:
        """The interrupt this node still owes if it stopped now: the plan's (or the record's) merged
        interrupt once a stage ran or may have run in this lifecycle (conservative after a restart:
        the lifecycle reached its stages), until the interrupt is confirmed."""
        fl = self.inflight
        recorded = Interrupt.model_validate(fl.interrupt) if fl is not None and fl.interrupt else None
        interrupt = self.plan.interrupt or recorded
        if interrupt is None:
            return None
        if self._runs and self.phase is Phase.STAGES:
            return interrupt if any(r.running or r.done or r.index > 0 for r in self._runs) else None
        return recorded if fl is not None and fl.owes else None

    def _leave(self, message: str) -> float | None:
        """The node left the recipe's scope (its selector, or the ignore label): start nothing new.
        What it owes is never dropped: a node that owes an interrupt keeps its in-flight record and
        our cordon (the plan and ``status`` show it; back in scope, the lifecycle resumes and runs the
        interrupt). A node that owes nothing is released: our claim goes, and it is uncordoned when
        ours was the last claim — decided from a fresh read, conditional on its resourceVersion."""
        name = self.recipe.name
        owed = self._owed_interrupt()
        if owed is not None:
            note = (f"{message}; it owes a {owed.type} (recorded): it stays cordoned until it is back in "
                    "scope or `reconciler node reset --force`")
            if self.inflight is None or not self.inflight.interrupt:
                self._patch(annotations={inflight_key(name): self._inflight(self.phase if self.phase in (
                    "stages", "interrupt") else "stages")})
            self.message = note
            self.outcome = Outcome.LEFT
            self._event(EventKind.OWED, note)
            return None
        node = self._refresh()
        self.owns_cordon = cordon_key(name) in node.annotations
        others = cordon_claims(node, name)
        uncordon = self.owns_cordon and node.unschedulable and not others
        ann: dict[str, str | None] = {inflight_key(name): None}
        if self.owns_cordon:
            ann[cordon_key(name)] = None
        if self.inflight is not None or self.owns_cordon or inflight_key(name) in node.annotations:
            self._patch(annotations=ann, unschedulable=False if uncordon else None)
        if uncordon:
            self._event(EventKind.UNCORDON, "released: node left the recipe's scope")
        elif self.owns_cordon and others:
            self._event(EventKind.UNCORDON, f"claim released; still cordoned for {', '.join(others)}")
        self.owns_cordon = False
        self.inflight = None
        self.message = message
        self.outcome = Outcome.LEFT
        self._event(EventKind.LEFT, message)
        return None

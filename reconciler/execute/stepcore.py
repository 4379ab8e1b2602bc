"""The core of one lifecycle step (:func:`reconciler.execute.machine.step`): reading the
:class:`~reconciler.execute.effects.View` (asking for what it lacks), collecting effects, the
records every phase writes, and API-error handling. The phases are mixins over this core
(:mod:`~reconciler.execute.phases_drain`, :mod:`~reconciler.execute.phases_stages`,
:mod:`~reconciler.execute.phases_end`). Pure: no I/O, no clock."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from typing import Any

from reconciler.errors import ClusterError, ConflictError, ForbiddenError, NotFoundError, TransientError
from reconciler.execute.effects import (
    NODE_EVENTS,
    Announce,
    DaemonSetExists,
    Effect,
    EmitEvent,
    GetPod,
    ListPdbs,
    ListPods,
    Log,
    LogLevel,
    PatchNode,
    Read,
    ReadNode,
    ReadStage,
    View,
)
from reconciler.execute.memory import Memory, Outcome, StepContext
from reconciler.execute.retry import Fail, Gone, Retry, classify
from reconciler.execute.stagework import commitment, interrupt_packages, owner_step
from reconciler.model.nodestate import (
    IGNORE_LABEL,
    ConfigDigest,
    InFlight,
    PackageState,
    config_key,
    dump_config_digests,
    dump_model,
    dump_state,
    inflight_key,
    is_ignored,
    parse_model,
    parse_state,
    readiness,
    release_digest,
    state_key,
)
from reconciler.model.observed import NodeInfo, PdbInfo, PodInfo
from reconciler.model.plan import NodePlan, Step
from reconciler.model.utctime import elapsed_since, to_rfc3339
from reconciler.model.vocab import (
    EventKind,
    FailureReason,
    Phase,
)
from reconciler.plan.drain import classify_pods
from reconciler.ports import StageSpec, StageStatus


class _Need(Exception):
    """Raised inside a step when it needs reads the view does not hold."""

    def __init__(self, *reads: Read) -> None:
        super().__init__()
        self.reads = reads


class _Replaced(Exception):
    """Raised inside a step when a read shows another machine under the node's name (another UID)."""

    def __init__(self, node: NodeInfo) -> None:
        super().__init__(node.name)
        self.node = node


class _Raise(Exception):
    def __init__(self, error: ClusterError) -> None:
        super().__init__(str(error))
        self.error = error


class StepCore:
    """One invocation of :func:`~reconciler.execute.machine.step`: works on a copy of the memory and
    collects effects."""

    def __init__(self, memory: Memory, view: View, plan: NodePlan, ctx: StepContext, now: float, utc: float) -> None:
        self.m0 = memory
        self.m = memory.copy()
        self.v = view
        self._run_plan = plan
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
        # the memory a write that fails leaves behind: as it was when the decision that made the write
        # began (the step's input — never changed, so shared rather than copied — then each phase
        # handler's start: see _checkpoint)
        self._cp = memory

    @property
    def plan(self) -> NodePlan:
        """The plan the lifecycle carries out: the run's, unless the lifecycle planned the node
        itself (:attr:`Memory.plan`): another machine under the node's name, the work an older
        release's record still owes, or the recipe's release taken up after it."""
        return self.m.plan if self.m.plan is not None else self._run_plan

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
        if self.m.uid and node.uid and node.uid != self.m.uid:
            raise _Replaced(node)  # another machine: nothing of this lifecycle applies to it
        self._settle()
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

    def _stage_log(self, spec: StageSpec) -> str:
        """The failing container's log tail of the stage pod of ``spec``, read only for a failure
        record (a request on a real cluster): ask before changing the memory."""
        tail = self.v.logs.get(spec.pod_name)
        if self._wrote or tail is None:
            raise _Need(ReadStage(spec, log=True))
        return tail

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

    def _checkpoint(self) -> None:
        """A decision begins here: a write issued from now on that fails leaves the memory as it is
        now — nothing the decision computed for that write (its record, its timers, the state it
        records) is kept, so the next step decides again from what the node holds."""
        self._cp = self.m.copy()

    def _write(self, effect: Effect, rollback: Memory | None = None) -> None:
        """A cluster write; if it fails, the memory is ``rollback`` (default: as it is now)."""
        self.rollbacks[len(self.effects)] = rollback if rollback is not None else self._cp
        self.effects.append(effect)
        self._wrote = True

    def _event(self, kind: EventKind, detail: str = "") -> None:
        """A timeline event; cordon, drain and uncordon are also Events on the node (:data:`NODE_EVENTS`)."""
        self._effect(Announce(kind, detail))
        reason = NODE_EVENTS.get(kind)
        if reason is not None:
            what = f"recipe {self.recipe.name}" + (f": {detail}" if detail else "")
            self._effect(EmitEvent(reason, what, notice=True))

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
        rollback = self._cp  # a failed write keeps the deferred records, and nothing decided for it
        self._settle(given=annotations or ())
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
                              taints=tuple(taints) if taints is not None else None, resource_version=rv or None,
                              uid=self.m.uid or None),
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
        self._settle(key)
        if key in self.m.pending:
            return self.m.pending[key]
        return self.m.node.annotations.get(key) if self.m.node else None

    def _defer(self, annotations: dict[str, str | None]) -> None:
        """Record to be written with the node's next write. Used for "after" records (a stage
        completed) whose next effect is always preceded by a write: the completed stage pod stays
        until the node is complete, so a run that stops before the write finds it and records it.
        A value given here replaces a deferred state or digests of the same annotation."""
        self._settle(given=annotations)
        self.m.pending.update(annotations)

    def _defer_state(self) -> None:
        """Record the package state (``m.state``) with the node's next write, as :meth:`_defer`;
        serialised once, when that write (or a read of the deferred records) comes: stages
        completing one after another do not each serialise the whole state (issue 36)."""
        self.m.state_owed = True

    def _defer_digests(self, digests: dict[str, ConfigDigest]) -> None:
        """Record the config digests with the node's next write, serialised then, as :meth:`_defer_state`."""
        self.m.digests = (None, digests)

    def _settle(self, key: str | None = None, given: Collection[str] = ()) -> None:
        """The deferred package state and config digests (:meth:`_defer_state`,
        :meth:`_defer_digests`) serialised into the deferred records; only the annotation ``key``
        when one is named. An annotation in ``given`` (about to be written with its own value) is
        no longer owed and not serialised."""
        name = self.recipe.name
        if self.m.state_owed:
            skey = state_key(name)
            if skey in given:
                self.m.state_owed = False
            elif key in (None, skey):
                self.m.pending[skey] = dump_state(self.m.state)
                self.m.state_owed = False
        known = self.m.digests
        if known is not None and known[0] is None:
            ckey = config_key(name)
            if ckey in given:
                self.m.digests = None
            elif key in (None, ckey):
                text = dump_config_digests(known[1])
                self.m.pending[ckey] = text
                self.m.digests = (text, known[1])

    def _inflight(self, phase: Phase, **extra: Any) -> str:
        """The in-flight record with ``phase`` (and ``extra`` fields), as JSON; kept in memory.

        The lifecycle's first record (no record yet, or one of another lifecycle) carries the
        commitment (:class:`~reconciler.model.nodestate.InFlight`): the release, the steps, the
        merged interrupt and its owner, the node's UID and bootID; a record of this lifecycle keeps
        the one it has (a record written before commitments existed gets the release and steps of
        the plan it is resumed with)."""
        fl = self.m.inflight
        base = fl.model_dump(by_alias=True) if fl else {}
        lifecycle = self.m.lifecycle or self.ctx.run_id
        stamp = self._stamp()
        same = fl is not None and fl.lifecycle_id == lifecycle
        timers = dict(base.get("timers") or {}) if same else {}
        if phase in (Phase.WAIT, Phase.DRAIN, Phase.READINESS_GATE):
            timers.setdefault(phase, stamp)  # its timeout counts from the first start, across restarts
        base.update(runId=self.ctx.run_id, planHash=self.ctx.plan_hash, phase=phase, since=stamp,
                    lifecycle=lifecycle, timers=timers)
        node = self.m.node
        if not same:  # a new lifecycle: a new commitment; its stage pods are named anew (no rerun counts)
            base.update(reruns=None, interrupt=None, interruptPackages=(), requestedAt=None, interruptOwner="",
                        bootID=node.boot_id if node is not None else "", **self._commitment())
        elif fl is not None and fl.steps is None:
            base.update(self._commitment())
        if phase in (Phase.PRE_CORDON, Phase.WAIT, Phase.DRAIN, Phase.STAGES) and self.plan.interrupt is not None:
            # the interrupt is owed from the start, so a restart after the stages never loses it
            owner = owner_step(self.plan.steps, self.plan.interrupt)
            base.update(interrupt=self.plan.interrupt.model_dump(mode="json"),
                        interruptPackages=interrupt_packages(self.plan.steps), requestedAt=None,
                        interruptOwner=base.get("interruptOwner") or (owner.package if owner else ""))
        base.update(extra)
        self.m.inflight = InFlight.model_validate(base)
        return dump_model(self.m.inflight)

    def _fresh_commit(self) -> bool:
        """The next record is this lifecycle's first (its commitment is made with it)."""
        fl = self.m.inflight
        return fl is None or fl.lifecycle_id != (self.m.lifecycle or self.ctx.run_id)

    def _commitment(self) -> dict[str, Any]:
        """The commitment fields of a new record: the release, the plan's steps, the node's UID."""
        node = self.m.node
        return {"release": release_digest(self.recipe), "recipeVersion": self.recipe.version,
                "steps": commitment(self.recipe, self.plan.steps), "nodeUID": node.uid if node is not None else ""}

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
        if isinstance(e, ConflictError) and m.uid:
            self._fetch()  # a precondition failed: is the node another machine now? (raises _Replaced)
        if m.streak == 0:
            m.streak_start = now
        m.streak += 1
        decision = classify(e, m.streak, now - m.streak_start, self.ctx.retry_bounds)
        if isinstance(decision, Gone):
            if not self._node_exists():  # also before the first read: deleted after it was planned
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

    def _ready_wait(self, node: NodeInfo) -> float | None:
        """For a node that is not Ready: when to look again while ``timeouts.nodeReady`` is not
        over, counted from its Ready condition's last transition (the node's creation when it has
        no Ready condition; when this process first saw it, when neither is known), so the bound
        holds across restarts and passes without a record of ours; None once it is over. Logs
        the wait once (event ``wait``, reason NodeNotReady)."""
        limit = self.recipe.timeouts.nodeReady
        cond = node.condition("Ready")
        since = cond.since if cond is not None and cond.since is not None else (node.created or None)
        waited = self._utc - since if since is not None else self._elapsed("node-ready", None)
        if waited >= limit:
            return None
        if not self.m.waiting_logged:
            self._event(EventKind.WAIT, f"{FailureReason.NODE_NOT_READY}: node is not Ready "
                                        f"(Ready={readiness(node.ready)}); waiting up to {limit} s for it")
            self.m.waiting_logged = True
        return self._now + min(self.ctx.poll_seconds, limit - waited)

    def _out_of_scope(self, node: NodeInfo) -> str | None:
        """Why the node must not be (further) worked on: it left the selector or was ignored."""
        if not self.recipe.nodeSelector.matches(node.labels):
            return "node no longer matches the recipe's nodeSelector"
        if is_ignored(node.labels):
            return f"node is labelled {IGNORE_LABEL}=true"
        return None

    # ------------------------------------------------------------------ entry points of the phase mixins
    def _fail(self, reason: str, message: str, *, keep_cordon: bool = True, stage: str = "", package: str = "",
              exit_code: int | None = None, log_tail: str = "") -> float | None:
        raise NotImplementedError

    def _phase_failing(self) -> float | None:
        raise NotImplementedError

    def _leave(self, message: str) -> float | None:
        raise NotImplementedError

    def _block(self, message: str) -> float | None:
        raise NotImplementedError

    def _not_started(self, message: str) -> float | None:
        raise NotImplementedError

    def _phase_wait(self) -> float | None:
        raise NotImplementedError

    def _phase_stages(self) -> float | None:
        raise NotImplementedError

    def _phase_uncordon(self) -> float | None:
        raise NotImplementedError

    def _after_stages(self) -> float | None:
        raise NotImplementedError

    def _phase_cordon(self) -> float | None:
        raise NotImplementedError

    def _begin(self) -> float | None:
        raise NotImplementedError

    def _drive(self, on_done: Any) -> float | None:
        raise NotImplementedError

    def _take_up(self, node: NodeInfo | None = None) -> float | None:
        raise NotImplementedError

    def _finish_owed(self, owed: Any, node: NodeInfo) -> float | None:
        raise NotImplementedError

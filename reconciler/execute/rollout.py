"""Batch-gated rollout of a plan across compartments (semantics-nodewright.md §1.2 with decisions
(a) and (b)).

Compartments proceed independently. Within one, nodes run in *waves*: a batch of
``next_batch_size(...)`` nodes starts, the next batch starts when every node of the current one
has ended. A batch passes when ``floor(succeeded × 100 / size) ≥ batchThreshold`` (blocked nodes
are left out of ``size`` and retried once at the end of the compartment, S09); consecutive failed
batches reaching ``failureThreshold`` below ``safetyLimit`` progress halt the compartment (unset:
its first failed batch, :func:`~reconciler.plan.batching.halt_rule`); nodes an earlier run left
failed with the same inputs count as failed batches from the start
(:func:`~reconciler.plan.batching.resume_state`), so a halt holds across runs, and a halted
compartment still finishes the lifecycles an earlier run started. The
number of nodes we hold disrupted — in progress, or failed and still cordoned by us, including
nodes left so by an earlier run — never exceeds the budget ceiling: a batch is shrunk to the free
slots, and a compartment with no free slot and nothing running halts with that reason. A failed
node is terminal for the run and never freezes its compartment.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from typing import Any

from reconciler.errors import (
    ClusterError,
    ConflictError,
    ReconcilerError,
    ServerError,
    TooManyRequestsError,
    TransientError,
)
from reconciler.execute.heap import frozen_heap
from reconciler.execute.jobs import ThreadJobPool
from reconciler.execute.lifecycle import NodeRun, Outcome, RunContext
from reconciler.execute.lock import LeaseLostError
from reconciler.execute.retry import Fail, Retry, classify
from reconciler.execute.timeline import BatchRecord, NodeOutcome, RunResult, Timeline, in_job
from reconciler.model.nodestate import (
    FailureRecord,
    InFlight,
    condition_type,
    inflight_key,
    inputs_digest,
    not_retried,
    not_retried_message,
    parse_model,
)
from reconciler.model.plan import NodePlan, Plan
from reconciler.model.policy import DEFAULT_COMPARTMENT, DeploymentPolicy, Strategy
from reconciler.model.recipe import Recipe
from reconciler.model.run import CompartmentResult, run_verdict
from reconciler.model.vocab import NodeResult, Phase
from reconciler.plan.batching import BatchState, evaluate_batch, halt_rule, next_batch_size, resume_state
from reconciler.ports import ChangeFeed, Clock, Cluster, ClusterPorts, NodeInterest

log = logging.getLogger(__name__)


MIN_AUTO_WORKERS = 16
MAX_AUTO_WORKERS = 128


def default_workers(plan: Plan) -> int:
    """Threads for a real cluster when ``--workers`` is not given: enough to advance every node
    of the largest batch the plan allows at once (a batch never exceeds its compartment's
    budget ceiling), between 16 and 128. With fewer, the nodes of a batch queue for a thread
    during their drains and the batch ends later than its slowest node would."""
    ceiling = max((c.ceiling for c in plan.compartments), default=0)
    return max(MIN_AUTO_WORKERS, min(MAX_AUTO_WORKERS, ceiling))


def new_run_id() -> str:
    """A fresh run id (``run-`` + 12 hex chars)."""
    return "run-" + uuid.uuid4().hex[:12]


@dataclass
class _Compartment:
    name: str
    strategy: Strategy | None
    ceiling: int
    queue: list[str]
    total: int
    held: set[str] = field(default_factory=set)  # unschedulable nodes at the start of the batch
    state: BatchState = field(default_factory=BatchState)
    active: list[NodeRun] = field(default_factory=list)
    failed: list[NodeRun] = field(default_factory=list)  # ended FAILED in this run
    batch: BatchRecord | None = None
    batches: list[BatchRecord] = field(default_factory=list)
    halted: str = ""
    retried_blocked: set[str] = field(default_factory=set)
    in_flight: set[str] = field(default_factory=set)  # lifecycles an earlier run started: always resumed
    failed_before: tuple[str, ...] = ()  # left failed by an earlier run with the same inputs

    @property
    def stopped(self) -> bool:
        """Starts nothing more: halted, or stopped with no lifecycle in flight left to resume (a
        compartment halted by an earlier run still finishes what that run started)."""
        return bool(self.halted) or (self.state.should_stop and not self.in_flight)

    @property
    def done(self) -> bool:
        return not self.active and (not self.queue or self.stopped)


class Rollout:
    """Carry out ``plan`` for ``recipe`` with ``policy`` on ``cluster``, timed by ``clock``.

    Args:
        cluster: the cluster roles (:class:`~reconciler.ports.ClusterPorts`), or one adapter that
            plays them all (``ClusterPorts.of`` makes the bundle); kept as :attr:`ports`.
        runtime_required: every runtime-required recipe of the apply (the taint leaves a node only
            when all that select it are complete there).
        waiting: nodes not started because an earlier recipe (by priority) is not complete on
            them, with the reason (NodeWright sequencing); reported as ``waiting``.
        max_seconds: give up waiting after this long (clock seconds); nodes still running are
            reported as they are (their records stay on the nodes, a later run resumes them).
        on_event: called with each timeline event (live progress).
        on_tick: called with the clock time at the top of every loop pass (before anything new
            starts); returns the clock time by which it must be called again (the loop never waits
            past it) or None. A ``ReconcilerError`` it raises stops the run: nothing more is started
            or advanced, ``stopped`` holds the message and running nodes are reported as still
            running (their records stay on the nodes). Used to renew the recipe's Lease.
        changes: which nodes changed (a real cluster's watch streams); without it the loop waits
            on the clock and looks at every node in progress.
        workers: node runs advanced at once. 1 for the simulated fleet (deterministic); more for
            a real cluster, where each step waits on API round trips.
        controller: the run is a ``reconciler controller`` pass (messages name its ways on, not
            ``apply``'s flags).
    """

    def __init__(
        self,
        recipe: Recipe,
        policy: DeploymentPolicy,
        plan: Plan,
        cluster: Cluster | ClusterPorts,
        clock: Clock,
        *,
        run_id: str | None = None,
        poll_seconds: float = 5.0,
        max_seconds: float = 7 * 24 * 3600.0,
        on_event: Callable[[Any], None] | None = None,
        agent_image: str | None = None,
        retry_failed: bool = False,
        runtime_required: tuple[str, ...] = (),
        waiting: dict[str, str] | None = None,
        on_tick: Callable[[float], float | None] | None = None,
        workers: int = 1,
        controller: bool = False,
        changes: ChangeFeed | None = None,
    ) -> None:
        self.recipe, self.policy, self.plan = recipe, policy, plan
        self.controller = controller
        self.workers = workers
        self._pool: ThreadJobPool | None = None
        self.ports, self.clock, self.changes = ClusterPorts.of(cluster), clock, changes
        self.run_id = run_id or new_run_id()
        self.timeline = Timeline(start=clock.now(), utc_start=clock.utc())
        if on_event:
            self.timeline.listeners.append(on_event)
        self.ctx = RunContext(
            recipe=recipe,
            ports=self.ports,
            clock=clock,
            run_id=self.run_id,
            plan_hash=plan.planHash,
            timeline=self.timeline,
            poll_seconds=poll_seconds,
            agent_image=agent_image,
            inputs=inputs_digest(recipe, policy),
            runtime_required=tuple(runtime_required) or ((recipe.name,) if recipe.runtimeRequired else ()),
        )
        self.waiting = dict(waiting or {})
        self.retry_failed = retry_failed
        self.prefailed: dict[str, FailureRecord] = {}
        self.max_seconds = max_seconds
        self.runs: dict[str, NodeRun] = {}
        self._wake: dict[str, float] = {}  # node → clock time its run asked to be looked at again
        self._by_name: dict[str, NodePlan] = {n.name: n for n in plan.nodes}
        self.max_disrupted: dict[str, int] = {}
        self.on_tick = on_tick
        self.stopped = ""
        self._api_errors = 0
        self._api_errors_since = 0.0
        self._interest: bool | None = None  # whether the node role is a NodeInterest (known on first use)

    # ------------------------------------------------------------------ setup
    def _strategy_of(self, name: str) -> Strategy | None:
        if name == DEFAULT_COMPARTMENT:
            return self.policy.default.strategy
        for c in self.policy.compartments:
            if c.name == name:
                return c.strategy
        return None

    def _reassert_failed(self, node: str, rec: FailureRecord) -> None:
        """Write the Erroring condition of a node left failed: the failed run wrote it after the
        failure record, so a run stopped between the two writes would otherwise lose it."""
        try:
            self.ports.nodes.set_node_condition(node, condition_type(self.recipe.name, "Erroring"), "True", rec.reason,
                                            rec.message[:1000])
        except ClusterError as e:
            log.warning("node %s: could not re-assert its Erroring condition: %s", node, e)

    def _compartments(self) -> list[_Compartment]:
        out = []
        nodes_now = {n.name: n for n in self.ports.nodes.list_nodes()}

        def held(name: str) -> FailureRecord | None:  # failed earlier with these very inputs: left failed
            info = nodes_now.get(name)
            return None if info is None else not_retried(info, self.recipe.name, self.ctx.inputs,
                                                         retry_failed=self.retry_failed)

        # the plan's notRetried nodes are in no batch (the planner made the same decision): still
        # failed on this read, they are reported failed as the plan said, their condition re-asserted
        for np_ in self.plan.nodes:
            if np_.notRetried is not None and (rec := held(np_.name)) is not None:
                self.prefailed[np_.name] = rec
                self._reassert_failed(np_.name, rec)
        for cp in self.plan.compartments:
            queue = []
            for n in (n for batch in cp.batches for n in batch if n in self._by_name):
                rec = held(n)  # a node that failed since the plan was made
                if rec is not None:
                    self.prefailed[n] = rec
                    self._reassert_failed(n, rec)
                    continue
                if n in self.waiting:
                    continue  # an earlier recipe (priority) is not complete on it
                queue.append(n)
            started = {n for n in queue if (info := nodes_now.get(n)) is not None
                       and inflight_key(self.recipe.name) in info.annotations}
            # lifecycles in flight go first: they already count against the budget
            queue.sort(key=lambda n: n not in started)
            # a halt of an earlier run is found again in the nodes it left failed (batching.resume_state)
            before = tuple(sorted(n for n in self.prefailed if self._by_name[n].compartment == cp.name))
            strategy = self._strategy_of(cp.name)
            total = len(queue) + len(before)
            c = _Compartment(cp.name, strategy, cp.ceiling, queue, total, in_flight=started, failed_before=before,
                             state=resume_state(strategy, total, len(before)) if queue else BatchState())
            if c.stopped:
                self._halt(c)
            out.append(c)
        return out

    def _halt(self, c: _Compartment) -> None:
        """Record that ``c`` halted, saying why: its consecutive failed batches, counting the nodes an
        earlier run left failed when they count (:func:`~reconciler.plan.batching.resume_state`)."""
        n, k = c.state.consecutive_failures, len(c.failed_before)
        why = f"halted after {n} consecutive failed batch(es)"
        if k:
            names = ", ".join(c.failed_before[:5]) + (f" and {k - 5} more" if k > 5 else "")
            how = ("`reconciler reset` or `package rerun` them" if self.controller
                   else "retry them (--retry-failed, `reconciler reset`, `package rerun`)")
            earlier = (f"{k} node(s) an earlier run left failed with these inputs ({names}) count as failed batches: "
                       f"{how}, leave them out (`reconciler node ignore`) or change the recipe to go on")
            # a batch of lifecycles the earlier run started may have passed since: the halt is theirs
            why = f"{why}, counting {earlier}" if n >= k else f"halted: {earlier}"
        c.halted = f"{why}; its rule: {halt_rule(c.strategy).describe()}"
        self.timeline.add(self.clock.now(), c.name, "halted", c.halted)

    # ------------------------------------------------------------------ loop
    def run(self) -> RunResult:
        """Run to the end (or ``max_seconds``) and return the result document. What was alive
        before the run is kept out of the garbage collector's passes meanwhile
        (:func:`~reconciler.execute.heap.frozen_heap`)."""
        with frozen_heap():
            try:
                return self._run()
            finally:
                self._close_pool()  # also when the run ends with an error

    def _run(self) -> RunResult:
        self.timeline.own()  # observers are called on this (the loop's) thread only
        comps = self._compartments()
        # nodes outside the selection that hold our records: released, or kept when they owe an
        # interrupt (issue 12's scope rules); they are not part of any batch
        extra = [NodeRun(self.ctx, NodePlan(name=o.name, compartment="", batch=0, steps=()))
                 for o in self.plan.outOfScope]
        for r in extra:
            self.runs[r.name] = r
            self._wake[r.name] = 0.0
        start = self.clock.now()
        tick_at: float | None = None
        changed: Collection[str] | None = None
        tells = False  # whether the last wait said what changed (never without a change feed)
        requested = False  # the stop was asked for by the process (LeaseLostError.requested)
        while True:
            if self.on_tick is not None:
                try:
                    tick_at = self.on_tick(self.clock.now())
                except ReconcilerError as e:
                    self._stop(str(e), requested=isinstance(e, LeaseLostError) and e.requested)
                    break
            api_down = False
            retry_after = 0.0
            for c in comps:
                try:
                    self._step_compartment(c)
                except LeaseLostError as e:  # a fenced write refused (execute/fence.py): stop writing at once
                    self.stopped, requested = str(e), e.requested
                    break
                except (TransientError, TooManyRequestsError, ServerError, ConflictError) as e:
                    # the read before a batch failed; nothing was started: retry, bounded (execute/retry.py)
                    api_down = True
                    if self._api_errors == 0:
                        self._api_errors_since = self.clock.now()
                    self._api_errors += 1
                    decision = classify(e, self._api_errors, self.clock.now() - self._api_errors_since,
                                        self.ctx.retry_bounds)
                    if isinstance(decision, Fail):
                        self.stopped = f"{decision.reason}: {decision.message}"
                        break
                    retry_after = max(retry_after, decision.after if isinstance(decision, Retry) else 0.0)
                    log.warning("run %s: %s; retrying in %.0f s", self.run_id, e, retry_after)
            if self.stopped:
                self._stop(self.stopped, requested=requested)
                break
            if not api_down:
                self._api_errors = 0
            if all(c.done for c in comps) and not extra:
                break
            now = self.clock.now()
            # look at a node when its own timer is due or the change feed saw it change
            # (changed None: nobody can tell, so look at every node)
            due = [r for r in [*extra, *(r for c in comps for r in c.active)]
                   if changed is None or r.name in changed or self._wake.get(r.name, 0.0) <= now]
            try:
                wakes_due = self._advance_all(due)
            except LeaseLostError as e:
                self._stop(str(e), requested=e.requested)
                break
            finally:
                self.timeline.flush()  # events the workers added, announced here on the loop thread
            for r, w in zip(due, wakes_due, strict=True):
                self._wake[r.name] = w if w is not None else now
            for c in comps:
                self._collect(c)
                self._record_budget(c)
            if extra:
                self._release([r for r in extra if r.outcome is not Outcome.RUNNING])
                extra = [r for r in extra if r.outcome is Outcome.RUNNING]
            wakes = [self._wake[r.name] for r in [*extra, *(r for c in comps for r in c.active)]]
            if all(c.done for c in comps) and not extra:
                break
            now = self.clock.now()
            if now - start >= self.max_seconds:
                log.warning("run %s stopped waiting after %.0f s", self.run_id, now - start)
                break
            pending_start = any(not c.active and c.queue and not c.stopped for c in comps)
            if pending_start and not api_down:
                changed = set() if tells else None  # this pass's changes were looked at already
                continue
            target = min(wakes) if wakes else now + self.ctx.poll_seconds
            if api_down:
                target = max(target, now + retry_after)
            if tick_at is not None:
                target = min(target, tick_at)
            if target > now:
                changed = self._wait(target - now)
                tells = changed is not None
            elif tells:
                # no time to wait: the change feed still says which nodes changed (it answers at
                # once), so only those and the nodes whose timer is due are looked at, not every node
                changed = self._wait(0.0)
            else:
                changed = None
        self._close_pool()
        self._end_lifecycles()
        return self._result(comps, self.clock.now() - start)

    def _wait(self, seconds: float) -> Collection[str] | None:
        """Wait ``seconds`` on the change feed (the nodes that changed) or, without one, on the
        clock (None: cannot tell)."""
        if self.changes is not None:
            return self.changes.changed(seconds)
        self.clock.wait(seconds)
        return None

    def _stop(self, message: str, *, requested: bool = False) -> None:
        """Stop the run: nothing more is started or advanced (node records stay on the nodes).
        ``requested``: the process asked for it (:attr:`LeaseLostError.requested`): logged as
        information, not as an error."""
        self.stopped = message
        (log.info if requested else log.error)("run %s stopped: %s", self.run_id, message)
        self.timeline.add(self.clock.now(), "run", "stopped", message)

    def _end_lifecycles(self) -> None:
        """Release the shared objects of lifecycles nothing needs any more, so a run that was
        stopped, preempted or killed leaves nothing behind once its nodes are finished.

        * This run's own lifecycle and the ones it resumed: unless one of their nodes failed or is
          still running in this run (their stage pods keep the logs and the resume point).
        * Any other lifecycle whose shared objects exist (``stages.lifecycles()``: e.g. one a killed
          run started and another run, itself stopped, finished): only when no node's in-flight
          record, for any recipe, names it (one LIST of nodes, done only when there is such a
          lifecycle).

        Every lifecycle but this run's own is released with ``if_unused`` (no stage pod of it may
        be left: a failed node outside this run keeps its pods and their logs)."""
        if self.stopped:
            return  # a stopped run writes nothing more
        worked: dict[str, bool] = {}
        for r in self.runs.values():
            if r.lifecycle:
                busy = r.outcome in (Outcome.FAILED, Outcome.RUNNING)
                worked[r.lifecycle] = worked.get(r.lifecycle, False) or busy
        release = {lc for lc, busy in worked.items() if not busy}
        try:
            owned = self.ports.stages.lifecycles()
            others = owned - set(worked)
            if others or release - {self.run_id}:
                referenced = self._referenced_lifecycles(owned)
                release = {lc for lc in release if lc == self.run_id or lc not in referenced}
                release |= others - referenced
        except ClusterError as e:
            log.warning("run %s: could not look for lifecycles to release: %s", self.run_id, e)
            release &= {self.run_id}
        for lifecycle in sorted(release):
            try:
                self.ports.stages.end_run(lifecycle, if_unused=lifecycle != self.run_id)
            except ClusterError as e:  # leftovers only: report, do not fail the run
                log.warning("run %s: could not release the stage objects of lifecycle %s: %s", self.run_id,
                            lifecycle, e)

    def _referenced_lifecycles(self, owned: set[str]) -> set[str]:
        """Lifecycles named by an in-flight record of any recipe on any node (one LIST of nodes);
        a record that cannot be read keeps every lifecycle of ``owned`` (those whose objects exist)."""
        out: set[str] = set()
        prefix = inflight_key("")
        for info in self.ports.nodes.list_nodes():
            for key, value in info.annotations.items():
                if key.startswith(prefix):
                    rec = parse_model(InFlight, value)
                    # a record that cannot be read might name any lifecycle: keep them all
                    out.add(rec.lifecycle or rec.runId if rec is not None else "*")
        if "*" in out:
            out |= owned
        return out

    def _refresh_held(self, c: _Compartment) -> None:
        """Nodes of the compartment that are unavailable (unschedulable) when a batch starts:
        held cordoned by this recipe (failed in this or an earlier run) or cordoned by someone
        else (S10: they count as unavailable too). One LIST per batch."""
        c.held = {
            info.name
            for info in self.ports.nodes.list_nodes(unschedulable_only=True)
            if info.unschedulable
            and (np := self._by_name.get(info.name)) is not None
            and np.compartment == c.name
        }

    def _advance_all(self, runs: list[NodeRun]) -> list[float | None]:
        """One cycle of each node run. Every decision (each :func:`~reconciler.execute.machine.step`)
        and every observer call happens on this, the loop's, thread; with ``workers`` > 1 (a real
        cluster: each read or write waits on an API round trip) only the runs' I/O goes to the job
        pool (:class:`~reconciler.execute.jobs.ThreadJobPool`), up to ``workers`` nodes' I/O at
        once. An error ends the pool: the I/O not started is
        dropped and the I/O already handed out is waited for before the error goes up (no write
        after it)."""
        if self.workers <= 1 or len(runs) <= 1:
            return [r.advance() for r in runs]
        if self._pool is None:
            self._pool = ThreadJobPool(self.workers)
        pool = self._pool
        try:
            for r in runs:
                job = r.begin()
                if job is not None:
                    pool.submit(r, _bound(r.perform, job))
            while pool.pending():
                key, answer, error = pool.next_done()
                if error is not None:
                    raise error
                assert isinstance(key, NodeRun)
                job = key.resume(answer)  # type: ignore[arg-type]  # what key.perform returned
                if job is not None:
                    pool.submit(key, _bound(key.perform, job))
        except BaseException:
            # the run stops (a lost Lease, a refused failure record, a crash)
            self._close_pool()
            raise
        return [r.wake for r in runs]

    def _close_pool(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.close()

    def _disrupted(self, c: _Compartment) -> int:
        # a node counts from its cordon on (one of its packages has an interrupt); its packages
        # without one run first on the schedulable node and disrupt nothing (``pre-cordon``)
        active = {r.name for r in c.active
                  if r.holds_cordon or (r.plan.cordon and r.phase not in (Phase.START, Phase.PRE_CORDON))}
        failed_held = {r.name for r in c.failed if r.holds_cordon}
        return len(active | failed_held | c.held)

    def _record_budget(self, c: _Compartment) -> None:
        self.max_disrupted[c.name] = max(self.max_disrupted.get(c.name, 0), self._disrupted(c))

    def _step_compartment(self, c: _Compartment) -> None:
        if c.active or c.stopped or not c.queue:
            return
        self._refresh_held(c)
        size = max(1, next_batch_size(c.strategy, c.ceiling, c.total, c.state))
        free = c.ceiling - self._disrupted(c)
        # budget rule (issue 12): lifecycles already in flight always run to completion, whatever the
        # budget (they already count); only new starts are gated by it
        picked = [n for n in c.queue if n in c.in_flight]
        for name in picked:
            c.queue.remove(name)
            c.in_flight.discard(name)
        # ... and they are part of the batch they resume in: the strategy's batch size bounds the
        # nodes in progress together, so a run that resumes a stopped one (a preempted controller
        # pass, a killed apply) never has more nodes in flight than one batch of the strategy
        new = len(picked)
        for name in list(c.queue):
            if new >= size or c.state.should_stop:  # halted by an earlier run: only what it started
                break
            # a node that is not cordoned for its work, or is already unavailable, adds no disruption
            cost = 1 if self._by_name[name].cordon and name not in c.held else 0
            if cost and cost > free:
                continue
            free -= cost
            new += 1
            picked.append(name)
            c.queue.remove(name)
        if not picked:
            c.halted = (f"budget exhausted: {self._disrupted(c)} node(s) unavailable (held cordoned by this "
                        f"recipe or cordoned by someone else), ceiling {c.ceiling}; fix or uncordon them to continue")
            self.timeline.add(self.clock.now(), c.name, "halted", c.halted)
            return
        c.batch = BatchRecord(number=len(c.batches) + 1, nodes=tuple(picked))
        c.batches.append(c.batch)
        self.timeline.add(self.clock.now(), c.name, "batch-start", f"batch {c.batch.number}: {', '.join(picked)}")
        for name in picked:
            run = NodeRun(self.ctx, self._by_name[name])
            self.runs[name] = run
            c.active.append(run)
            self._wake[name] = 0.0  # advanced (in parallel where allowed) by the run loop
        self._collect(c)
        self._record_budget(c)

    def _release(self, runs: list[NodeRun]) -> None:
        """Tell the node role the run is done with these nodes (ended lifecycles), when it wants
        to know (:class:`~reconciler.ports.NodeInterest`: the real cluster's watch cache stops
        keeping them current)."""
        if not runs:
            return
        if self._interest is None:
            self._interest = isinstance(self.ports.nodes, NodeInterest)  # a Protocol check is slow: once
        nodes = self.ports.nodes
        if self._interest and isinstance(nodes, NodeInterest):
            for r in runs:
                nodes.forget_node(r.name)

    def _collect(self, c: _Compartment) -> None:
        still = [r for r in c.active if r.outcome is Outcome.RUNNING]
        if len(still) == len(c.active):
            return
        self._release([r for r in c.active if r.outcome is not Outcome.RUNNING])
        c.failed.extend(r for r in c.active if r.outcome is Outcome.FAILED)
        c.active = still
        if still or c.batch is None:
            return
        b = c.batch
        outcomes = [self.runs[n].outcome for n in b.nodes]
        b = replace(b, succeeded=outcomes.count(Outcome.COMPLETE), failed=outcomes.count(Outcome.FAILED),
                    blocked=outcomes.count(Outcome.BLOCKED))
        waiting = outcomes.count(Outcome.WAITING)  # never started (not Ready): out of the count
        counted = b.succeeded + b.failed
        for n in b.nodes:
            if self.runs[n].outcome is Outcome.BLOCKED and n not in c.retried_blocked:
                c.retried_blocked.add(n)
                c.queue.append(n)  # retried once at the end of the compartment (S09)
        if counted:
            c.state = evaluate_batch(c.strategy, c.total, c.state, counted, b.succeeded, b.failed)
            b = replace(b, passed=not c.state.last_batch_failed)
        c.batches[-1] = b
        self.timeline.add(
            self.clock.now(), c.name, "batch-end",
            f"batch {b.number}: {b.succeeded} ok, {b.failed} failed, {b.blocked} blocked"
            + (f", {waiting} waiting (not Ready)" if waiting else "")
            + ("" if b.passed is None else (", passed" if b.passed else ", failed")),
        )
        if c.state.should_stop:
            self._halt(c)
        c.batch = None

    # ------------------------------------------------------------------ result
    def _result(self, comps: list[_Compartment], duration: float) -> RunResult:
        outcomes: list[NodeOutcome] = []
        any_failed = any_waiting = False
        for np in self.plan.nodes:
            r = self.runs.get(np.name)
            if r is None and np.name in self.prefailed:
                f0 = self.prefailed[np.name]
                any_failed = True
                outcomes.append(NodeOutcome(
                    np.name, NodeResult.FAILED, np.compartment, failed_stage=f0.stage, reason=f0.reason,
                    message=not_retried_message(f0, self.recipe.name, np.name, controller=self.controller),
                    exit_code=f0.exitCode,
                    log_tail=f0.logTail))
                continue
            if r is None and np.name in self.waiting:
                any_waiting = True
                outcomes.append(NodeOutcome(np.name, NodeResult.WAITING, np.compartment, message=self.waiting[np.name]))
                continue
            if r is None:
                outcomes.append(NodeOutcome(np.name, NodeResult.UNTOUCHED, np.compartment,
                                            message="not started" if np.steps or np.interrupt else "no changes"))
                continue
            o = r.outcome
            st = {
                Outcome.COMPLETE: NodeResult.COMPLETE,
                Outcome.FAILED: NodeResult.FAILED,
                Outcome.BLOCKED: NodeResult.BLOCKED,
                Outcome.REMOVED: NodeResult.REMOVED,
                Outcome.LEFT: NodeResult.LEFT,
                Outcome.WAITING: NodeResult.WAITING,
                Outcome.RUNNING: NodeResult.UNTOUCHED,
            }[o]
            if o in (Outcome.FAILED, Outcome.BLOCKED):
                any_failed = True
            any_waiting = any_waiting or o is Outcome.WAITING
            f = r.failure
            outcomes.append(
                NodeOutcome(
                    np.name,
                    st,
                    np.compartment,
                    failed_stage=f.stage if f else "",
                    reason=f.reason if f else "",
                    message=r.message if o is not Outcome.RUNNING else "still running when the run stopped",
                    exit_code=f.exitCode if f else None,
                    log_tail=f.logTail if f else "",
                )
            )
        halted = any(c.halted or c.state.should_stop for c in comps)
        running = any(r.outcome is Outcome.RUNNING for r in self.runs.values())
        result = run_verdict(halted=halted, failed=any_failed or running, waiting=any_waiting)
        comp_docs = tuple(
            CompartmentResult(c.name, c.ceiling, c.strategy.kind if c.strategy else "legacy-fixed", tuple(c.batches),
                              halted=bool(c.halted or c.state.should_stop), halt_reason=c.halted,
                              max_disrupted=self.max_disrupted.get(c.name, 0), untouched=tuple(c.queue))
            for c in comps
        )
        for gone in self.plan.outOfScope:
            left = self.runs.get(gone.name)
            why = left.message if left is not None else gone.reason
            outcomes.append(NodeOutcome(gone.name, NodeResult.LEFT, "", message=why))
        return RunResult(
            run_id=self.run_id,
            plan_hash=self.plan.planHash,
            recipe=self.recipe.name,
            result=result,
            nodes=outcomes,
            compartments=comp_docs,
            timeline=list(self.timeline.events),
            duration=duration,
            writes=getattr(self.ports.nodes, "writes", 0),  # the adapter playing the roles counts its writes
        )


def _bound(perform: Callable[[Any], Any], job: Any) -> Callable[[], Any]:
    """``perform(job)`` as a job of the pool (no arguments; its events wait for the loop's
    flush, :func:`~reconciler.execute.timeline.in_job`)."""

    def run() -> Any:
        in_job()
        return perform(job)

    return run

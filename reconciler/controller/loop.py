"""The controller: one decision thread applying the desired state whenever something changed.

:meth:`Controller.serve` loops until shutdown:

1. with leader election, wait until this replica leads (a standby only keeps its caches);
2. wait for work (:class:`~.workqueue.WorkQueue`: the startup pass, a watch event that
   :mod:`.triggers` says matters, a retry after an error);
3. run one **pass** (:meth:`Controller.reconcile`): load the desired state, write the status of
   objects the loader refuses, then :meth:`reconciler.session.Session.apply` over every other
   recipe — the same Leases, fenced writes, pause/disable, sequencing, batch gating and locked
   mode as ``reconciler apply`` — on the session's roles with writes and waits fenced by the stop
   signal (:mod:`.stopping`). Each recipe's policy is resolved once per desired state
   (:attr:`reconciler.load.Inputs.resolved`).

Every pass applies *all* recipes, not only the one an event named: the runtime-required taint
leaves a node only when every runtime-required recipe selecting it is complete, and sequencing
compares recipes by priority, so the service must see them together. Recipes already up to date
cost one plan each.

New work preempts a running pass (``preempt``): the rollout stops between two of its loop steps
(nodes keep their records), and the next pass resumes those lifecycles — in-flight lifecycles
always run to completion, whatever the budget — and plans the new work, so a node that joins
during a rollout that waits days for training jobs gets its packages without waiting for it.

A rollout that **halted** (failure threshold) is not started again by unrelated events: the
recipe is left Stalled until its content changes or a control switch of it changes (``pause`` then
``resume`` looks again). A runtime-required recipe is never left out, so the taint rule still sees
it; its rollout (like any after a restart) finds the halt again in the nodes left failed
(:func:`reconciler.plan.batching.resume_state`) and starts nothing new.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.controller.leader import Leadership
from reconciler.controller.metrics import ControllerMetrics, MetricsObserver
from reconciler.controller.recipeevents import EventSink, ObjectUids, RecipeEventsObserver
from reconciler.controller.recipestatus import (
    ObjectView,
    RecipeStatusObserver,
    StatusWriter,
    held_status,
    invalid_status,
)
from reconciler.controller.source import DesiredState
from reconciler.controller.stopping import PassStopped, StoppableClock, StoppableCluster, StoppableFeed, StopSignal
from reconciler.controller.triggers import (
    controls_trigger,
    node_trigger,
    own_echo,
    pdb_trigger,
    recipe_trigger,
    reconcile_requested,
    records_removed,
)
from reconciler.controller.workqueue import WorkQueue
from reconciler.errors import ClusterError, InputError, InputErrors, LeaseHeldError, ReconcilerError
from reconciler.execute.lock import LeaseLostError
from reconciler.load import Inputs
from reconciler.model.observed import NodeInfo
from reconciler.model.recipe import Recipe
from reconciler.model.utctime import to_rfc3339
from reconciler.model.vocab import NodeResult
from reconciler.ops.controls import held_reason
from reconciler.plan.planner import locked_refusals
from reconciler.service import ApplyResult, Observer, unpinned
from reconciler.session import Session

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ControllerSettings:
    """How the controller runs its passes.

    ``holder``: the replica's identity (``<pod>/<pid>``), prefixed with each pass's run id on the
    recipe Leases. ``locked``: as ``apply`` (every package pinned by digest). ``workers``,
    ``poll_seconds``: as :meth:`reconciler.session.Session.apply`. ``lease_duration``: seconds
    of the recipe Leases; ``wait_for_lock``: how long a pass waits for a recipe Lease another run
    holds (a new leader waits for the old leader's to expire). ``retry_seconds``: a pass that
    failed (API errors, a Lease held by a pipeline run) is retried after this long. ``preempt``:
    new work stops a running pass (module docstring).
    """

    holder: str
    locked: bool = True
    workers: int | None = None
    poll_seconds: float = 15.0
    lease_duration: int = 60
    wait_for_lock: float = 120.0
    retry_seconds: float = 30.0
    preempt: bool = True


def content_digest(recipe: Recipe) -> str:
    """sha256 of the recipe model (what a halted rollout is remembered by)."""
    return hashlib.sha256(recipe.model_dump_json().encode()).hexdigest()


def _log_results(result: ApplyResult) -> None:
    """One INFO line per recipe run of a pass, and a WARNING per node that failed or is blocked
    (at most 10 per recipe; the NodeRecipe status and events carry the rest)."""
    for r in result.results:
        bad = [n for n in r.nodes if n.state in (NodeResult.FAILED, NodeResult.BLOCKED)]
        done = sum(n.state == NodeResult.COMPLETE for n in r.nodes)
        waiting = sum(n.state == NodeResult.WAITING for n in r.nodes)
        log.info("recipe %s: %s (%d node(s) completed, %d failed or blocked, %d waiting on earlier recipes, %.1f s)",
                 r.recipe, r.result, done, len(bad), waiting, r.duration)
        for n in bad[:10]:
            where = f" at {n.failed_stage}" if n.failed_stage else ""
            log.warning("recipe %s: node %s %s%s: %s", r.recipe, n.name, n.state, where, n.message or n.reason)
        if len(bad) > 10:
            log.warning("recipe %s: %d more node(s) failed or blocked", r.recipe, len(bad) - 10)
    for name, why in sorted(result.skipped.items()):
        log.info("recipe %s: skipped (%s)", name, why)


def _resolvable(recipes: Sequence[Recipe], inputs: Inputs, invalid: dict[str, str]) -> list[Recipe]:
    """``recipes`` whose deployment policy resolves (:attr:`~reconciler.load.Inputs.resolved`);
    each other one goes into ``invalid`` with the loader's error (``NodeRecipe/<name>:
    spec.deploymentPolicy: ... is not defined (loaded policies: ...)``), so it alone is refused
    (the service would refuse every recipe at once)."""
    kept = []
    for r in recipes:
        got = inputs.resolved[r.name]
        if isinstance(got, InputError):
            invalid[r.name] = str(got)
            continue
        kept.append(r)
    return kept


class Controller:
    """The controller (module docstring). Event handlers (:meth:`on_node`, :meth:`on_recipe`,
    :meth:`on_controls`) are called by watch threads; everything else runs on :meth:`serve`'s thread.

    Args:
        source: the desired state. session: the cluster's session (its roles, clock and change
            feed; every pass is its :meth:`~reconciler.session.Session.apply`).
        settings: :class:`ControllerSettings`.
        status: NodeRecipe status writer and the objects' view (None: no status, e.g. a directory source).
        leader: leader election (None: always active, a single replica).
        metrics: Prometheus metrics (None: a private registry).
        events: the NodeRecipe event sink and the objects' UIDs (None: no events).
        reporters: more observers of every pass (e.g. git status commits); they read
            :attr:`revision` for the source revision of the pass.
    """

    def __init__(self, source: DesiredState, session: Session, settings: ControllerSettings, *,
                 status: tuple[StatusWriter, ObjectView] | None = None, leader: Leadership | None = None,
                 metrics: ControllerMetrics | None = None,
                 events: tuple[EventSink, ObjectUids] | None = None,
                 reporters: Sequence[Observer] = ()) -> None:
        self.source, self.session, self.settings = source, session, settings
        self.cluster, self.clock = session.cluster, session.clock
        self.reporters = tuple(reporters)
        #: the source revision of the pass running (or last run): what reporters record
        self.revision = ""
        self.status, self.leader, self.events = status, leader, events
        self.metrics = metrics or ControllerMetrics(nodes=lambda: session.cluster.nodes.list_nodes(),
                                                    wall=session.clock.utc)
        self.queue = WorkQueue()
        self.signal = StopSignal()
        if leader is not None:
            self.signal.lost_leadership = leader.lost
        self.queue.on_add = self._on_add
        self._in_pass = threading.Event()
        self.stalled: dict[str, str] = {}  # recipe → content digest of a rollout that halted
        self._refused: dict[str, str] = {}  # recipe → why it was last refused (its Event is not repeated)
        self.passes = 0
        self.last_outcome = ""
        self.last_result: ApplyResult | None = None
        self.thread_alive = threading.Event()
        self._retry = False

    # ------------------------------------------------------------------ event handlers (watch threads)
    def _on_add(self, reason: str, preempt: bool) -> None:
        if preempt and self.settings.preempt and self._in_pass.is_set():
            self.signal.preempt(reason)

    def on_node(self, event: str, old: NodeInfo | None, new: NodeInfo | None) -> None:
        """A node watch event; queues a pass when :func:`~.triggers.node_trigger` says it matters."""
        reason = node_trigger(event, old, new, self.source.selectors())
        if old is not None and new is not None and (reconcile_requested(old, new) or records_removed(old, new)):
            self.stalled.clear()  # an operator reset or re-ran nodes: a halted rollout may go on
        if reason:
            self.metrics.triggers.labels("node").inc()
            # our own reboot, cordon or taint coming back: the running pass waits for it already
            self.queue.add(reason, preempt=not own_echo(old, new))

    def on_recipe(self, event: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        """A NodeRecipe watch event (the source's store is updated by the caller)."""
        reason = recipe_trigger(event, old, new)
        if reason:
            self.metrics.triggers.labels("recipe").inc()
            self.queue.add(reason)

    def on_pdb(self, event: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        """A PodDisruptionBudget watch event (:func:`~.triggers.pdb_trigger`)."""
        reason = pdb_trigger(event, old, new)
        if reason:
            self.metrics.triggers.labels("pdb").inc()
            # a running drain asks the Eviction API, which reads the budget as it is now: queued only
            self.queue.add(reason, preempt=False)

    def on_controls(self, old: Mapping[str, str] | None, new: Mapping[str, str] | None) -> None:
        """The controls ConfigMap changed (``pause``/``resume``/``disable``/``enable``): a halted
        recipe whose switch changed may be tried again."""
        reason = controls_trigger(old, new)
        if reason:
            for name in [k for k in set(old or {}) | set(new or {}) if (old or {}).get(k) != (new or {}).get(k)]:
                self.stalled.pop(name, None)
            self.metrics.triggers.labels("controls").inc()
            self.queue.add(reason)

    # ------------------------------------------------------------------ the decision thread
    def stop(self) -> None:
        """SIGTERM: stop the running pass (its step is recorded on the nodes) and :meth:`serve`."""
        self.signal.request_shutdown()
        self.queue.wake()

    def serve(self) -> None:
        """Run passes until :meth:`stop` (module docstring)."""
        self.thread_alive.set()
        self.queue.add("startup")
        shutdown = self.signal.shutdown
        try:
            while not shutdown.is_set():
                if self.leader is not None and not self.leader.is_leader():
                    self.metrics.leader.set(0)
                    if not self.leader.wait_leading(shutdown):
                        break
                    self.leader.new_term()
                    self.queue.add("became leader")
                if self.leader is not None:
                    self.metrics.leader.set(1)
                reasons = self.queue.take(shutdown, timeout=self.settings.retry_seconds if self._retry else None)
                if shutdown.is_set():
                    break
                if not reasons and self._retry:
                    reasons = ["retry after a failed pass"]
                if reasons:
                    self.reconcile(reasons)
        finally:
            self.thread_alive.clear()

    def _observers(self) -> list[Observer]:
        out: list[Observer] = [MetricsObserver(self.metrics), self.metrics.rollout]
        if self.status is not None:
            writer, objects = self.status
            out.append(RecipeStatusObserver(writer, objects, self.clock,
                                            on_write=lambda _: self.metrics.status_writes.inc()))
        if self.events is not None:
            out.append(RecipeEventsObserver(*self.events))
        out.extend(self.reporters)
        return out

    def _write_status(self, name: str, build: Any) -> None:
        if self.status is None:
            return
        writer, objects = self.status
        gen = objects.generation(name)
        if gen is None:
            return
        try:
            writer.write_status(name, build(gen, to_rfc3339(self.clock.utc()), objects.conditions(name)))
            self.metrics.status_writes.inc()
        except ClusterError as e:
            log.warning("recipe %s: could not write its status: %s", name, e)

    def _select(self, recipes: Sequence[Recipe], invalid: dict[str, str]) -> list[Recipe]:
        kept = []
        for r in recipes:
            refused = unpinned(r) if self.settings.locked else []
            if refused:
                invalid[r.name] = "; ".join(refused)
                continue
            if self.stalled.get(r.name) == content_digest(r) and not r.runtimeRequired:
                continue  # halted with this very content: left Stalled until it changes
            self.stalled.pop(r.name, None)
            kept.append(r)
        return kept

    def reconcile(self, reasons: Sequence[str]) -> str:
        """One pass (module docstring); returns its outcome (``succeeded``, ``failed``, ``idle``,
        ``invalid``, ``preempted``, ``stopped``, ``lease-held``, ``lease-lost``, ``error``), also
        counted in the metrics."""
        self.signal.clear_preempt()
        self._in_pass.set()
        self.passes += 1
        start = self.clock.now()
        log.info("pass %d: %s", self.passes, "; ".join(reasons[:5]) + (f" (+{len(reasons) - 5})" if len(reasons) > 5
                                                                        else ""))
        try:
            outcome = self._pass()
        except Exception:  # a bug must not end a long-running controller: log it, retry later
            log.exception("pass %d failed unexpectedly; retrying in %.0f s", self.passes, self.settings.retry_seconds)
            outcome = "error"
        finally:
            self._in_pass.clear()
        self._retry = outcome in ("lease-held", "lease-lost", "error")
        self.last_outcome = outcome
        self.metrics.passes.labels(outcome).inc()
        self.metrics.pass_seconds.observe(max(0.0, self.clock.now() - start))
        log.info("pass %d: %s", self.passes, outcome)
        return outcome

    def _pass(self) -> str:
        try:
            desired = self.source.current()
        except InputError as e:
            each = e.errors if isinstance(e, InputErrors) else [e]
            log.error("the desired state cannot be loaded (%d error(s)):", len(each))
            for err in each[:50]:
                log.error("  %s", err)
            return "invalid"
        except ReconcilerError as e:  # a git fetch that failed: try again later
            log.error("the desired state cannot be fetched: %s; retrying in %.0f s", e, self.settings.retry_seconds)
            return "error"
        self.revision = desired.revision
        invalid = dict(desired.invalid)
        kept = self._select(desired.inputs.recipes, invalid)
        kept = _resolvable(kept, desired.inputs, invalid)
        for name, why in sorted(invalid.items()):
            self._refuse(name, why)
        for name in set(self._refused) - set(invalid):
            del self._refused[name]
        if not kept:
            return "invalid" if invalid else "idle"
        inputs = desired.inputs.only({r.name for r in kept})
        session = self._stoppable()
        try:
            result = self._apply(session, inputs)
        except (PassStopped, LeaseLostError, LeaseHeldError) as e:
            return self._failed(e)
        except InputError as e:
            refused = self._refused_by_plan(inputs)
            if not refused:
                log.error("the pass was refused: %s", e)
                return "invalid"
            # one recipe cannot be planned, or locked mode refused its plan (a downgrade without
            # uninstall steps): that recipe is Stalled, the others go on (the service refuses the
            # whole set at once)
            for name, why in refused.items():
                self._refuse(name, why)
            rest = {r.name for r in inputs.recipes} - set(refused)
            if not rest:
                return "invalid"
            try:
                result = self._apply(session, inputs.only(rest))
            except ReconcilerError as again:
                return self._failed(again)
        except ReconcilerError as e:
            return self._failed(e)
        self.last_result = result
        _log_results(result)
        for name, why in result.skipped.items():
            self._write_status(name, lambda g, now, prev, w=why, n=name: held_status(n, w, generation=g, now=now,
                                                                                    previous=prev))
        for r in result.results:
            if r.result == "halted":
                self.stalled[r.recipe] = content_digest(inputs.recipe(r.recipe))
        if result.stopped:
            why = self.signal.reason()
            (log.info if why and not why.startswith("leadership") else log.warning)("pass stopped: %s",
                                                                                  why or result.stopped)
            if why.startswith("preempted"):
                return "preempted"
            return "stopped" if why else "lease-lost"
        return "succeeded" if result.succeeded else "failed"

    def _stoppable(self) -> Session:
        """The session with its writes and waits fenced by the stop signal (:mod:`.stopping`)."""
        s = self.session
        feed = StoppableFeed(s.changes, s.clock, self.signal) if s.changes is not None else None
        return Session(StoppableCluster(s.cluster, self.signal).ports, StoppableClock(s.clock, self.signal),
                       changes=feed, description=s.description, poll_seconds=s.poll_seconds, sim=s.sim)

    def _apply(self, session: Session, inputs: Inputs) -> ApplyResult:
        c = self.settings
        return session.apply(inputs, locked=c.locked, workers=c.workers, poll_seconds=c.poll_seconds,
                             lease_duration=c.lease_duration, wait_for_lock=c.wait_for_lock, holder=c.holder,
                             observers=self._observers(), controller=True,
                             superseded=self.leader.superseded if self.leader is not None else frozenset())

    def _failed(self, e: ReconcilerError) -> str:
        """The outcome of a pass the service ended with ``e``."""
        if isinstance(e, PassStopped):
            (log.info if e.requested else log.warning)("%s", e)
            return "preempted" if e.reason.startswith("preempted") else "stopped"
        if isinstance(e, LeaseLostError):
            log.error("pass stopped: %s", e)
            return "lease-lost"
        if isinstance(e, LeaseHeldError):
            log.warning("a recipe is being applied by another run; retrying in %.0f s: %s",
                        self.settings.retry_seconds, e)
            return "lease-held"
        if isinstance(e, InputError):
            log.error("the pass was refused: %s", e)
            return "invalid"
        log.error("the pass failed: %s; retrying in %.0f s", e, self.settings.retry_seconds)
        return "error"

    def _refused_by_plan(self, inputs: Inputs) -> dict[str, str]:
        """Recipe → why it cannot be planned, or why locked mode refuses its current plan (reads
        only: one observe and plan per recipe; called only after the service refused the set)."""
        out = {}
        for recipe in inputs.recipes:
            try:
                (plan,) = self.session.plan(inputs.only({recipe.name}))
            except InputError as e:
                out[recipe.name] = str(e)
                continue
            except ReconcilerError:
                return {}
            why = locked_refusals(plan, recipe) if self.settings.locked else []
            if why:
                out[recipe.name] = "; ".join(why)
        return out

    def _refuse(self, name: str, why: str) -> None:
        """Recipe ``name`` is left out of the pass because of ``why`` (naming the object, the field
        and what is missing): an ERROR line, status Stalled (InvalidSpec) and, when the reason is
        new, a Warning Event ``InvalidSpec`` on the object; the other recipes go on."""
        log.error("recipe %s is refused: %s", name, why)
        self._write_status(name, lambda g, now, prev: invalid_status(name, why, generation=g, now=now, previous=prev))
        if self._refused.get(name) != why and self.events is not None:
            sink, uids = self.events
            uid = uids.uid(name)
            if uid:
                try:
                    sink.emit(name, uid, "InvalidSpec", f"not rolled out: {why}"[:1024], "Warning")
                except ReconcilerError as e:
                    log.warning("recipe %s: could not create event InvalidSpec: %s", name, e)
        self._refused[name] = why

    def held(self, recipe: str) -> str:
        """``reconciler pause``/``disable`` state of ``recipe`` as the service reads it."""
        return held_reason(self.cluster, recipe)

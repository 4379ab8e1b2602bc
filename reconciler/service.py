"""The application service: :func:`plan_recipes` and :func:`apply_recipes` with every safety
check, for the CLI, the controller and Python callers alike (issue 15).

``apply_recipes(inputs, cluster, clock, settings)`` does what ``reconciler apply`` does, in this order:

1. take the Lease of every recipe (one run per recipe; :mod:`reconciler.execute.lock`) before
   anything is observed or changed, and fence every later write with it
   (:mod:`reconciler.execute.fence`);
2. observe once and plan every recipe; refuse — before any write — a plan whose hash differs from
   the reviewed one (``settings.expected_hashes``) and, in locked mode, packages not pinned by
   digest or downgrades without uninstall steps;
3. taint new nodes of runtime-required recipes (``autoTaintNewNodes``);
4. per recipe in (priority, name) order: skip a paused or disabled recipe (``reconciler pause``;
   a paused one still holds back later recipes on the same nodes, a disabled one does not),
   observe and plan again against the fleet as the earlier recipes left it, hold nodes an
   earlier recipe is not complete on (``sequencing``), roll the plan out batch by batch;
5. release the Leases (a lost Lease stops the whole apply: ``ApplyResult.stopped``).

Observers (:class:`Observer`) are told what happens — on the caller's thread, which is the
rollout loop's (:class:`~reconciler.execute.timeline.Timeline`). Errors: ``InputError`` /
``PlanMismatchError`` (exit 2: nothing was changed), ``LeaseHeldError`` (exit 1), ``ClusterError``
(exit 4).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from reconciler.errors import InputError, PlanMismatchError, ReconcilerError
from reconciler.execute.fence import FencedCluster
from reconciler.execute.lock import DEFAULT_DURATION, LeaseGroup, holder_identity
from reconciler.execute.sequencing import waiting_nodes
from reconciler.execute.taints import auto_taint
from reconciler.load import Inputs, policy_for
from reconciler.load.snapshotfile import paused_gc
from reconciler.model.observed import ObservedFleet
from reconciler.model.plan import Plan
from reconciler.model.recipe import Recipe
from reconciler.model.run import Event, RunResult
from reconciler.model.selector import LabelSelector
from reconciler.model.versions import is_exact
from reconciler.observe.snapshot import observe
from reconciler.ops.controls import held_reason, store_for
from reconciler.plan.planner import compute_plan, locked_refusals
from reconciler.ports import ChangeFeed, Clock, Cluster, ClusterPorts


@dataclass(frozen=True)
class ApplySettings:
    """How one ``apply`` runs.

    ``holder``: who takes the Leases (``<host>/<pid>`` of the process; the run id is prefixed).
    ``locked``: refuse unpinned packages and downgrades without uninstall steps.
    ``expected_hashes``: recipe name → the planHash a reviewer approved (``apply --plan``); every
    recipe applied must have one and match it. ``workers``: node runs advanced at once (1 for the
    simulated fleet; None: :func:`~reconciler.execute.rollout.default_workers` of each plan).
    ``poll_seconds``: fallback poll interval. ``lease_duration`` / ``wait_for_lock``: seconds.
    ``retry_failed``: start again the nodes that failed in an earlier run with the same inputs
    (planned with ``compute_plan(retry_failed=True)``; without it they are left failed).
    ``controller``: a ``reconciler controller`` pass (its messages name no ``apply`` flag).
    ``superseded``: processes whose recipe Leases this run takes over before they expire (the
    controller replicas whose leadership this one took over: :func:`~reconciler.execute.lock.take_lease`).
    """

    holder: str
    run_id: str | None = None
    locked: bool = True
    expected_hashes: Mapping[str, str] | None = None
    plan_source: str = "the reviewed plan"
    retry_failed: bool = False
    workers: int | None = None
    poll_seconds: float = 5.0
    lease_duration: int = DEFAULT_DURATION
    wait_for_lock: float = 0.0
    #: ``-l/--selector``: only nodes matching it get work (``compute_plan(only=...)``); None: all
    only: LabelSelector | None = None
    controller: bool = False
    superseded: frozenset[str] = frozenset()


class Observer(Protocol):
    """What an ``apply`` tells the terminal, the status object, git status and metrics. Every
    method is called on the apply's own thread."""

    def tainted(self, nodes: Sequence[str]) -> None:
        """New nodes were tainted runtime-required before anything else."""
        ...

    def skipped(self, recipe: Recipe, reason: str) -> None:
        """``recipe`` is paused or disabled: not applied."""
        ...

    def started(self, recipe: Recipe, plan: Plan, run_id: str) -> None:
        """``recipe`` is about to be rolled out with ``plan``."""
        ...

    def event(self, plan: Plan, event: Event) -> None:
        """One timeline event of the rollout of ``plan``."""
        ...

    def finished(self, recipe: Recipe, plan: Plan, result: RunResult) -> None:
        """The rollout of ``plan`` ended (see ``result.result``)."""
        ...

    def failed(self, recipe: Recipe | None, error: ReconcilerError, run_id: str) -> None:
        """The apply stopped with ``error`` while ``recipe`` (None: before any) was current."""
        ...


@dataclass
class ApplyResult:
    """What an ``apply`` did: one result per recipe rolled out, in order; recipes skipped with
    the reason; nodes tainted first; ``stopped`` is the reason a lost Lease stopped it ("" when
    not). ``succeeded``: every rollout succeeded and nothing stopped."""

    run_id: str
    results: list[RunResult] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    tainted: list[str] = field(default_factory=list)
    stopped: str = ""

    @property
    def succeeded(self) -> bool:
        """Every rollout succeeded and the apply was not stopped."""
        return not self.stopped and all(r.result == "succeeded" for r in self.results)


def _narrowed(fleet: ObservedFleet, only: LabelSelector | None) -> ObservedFleet:
    """``fleet`` with only the nodes ``only`` matches (all without it): what ``-l`` lets
    ``autoTaintNewNodes`` taint."""
    if only is None:
        return fleet
    nodes = {k: n for k, n in fleet.nodes.items() if only.matches(n.labels)}
    return ObservedFleet(nodes, {k: v for k, v in fleet.pods_by_node.items() if k in nodes}, fleet.pdbs)


def plan_recipes(inputs: Inputs, cluster: Cluster | ClusterPorts, *, revision: str = "",
                 only: LabelSelector | None = None, retry_failed: bool = False) -> list[Plan]:
    """Plan every recipe of ``inputs`` against one observation of ``cluster`` (reads only);
    ``revision`` labels where the inputs came from (recorded, not hashed); ``only`` and
    ``retry_failed`` as ``apply``'s ``-l`` and ``--retry-failed`` (:func:`compute_plan`), so the
    plans are the ones ``apply`` with the same options carries out.

    Raises: InputError (a dependency cycle), ClusterError (the reads failed).

    The cyclic garbage collector is paused meanwhile: observing and planning a large fleet
    allocate millions of acyclic records and free none, and its passes over them cost about a
    fifth of the CPU of observing 100,000 nodes."""
    with paused_gc():
        fleet = observe(cluster)
        return [compute_plan(r, policy_for(r, inputs), fleet, revision=revision, only=only, retry_failed=retry_failed)
                for r in inputs.recipes]


def apply_recipes(inputs: Inputs, cluster: Cluster | ClusterPorts, clock: Clock, settings: ApplySettings,
                  observers: Sequence[Observer] = (), *, changes: ChangeFeed | None = None) -> ApplyResult:
    """Apply every recipe of ``inputs`` to ``cluster`` (timed by ``clock``; ``changes``: which
    nodes changed, a real cluster's watch streams) with every safety check (module docstring);
    ``observers`` are told what happens.

    Raises:
        InputError, PlanMismatchError: refused before anything was changed.
        LeaseHeldError: another run holds a recipe's Lease (after ``wait_for_lock``).
        ClusterError: the API failed in a way the run could not retry.
    """
    from reconciler.execute.rollout import Rollout, default_workers, new_run_id  # not needed to plan

    run_id = settings.run_id or new_run_id()
    out = ApplyResult(run_id=run_id)
    policies = {r.name: policy_for(r, inputs) for r in inputs.recipes}
    ports = ClusterPorts.of(cluster, store_for(cluster))
    leases = LeaseGroup(ports.leases, clock, [r.name for r in inputs.recipes], holder_identity(run_id, settings.holder),
                        duration=settings.lease_duration, superseded=settings.superseded)
    leases.acquire(settings.wait_for_lock)  # before anything is observed or changed
    fenced = FencedCluster(ports, leases).ports  # the write roles fenced by the leases
    current: Recipe | None = None
    try:
        fleet = observe(ports)
        only, retry = settings.only, settings.retry_failed
        first = {r.name: compute_plan(r, policies[r.name], fleet, only=only, retry_failed=retry)
                 for r in inputs.recipes}
        _check_gates(inputs, first, settings,
                     lambda r, other: compute_plan(r, policies[r.name], fleet, only=only, retry_failed=other))
        out.tainted = auto_taint(fenced.nodes, inputs.recipes, _narrowed(fleet, only))
        if out.tainted:
            for o in observers:
                o.tainted(out.tainted)
        runtime_required = tuple(r.name for r in inputs.recipes if r.runtimeRequired)
        done: list[Recipe] = []
        for recipe in inputs.recipes:
            current = recipe
            leases.tick(clock.now())
            held = held_reason(cluster, recipe.name)  # reconciler pause / disable
            if held:
                out.skipped[recipe.name] = held
                for o in observers:
                    o.skipped(recipe, held)
                if held.startswith("paused"):  # a paused recipe still holds back later ones
                    done.append(recipe)
                continue
            fleet = observe(ports)
            the_plan = compute_plan(recipe, policies[recipe.name], fleet, only=only, retry_failed=retry)
            earlier = [(e, compute_plan(e, policies[e.name], fleet, only=only, retry_failed=retry)) for e in done]
            waiting = waiting_nodes(recipe, the_plan, earlier)
            done.append(recipe)
            for o in observers:
                o.started(recipe, the_plan, run_id)

            def on_event(ev: Event, p: Plan = the_plan) -> None:
                for o in observers:
                    o.event(p, ev)

            rollout = Rollout(recipe, policies[recipe.name], the_plan, fenced, clock, run_id=run_id,
                              poll_seconds=settings.poll_seconds, on_event=on_event,
                              retry_failed=settings.retry_failed, runtime_required=runtime_required,
                              waiting=waiting, on_tick=leases.tick, controller=settings.controller,
                              workers=settings.workers or default_workers(the_plan), changes=changes)
            result = rollout.run()
            out.results.append(result)
            for o in observers:
                o.finished(recipe, the_plan, result)
            if rollout.stopped:  # lease lost: act no more (node records stay; the next holder resumes)
                out.stopped = rollout.stopped
                break
    except ReconcilerError as e:
        leases.release()
        for o in observers:
            o.failed(current or (inputs.recipes[0] if inputs.recipes else None), e, run_id)
        raise
    leases.release()
    return out


def _check_gates(inputs: Inputs, first: Mapping[str, Plan], settings: ApplySettings,
                 replan: Callable[[Recipe, bool], Plan] | None = None) -> None:
    """The plan-hash gate and locked mode, on the first plan of every recipe, before any write.
    ``replan(recipe, retry_failed)``: the same plan with the other ``--retry-failed``, made only
    to say so when the reviewed plan differs just by that flag."""
    expected = settings.expected_hashes
    if expected is not None:
        for rec in inputs.recipes:
            current = first[rec.name].planHash
            if rec.name not in expected:
                raise PlanMismatchError(f"{settings.plan_source} has no plan for recipe {rec.name}; plan it and "
                                        "review it")
            if current != expected[rec.name]:
                other = not settings.retry_failed
                if replan is not None and replan(rec, other).planHash == expected[rec.name]:
                    made, now = ("with", "without") if other else ("without", "with")
                    raise PlanMismatchError(
                        f"{settings.plan_source} for recipe {rec.name} was made {made} --retry-failed and this "
                        f"apply runs {now} it (nodes that failed with the same inputs are planned differently); "
                        f"apply {made} --retry-failed, or re-run `reconciler plan` {now} it and review it")
                raise PlanMismatchError(
                    f"{settings.plan_source} is stale for recipe {rec.name}: its planHash {expected[rec.name][:12]} "
                    f"does not match the current inputs and fleet ({current[:12]}); re-run `reconciler plan` and "
                    "review it"
                )
    if settings.locked:
        refused = [m for r in inputs.recipes for m in unpinned(r)]
        refused += [m for r in inputs.recipes for m in locked_refusals(first[r.name], r)]
        if refused:
            raise InputError("; ".join(refused))


def unpinned(recipe: Recipe) -> list[str]:
    """Locked mode on the model (the loader checks it with positions when asked; a library caller
    may not have asked): every package pinned by ``containerSHA`` at an exact ``X.Y.Z`` version."""
    out = []
    for name, pkg in sorted(recipe.packages.items()):
        if pkg.containerSHA is None:
            out.append(f"recipe {recipe.name}: package {name} has no containerSHA; locked mode needs every image "
                       "pinned by digest")
        if not is_exact(pkg.version):
            out.append(f"recipe {recipe.name}: package {name} version {pkg.version!r} is not exact; locked mode "
                       "needs X.Y.Z")
    return out


__all__ = ["ApplyResult", "ApplySettings", "Observer", "apply_recipes", "plan_recipes"]

"""The world-moves sweep's machinery (issue 34): a rollout of the representative recipe of
:mod:`sweep` over a fleet that already has release 1, with one change of the world applied right
after one of its writes, then a following ``apply`` — checked at every write and at the end.

The rollout is release 2 (the rebooting ``driver`` and the service-restarting ``agent`` bumped)
over the crash sweep's fleet (six nodes, a PodDisruptionBudget over the ``web`` pods, a protected
training pod, and three ``api`` pods without a budget) on which release 1 ran whole; its writes are the *points*
(:func:`reference_points`: each names the node it touched and the phase that node was in). A
:data:`CHANGES` entry moves the world at a point, as the field does under a running controller:

* ``bump`` / ``revert``: the recipe goes to release 3 (``driver`` bumped again) or back to
  release 1; the controller preempts the pass (its stop fence refuses the next write,
  :mod:`reconciler.controller.stopping`) and the next pass applies the new recipe;
* ``deleted`` / ``replaced``: the node is deleted (its pods collected), or its machine replaced
  under the same name (a new UID, nothing of ours on it);
* ``not-ready``: the node goes NotReady and comes back Ready two minutes later;
* ``pod-deleted``: someone else deletes a running stage pod (the node's, else any);
* ``pdb-changed`` / ``pdb-created``: the ``web`` budget goes to ``maxUnavailable: 0``, or a
  budget allowing no disruption is created over the ``api`` pods (which had none); an admin
  relaxes it five minutes later;
* ``scope-left``: the node's labels change so the recipe no longer selects it;
* ``ignored``: ``reconciler node ignore`` on the node;
* ``reset``: ``reconciler node reset`` on the node (refused while it owes an interrupt).

The rollout then runs to its end and a following ``apply`` of the recipe as it now is (release 3,
release 1, or release 2) runs to its end. :func:`run_world` checks every invariant of
:mod:`reconciler.testing.invariants` over both runs, and that a new plan has nothing left to do
for any node it selects: what it shows as done really ran there (``check_recorded_ran``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reconciler.adapters.sim.config import SimConfig
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.controller.stopping import PassStopped, StoppableCluster, StopSignal
from reconciler.diff import read_state
from reconciler.errors import CrashInjected
from reconciler.execute.rollout import Rollout
from reconciler.model.nodestate import InFlight, PackageState, inflight_key, parse_model
from reconciler.model.recipe import Recipe
from reconciler.observe.snapshot import observe
from reconciler.ops.nodeops import ignore_patch, reset_patch
from reconciler.ops.patches import NodeRefused, write_node_patches
from reconciler.plan.planner import compute_plan
from reconciler.testing.faults import WRITE_METHODS, FaultyCluster
from reconciler.testing.fleetgen import make_pdb, make_pod
from reconciler.testing.invariants import (
    Watch,
    check_budget,
    check_cordons,
    check_foreign_cordons,
    check_owed_interrupts,
    check_protected,
    check_reboots,
    check_recorded_ran,
    check_retries,
    check_stage_pods,
    check_timeline,
)

from .sweep import FIGURES, POLICY, RECIPE, fleet

#: No injected stage failure: every node must end on the recipe as it is last, whatever moved.
CONFIG = SimConfig()


def _bumped(r: Recipe, version: str, **versions: str) -> Recipe:
    pkgs = {**r.packages, **{k: r.packages[k].model_copy(update={"version": v}) for k, v in versions.items()}}
    return r.model_copy(update={"version": version, "packages": pkgs})


V1 = RECIPE
V2 = _bumped(V1, "2", driver="1.1.0", agent="1.1.0")
V3 = _bumped(V2, "3", driver="1.2.0")
#: Packages with an interrupt (the same in every release).
INTERRUPTING = tuple(k for k, p in V1.packages.items() if p.interrupt is not None)
#: A run writing more than this many times the reference run's writes has not ended: stopped.
WRITE_CAP = 20


@functools.cache
def _base_objects() -> tuple[dict[str, Any], ...]:
    api = [make_pod("api", f"api-{i}", f"n{i}", labels={"app": "api"}, owner=("ReplicaSet", "api")) for i in (2, 5, 6)]
    sim = SimFleet(fleet() + api, CONFIG)
    r = Rollout(V1, POLICY, compute_plan(V1, POLICY, observe(sim)), sim, sim, run_id="release-1")
    assert r.run().result == "succeeded"
    return tuple(sim.to_objects())


def base_fleet() -> SimFleet:
    """The fleet after release 1 ran whole on it (a fresh copy)."""
    return SimFleet(list(_base_objects()), CONFIG)


@dataclass(frozen=True)
class Point:
    """One write of the reference run of release 2: its number (1-based), what it was, the node
    it touched and that node's phase right after it (``-`` when no lifecycle was in flight)."""

    n: int
    verb: str
    target: str
    node: str
    phase: str

    def __str__(self) -> str:
        return f"write {self.n} ({self.verb} {self.target}; {self.node} at {self.phase})"


@functools.cache
def reference_points() -> tuple[Point, ...]:
    """The writes of release 2 run whole over :func:`base_fleet`."""
    sim = base_fleet()
    pod_node: dict[str, str] = {}

    def before_evict(namespace: str, name: str, *_: Any) -> None:
        pod = sim.get_pod(namespace, name)
        pod_node[f"pod/{namespace}/{name}"] = pod.node_name if pod else ""

    port = FaultyCluster(sim, clock=sim, before={"evict_pod": before_evict})
    Rollout(V2, POLICY, compute_plan(V2, POLICY, observe(sim)), port, sim, run_id="reference").run()
    points, last = [], ""
    for c in port.write_calls:
        if c.outcome != "ok":
            continue  # refused (an eviction the budget blocks): nothing changed, no point
        kind, _, rest = c.target.partition("/")
        node = {"node": rest, "stage": rest.split("/")[0], "stages": rest.split("/")[-1],
                "pod": pod_node.get(c.target, "")}.get(kind, "") or last
        last = node
        points.append(Point(len(points) + 1, c.verb, c.target, node, ""))
    # phases: replay with a hook reading the node's record after each write
    sim2, phases = base_fleet(), []

    def after(*_: Any, **__: Any) -> None:
        node = points[len(phases)].node
        rec = sim2.nodes.get(node, {}).get("metadata", {}).get("annotations", {}).get(inflight_key(V2.name))
        fl = parse_model(InFlight, rec)
        phases.append(str(fl.phase) if fl is not None else "-")

    hooks = dict.fromkeys(WRITE_METHODS, after)
    port2 = FaultyCluster(sim2, clock=sim2, after=hooks)
    Rollout(V2, POLICY, compute_plan(V2, POLICY, observe(sim2)), port2, sim2, run_id="reference").run()
    assert len(phases) == len(points)
    return tuple(Point(p.n, p.verb, p.target, p.node, ph) for p, ph in zip(points, phases, strict=True))


@dataclass
class World:
    """What a change works with: the fleet, the stop signal of the running pass, and the recipe the
    following ``apply`` runs (a change to the recipe sets it). ``note``: what the change did."""

    sim: SimFleet
    signal: StopSignal
    recipe: Recipe = V2
    note: str = ""

    def undo_after(self, seconds: float, fn: Callable[[], object]) -> None:
        """Run ``fn`` once ``seconds`` of simulated time have passed (an admin undoing a change)."""
        self.sim._at(self.sim._now + seconds, fn)


def _recipe_to(r: Recipe) -> Callable[[World, str], None]:
    def change(w: World, node: str) -> None:
        w.recipe = r
        w.signal.preempt(f"recipe {r.name} changed to release {r.version}")
        w.note = f"recipe to release {r.version}"

    return change


def _deleted(w: World, node: str) -> None:
    w.sim.delete_node(node)


def _replaced(w: World, node: str) -> None:
    if node in w.sim.nodes:
        w.sim.replace_node(node)


def _not_ready(w: World, node: str) -> None:
    if node not in w.sim.nodes:
        return
    w.sim.set_node(node, ready=False)
    w.undo_after(120, lambda: w.sim.set_node(node, ready=True) if node in w.sim.nodes else None)


def _pod_deleted(w: World, node: str) -> None:
    running = [(spec.node != node, name) for name, spec in w.sim.stage_pods().items()
               if w.sim.stage_status(spec).phase == "running"]
    if not running:
        w.note = "no stage pod running"
        return
    w.sim.delete_stage_pod(min(running)[1])
    w.note = f"deleted {min(running)[1]}"


def _pdb_changed(w: World, node: str) -> None:
    w.sim.set_pdb("web", "web", maxUnavailable=0)
    w.undo_after(300, lambda: w.sim.set_pdb("web", "web", maxUnavailable=1))


def _pdb_created(w: World, node: str) -> None:
    w.sim.add_pdb(make_pdb("api", "api", {"app": "api"}, max_unavailable=0))
    w.undo_after(300, lambda: w.sim.set_pdb("api", "api", maxUnavailable=1))


def _scope_left(w: World, node: str) -> None:
    if node in w.sim.nodes:
        labels = w.sim.get_node(node).labels
        w.sim.set_node(node, labels={**labels, "pool": "cpu"})


def _ignored(w: World, node: str) -> None:
    if node in w.sim.nodes:
        p = ignore_patch(w.sim.get_node(node), True)
        assert p is not None
        write_node_patches(w.sim, [p], lambda n: ignore_patch(n, True))


def _reset(w: World, node: str) -> None:
    if node not in w.sim.nodes:
        return
    try:
        p = reset_patch(w.sim.get_node(node), V2.name)
    except NodeRefused as e:
        w.note = f"refused: {e}"
        return
    if p is not None:
        write_node_patches(w.sim, [p], lambda n: reset_patch(n, V2.name))


#: Every change of the world the sweep applies, by name (module docstring).
CHANGES: dict[str, Callable[[World, str], None]] = {
    "bump": _recipe_to(V3),
    "revert": _recipe_to(V1),
    "deleted": _deleted,
    "replaced": _replaced,
    "not-ready": _not_ready,
    "pod-deleted": _pod_deleted,
    "pdb-changed": _pdb_changed,
    "pdb-created": _pdb_created,
    "scope-left": _scope_left,
    "ignored": _ignored,
    "reset": _reset,
}


@dataclass
class Outcome:
    """One scenario: the problems found (empty: every invariant held) and what the change did."""

    problems: list[str]
    note: str
    results: list[str]


def _run(w: World, watch: Watch, r: Recipe, run_id: str, cluster: Any, cap: int) -> tuple[list[str], str]:
    port = FaultyCluster(cluster, clock=w.sim, crash_after_writes=cap)
    rollout = Rollout(r, POLICY, compute_plan(r, POLICY, observe(w.sim)), port, w.sim, run_id=run_id)
    problems: list[str] = []
    try:
        result = rollout.run().result
    except CrashInjected:
        problems.append(f"{run_id}: did not end within {cap} writes")
        result = "cut"
    except PassStopped:  # preempted while it ended (its leftovers' clean-up): the service re-raises it too
        result = "preempted"
    deps = {k: list(v.dependsOn) for k, v in r.packages.items()}
    problems += [f"{run_id}: {p}" for p in check_timeline(rollout.timeline.events, deps)]
    return problems, result


def run_world(point: int, change: str) -> Outcome:
    """Release 2 over :func:`base_fleet` with ``CHANGES[change]`` applied right after write
    ``point`` (on the node that write touched), then an ``apply`` of the recipe as it is then; the
    invariants' violations (module docstring)."""
    sim = base_fleet()
    had: dict[str, dict[str, PackageState]] = {n.name: read_state(V2.name, n.annotations)[0]
                                               for n in sim.list_nodes()}
    plan0 = compute_plan(V2, POLICY, observe(sim))
    ceilings = {c.name: c.ceiling for c in plan0.compartments}
    watch = Watch(sim, V2.name, {n.name: n.compartment for n in plan0.nodes})
    w = World(sim, StopSignal())
    node = reference_points()[point - 1].node
    writes = 0

    def count(*_: Any, **__: Any) -> None:
        nonlocal writes
        writes += 1
        if writes == point:
            CHANGES[change](w, node)

    cap = WRITE_CAP * len(reference_points())
    moved = FaultyCluster(watch.port, clock=sim, after=dict.fromkeys(WRITE_METHODS, count))
    problems, first = _run(w, watch, V2, "pass-1", StoppableCluster(moved, w.signal), cap)
    w.signal.clear_preempt()
    more, second = _run(w, watch, w.recipe, "pass-2", watch.port, cap)
    problems += more
    r = w.recipe
    problems += check_budget(watch, ceilings) + check_protected(watch, r) + check_cordons(sim, r.name, ())
    problems += check_stage_pods(watch) + check_recorded_ran(sim, r.name, had) + check_foreign_cordons(watch)
    problems += check_reboots(watch) + check_owed_interrupts(watch, INTERRUPTING)
    problems += check_retries(watch, r.timeouts.stageRetries)
    plan = compute_plan(r, POLICY, observe(sim))
    problems += [f"{n.name}: a new plan still has work after the following apply: {n.note}"
                 for n in plan.nodes if n.has_work]
    FIGURES["scenarios"] += 1
    return Outcome(problems, w.note, [first, second])

"""One node's work under a recipe, from what the node records (pure): the ordered steps and the
merged interrupt. The planner (:mod:`reconciler.plan.planner`) plans every node with it, and the
lifecycle (:mod:`reconciler.execute`) plans a node again with it when the node turns out to be
another machine or takes up a newer release at a safe point, so both make the same decision."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from reconciler.diff import NodeDiff, PackageChange, diff_node
from reconciler.model.graph import dependents
from reconciler.model.interrupts import merge_interrupts
from reconciler.model.observed import NodeInfo
from reconciler.model.plan import NodePlan, Step
from reconciler.model.recipe import Interrupt, Recipe

# --------------------------------------------------------------------------------------------
# step order


def order_steps(changes: Sequence[PackageChange], deps: Mapping[str, Sequence[str]]) -> list[Step]:
    """Order a node's changing packages into steps with their ``after`` lists.

    ``deps`` is the recipe's name → dependency names. Uninstalls first, each after the
    uninstalling packages that depend on it; then the other steps in dependency order (each
    after its changing, non-uninstalling dependencies), preferring downgrades, then names.
    """
    changing = {c.package: c for c in changes if c.changing}
    rev = dependents(deps)
    uninst = {n for n, c in changing.items() if c.action == "uninstall"}
    after: dict[str, list[str]] = {}
    for n in changing:
        if n in uninst:
            after[n] = sorted(d for d in rev.get(n, []) if d in uninst)
        else:
            after[n] = sorted(d for d in deps.get(n, ()) if d in changing and d not in uninst)
    order = _kahn(sorted(uninst), after, lambda n: (0, n))
    order += _kahn(
        sorted(set(changing) - uninst),
        after,
        lambda n: (0 if changing[n].action == "downgrade" else 1, n),
    )
    return [changing[n].to_step(after[n]) for n in order]


def _kahn(names: list[str], after: Mapping[str, list[str]], key: Callable[[str], tuple[int, str]]) -> list[str]:
    """Topological order of ``names`` (``after`` edges inside ``names``), smallest ``key`` first."""
    members = set(names)
    pending = {n: {a for a in after[n] if a in members} for n in names}
    dependents: dict[str, list[str]] = {n: [] for n in names}  # each edge once: linear in names and edges
    for n in names:
        for a in pending[n]:
            dependents[a].append(n)
    heap = [(key(n), n) for n in names if not pending[n]]
    heapq.heapify(heap)
    out: list[str] = []
    while heap:
        _, n = heapq.heappop(heap)
        out.append(n)
        for m in dependents[n]:
            pending[m].discard(n)
            if not pending[m]:
                heapq.heappush(heap, (key(m), m))
    if len(out) != len(names):  # pragma: no cover - the recipe graph is checked acyclic first
        raise ValueError("dependency cycle among steps")
    return out


@dataclass(frozen=True)
class NodeWork:
    """``steps`` in dependency order, the merged ``interrupt`` (every step's and the one the
    node's record still owes), and the :class:`~reconciler.diff.NodeDiff` they come from."""

    steps: tuple[Step, ...]
    interrupt: Interrupt | None
    diff: NodeDiff


def recipe_deps(recipe: Recipe) -> dict[str, list[str]]:
    """The recipe's ``dependsOn`` as name → sorted dependency names."""
    return {name: sorted(p.dependsOn) for name, p in recipe.packages.items()}


def node_work(recipe: Recipe, info: NodeInfo, deps: Mapping[str, Sequence[str]] | None = None) -> NodeWork:
    """What ``recipe`` needs on the node ``info`` (from its annotations). A node whose state
    annotation cannot be read gets no work (the planner skips it with a warning)."""
    d = diff_node(recipe, info)
    steps = tuple(order_steps(d.changes, recipe_deps(recipe) if deps is None else deps))
    intr = None if d.state_error else merge_interrupts([*(s.interrupt for s in steps), d.owed_interrupt])
    return NodeWork(steps, intr, d)


def work_plan(plan: NodePlan, work: NodeWork) -> NodePlan:
    """``plan`` (its node, compartment and batch) with ``work``'s steps and interrupt, cordoned
    exactly when there is an interrupt (the planner's rule); nothing about pods (the lifecycle
    lists them itself)."""
    return NodePlan(name=plan.name, compartment=plan.compartment, batch=plan.batch, steps=work.steps,
                    interrupt=work.interrupt, cordon=work.interrupt is not None)


def free_steps(steps: tuple[Step, ...] | list[Step]) -> tuple[Step, ...]:
    """The steps that run before the cordon: a step without an interrupt of its own whose
    dependencies on the node (``after``) are such steps too (NodeWright gates only packages with
    an interrupt behind the cordon, the wait and the drain; semantics §2.2, §2.5). ``steps`` in
    dependency order, as the planner orders them."""
    free: list[Step] = []
    names: set[str] = set()
    for s in steps:
        if s.interrupt is None and all(a in names for a in s.after):
            free.append(s)
            names.add(s.package)
    return tuple(free)

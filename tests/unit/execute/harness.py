"""Run a recipe on a simulated fleet and check the rollout invariants after every test.

``pkg``/``recipe``/``policy`` are this directory's defaults (pinned packages, nodes labelled
``pool: gpu``, training pods protected, one compartment) over the one builder family,
:mod:`reconciler.testing.builders`; fleets are Kubernetes objects from
:mod:`reconciler.testing.fleetgen`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.adapters.sim import SimFleet
from reconciler.adapters.simconfig import SimConfig
from reconciler.execute.rollout import Rollout
from reconciler.execute.timeline import Event, RunResult
from reconciler.model.plan import Plan
from reconciler.model.policy import DeploymentPolicy
from reconciler.model.recipe import DrainOptions, Package, Recipe, Timeouts
from reconciler.model.selector import LabelSelector
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
from reconciler.testing import builders as b
from reconciler.testing.faults import FaultyCluster
from reconciler.testing.invariants import Watch, check_budget, check_cordons, check_protected, check_timeline

SHA = "sha256:" + "a" * 64
TRAINING = LabelSelector(matchLabels={"workload": "long-running-training"})


def pkg(name: str, version: str = "1.0.0", *, deps: dict[str, str] | None = None, interrupt: str | None = None,
        services: tuple[str, ...] = (), config: dict[str, str] | None = None) -> Package:
    """A package pinned by digest (:func:`reconciler.testing.builders.package`)."""
    return b.package(name, version, sha=SHA, depends_on=deps,
                     interrupt={"type": interrupt, "services": services} if interrupt else None, config=config)


def recipe(*packages: Package, name: str = "tune", selector: dict[str, str] | None = None,
           drain: DrainOptions | None = None, timeouts: Timeouts | None = None, **kw: Any) -> Recipe:
    """A recipe over nodes labelled ``pool: gpu`` by default, protecting training pods
    (:func:`reconciler.testing.builders.recipe`)."""
    return b.recipe(name, *packages, selector=selector if selector is not None else {"pool": "gpu"},
                    protect=TRAINING, drain=drain, version="2026.11.1", timeouts=timeouts or Timeouts(), **kw)


def policy(*, count: int | None = None, percent: int | None = None, strategy: str = "fixed",
           **params: Any) -> DeploymentPolicy:
    """A single-compartment policy (:func:`reconciler.testing.builders.policy`)."""
    budget = b.budget(count=count) if count is not None else b.budget(percent=percent or 100)
    return b.policy("p", default_budget=budget, default_strategy=b.strategy(strategy, **params))


@dataclass
class Run:
    """Outcome of :func:`apply` with the fleet, the watcher and the port the rollout talked to
    (``port.calls``: every call through it) for further checks."""

    result: RunResult
    sim: SimFleet
    watch: Watch
    plan: Plan
    port: FaultyCluster

    def node(self, name: str) -> Any:
        """The result entry of one node."""
        return next(n for n in self.result.nodes if n.name == name)

    def events(self, node: str, event: str | None = None) -> list[Event]:
        """Timeline events of one node (optionally of one kind)."""
        return [e for e in self.result.timeline if e.node == node and (event is None or e.event == event)]


def apply(objs_or_sim: list[dict[str, Any]] | SimFleet, r: Recipe, p: DeploymentPolicy,
          config: SimConfig | None = None, *, check: bool = True,
          before: Mapping[str, Callable[..., object]] | None = None,
          after: Mapping[str, Callable[..., object]] | None = None, **kw: Any) -> Run:
    """Plan and apply ``r`` on a simulated fleet; assert the invariants unless ``check`` is False.
    The rollout talks to one port decorator (:class:`~reconciler.testing.faults.FaultyCluster`)
    over the invariants' :class:`Watch`, with ``before``/``after`` hooks by port method: a test
    makes the world move on around a call (an admin uncordons the node right after an eviction)
    or watches the calls (``Run.port.calls``)."""
    sim = objs_or_sim if isinstance(objs_or_sim, SimFleet) else SimFleet(objs_or_sim, config or SimConfig())
    plan = compute_plan(r, p, observe(sim))
    comp = {n.name: n.compartment for n in plan.nodes}
    watch = Watch(sim, r.name, comp)
    port = FaultyCluster(watch.port, clock=sim, before=before, after=after)
    result = Rollout(r, p, plan, port, sim, **kw).run()
    if check:
        ceilings = {c.name: c.ceiling for c in plan.compartments}
        failed = [n.name for n in result.nodes if n.state == "failed"]
        problems = (
            check_budget(watch, ceilings)
            + check_protected(watch, r)
            + check_cordons(sim, r.name, failed)
            + check_timeline(result.timeline, {k: list(v.dependsOn) for k, v in r.packages.items()})
        )
        assert not problems, problems
    return Run(result, sim, watch, plan, port)

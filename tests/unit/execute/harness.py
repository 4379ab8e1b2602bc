"""Run a recipe on a simulated fleet and check the rollout invariants after every test.

Recipes, packages and policies come from :mod:`reconciler.testing.builders` and fleets are
Kubernetes objects from :mod:`reconciler.testing.fleetgen`; this directory's conventions are the
values below: packages pinned by :data:`SHA`, recipes over nodes labelled :data:`GPU` protecting
:data:`TRAINING` pods, and :data:`ONE_AT_A_TIME`, the policy most tests roll out with."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.adapters.sim.config import SimConfig
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.diff import read_state
from reconciler.execute.rollout import Rollout
from reconciler.execute.timeline import Event, RunResult
from reconciler.model.plan import Plan
from reconciler.model.policy import DeploymentPolicy
from reconciler.model.recipe import Recipe
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
from reconciler.testing.builders import policy
from reconciler.testing.faults import FaultyCluster
from reconciler.testing.invariants import (
    Watch,
    check_budget,
    check_cordons,
    check_protected,
    check_recorded_ran,
    check_stage_pods,
    check_timeline,
)

#: The digest every package of these tests is pinned by (``package(..., sha=SHA)``).
SHA = "sha256:" + "a" * 64
#: The node labels the recipes of these tests select (``recipe(..., selector=GPU)``).
GPU = {"pool": "gpu"}
#: The pods the recipes of these tests protect (``recipe(..., protect=TRAINING)``).
TRAINING = {"workload": "long-running-training"}
#: One node at a time: a count budget of 1 with a fixed strategy.
ONE_AT_A_TIME = policy(count=1, default_strategy="fixed")


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
    had = {n.name: read_state(r.name, n.annotations)[0] for n in sim.list_nodes()}
    plan = compute_plan(r, p, observe(sim), retry_failed=kw.get("retry_failed", False))  # as apply plans it
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
            + check_stage_pods(watch)
            + check_recorded_ran(sim, r.name, had)
        )
        assert not problems, problems
    return Run(result, sim, watch, plan, port)

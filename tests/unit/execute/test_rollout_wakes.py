"""Which node runs the rollout loop advances (issue 17): with a change feed (the real cluster's
watch streams), a node is advanced only when its own timer is due or the feed named it, also in a
pass that did not wait; nodes whose lifecycle ended are handed to the node role's ``forget_node``
(the watch store stops waking for them). Without one (the simulated fleet's clock cannot tell),
every node is looked at after each wait, as before."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import pytest

from reconciler.adapters.sim.fleet import SimFleet
from reconciler.execute.lifecycle import NodeRun
from reconciler.execute.rollout import Rollout
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
from reconciler.ports import NodeInterest
from reconciler.testing.builders import package, policy, recipe
from reconciler.testing.fleetgen import make_node, make_pod

from .harness import GPU, SHA, TRAINING


class TellingClock:
    """The simulated clock, and a change feed on it that answers "nothing changed" (an empty set)
    instead of "unknown": only the nodes' own timers bring them back. Each reading is 1 ms later than the
    one before (time passes while a loop pass works, as on a real cluster), so a node that asks
    to come back at once leaves no time to wait."""

    def __init__(self, sim: SimFleet) -> None:
        self.sim = sim
        self.waits: list[float] = []
        self.drift = 0.0

    def now(self) -> float:
        self.drift += 0.001
        return self.sim.now() + self.drift

    def utc(self) -> float:
        return self.sim.utc()

    def wait(self, seconds: float) -> None:
        self.sim.wait(seconds)

    def changed(self, within: float) -> Collection[str] | None:
        self.waits.append(within)
        self.sim.wait(within)
        return set()


class Forgetting:
    """The fleet as the node role, recording ``forget_node`` calls (a :class:`NodeInterest`)."""

    def __init__(self, sim: SimFleet) -> None:
        self.sim = sim
        self.forgotten: list[str] = []

    def forget_node(self, name: str) -> None:
        self.forgotten.append(name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sim, name)


def _fleet(n: int) -> SimFleet:
    objs = [make_node(f"n{i}", {"pool": "gpu"}, created=1795000000.0 + i) for i in range(1, n + 1)]
    objs += [make_pod("web", f"web-{i}", f"n{i}", labels={"app": "web"}, owner=("ReplicaSet", "web"))
             for i in range(1, n + 1)]
    return SimFleet(objs)


@pytest.fixture
def begun(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float | None, float]]:
    """Every NodeRun.begin: (node, the wake it had asked for, the clock time it was begun at)."""
    seen: list[tuple[str, float | None, float]] = []
    orig = NodeRun.begin

    def begin(self: NodeRun) -> Any:
        seen.append((self.name, self.wake, self.ctx.clock.now()))
        return orig(self)

    monkeypatch.setattr(NodeRun, "begin", begin)
    return seen


def test_a_telling_clock_advances_only_due_nodes(begun: list[tuple[str, float | None, float]]) -> None:
    sim = _fleet(6)
    r = recipe("tune", package("base", sha=SHA),
               package("tuned", sha=SHA, depends_on={"base": "1.0.0"}, interrupt="reboot"),
               selector=GPU, protect=TRAINING)
    p = policy(count=3, default_strategy="fixed")
    plan = compute_plan(r, p, observe(sim))
    clock = TellingClock(sim)
    roles = Forgetting(sim)
    assert isinstance(roles, NodeInterest)
    result = Rollout(r, p, plan, roles, clock, poll_seconds=2.0, changes=clock).run()
    assert result.result == "succeeded", [(n.name, n.state, n.message) for n in result.nodes]
    first: set[str] = set()
    for name, wake, now in begun:
        if name in first:
            assert wake is not None and wake <= now, f"{name} advanced at {now} before its wake {wake}"
        first.add(name)
    assert first == {f"n{i}" for i in range(1, 7)}
    assert 0.0 in clock.waits  # passes that could not wait asked the feed what changed at once
    assert sorted(roles.forgotten) == sorted(first)  # each ended lifecycle handed over once


def test_an_unknowing_clock_looks_at_every_node_after_a_wait(begun: list[tuple[str, float | None, float]]) -> None:
    sim = _fleet(4)
    r = recipe("tune", package("tuned", sha=SHA, interrupt="reboot"), selector=GPU, protect=TRAINING)
    p = policy(count=2, default_strategy="fixed")
    plan = compute_plan(r, p, observe(sim))
    result = Rollout(r, p, plan, sim, sim, poll_seconds=2.0).run()
    assert result.result == "succeeded"
    # the simulated clock cannot tell what changed: some node is looked at before its own timer
    assert any(wake is not None and wake > now for _, wake, now in begun)

"""The world-moves sweep (issue 34): at every write of a rollout (each phase of each node's
lifecycle), each change of the world — the recipe bumped or reverted, the node deleted or replaced
by another machine, NotReady then Ready, a stage pod deleted by someone else, a
PodDisruptionBudget created or changed, the node leaving the recipe's scope, ``node ignore``,
``node reset`` — then the rollout and a following ``apply`` run to their end (:mod:`world`).
Checked over both runs, at every write where the rule is about writes:

* a node runs stage pods of one lifecycle only, at most one per package (``check_stage_pods``);
* an interrupt acts at most once per lifecycle on a machine (``check_reboots``), and is requested
  at most once per run unless the first request never acted (``check_timeline``);
* no node is recorded complete at a version whose stages did not run on that machine
  (``check_recorded_ran``);
* no cordon we did not make is lifted (``check_foreign_cordons``), no node is left cordoned by us
  without a record (``check_cordons``), the budget holds and no protected pod is evicted;
* every owed interrupt acted, or a record still owes it (``check_owed_interrupts``);
* every stage is tried at most ``1 + stageRetries`` times (``check_retries``), and both runs end
  (:data:`world.WRITE_CAP`);
* a new plan of the recipe as it is last has nothing left to do for any node it selects.

The fast tier runs :data:`SAMPLE` (each change at the first write of each phase of node ``n2``,
whose batch runs two nodes at once); CI runs every change at every write (``slow``).
"""

from __future__ import annotations

import pytest

from .world import CHANGES, Point, reference_points, run_world

#: The phases a write can leave a node in (``-``: its lifecycle ended, or none began).
PHASES = ("wait", "drain", "stages", "interrupt", "post-interrupt", "-")


def _sample() -> list[tuple[Point, str]]:
    points = reference_points()
    firsts = [next(p for p in points if p.node == "n2" and p.phase == ph) for ph in PHASES]
    return [(p, c) for c in CHANGES for p in firsts]


#: The fast tier's subset: every change at the first write of each phase of node n2.
SAMPLE = _sample()


def test_the_points_cover_every_phase_of_every_node() -> None:
    points = reference_points()
    assert len(points) > 100
    for node in ("n1", "n2", "n3", "n4", "n5", "n6"):
        seen = {p.phase for p in points if p.node == node}
        assert seen >= set(PHASES) - ({"drain"} if node == "n6" else set()), (node, seen)  # n6 has no pod to evict


@pytest.mark.parametrize(("point", "change"), SAMPLE, ids=[f"{c}-at-{p.n}-{p.phase}" for p, c in SAMPLE])
def test_a_sampled_change_at_a_sampled_point_keeps_every_invariant(point: Point, change: str) -> None:
    out = run_world(point.n, change)
    assert not out.problems, (str(point), out.note, out.problems)


@pytest.mark.slow
@pytest.mark.parametrize("change", list(CHANGES))
def test_every_change_at_every_write_keeps_every_invariant(change: str) -> None:
    failures = []
    for point in reference_points():
        out = run_world(point.n, change)
        if out.problems:
            failures.append((str(point), out.note, out.problems[:3]))
    assert not failures, failures

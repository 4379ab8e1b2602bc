"""How many nodes a real-cluster rollout advances at once by default."""

from __future__ import annotations

from reconciler.execute.rollout import MAX_AUTO_WORKERS, MIN_AUTO_WORKERS, default_workers
from reconciler.model.plan import Plan
from reconciler.plan.planner import compute_plan
from reconciler.testing import builders as b


def _plan(nodes: int, percent: int) -> Plan:
    pkg = b.package("tuning", "1.0.0")
    fleet = b.fleet(b.node(f"n{i:05d}", labels={"pool": "gpu"}) for i in range(nodes))
    return compute_plan(b.recipe("r", pkg, selector={"pool": "gpu"}),
                        b.policy(default_budget=b.budget(percent=percent)), fleet)


def test_workers_cover_the_largest_batch_the_budget_allows() -> None:
    assert default_workers(_plan(500, 10)) == 50  # a batch of 50 nodes: 50 threads
    assert default_workers(_plan(40, 10)) == MIN_AUTO_WORKERS
    assert default_workers(_plan(2000, 100)) == MAX_AUTO_WORKERS
    assert default_workers(_plan(0, 10)) == MIN_AUTO_WORKERS

"""Crash safety: kill the run after every possible write and resume (issue #3 §2).

The resumed run must end in the same recorded state as an uninterrupted run, never re-run a stage
that completed, never exceed the budget across the crash boundary, never evict a protected pod
and never leave a node cordoned by us without a failure record.
"""

from __future__ import annotations

import contextlib

import pytest

from reconciler.adapters.sim.config import SimConfig, StageFailure
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.errors import CrashInjected
from reconciler.model.nodestate import PREFIX, cordon_key, failure_key
from reconciler.model.recipe import Timeouts
from reconciler.testing.builders import package, policy, recipe
from reconciler.testing.fleetgen import make_node, make_pdb, make_pod
from reconciler.testing.invariants import check_no_rerun

from .harness import GPU, SHA, TRAINING, apply

KEEP = ("nodeState_", "config_", "status_")


def fleet() -> list[dict]:
    objs = [make_node(f"n{i}", {"pool": "gpu"}, created=1795000000.0 + i) for i in range(1, 7)]
    objs += [make_pod("web", f"web-{i}", f"n{i}", labels={"app": "web"}, owner=("ReplicaSet", "web"))
             for i in (1, 2, 4)]
    objs.append(make_pdb("web", "web", {"app": "web"}, max_unavailable=1))
    objs.append(make_pod("ml", "train", "n3", labels={"workload": "long-running-training"}, owner=("Job", "t"),
                         active_deadline=200))
    return objs


RECIPE = recipe(
    "tune",
    package("base", sha=SHA),
    package("driver", sha=SHA, depends_on={"base": "1.0.0"}, interrupt="reboot"),
    package("agent", sha=SHA, depends_on={"base": "1.0.0"}, interrupt="service:agent"),
    selector=GPU,
    protect=TRAINING,
    timeouts=Timeouts(stageRetries=1, retryBackoff=5),
)
# the representative rollout goes on past n5's failure: NodeWright's default, written out since
# the first failed batch halts by default (issue 34)
POLICY = policy(count=2, default_strategy="exponential", initialBatch=1, failureThreshold="never")
CONFIG = SimConfig(failures=(StageFailure(node="n5", package="driver", stage="apply", exitCode=9, times=99),))


def final_state(sim: SimFleet) -> dict[str, tuple]:
    out = {}
    for n in sim.list_nodes():
        ann = {k: v for k, v in n.annotations.items() if k.startswith(PREFIX) and any(x in k for x in KEEP)}
        held = cordon_key("tune") in n.annotations
        out[n.name] = (ann, n.unschedulable, held, failure_key("tune") in n.annotations)
    return out


@pytest.mark.slow
def test_crash_after_every_write_then_resume_ends_like_an_uninterrupted_run() -> None:
    base = apply(fleet(), RECIPE, POLICY, CONFIG)
    assert base.node("n5").state == "failed" and base.result.result == "failed"
    reference = final_state(base.sim)
    total = base.sim.writes
    assert total > 60
    for n in range(1, total + 1):
        sim = SimFleet(fleet(), CONFIG, crash_after=n)
        with contextlib.suppress(CrashInjected):
            apply(sim, RECIPE, POLICY, check=False)
        sim.crash_after = None
        sim.mono_offset = 30 * 86400.0  # resumed by a fresh process: another monotonic origin (issue 12)
        resumed = apply(sim, RECIPE, POLICY)  # invariants checked on the resumed run
        assert final_state(sim) == reference, f"crash after write {n}: final state differs"
        assert not check_no_rerun(sim), (n, check_no_rerun(sim))
        assert resumed.watch.max_held.get("__default__", 0) <= 2

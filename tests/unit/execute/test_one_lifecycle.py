"""A node runs stage pods of one lifecycle only, at most one per package (issue 34, item 1).
Packages that do not depend on each other run in parallel on a node, as NodeWright runs them; a
stage that fails for good fails the node only once no other stage pod of it still runs, so the
lifecycle that retries the node never starts a pod beside one of the failed lifecycle's."""

from __future__ import annotations

from reconciler.adapters.sim.config import SimConfig, StageFailure
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.model.nodestate import parse_state, state_key
from reconciler.model.recipe import Timeouts
from reconciler.testing.builders import package, recipe, state_annotations
from reconciler.testing.fleetgen import make_node

from .harness import GPU, ONE_AT_A_TIME, SHA, apply

SLOW_OLD = package("slow", "1.0.0", sha=SHA)
R = recipe("tune", package("slow", "2.0.0", sha=SHA), package("quick", sha=SHA), selector=GPU,
           timeouts=Timeouts(stageRetries=0))
CONFIG = SimConfig(stageSeconds={"upgrade": 300, "default": 10},
                   failures=(StageFailure(node="n1", package="quick", stage="apply", exitCode=3, times=1),))


def test_a_failed_stage_fails_the_node_only_after_its_other_stage_pods_end_and_a_retry_never_overlaps() -> None:
    sim = SimFleet([make_node("n1", {"pool": "gpu"}, annotations=state_annotations("tune", installed=[SLOW_OLD]))],
                   CONFIG)
    first = apply(sim, R, ONE_AT_A_TIME)
    n1 = first.node("n1")
    assert n1.state == "failed" and n1.reason == "StageFailed" and "quick" in n1.message
    kinds = [(e.event, e.detail.split()[0]) for e in first.events("n1") if e.event in ("stage-end", "failed")]
    assert kinds.index(("stage-end", "slow")) < kinds.index(("failed", "StageFailed:")), kinds
    st = parse_state(sim.get_node("n1").annotations[state_key("tune")])
    assert (st["slow|2.0.0"].stage, st["slow|2.0.0"].state) == ("upgrade", "complete")
    second = apply(sim, R, ONE_AT_A_TIME, retry_failed=True)  # the harness checks: no pod beside another
    assert second.node("n1").state == "complete", second.node("n1").message
    assert not second.watch.overlaps

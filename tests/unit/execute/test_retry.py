"""The failure classifier (issue 12, finding 3): every retry bounded by count and time."""

from __future__ import annotations

import pytest

from reconciler.adapters.sim.fleet import SimFleet
from reconciler.errors import (
    ClusterError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    ServerError,
    TooManyRequestsError,
    TransientError,
)
from reconciler.execute.retry import DEFAULT_BOUNDS, Fail, Gone, Retry, RetryBounds, classify
from reconciler.execute.rollout import Rollout
from reconciler.model.vocab import FailureReason
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
from reconciler.testing.builders import package, policy, recipe
from reconciler.testing.faults import Fault, FaultyCluster
from reconciler.testing.fleetgen import make_node

from .harness import GPU, SHA, TRAINING

B = RetryBounds(attempts=5, seconds=100.0, base=2.0, cap=10.0, conflict=0.5)

CASES = [
    # error, attempt, elapsed, expected decision
    (NotFoundError("gone", 404, "NotFound"), 1, 0.0, Gone()),
    (ForbiddenError("rbac", 403, "Forbidden"), 1, 0.0, Fail(FailureReason.FORBIDDEN, "")),
    (ClusterError("bad pod", 422, "Invalid"), 1, 0.0, Fail(FailureReason.INVALID, "")),
    (ClusterError("bad request", 400, "BadRequest"), 1, 0.0, Fail(FailureReason.INVALID, "")),
    (TransientError("reset", 0, "Unavailable"), 1, 0.0, Retry(2.0)),
    (TransientError("reset", 0, "Unavailable"), 2, 2.0, Retry(4.0)),
    (TransientError("reset", 0, "Unavailable"), 4, 14.0, Retry(10.0)),  # capped
    (TransientError("503", 503, "ServiceUnavailable", retry_after=30.0), 1, 0.0, Retry(30.0)),  # Retry-After wins
    (TooManyRequestsError("slow down", retry_after=7.0), 1, 0.0, Retry(7.0)),
    (ServerError("etcd timeout", 500, "InternalError"), 3, 6.0, Retry(8.0)),
    (ConflictError("modified", 409, "Conflict"), 4, 6.0, Retry(0.5)),  # re-read soon, not long backoff
    (ConflictError("modified", 409, "Conflict"), 6, 10.0, Fail(FailureReason.API_ERROR_PERSISTS, "")),  # count
    (TransientError("reset", 0, "Unavailable"), 2, 100.0, Fail(FailureReason.API_ERROR_PERSISTS, "")),  # time
    (ClusterError("odd", 418, "Teapot"), 6, 0.0, Fail(FailureReason.API_ERROR_PERSISTS, "")),
]


@pytest.mark.parametrize(("error", "attempt", "elapsed", "want"), CASES)
def test_classify(error: ClusterError, attempt: int, elapsed: float, want: object) -> None:
    got = classify(error, attempt, elapsed, B)
    assert type(got) is type(want)
    if isinstance(want, Fail):
        assert isinstance(got, Fail) and got.reason is want.reason and str(error) in got.message
    else:
        assert got == want


def test_every_streak_ends_within_its_bounds() -> None:
    for error in (ConflictError("x", 409, "Conflict"), TransientError("x", 0, "U"), ServerError("x", 500, "I"),
                  TooManyRequestsError("x", retry_after=1.0)):
        t, attempt = 0.0, 1
        while isinstance(d := classify(error, attempt, t, B), Retry):
            t += d.after
            attempt += 1
            assert attempt <= B.attempts + 1
        assert isinstance(d, Fail) and d.reason is FailureReason.API_ERROR_PERSISTS


def test_a_permanent_409_on_node_patches_ends_in_a_named_failure_within_its_bound() -> None:
    """The tester's case: a 409 that never clears was retried 4,321 times over 6 simulated hours."""
    r = recipe("tune", package("driver", sha=SHA, interrupt="reboot"), selector=GPU, protect=TRAINING)
    sim = SimFleet([make_node("n1", {"pool": "gpu"}), make_node("n2", {"pool": "gpu"})])
    # every node patch after the first (the cordon) is refused: the node can never progress
    fc = FaultyCluster(sim, faults=[Fault("conflict", verb="patch_node", target="node/n1", nth=2, times=None)])
    # failureThreshold never: the compartment goes on past n1's failure (by default it would halt)
    pol = policy(count=2, default_strategy="fixed", failureThreshold="never")
    plan = compute_plan(r, pol, observe(sim))
    res = Rollout(r, pol, plan, fc, sim, run_id="run-409").run()
    n1 = next(n for n in res.nodes if n.name == "n1")
    assert n1.state == "failed" and n1.reason == FailureReason.API_ERROR_PERSISTS, n1
    patches = [c for c in fc.calls if c.verb == "patch_node" and c.target == "node/n1"]
    # the cordon, the step's retries, the failure record's own retries, one last try to record it
    assert len(patches) <= 2 + 2 * (DEFAULT_BOUNDS.attempts + 1)
    assert res.duration < 2 * 3600  # not 6 h
    n2 = next(n for n in res.nodes if n.name == "n2")
    assert n2.state == "complete"  # a failed node never freezes its compartment
    # the node is still cordoned by us, and that is recorded (the cordon claim was written with the cordon)
    ann = sim.nodes["n1"]["metadata"]["annotations"]
    assert sim.nodes["n1"]["spec"]["unschedulable"] and any(k.endswith("/cordon_tune") for k in ann)

"""Two clock readings (issue 12, finding 1): records persist UTC instants, never monotonic readings.

A resumed run is a fresh process, perhaps on another host: its monotonic clock has another
origin. ``SimFleet.mono_offset`` moves the simulated process's monotonic origin while simulated
UTC time runs on, so every comparison of a persisted time with ``Clock.now()`` would show here.
"""

from __future__ import annotations

import contextlib
import json

from reconciler.adapters.sim.fleet import SimFleet
from reconciler.errors import CrashInjected
from reconciler.model.nodestate import InFlight, inflight_key
from reconciler.model.recipe import DrainOptions, Timeouts
from reconciler.model.utctime import elapsed_since, from_rfc3339, to_rfc3339
from reconciler.testing.builders import package, policy, recipe
from reconciler.testing.fleetgen import make_node, make_pdb, make_pod

from .harness import GPU, ONE_AT_A_TIME, SHA, TRAINING, apply

THIRTY_DAYS = 30 * 86400.0


def _reboot_recipe():  # type: ignore[no-untyped-def]
    return recipe("tune", package("driver", sha=SHA, interrupt="reboot"), selector=GPU, protect=TRAINING,
                  timeouts=Timeouts(reboot=600))


def _inflight(sim: SimFleet, node: str, name: str = "tune") -> InFlight | None:
    text = sim.nodes[node]["metadata"].get("annotations", {}).get(inflight_key(name))
    return InFlight.model_validate_json(text) if text else None


def test_utc_instants_round_trip_and_unknown_is_not_zero() -> None:
    t = 1_795_000_000.25
    assert from_rfc3339(to_rfc3339(t)) == t
    assert to_rfc3339(0.0) == "1970-01-01T00:00:00.000000Z"
    for bad in ("", "yesterday", "2026-12-01T10:00:00", "1e9", None):
        assert from_rfc3339(bad) is None, bad  # a naive or unreadable time is unknown, not epoch 0
    assert elapsed_since(to_rfc3339(t + 50), t) == 0.0  # the writer's clock ran ahead: never negative
    assert elapsed_since(to_rfc3339(t), t + 80) == 80.0


def test_records_written_by_older_versions_with_clock_readings_are_read_as_unknown() -> None:
    old = json.dumps({"runId": "r", "planHash": "h", "phase": "interrupt", "since": 1234.5, "requestedAt": 99.0})
    fl = InFlight.model_validate_json(old)
    assert fl.since == "" and fl.requestedAt == ""  # requested (never sent twice), time unknown


def test_resume_mid_reboot_in_a_process_with_another_monotonic_origin_completes() -> None:
    nodes = [make_node(f"n{i}", {"pool": "gpu"}) for i in range(1, 3)]
    r = _reboot_recipe()
    base = apply(nodes, r, ONE_AT_A_TIME)
    total = base.sim.writes
    seen_mid_reboot = 0
    for crash_at in range(1, total + 1):
        sim = SimFleet([make_node(f"n{i}", {"pool": "gpu"}) for i in range(1, 3)], crash_after=crash_at)
        with contextlib.suppress(CrashInjected):
            apply(sim, r, ONE_AT_A_TIME, check=False)
        sim.crash_after = None
        if any((fl := _inflight(sim, n)) is not None and fl.requestedAt for n in ("n1", "n2")):
            seen_mid_reboot += 1
        sim.mono_offset = THIRTY_DAYS if crash_at % 2 else -THIRTY_DAYS  # another process's origin
        resumed = apply(sim, r, ONE_AT_A_TIME)
        states = {n.name: (n.state, n.reason) for n in resumed.result.nodes}
        assert all(s == "complete" or (s == "untouched" and _done(sim, n)) for n, (s, _) in states.items()), (
            crash_at, states)
    assert seen_mid_reboot >= 2  # the sweep did crash while a reboot was owed


def _done(sim: SimFleet, node: str) -> bool:
    labels = sim.nodes[node]["metadata"].get("labels", {})
    return labels.get("reconciler.nodewright.dev/status_tune") == "complete"


def test_the_drain_timeout_counts_from_the_drains_start_across_a_restart() -> None:
    # a PDB that allows no disruption: the drain can only time out (after 100 s)
    objs = [make_node("n1", {"pool": "gpu"}),
            make_pod("web", "web-1", "n1", labels={"app": "web"}, owner=("ReplicaSet", "web")),
            make_pdb("web", "web", {"app": "web"}, max_unavailable=0)]
    r = recipe("tune", package("driver", sha=SHA, interrupt="reboot"), selector=GPU, protect=TRAINING,
               drain=DrainOptions(timeoutSeconds=100))
    sim = SimFleet(objs)
    first = apply(sim, r, ONE_AT_A_TIME, max_seconds=80, check=False)
    assert first.node("n1").state == "untouched"  # still draining when the run stopped
    fl = _inflight(sim, "n1")
    assert fl is not None and fl.phase == "drain" and "drain" in fl.timers
    drain_started = from_rfc3339(fl.timers["drain"])
    assert drain_started is not None
    sim.mono_offset = THIRTY_DAYS  # a fresh process elsewhere
    second = apply(sim, r, ONE_AT_A_TIME, check=False)
    n1 = second.node("n1")
    assert n1.state == "failed" and n1.reason == "DrainTimeout"
    failed_at = sim.utc()
    # it failed 100 s after the drain started (to the poll interval), not 100 s after the resume
    assert 100 <= failed_at - drain_started < 100 + 10, failed_at - drain_started
    assert _inflight(sim, "n1") is not None  # the record stays with the failed, still cordoned node


def test_a_resume_with_an_over_full_budget_finishes_the_nodes_already_in_flight() -> None:
    """Issue 12, finding 6: the budget gates new starts only; nodes in flight already count."""
    from reconciler.model.nodestate import cordon_key

    r = _reboot_recipe()
    sim = SimFleet([make_node(f"n{i}", {"pool": "gpu"}) for i in range(1, 6)])
    pol = policy(count=2, default_strategy="fixed", initialBatch=2)
    first = apply(sim, r, pol, max_seconds=100, check=False)  # stops mid-reboot
    in_flight = [n for n in ("n1", "n2", "n3", "n4", "n5") if _inflight(sim, n) is not None]
    assert len(in_flight) == 2 and all(cordon_key("tune") in sim.nodes[n]["metadata"]["annotations"]
                                       for n in in_flight), first.result.nodes
    others = [n for n in ("n1", "n2", "n3", "n4", "n5") if n not in in_flight]
    sim.set_node(others[0], unschedulable=True)  # an admin cordons another node: 3 unavailable, ceiling 2
    sim.mono_offset = THIRTY_DAYS
    second = apply(sim, r, pol, check=False)
    states = {n.name: n.state for n in second.result.nodes}
    assert all(states[n] == "complete" for n in in_flight), states
    # and the rest of the rollout still went on once the in-flight nodes were done
    assert all(states[n] == "complete" for n in others[1:]), states

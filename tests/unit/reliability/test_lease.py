"""One reconciler per recipe (issue #6 §2) on the simulated fleet: the Lease, its renewal from the
rollout loop, waiting, takeover of a dead run's lease (which then resumes its nodes), a lease lost
mid-run, and the CLI's ``--wait-for-lock``."""

from __future__ import annotations

import io
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from reconciler.adapters.host import process_identity
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.cli import clusters
from reconciler.cli.main import main
from reconciler.errors import CrashInjected, LeaseHeldError
from reconciler.execute.lock import LeaseGroup, LeaseLock, LeaseLostError, holder_identity, lease_name
from reconciler.execute.rollout import Rollout
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
from reconciler.ports import ClusterPorts
from reconciler.testing.faults import Fault, FaultyCluster
from reconciler.testing.fleetgen import make_node

from .sweep import CONFIG, POLICY, RECIPE, fleet, recorded_state, run_scenario

NAME = lease_name("tune")


def small() -> SimFleet:
    return SimFleet([make_node("n1", {"pool": "gpu"})])


def test_lease_name_and_holder_identity() -> None:
    assert lease_name("gpu-training-tuning") == "reconciler-gpu-training-tuning"
    long = lease_name("x" * 80)
    assert len(long) <= 63 and long.startswith("reconciler-xxx") and long != lease_name("x" * 81)
    assert lease_name("Odd_Name") != lease_name("odd-name")  # different recipes never share a lease
    assert holder_identity("run-abc", "host-1/42") == "run-abc@host-1/42"
    h = holder_identity("run-abc", process_identity())
    assert h.startswith("run-abc@") and h.rsplit("/", 1)[1] == str(os.getpid())


def test_second_run_is_refused_naming_the_holder() -> None:
    sim = small()
    a = LeaseLock(sim, sim, "tune", "run-a@host-1/11")
    a.acquire()
    b = LeaseLock(sim, sim, "tune", "run-b@host-2/22")
    with pytest.raises(LeaseHeldError, match=r"held by run-a@host-1/11 .*another reconciler run is active") as e:
        b.acquire()
    assert e.value.exit_code == 1 and e.value.holder == "run-a@host-1/11"
    assert sim.get_lease(NAME) is not None and sim.get_lease(NAME).holder == "run-a@host-1/11"  # type: ignore[union-attr]


def test_second_run_waits_while_the_first_renews_then_gives_up() -> None:
    sim = small()
    a = LeaseLock(sim, sim, "tune", "run-a")
    a.acquire()
    b = LeaseLock(sim, sim, "tune", "run-b")
    t0 = sim.now()
    a.tick(sim.now())
    with pytest.raises(LeaseHeldError):
        # b waits 15 s (a's lease has 60 s left): refused after the wait
        b.acquire(wait_seconds=15)
    assert sim.now() - t0 == pytest.approx(15.0)


def test_second_run_waits_and_gets_it_when_the_first_releases() -> None:
    sim = small()
    a = LeaseLock(sim, sim, "tune", "run-a")
    a.acquire()
    sim._at(sim.now() + 12, a.release)  # the first run ends 12 s later
    b = LeaseLock(sim, sim, "tune", "run-b", retry_every=5)
    b.acquire(wait_seconds=60)
    assert b.held and sim.now() == pytest.approx(15.0) and not b.took_over_from


def test_dead_holder_is_taken_over_after_the_duration() -> None:
    sim = small()
    LeaseLock(sim, sim, "tune", "run-dead").acquire()  # never renewed: the process died
    b = LeaseLock(sim, sim, "tune", "run-b", retry_every=5)
    b.acquire(wait_seconds=120)
    lease = sim.get_lease(NAME)
    assert lease is not None and lease.holder == "run-b" and lease.transitions == 1
    assert 60.0 <= sim.now() <= 65.0
    assert b.took_over_from == "run-dead"


def test_tick_renews_on_schedule_and_survives_transient_errors() -> None:
    sim = small()
    fc = FaultyCluster(sim, faults=[Fault("unavailable", verb="replace_lease", nth=2, times=3)])
    lock = LeaseLock(fc, sim, "tune", "run-a", duration=60, renew_every=20, retry_every=5)
    lock.acquire()
    assert lock.tick(sim.now()) == pytest.approx(20.0)  # not due yet
    for t in (20, 40, 45, 50, 55):  # ok, then three failures (retry every 5 s), then ok
        sim.advance(t - sim.now())
        lock.tick(sim.now())
    assert lock.renewals == 2 and len(fc.injected) == 3
    assert sim.get_lease(NAME).renewed == pytest.approx(sim.wall())  # type: ignore[union-attr]


def test_tick_stops_the_run_before_the_lease_can_expire() -> None:
    sim = small()
    fc = FaultyCluster(sim, faults=[Fault("reset", verb="replace_lease", times=None)])
    lock = LeaseLock(fc, sim, "tune", "run-a", duration=60, renew_every=20, retry_every=5, margin=10)
    lock.acquire()
    with pytest.raises(LeaseLostError, match=r"last renewed 50 s ago \(could not renew: .*reset.*\).* stops writing"):
        while True:
            nxt = lock.tick(sim.now())
            assert nxt is not None and sim.now() < 60
            sim.advance(nxt - sim.now())
    assert sim.now() == pytest.approx(50.0) and not lock.held


def test_tick_reports_a_lease_taken_by_another_run() -> None:
    sim = small()
    lock = LeaseLock(sim, sim, "tune", "run-a")
    lock.acquire()
    sim.leases[NAME] = replace(sim.leases[NAME], holder="run-intruder@elsewhere/9")
    sim.advance(20)
    with pytest.raises(LeaseLostError, match="taken over by run-intruder@elsewhere/9"):
        lock.tick(sim.now())
    lock.release()  # not ours any more: left alone
    assert sim.get_lease(NAME).holder == "run-intruder@elsewhere/9"  # type: ignore[union-attr]


def test_group_locks_in_name_order_and_releases_on_failure() -> None:
    sim = small()
    LeaseLock(sim, sim, "b-recipe", "other").acquire()
    g = LeaseGroup(sim, sim, ["c-recipe", "a-recipe", "b-recipe"], "run-me")
    with pytest.raises(LeaseHeldError, match="held by other"):
        g.acquire()
    assert set(sim.leases) == {lease_name("b-recipe")}  # a-recipe, taken first, was given back
    assert [lk.recipe for lk in g.locks] == ["a-recipe", "b-recipe", "c-recipe"]


# ------------------------------------------------------------------ with the rollout
def _rollout(cluster: Any, sim: SimFleet, group: LeaseGroup, run_id: str) -> Rollout:
    plan = compute_plan(RECIPE, POLICY, observe(sim))
    return Rollout(RECIPE, POLICY, plan, cluster, sim, run_id=run_id, on_tick=group.tick)


def test_rollout_renews_the_lease_all_along() -> None:
    sim = SimFleet(fleet(), CONFIG)
    recorded = FaultyCluster(sim)  # no faults: records the lease calls with their clock time
    g = LeaseGroup(recorded, sim, ["tune"], "run-a")
    g.acquire()
    r = _rollout(sim, sim, g, "run-a")
    res = r.run()
    g.release()
    renewals = [c.at for c in recorded.calls if c.verb == "replace_lease" and c.at is not None]
    assert res.result == "failed" and not r.stopped  # n5's failing stage, as in the reference
    gaps = [b - a for a, b in zip([0.0, *renewals], [*renewals, sim.now()], strict=True)]
    assert len(renewals) >= res.duration // 20 - 1 and max(gaps) <= 20.0 + 1e-6
    assert not sim.leases  # released at the end


def test_crashed_run_is_taken_over_and_resumed() -> None:
    """Run A holds the lease and is killed mid-rollout; run B is refused at once, then waits,
    takes the lease over once it has expired, resumes A's nodes and ends in the reference state."""
    reference = recorded_state(run_scenario().sim)
    sim = SimFleet(fleet(), CONFIG)
    ga = LeaseGroup(sim, sim, ["tune"], holder_identity("run-a", "host-a/1"))
    ga.acquire()
    crashing = FaultyCluster(sim, crash_after_writes=40)
    with pytest.raises(CrashInjected):
        _rollout(crashing, sim, ga, "run-a").run()
    assert sim.get_lease(NAME) is not None  # a killed process releases nothing
    gb = LeaseGroup(sim, sim, ["tune"], holder_identity("run-b", "host-b/2"))
    with pytest.raises(LeaseHeldError, match="run-a@"):
        gb.acquire()
    gb.acquire(wait_seconds=120)
    assert gb.took_over_from == {"tune": holder_identity("run-a", "host-a/1")}
    rb = _rollout(sim, sim, gb, "run-b")
    res = rb.run()
    gb.release()
    assert any(e.event == "resume" for e in res.timeline)
    assert recorded_state(sim) == reference


def test_lease_lost_mid_run_stops_cleanly_and_the_new_holder_finishes() -> None:
    reference = recorded_state(run_scenario().sim)
    sim = SimFleet(fleet(), CONFIG)
    ga = LeaseGroup(sim, sim, ["tune"], "run-a")
    ga.acquire()
    sim._at(300.0, lambda: sim.leases.update({NAME: replace(sim.leases[NAME], holder="run-b")}))
    ra = _rollout(sim, sim, ga, "run-a")
    res = ra.run()
    assert "taken over by run-b" in ra.stopped and res.result == "failed"
    running = [n.name for n in res.nodes if n.message == "still running when the run stopped"]
    assert running  # every node accounted for: the in-flight ones are named
    assert any(e.event == "stopped" for e in res.timeline)
    gb = LeaseGroup(sim, sim, ["tune"], "run-b")
    gb.acquire()
    _rollout(sim, sim, gb, "run-b").run()
    assert recorded_state(sim) == reference


def test_renewals_failing_for_the_lease_duration_stop_the_run() -> None:
    """An API outage longer than the lease: the run stops before another run could take over."""
    reference = recorded_state(run_scenario().sim)
    sim = SimFleet(fleet(), CONFIG)
    fc = FaultyCluster(sim, faults=[Fault("reset", verb="replace_lease", nth=3, times=None)])
    g = LeaseGroup(fc, sim, ["tune"], "run-a")
    g.acquire()
    r = _rollout(fc, sim, g, "run-a")
    res = r.run()
    assert "could not renew" in r.stopped and "stops writing" in r.stopped
    assert res.duration < 130
    g2 = LeaseGroup(sim, sim, ["tune"], "run-b")
    g2.acquire(wait_seconds=120)
    _rollout(sim, sim, g2, "run-b").run()
    assert recorded_state(sim) == reference


# ------------------------------------------------------------------ CLI
RECIPE_YAML = """\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: NodeRecipe
metadata: {name: kernel-fix}
spec:
  version: 2026.11.1
  nodeSelector: {matchLabels: {pool: gpu}}
  interruptionBudget: {count: 1}
  packages:
    base: {version: 1.0.0, image: ghcr.io/example/base, containerSHA: "sha256:%s"}
""" % ("b" * 64)


@pytest.fixture
def shared_sim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[SimFleet, Path, Path]:
    """A fleet file, a recipe file, and one SimFleet every CLI call in the test opens (as two
    processes on one cluster would share it)."""
    objs = [make_node(f"n{i}", {"pool": "gpu"}) for i in (1, 2)]
    fleet_file = tmp_path / "fleet.yaml"
    buf = io.StringIO()
    YAML(typ="safe", pure=True).dump({"apiVersion": "v1", "kind": "List", "items": objs}, buf)
    fleet_file.write_text(buf.getvalue())
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE_YAML)
    sim = SimFleet(objs)
    real_open = clusters.open_cluster

    def open_shared(args: Any) -> Any:
        opened = real_open(args)
        opened.cluster, opened.clock, opened.sim = ClusterPorts.of(sim), sim, sim
        opened.wall = sim.wall
        return opened

    monkeypatch.setattr(clusters, "open_cluster", open_shared)
    return sim, fleet_file, recipe


def test_cli_refuses_a_second_run_with_the_holder_and_exit_1(
        shared_sim: tuple[SimFleet, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    sim, fleet_file, recipe = shared_sim
    LeaseLock(sim, sim, "kernel-fix", "run-first@ci-runner-7/4242").acquire()
    writes = sim.writes
    rc = main(["apply", str(recipe), "--cluster", f"sim:{fleet_file}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1
    assert len(err) == 1 and "held by run-first@ci-runner-7/4242" in err[0] and err[0].startswith("error: lease ")
    assert sim.writes == writes  # nothing was changed


def test_cli_waits_for_the_lock_then_runs(shared_sim: tuple[SimFleet, Path, Path],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    sim, fleet_file, recipe = shared_sim
    LeaseLock(sim, sim, "kernel-fix", "run-dead@host/1").acquire()
    rc = main(["apply", str(recipe), "--cluster", f"sim:{fleet_file}", "--wait-for-lock", "90", "-o", "json"])
    assert rc == 0, capsys.readouterr().err
    assert sim.now() >= 60.0  # waited for the dead run's lease to expire
    assert not sim.leases  # released at the end
    assert sim.calls[:2] == [("create-lease", f"lease/{lease_name('kernel-fix')}"),  # the dead run
                             ("update-lease", f"lease/{lease_name('kernel-fix')}")]  # taken over

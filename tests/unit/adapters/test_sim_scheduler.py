"""The simulated fleet's controllers and scheduler: an evicted pod is replaced at once by a Pending,
unbound pod that the scheduler binds to the least-loaded schedulable node; the replacement
survives a save and resume (it used to exist only as an in-memory timer)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.adapters.sim import index as simindex
from reconciler.adapters.sim.config import SimConfig
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.testing.fleetgen import make_node, make_pdb, make_pod

CFG = SimConfig(rescheduleSeconds=5, podStartSeconds=5, maxTerminationSeconds=1)


def _fleet(cfg: SimConfig = CFG) -> SimFleet:
    objs = [make_node(f"n{i}", {"pool": "gpu"}) for i in (1, 2, 3)]
    objs += [make_pod("web", "web-a", "n1", labels={"app": "web"}, owner=("ReplicaSet", "web"))]
    objs += [make_pod("web", "web-b", "n2", labels={"app": "web"}, owner=("ReplicaSet", "web"))]
    objs += [make_pdb("web", "web", {"app": "web"}, max_unavailable=1)]
    return SimFleet(objs, cfg)


def _web(sim: SimFleet) -> dict[str, tuple[str, str, bool]]:
    return {p.name: (p.node_name, p.phase, p.ready) for p in sim.list_pods() if p.namespace == "web"}


def test_replacement_is_pending_then_bound_to_least_loaded_node() -> None:
    sim = _fleet()
    sim.patch_node("n1", unschedulable=True)
    sim.evict_pod("web", "web-a", "", grace_seconds=1)
    sim.advance(1.5)  # terminated and gone: the ReplicaSet's replacement exists at once, unbound
    pods = _web(sim)
    assert "web-a" not in pods and len(pods) == 2
    (new,) = [n for n in pods if n != "web-b"]
    assert pods[new] == ("", "Pending", False)
    assert sim.list_pdbs()[0].expected_pods == 2 and sim.list_pdbs()[0].disruptions_allowed == 0
    sim.advance(5)  # bound: n3 has no pod, n2 has web-b, n1 is cordoned
    assert _web(sim)[new] == ("n3", "Pending", False)
    sim.advance(5)
    assert _web(sim)[new] == ("n3", "Running", True)
    assert sim.list_pdbs()[0].disruptions_allowed == 1


def test_replacement_survives_save_and_resume(tmp_path: Path) -> None:
    sim = _fleet()
    sim.evict_pod("web", "web-a", "", grace_seconds=1)
    sim.advance(2)
    path = tmp_path / "mid.json"
    sim.save(str(path))
    again = SimFleet.from_file(str(path), CFG)
    pods = _web(again)
    assert len(pods) == 2 and [v for k, v in pods.items() if k != "web-b"] == [("", "Pending", False)]
    again.advance(20)
    assert sorted(v[1:] for v in _web(again).values()) == [("Running", True), ("Running", True)]
    assert again.list_pdbs()[0].expected_pods == 2


def test_unschedulable_replacement_waits_with_its_uid() -> None:
    sim = _fleet()
    for n in ("n1", "n2", "n3"):
        sim.patch_node(n, unschedulable=True)
    sim.evict_pod("web", "web-a", "", grace_seconds=1)
    sim.advance(10)
    (new,) = [p for p in sim.list_pods() if p.namespace == "web" and p.name != "web-b"]
    assert new.node_name == "" and new.phase == "Pending"
    sim.advance(60)
    same = sim.get_pod("web", new.name)
    assert same is not None and same.uid == new.uid and same.node_name == ""
    sim.patch_node("n2", unschedulable=False)
    sim.advance(40)
    bound = sim.get_pod("web", new.name)
    assert bound is not None and bound.uid == new.uid and bound.node_name == "n2" and bound.ready


def test_node_cache_is_bounded_and_answers_stay_current(monkeypatch: pytest.MonkeyPatch) -> None:
    """The parsed-node cache keeps at most NODE_CACHE_SIZE nodes (the oldest leave first); a node
    read again after it left is parsed afresh, and the scheduler still sees cordons made since."""
    monkeypatch.setattr(simindex, "NODE_CACHE_SIZE", 3)
    objs = [make_node(f"n{i}", {"pool": "gpu"}) for i in range(8)]
    objs += [make_pod("web", "web-a", "n0", labels={"app": "web"}, owner=("ReplicaSet", "web"))]
    sim = SimFleet(objs, CFG)
    index = sim._index
    seen = [index.node(f"n{i}") for i in range(8)]
    assert [n.name for n in seen] == [f"n{i}" for i in range(8)]
    assert len(index._node_cache) == 3 and set(index._node_cache) == {"n5", "n6", "n7"}
    for i in range(1, 8):
        sim.patch_node(f"n{i}", unschedulable=True)  # every node but n0 cordoned; n0 left the cache
    assert len(index._node_cache) <= 3
    assert [n.unschedulable for n in sim.list_nodes()] == [False] + [True] * 7
    sim.evict_pod("web", "web-a", "", grace_seconds=1)
    sim.advance(12)  # the replacement can only go to n0, read afresh
    assert {p.node_name for p in sim.list_pods() if p.namespace == "web"} == {"n0"}


def test_scheduler_heap_stays_bounded_under_many_node_writes() -> None:
    """Every node write supersedes the node's heap entry; thousands of writes between two picks
    leave the heap within twice the fleet (plus slack), and the scheduler's choice is unchanged."""
    sim = _fleet()
    index = sim._index
    for i in range(3000):
        sim.patch_node(f"n{1 + i % 3}", annotations={"k": str(i)})
    assert len(index._heap) <= 2 * 3 + 1024
    sim.patch_node("n1", unschedulable=True)
    sim.evict_pod("web", "web-a", "", grace_seconds=1)
    sim.advance(12)
    assert sorted(p.node_name for p in sim.list_pods() if p.namespace == "web") == ["n2", "n3"]


def test_a_saved_fleet_carries_the_budgets_current_status(tmp_path: Path) -> None:
    """The disruption controller never lags in the simulated fleet: a save writes each PDB's
    status as the pods it saves give it, not as it was last read."""
    sim = _fleet()
    sim.evict_pod("web", "web-a", "", grace_seconds=1)
    sim.advance(1.5)
    assert sim.list_pdbs()[0].current_healthy == 1  # read while the replacement is Pending
    sim.advance(20)  # bound, started, Ready
    path = tmp_path / "fleet.json"
    sim.save(str(path))
    (pdb,) = [o for o in json.loads(path.read_text())["items"] if o["kind"] == "PodDisruptionBudget"]
    assert pdb["status"]["currentHealthy"] == 2 and pdb["status"]["disruptionsAllowed"] == 1

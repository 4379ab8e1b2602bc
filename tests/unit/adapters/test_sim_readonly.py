"""A read-only simulated fleet (what ``plan`` opens): its pods by node are converted when a node's
are first read, which is exact only because such a fleet refuses every write; the view holds the
same keys and values as grouping every listed pod."""

from __future__ import annotations

import pytest

from reconciler.adapters.sim.fleet import SimFleet
from reconciler.adapters.sim.index import NodePods
from reconciler.model.observed import group_pods
from reconciler.observe.snapshot import observe
from reconciler.testing.fleetgen import make_node, make_pdb, make_pod


def _objects() -> list[dict[str, object]]:
    objs: list[dict[str, object]] = [make_node(f"n{i}", {"pool": "gpu"}) for i in (1, 2, 3)]
    objs += [make_pod("web", f"web-{c}", "n1", labels={"app": "web"}, owner=("ReplicaSet", "web")) for c in "cab"]
    objs += [make_pod("apps", "z", "n1"), make_pod("apps", "a", "n2")]
    objs += [make_pod("web", "unbound", "")]  # Pending, not scheduled: in no node's pods
    objs += [make_pod("web", "stray", "gone")]  # bound to a node the snapshot does not hold
    objs += [make_pdb("web", "web", {"app": "web"}, max_unavailable=1)]
    return objs


def test_view_equals_grouping_every_pod() -> None:
    writable, ro = SimFleet(_objects()), SimFleet(_objects(), read_only=True)
    view = ro.pods_by_node()
    assert isinstance(view, NodePods) and not isinstance(writable.pods_by_node(), NodePods)
    expected = group_pods(writable.list_pods())
    assert set(expected) == {"n1", "n2", "gone"}
    assert dict(view) == expected and len(view) == 3 and sorted(view) == sorted(expected)
    assert [p.name for p in view["n1"]] == ["z", "web-a", "web-b", "web-c"]  # apps/z before web/*
    assert view.get("n3") is None and "n3" not in view
    with pytest.raises(KeyError):
        view["n3"]
    assert observe(ro) == observe(writable)  # the whole observation, PDB status included


def test_a_node_s_pods_are_converted_when_first_read() -> None:
    ro = SimFleet(_objects(), read_only=True)
    fleet = observe(ro)
    assert not ro._index._pod_cache  # observing converted no pod
    first = fleet.pods_on("n2")
    assert [p.name for p in first] == ["a"] and set(ro._index._pod_cache) == {("apps", "a")}
    assert fleet.pods_on("n2") is first  # kept, not converted again


@pytest.mark.parametrize("write", [
    lambda s: s.patch_node("n1", unschedulable=True),
    lambda s: s.evict_pod("web", "web-a", "", grace_seconds=1),
    lambda s: s.emit_event("n1", "Cordoned", "x"),
])
def test_a_read_only_fleet_refuses_writes(write: object) -> None:
    ro = SimFleet(_objects(), read_only=True)
    with pytest.raises(RuntimeError, match="read-only simulated fleet"):
        write(ro)  # type: ignore[operator]
    assert ro.writes == 0 and not ro.calls

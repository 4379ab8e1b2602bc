"""What the watch streams hold (reconciler/adapters/kube/cache.py): never backwards, served only in
sync, a node's pods only once the pod stream reached the node's version, absent not gone, and
wake-ups only for changes a reader of a node of interest would see."""

from __future__ import annotations

import threading
import time
from typing import Any

from reconciler.adapters.kube.cache import NODES, PODS, WatchStore
from reconciler.testing.fleetgen import START, make_node, make_pod

NS = "node-reconciler"


def node(name: str, rv: int, *, heartbeat: float = START, unschedulable: bool = False) -> dict[str, Any]:
    obj = make_node(name, {"pool": "gpu"}, resource_version=str(rv), heartbeat=heartbeat, uid="u-" + name,
                    boot_id="b1", kubelet_labels=False)
    obj["spec"]["unschedulable"] = unschedulable
    return obj


def pod(name: str, rv: int, node_name: str, ns: str = "load", phase: str = "Running",
        labels: dict[str, str] | None = None) -> dict[str, Any]:
    return make_pod(ns, name, node_name, labels=labels, phase=phase, resource_version=str(rv))


def stage_pod(name: str, rv: int, node_name: str, phase: str = "Running") -> dict[str, Any]:
    return pod(name, rv, node_name, ns=NS, phase=phase, labels={"app.kubernetes.io/managed-by": "node-reconciler"})


def synced(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], version: int = 100) -> WatchStore:
    s = WatchStore(NS)
    s.replace(NODES, nodes, version)
    s.replace(PODS, pods, version)
    return s


def test_nothing_is_served_before_the_lists_nor_while_a_stream_is_broken() -> None:
    s = WatchStore(NS)
    assert s.node("n1") is None and s.nodes() is None and s.pods_by_node() is None
    assert s.pods_on("n1", wait=0) is None and s.stage_pod("p") == (False, None)
    s.replace(NODES, [node("n1", 5)], 10)
    s.replace(PODS, [pod("w", 6, "n1")], 10)
    assert s.node("n1") is not None and [p.name for p in s.pods_on("n1", wait=0) or ()] == ["w"]
    s.unsynced(PODS)
    assert s.pods_on("n1", wait=0) is None and s.pods_by_node() is None
    assert s.node("n1") is not None  # the other kind still is
    s.resynced(PODS)
    assert s.pods_by_node() == {"n1": tuple(s.pods_on("n1", wait=0) or ())}


def test_never_backwards_and_unknown_is_asked_not_absent() -> None:
    s = synced([node("n1", 50)], [])
    s.apply(NODES, "MODIFIED", node("n1", 60, unschedulable=True))
    assert s.put_node(node("n1", 55)).unschedulable is False  # an older answer is returned, not kept
    info = s.node("n1")
    assert info is not None and info.unschedulable and info.resource_version == "60"
    s.apply(NODES, "MODIFIED", node("n1", 58))  # an event older than what is held: ignored
    assert s.node("n1").unschedulable  # type: ignore[union-attr]
    assert s.node("n2") is None  # not held: the caller asks the API server
    s.apply(NODES, "DELETED", node("n1", 70))
    assert s.node("n1") is None and s.nodes() == []
    bad = node("n3", 1)
    bad["metadata"]["resourceVersion"] = "01"  # not comparable: never served
    s.apply(NODES, "ADDED", bad)
    assert s.node("n3") is None


def test_a_nodes_pods_wait_for_the_pod_stream_to_reach_the_nodes_version() -> None:
    """A pod bound before our cordon (version 200) is certainly held once the pod stream passed 200."""
    s = synced([node("n1", 100)], [pod("w1", 90, "n1")], version=100)
    s.put_node(node("n1", 200, unschedulable=True), written=True)  # our cordon's answer
    assert s.pods_on("n1", wait=0) is None  # the pod stream is at 100: cannot say yet

    def later() -> None:
        time.sleep(0.05)
        s.apply(PODS, "ADDED", pod("w2", 150, "n1"))  # bound before the cordon
        s.apply(PODS, "MODIFIED", pod("other", 201, "n9"))  # the stream passes 200

    t = threading.Thread(target=later)
    t.start()
    got = s.pods_on("n1", wait=2.0)
    t.join()
    assert got is not None and [p.name for p in got] == ["w1", "w2"]
    s.apply(NODES, "MODIFIED", node("n2", 500))  # a node we never wrote: its pods at once
    assert s.pods_on("n2", wait=0) == []
    s.apply(PODS, "DELETED", pod("w1", 210, "n1"))
    assert [p.name for p in s.pods_on("n1", wait=0) or ()] == ["w2"]


def test_a_pod_moving_between_nodes_is_listed_on_its_new_node_only() -> None:
    s = synced([node("a", 1), node("b", 1)], [pod("w", 5, "a")])
    s.apply(PODS, "MODIFIED", pod("w", 6, "b"))
    assert s.pods_on("a", wait=0) == [] and [p.name for p in s.pods_on("b", wait=0) or ()] == ["w"]


def test_stage_pods_are_held_raw_and_known_gone_after_their_deletion() -> None:
    s = synced([node("n1", 1)], [stage_pod("st", 5, "n1")])
    hit, raw = s.stage_pod("st")
    assert hit and raw is not None and raw["metadata"]["name"] == "st"
    assert s.stage_pod("never-seen") == (False, None)  # created an instant ago, maybe: ask
    s.apply(PODS, "DELETED", stage_pod("st", 9, "n1"))
    assert s.stage_pod("st") == (True, None)
    s.put_pod(stage_pod("st", 8, "n1"))  # an answer older than the deletion: not brought back
    assert s.stage_pod("st") == (True, None)
    s.put_pod(stage_pod("st", 12, "n1", phase="Pending"))  # created again
    assert s.stage_pod("st")[1] is not None


def test_wakes_only_nodes_of_interest_and_only_for_what_a_reader_sees() -> None:
    s = synced([node("n1", 10), node("n2", 10)], [pod("w", 11, "n1")])
    assert s.apply(NODES, "MODIFIED", node("n1", 12, unschedulable=True)) == set()  # no interest yet
    s.interest("n1")
    assert s.apply(NODES, "MODIFIED", node("n1", 13, unschedulable=True, heartbeat=START + 60)) == set()  # heartbeat
    assert s.apply(NODES, "MODIFIED", node("n1", 14)) == {"n1"}
    assert s.apply(PODS, "DELETED", pod("w", 15, "n1")) == {"n1"}  # a workload pod leaving a draining node
    assert s.apply(PODS, "ADDED", pod("x", 16, "n2")) == set()
    s.put_node(node("n1", 20, unschedulable=True), written=True)  # our write's answer
    assert s.apply(NODES, "MODIFIED", node("n1", 20, unschedulable=True)) == set()  # its echo
    s.forget_node("n1")
    assert s.apply(NODES, "MODIFIED", node("n1", 21)) == set()


def test_an_object_that_cannot_be_converted_is_dropped_not_fatal() -> None:
    s = synced([node("n1", 10)], [])
    assert s.apply(NODES, "MODIFIED", {**node("n1", 11), "spec": {"taints": [{"effect": "NoSchedule"}]}}) == set()
    assert s.node("n1") is None  # never served: its reads are requests
    s.apply(NODES, "MODIFIED", node("n1", 12))
    assert s.node("n1") is not None

"""The watch-fed read cache: never backwards, tracked keys only, only while the watch streams."""

from __future__ import annotations

import threading
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from reconciler.adapters.kube.cache import NODES, PODS, WatchCache, parse_resource_version
from reconciler.testing import builders
from reconciler.testing.fleetgen import make_node, make_pod


def node(name: str, rv: str, **ann: str) -> dict[str, Any]:
    return make_node(name, {}, resource_version=rv, annotations=ann)


def pod(name: str, rv: str, phase: str = "Running", ns: str = "ns", node: str = "") -> dict[str, Any]:
    return make_pod(ns, name, node, phase=phase, resource_version=rv)


def synced_cache(**kw: Any) -> WatchCache:
    c = WatchCache(**kw)
    c.set_synced(NODES, True)
    c.set_synced(PODS, True)
    return c


def test_resource_versions_compare_as_kep_5504_integers() -> None:
    assert parse_resource_version("12345") == 12345
    assert parse_resource_version("9") < parse_resource_version("10")  # type: ignore[operator]
    for bad in ("", "0", "012", "12a", "abc", None, 12):
        assert parse_resource_version(bad) is None


def test_untracked_objects_are_not_kept() -> None:
    c = synced_cache()
    c.observe(NODES, "ADDED", node("n1", "5"))
    assert c.lookup(NODES, "n1") == (False, None)
    assert len(c) == 0


def test_tracked_node_follows_events_and_answers_without_going_backwards() -> None:
    c = synced_cache()
    c.track(NODES, "n1")
    assert c.lookup(NODES, "n1") == (False, None)  # tracked, nothing known yet: ask the server
    c.store(NODES, node("n1", "10", a="get"))
    assert c.lookup(NODES, "n1")[1]["metadata"]["annotations"] == {"a": "get"}
    c.observe(NODES, "MODIFIED", node("n1", "12", a="event"))
    assert c.lookup(NODES, "n1")[1]["metadata"]["resourceVersion"] == "12"
    # an older answer (a slow GET, a lagging event) never replaces a newer one
    c.store(NODES, node("n1", "11", a="stale"))
    c.observe(NODES, "MODIFIED", node("n1", "9", a="older"))
    assert c.lookup(NODES, "n1")[1]["metadata"]["annotations"] == {"a": "event"}


def test_event_arriving_while_a_request_is_in_flight_wins_when_newer() -> None:
    c = synced_cache()
    c.track(NODES, "n1")  # before the GET is sent
    c.observe(NODES, "MODIFIED", node("n1", "21", a="event"))  # processed while the GET is in flight
    c.store(NODES, node("n1", "20", a="get"))  # the GET's answer is older
    assert c.lookup(NODES, "n1")[1]["metadata"]["annotations"] == {"a": "event"}


def test_deleted_object_answers_gone_until_recreated() -> None:
    c = synced_cache()
    c.track(PODS, ("ns", "stage-1"))
    c.store(PODS, pod("stage-1", "30"))
    c.observe(PODS, "DELETED", pod("stage-1", "31"))
    assert c.lookup(PODS, ("ns", "stage-1")) == (True, None)
    c.observe(PODS, "ADDED", pod("stage-1", "40", "Pending"))
    assert c.lookup(PODS, ("ns", "stage-1"))[1]["status"]["phase"] == "Pending"


def test_pods_are_keyed_by_namespace_and_name() -> None:
    c = synced_cache()
    c.track(PODS, ("ns", "p"))
    c.observe(PODS, "ADDED", pod("p", "5", ns="other"))
    assert c.lookup(PODS, ("ns", "p")) == (False, None)


def test_no_answers_while_the_watch_is_not_streaming_and_a_break_forgets_everything() -> None:
    c = WatchCache()
    c.track(NODES, "n1")
    c.store(NODES, node("n1", "5"))
    assert c.lookup(NODES, "n1") == (False, None)  # watch not started: events may be missing
    c.set_synced(NODES, True)
    assert c.lookup(NODES, "n1")[0] is True
    c.set_synced(NODES, False)  # stream broken: events may be lost
    c.set_synced(NODES, True)
    assert c.lookup(NODES, "n1") == (False, None)
    # an answer for a key forgotten while its request was in flight is dropped, not resurrected
    c.store(NODES, node("n1", "6"))
    assert c.lookup(NODES, "n1") == (False, None)


def test_incomparable_resource_version_is_never_served() -> None:
    c = synced_cache()
    c.track(NODES, "n1")
    c.store(NODES, node("n1", "opaque-token"))
    assert c.lookup(NODES, "n1") == (False, None)


def test_convert_is_applied_and_size_is_bounded() -> None:
    c = synced_cache(convert={NODES: lambda o: o["metadata"]["name"].upper()}, max_entries=3)
    for i in range(5):
        c.track(NODES, f"n{i}")
        c.store(NODES, node(f"n{i}", str(i + 1)))
    assert len(c) == 3
    assert c.lookup(NODES, "n0") == (False, None)  # least recently used: forgotten
    assert c.lookup(NODES, "n4") == (True, "N4")


@given(st.lists(st.tuples(st.integers(1, 50), st.booleans()), min_size=1, max_size=40))
def test_the_cache_holds_the_newest_of_whatever_arrived_in_any_order(arrivals: list[tuple[int, bool]]) -> None:
    c = synced_cache()
    c.track(NODES, "n")
    for rv, is_event in arrivals:
        obj = node("n", str(rv), v=str(rv))
        if is_event:
            c.observe(NODES, "MODIFIED", obj)
        else:
            c.store(NODES, obj)
    assert c.lookup(NODES, "n")[1]["metadata"]["resourceVersion"] == str(max(rv for rv, _ in arrivals))


def test_concurrent_writers_leave_the_newest() -> None:
    c = synced_cache()
    c.track(NODES, "n")

    def feed(start: int) -> None:
        for rv in range(start, 2000, 4):
            c.observe(NODES, "MODIFIED", node("n", str(rv)))

    threads = [threading.Thread(target=feed, args=(s,)) for s in (1, 2, 3, 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert c.lookup(NODES, "n")[1]["metadata"]["resourceVersion"] == "1999"


def test_observe_reports_a_change_only_when_a_reader_would_see_one() -> None:
    c = synced_cache()
    c.track(PODS, ("ns", "s"))
    assert c.observe(PODS, "ADDED", pod("s", "5", "Pending")) is True  # first knowledge of a tracked pod
    assert c.observe(PODS, "MODIFIED", pod("s", "5", "Pending")) is False  # no newer
    assert c.observe(PODS, "MODIFIED", pod("s", "6", "Pending")) is False  # only the resourceVersion moved
    assert c.observe(PODS, "MODIFIED", pod("s", "7", "Running")) is True
    assert c.observe(PODS, "DELETED", pod("s", "8", "Running")) is True
    assert c.observe(PODS, "ADDED", pod("other", "9")) is False  # not tracked


def test_same_but_version_ignores_only_the_version_and_managed_fields() -> None:
    from reconciler.adapters.kube.cache import same_but_version

    a = {"metadata": {"name": "p", "resourceVersion": "1", "managedFields": [{"time": "t1"}]}, "status": {"x": 1}}
    b = {"metadata": {"name": "p", "resourceVersion": "2", "managedFields": [{"time": "t2"}]}, "status": {"x": 1}}
    assert same_but_version(a, b)
    assert not same_but_version(a, {**b, "status": {"x": 2}})
    assert not same_but_version(a, {**b, "metadata": {**b["metadata"], "labels": {"k": "v"}}})
    assert same_but_version(builders.node("n", resource_version="1"), builders.node("n", resource_version="2"))
    assert not same_but_version(builders.node("n", unschedulable=True), builders.node("n"))
    assert not same_but_version("a", "b")


def test_an_event_no_newer_than_the_entry_is_not_converted() -> None:
    """The echo of our own write (its answer stored first) is dropped before conversion."""
    converted: list[str] = []

    def convert(obj: dict[str, Any]) -> str:
        converted.append(obj["metadata"]["resourceVersion"])
        return str(obj["metadata"]["resourceVersion"])

    c = synced_cache(convert={NODES: convert})
    c.track(NODES, "n1")
    assert c.store(NODES, node("n1", "10")) == "10"
    assert c.observe(NODES, "MODIFIED", node("n1", "10")) is False  # the echo
    assert c.observe(NODES, "MODIFIED", node("n1", "9")) is False  # older
    assert converted == ["10"]
    assert c.observe(NODES, "MODIFIED", node("n1", "11", a="x")) is True
    assert converted == ["10", "11"]


def test_forget_node_drops_the_node_and_the_pods_bound_to_it() -> None:
    c = synced_cache()
    bound = pod("stage-a", "5", node="n1")
    other = pod("stage-b", "6", node="n2")
    for k in ("n1", "n2"):
        c.track(NODES, k)
        c.store(NODES, node(k, "3"))
    c.track(PODS, ("ns", "stage-a"))
    c.store(PODS, bound)
    c.track(PODS, ("ns", "stage-b"))
    c.store(PODS, other)
    c.track(PODS, ("ns", "unknown-yet"))  # tracked before its answer: bound to no known node, kept
    c.forget_node("n1")
    assert c.lookup(NODES, "n1") == (False, None)
    assert c.lookup(PODS, ("ns", "stage-a")) == (False, None)
    assert c.lookup(NODES, "n2")[0] and c.lookup(PODS, ("ns", "stage-b"))[0]
    assert not c.tracks_any(NODES, ["n1"]) and not c.tracks_any(PODS, [("ns", "stage-a")])
    assert c.tracks_any(PODS, [("ns", "unknown-yet")])
    # events of the forgotten node are not kept (and so not decoded by the watch's byte scan)
    assert c.observe(NODES, "MODIFIED", node("n1", "9")) is False
    assert c.lookup(NODES, "n1") == (False, None)

"""The watch clock's economy: events of untracked objects skipped undecoded, wakes only for changes
a reader of the cache would see, a resume point never ahead of the stream, a hostile event that
cannot kill the watch thread."""

from __future__ import annotations

import re
import threading
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.adapters.kube import watch as kubewatch
from reconciler.adapters.kube.cache import NODES, PODS, WatchCache
from reconciler.adapters.kube.objects import node_from
from reconciler.adapters.kube.watch import WatchClock, _lines, concerns_tracked, resume_version, scan, wakes_only
from reconciler.testing.fleetgen import START, make_node, make_pod


def node(name: str, rv: str, *, labels: dict[str, str] | None = None, heartbeat: float = START,
         taints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return make_node(name, labels or {}, resource_version=rv, heartbeat=heartbeat, taints=taints, uid="u-" + name,
                     boot_id="b1", kubelet_labels=False)


def pod(name: str, rv: str, node_name: str, ns: str = "load", phase: str = "Running",
        labels: dict[str, str] | None = None) -> dict[str, Any]:
    return make_pod(ns, name, node_name, labels=labels, phase=phase, resource_version=rv)


def line(obj: dict[str, Any], event: str = "MODIFIED") -> bytes:
    """An event as the API server writes it: compact JSON, type first."""
    return orjson.dumps({"type": event, "object": obj})


def cache_tracking(nodes: tuple[str, ...] = (), pods: tuple[tuple[str, str], ...] = ()) -> WatchCache:
    c = WatchCache({NODES: node_from})
    c.set_synced(NODES, True)
    c.set_synced(PODS, True)
    for n in nodes:
        c.track(NODES, n)
    for p in pods:
        c.track(PODS, p)
    return c


# ------------------------------------------------------------------ skipping undecoded


def test_events_of_untracked_nodes_and_their_pods_are_skippable() -> None:
    c = cache_tracking(nodes=("n1",), pods=(("reconciler", "stage-1"),))
    assert concerns_tracked("nodes", line(node("n1", "5")), c)
    assert not concerns_tracked("nodes", line(node("n2", "5")), c)
    assert concerns_tracked("pods", line(pod("w1", "5", "n1")), c)  # a workload pod of a tracked node
    assert not concerns_tracked("pods", line(pod("w2", "5", "n2")), c)
    # a tracked stage pod is decoded even when its node is not tracked (any more)
    assert concerns_tracked("pods", line(pod("stage-1", "5", "n9", ns="reconciler")), c)
    assert not concerns_tracked("pods", line(pod("stage-1", "5", "n9", ns="other")), c)


def test_lines_that_are_not_plain_object_events_are_always_decoded() -> None:
    c = cache_tracking()
    assert concerns_tracked("nodes", b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}', c)
    assert concerns_tracked("nodes", b'{"type":"ERROR","object":{"code":410}}', c)
    assert concerns_tracked("nodes", b'{"object": {"metadata": {"name": "n2"}}, "type": "MODIFIED"}', c)


def test_labels_named_like_the_key_fields_do_not_hide_the_real_ones() -> None:
    c = cache_tracking(nodes=("n1",))
    hostile = {"name": "n2", "nodeName": "n2", "namespace": "x", "a": 'say "name":"n3"'}
    assert concerns_tracked("nodes", line(node("n1", "5", labels=hostile)), c)
    assert concerns_tracked("pods", line(pod("p", "5", "n1", labels=hostile)), c)


_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_names = st.sampled_from(["n1", "n2", "n3", "stage-1", "name", "nodeName"])


@settings(max_examples=300, deadline=None)
@given(labels=st.dictionaries(st.one_of(st.sampled_from(["name", "nodeName", "namespace", "resourceVersion"]), _text),
                              st.one_of(_names, _text), max_size=6),
       name=_names, node_name=_names, ns=st.sampled_from(["load", "reconciler"]),
       tracked_nodes=st.sets(_names, max_size=3), tracked_pods=st.sets(st.tuples(st.just("reconciler"), _names),
                                                                       max_size=2))
def test_an_event_of_a_tracked_object_is_never_skipped(labels: dict[str, str], name: str, node_name: str, ns: str,
                                                       tracked_nodes: set[str],
                                                       tracked_pods: set[tuple[str, str]]) -> None:
    c = cache_tracking(tuple(tracked_nodes), tuple(tracked_pods))
    if not concerns_tracked("nodes", line(node(name, "7", labels=labels)), c):
        assert name not in tracked_nodes
    if not concerns_tracked("pods", line(pod(name, "7", node_name, ns=ns, labels=labels)), c):
        assert node_name not in tracked_nodes and (ns, name) not in tracked_pods


def _per_key(key: str, line: bytes) -> list[str]:
    """What a scan of ``line`` for ``"<key>":"…"`` alone finds (the triage's former one pattern per key)."""
    return [m.decode("utf-8", "replace") for m in re.findall(rb'"' + key.encode() + rb'":"([^"\\]*)"', line)]


@settings(max_examples=300, deadline=None)
@given(labels=st.dictionaries(st.one_of(st.sampled_from(["name", "nodeName", "namespace", "resourceVersion"]), _text),
                              st.one_of(_names, _text, st.integers(0, 10**6).map(str)), max_size=6),
       name=_names, node_name=_names, ns=st.sampled_from(["load", "reconciler"]), rv=st.integers(1, 10**9))
def test_the_single_scan_finds_what_one_scan_per_key_found(labels: dict[str, str], name: str, node_name: str,
                                                           ns: str, rv: int) -> None:
    for raw in (line(node(name, str(rv), labels=labels)), line(pod(name, str(rv), node_name, ns=ns, labels=labels))):
        f = scan(raw)
        assert f is not None
        assert f.names == _per_key("name", raw)
        assert f.node_names == _per_key("nodeName", raw)
        assert f.namespaces == _per_key("namespace", raw)
        assert f.versions == [int(m) for m in re.findall(rb'"resourceVersion":"([1-9][0-9]*)"', raw)]
    assert scan(b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}') is None


@settings(max_examples=300, deadline=None)
@given(true_rv=st.integers(1, 10**12), current=st.integers(1, 10**12),
       labels=st.dictionaries(st.sampled_from(["resourceVersion", "a", "b"]),
                              st.one_of(st.integers(0, 10**13).map(str), _text), max_size=3))
def test_the_resume_point_after_a_skipped_event_is_never_ahead_of_the_stream(true_rv: int, current: int,
                                                                             labels: dict[str, str]) -> None:
    current = min(current, true_rv)  # the stream's earlier events are older
    got = resume_version(str(current), line(node("n2", str(true_rv), labels=labels)))
    assert current <= int(got) <= true_rv


def test_resume_point_is_kept_when_the_line_or_the_current_version_gives_nothing() -> None:
    assert resume_version("10", b'{"type":"MODIFIED","object":{}}') == "10"
    assert resume_version("opaque", line(node("n", "12"))) == "opaque"
    assert resume_version("10", line(node("n", "12"))) == "12"


# ------------------------------------------------------------------ what wakes the rollout


def clock_with(cache: WatchCache | None) -> WatchClock:
    return WatchClock(None, cache=cache)  # type: ignore[arg-type]  # no watch is started here


def test_the_echo_of_our_own_write_and_a_heartbeat_do_not_wake_but_a_change_does() -> None:
    c = cache_tracking(nodes=("n1",))
    clock = clock_with(c)
    c.store(NODES, node("n1", "10"))  # our PATCH's answer
    assert clock._woken("nodes", "MODIFIED", node("n1", "10")) is None  # its echo
    assert clock._woken("nodes", "MODIFIED", node("n1", "11", heartbeat=START + 40)) is None
    assert c.lookup(NODES, "n1")[1].resource_version == "11"  # kept current all the same
    cordon = [{"key": "k", "value": "", "effect": "NoSchedule"}]
    assert clock._woken("nodes", "MODIFIED", node("n1", "12", taints=cordon)) == "n1"
    assert clock._woken("nodes", "DELETED", node("n1", "13", taints=cordon)) == "n1"
    assert clock._woken("nodes", "MODIFIED", node("n2", "14")) is None  # not tracked: not the run's


def test_pods_wake_their_tracked_node_stage_pods_only_on_change() -> None:
    c = cache_tracking(nodes=("n1",), pods=(("reconciler", "stage-1"),))
    clock = clock_with(c)
    assert clock._woken("pods", "DELETED", pod("w1", "20", "n1")) == "n1"  # a drained pod leaves
    assert clock._woken("pods", "MODIFIED", pod("w2", "21", "n2")) is None
    c.store(PODS, pod("stage-1", "22", "n1", ns="reconciler", phase="Pending"))  # our POST's answer
    assert clock._woken("pods", "ADDED", pod("stage-1", "22", "n1", ns="reconciler", phase="Pending")) is None
    assert clock._woken("pods", "MODIFIED", pod("stage-1", "23", "n1", ns="reconciler")) == "n1"


def test_without_a_cache_every_node_is_reported() -> None:
    clock = clock_with(None)
    assert clock._woken("nodes", "MODIFIED", node("n7", "1")) == "n7"
    assert clock._woken("pods", "MODIFIED", pod("p", "1", "n8")) == "n8"
    assert clock._woken("pods", "MODIFIED", {"metadata": {"name": "p"}}) is None


def test_marking_nobody_does_not_end_a_wait_early() -> None:
    clock = clock_with(cache_tracking())
    clock._threads.append(threading.Thread())  # pretend the watches run
    clock._healthy = {"nodes": True, "pods": True}
    clock._mark(None)
    assert not clock._event.is_set()
    clock._mark("n1")
    assert clock.wait(5) == {"n1"}
    assert clock.events_seen == 2


# ------------------------------------------------------------------ the stream


class FakeStream:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.released = False

    def stream(self, amt: int, decode_content: bool = True) -> Any:
        yield from self.chunks

    def release_conn(self) -> None:
        self.released = True


def test_lines_are_split_across_chunk_boundaries() -> None:
    resp = FakeStream([b'{"a":', b'1}\n{"b":2}\n\n{"c"', b':3}\n', b'{"d":4}'])
    assert list(_lines(resp)) == [b'{"a":1}', b'{"b":2}', b'{"c":3}']


def test_the_loop_skips_untracked_decodes_tracked_and_survives_a_hostile_object() -> None:
    c = cache_tracking(nodes=("n1",))
    clock = clock_with(c)
    calls: list[dict[str, Any]] = []
    streams = [
        FakeStream([line(node("n2", "101")) + b"\n", line(node("n1", "102")) + b"\n",
                    # a tracked node whose taint has no key: node_from cannot convert it
                    line({**node("n1", "103"), "spec": {"taints": [{"effect": "NoSchedule"}]}}) + b"\n",
                    line(node("n1", "104")) + b"\n"]),
        FakeStream([line(node("n2", "105")) + b"\n"]),
    ]

    class Listing:
        data = b'{"metadata":{"resourceVersion":"100"}}'

        def release_conn(self) -> None:
            pass

    def lister(**kw: Any) -> Any:
        calls.append(kw)
        if not kw.get("watch"):
            return Listing()
        if not streams:
            clock._stop.set()
            return FakeStream([])
        return streams.pop(0)

    clock._stop.wait = lambda timeout=None: clock._stop.is_set()  # type: ignore[method-assign]  # no backoff sleep
    clock._loop("nodes", lister)
    watches = [kw["resource_version"] for kw in calls if kw.get("watch")]
    assert watches[0] == "100"
    assert watches[1] == "103"  # re-opened after the event it could not use, not before it
    assert clock.events_skipped == 2  # n2, twice; never decoded
    assert clock.events_seen == 1  # n1 at 102 (ADDED knowledge of a tracked node: a change)
    assert c.lookup(NODES, "n1") == (False, None)  # forgotten when the stream broke: ask the server


def test_workload_pods_of_tracked_nodes_wake_them_without_being_decoded() -> None:
    c = cache_tracking(nodes=("n1", "n2"), pods=(("reconciler", "stage-1"),))
    assert wakes_only(line(pod("w1", "5", "n1")), c) == {"n1"}
    assert wakes_only(line(pod("w1", "5", "n1"), "DELETED"), c) == {"n1"}  # gone: the drain looks again
    assert wakes_only(line(pod("stage-1", "5", "n1", ns="reconciler")), c) == set()  # tracked: decoded
    assert wakes_only(line(pod("w3", "5", "n9")), c) == set()  # not a tracked node's
    assert wakes_only(b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}', c) == set()
    # a label named like the field only adds a candidate (a spurious look), never hides the node
    assert wakes_only(line(pod("w4", "5", "n1", labels={"nodeName": "n2"})), c) == {"n1", "n2"}


@settings(max_examples=300, deadline=None)
@given(labels=st.dictionaries(st.one_of(st.sampled_from(["name", "nodeName", "namespace"]), _text),
                              st.one_of(_names, _text), max_size=6),
       name=_names, node_name=_names, ns=st.sampled_from(["load", "reconciler"]),
       tracked_nodes=st.sets(_names, max_size=3), tracked_pods=st.sets(st.tuples(st.just("reconciler"), _names),
                                                                       max_size=2))
def test_a_pod_event_is_decoded_or_wakes_its_tracked_node(labels: dict[str, str], name: str, node_name: str, ns: str,
                                                          tracked_nodes: set[str],
                                                          tracked_pods: set[tuple[str, str]]) -> None:
    """Whenever an event may concern a tracked pod it is decoded; otherwise, if its node is
    tracked, that node is among the woken ones."""
    c = cache_tracking(tuple(tracked_nodes), tuple(tracked_pods))
    ev = line(pod(name, "7", node_name, ns=ns, labels=labels))
    woken = wakes_only(ev, c)
    if (ns, name) in tracked_pods:
        assert woken == set()
    elif woken:
        assert woken <= tracked_nodes
        assert node_name not in tracked_nodes or node_name in woken


def test_the_loop_wakes_the_node_of_a_workload_pod_undecoded(monkeypatch: pytest.MonkeyPatch) -> None:
    scanned: list[bytes] = []
    real_scan = kubewatch.scan

    def counting(raw: bytes) -> Any:
        scanned.append(raw)
        return real_scan(raw)

    monkeypatch.setattr(kubewatch, "scan", counting)
    c = cache_tracking(nodes=("n1",))
    clock = clock_with(c)
    streams = [FakeStream([line(pod("w1", "201", "n1")) + b"\n", line(pod("w2", "202", "n2")) + b"\n"])]

    class Listing:
        data = b'{"metadata":{"resourceVersion":"200"}}'

        def release_conn(self) -> None:
            pass

    def lister(**kw: Any) -> Any:
        if not kw.get("watch"):
            return Listing()
        if not streams:
            clock._stop.set()
            return FakeStream([])
        return streams.pop(0)

    clock._stop.wait = lambda timeout=None: clock._stop.is_set()  # type: ignore[method-assign]
    clock._loop("pods", lister)
    assert clock.events_seen == 0 and clock.events_skipped == 2
    assert clock._changed == {"n1"}
    assert len(scanned) == 2  # each line scanned once: triage, wake-up and resume point share it

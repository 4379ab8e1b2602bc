"""The watch streams (reconciler/adapters/kube/watch.py) against a fake API server: the client's
``Watch`` after a LIST, the store fed, a wait woken by a change of a node of interest, a stream
re-opened from its last version after the server ends it, re-listed after 410 Gone, an unusable
event not fatal, and ``close`` ending the threads at once from any thread."""

from __future__ import annotations

import json
import queue
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pytest
from kubernetes import client

from reconciler.adapters.kube.api import KubeApi
from reconciler.adapters.kube.cache import WatchStore
from reconciler.adapters.kube.watch import KubeWatch
from tests.httpfake import QuietHandler
from tests.unit.adapters.test_watchstore import node, pod


class _Api(QuietHandler):
    protocol_version = "HTTP/1.1"
    lists: ClassVar[dict[str, list[dict[str, Any]]]] = {}
    version: ClassVar[int] = 100
    events: ClassVar[dict[str, queue.Queue[bytes | None]]] = {}
    watches: ClassVar[list[tuple[str, str]]] = []  # (kind, resourceVersion) of each WATCH
    list_count: ClassVar[dict[str, int]] = {}
    answer_after: ClassVar[float] = 0.0  # seconds before a WATCH is answered

    def do_GET(self) -> None:
        url = urllib.parse.urlparse(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        kind = url.path.rsplit("/", 1)[-1]
        if q.get("watch") != "true":
            _Api.list_count[kind] = _Api.list_count.get(kind, 0) + 1
            self.send_json(200, {"kind": "List", "metadata": {"resourceVersion": str(_Api.version)},
                                 "items": _Api.lists.get(kind, [])})
            return
        _Api.watches.append((kind, q.get("resourceVersion", "")))
        time.sleep(_Api.answer_after)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        feed = _Api.events.setdefault(kind, queue.Queue())
        while True:
            try:
                line = feed.get(timeout=5)
            except queue.Empty:
                line = None
            if line is None:  # the server ends the watch (its timeoutSeconds)
                self.wfile.write(b"0\r\n\r\n")
                return
            self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
            self.wfile.flush()


def event(kind: str, type_: str, obj: dict[str, Any]) -> None:
    _Api.events.setdefault(kind, queue.Queue()).put(json.dumps({"type": type_, "object": obj}).encode() + b"\n")


def until(check: Callable[[], bool], seconds: float = 5.0) -> None:
    end = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


@pytest.fixture
def clock(http_server: Callable[[type[_Api]], str]) -> Iterator[KubeWatch]:
    _Api.lists = {"nodes": [node("n1", 90), node("n2", 90)], "pods": [pod("w", 91, "n1")]}
    _Api.version, _Api.events, _Api.watches, _Api.list_count, _Api.answer_after = 100, {}, [], {}, 0.0
    cfg = client.Configuration()
    cfg.host = http_server(_Api)
    api = client.ApiClient(cfg)
    c = KubeWatch(KubeApi(api), WatchStore("node-reconciler"), max_sleep=5)
    c._stop.wait = lambda timeout=None: c._stop.is_set()  # type: ignore[method-assign]  # no backoff sleep
    try:
        yield c
    finally:
        c.close()
        for q in _Api.events.values():
            q.put(None)
        api.close()


def test_streams_fill_the_store_and_wake_a_wait_for_nodes_of_interest(clock: KubeWatch) -> None:
    clock.start()
    until(lambda: len(_Api.watches) == 2)
    assert sorted(_Api.watches) == [("nodes", "100"), ("pods", "100")]
    assert [p.name for p in clock.store.pods_on("n1", wait=0) or ()] == ["w"]
    clock.store.interest("n1")
    event("nodes", "MODIFIED", node("n2", 101, unschedulable=True))  # not of interest
    event("pods", "DELETED", pod("w", 102, "n1"))
    t0 = time.monotonic()
    changed = clock.changed(3.0)
    assert changed == {"n1"} and time.monotonic() - t0 < 2.0
    assert clock.store.pods_on("n1", wait=0) == []
    until(lambda: (clock.store.node("n2") or node_default()).unschedulable)


def test_a_stream_is_reopened_from_its_last_version_and_relisted_after_410(clock: KubeWatch) -> None:
    clock.start()
    until(lambda: len(_Api.watches) == 2)
    event("nodes", "MODIFIED", node("n1", 105))
    _Api.events["nodes"].put(None)  # the server ends the watch
    until(lambda: ("nodes", "105") in _Api.watches)
    assert _Api.list_count["nodes"] == 1
    _Api.version = 300
    _Api.lists["nodes"] = [node("n3", 299)]
    gone = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"}
    _Api.events["nodes"].put(json.dumps({"type": "ERROR", "object": gone}).encode() + b"\n")
    until(lambda: ("nodes", "300") in _Api.watches)
    assert _Api.list_count["nodes"] == 2
    assert clock.store.node("n1") is None and clock.store.node("n3") is not None  # replaced by the new list


def test_an_unusable_object_is_not_served_and_the_stream_goes_on(clock: KubeWatch) -> None:
    clock.start()
    until(lambda: len(_Api.watches) == 2)
    hostile = {**node("n1", 103), "spec": {"taints": [{"effect": "NoSchedule"}]}}  # a taint without a key
    event("nodes", "MODIFIED", hostile)
    until(lambda: clock.store.node("n1") is None)  # dropped: its reads are requests
    _Api.events["nodes"].put(b"not json\n")  # the client's watch skips a line it cannot decode
    event("nodes", "MODIFIED", node("n1", 110, unschedulable=True))
    until(lambda: (clock.store.node("n1") or node_default()).unschedulable)
    assert [w for w in _Api.watches if w[0] == "nodes"] == [("nodes", "100")]  # one stream throughout


def node_default() -> Any:
    from reconciler.adapters.kube.objects import node_from

    return node_from(node("x", 1))


def test_close_ends_the_streams_at_once_from_another_thread(clock: KubeWatch) -> None:
    clock.start()
    until(lambda: len(_Api.watches) == 2)
    closer = threading.Thread(target=clock.close)
    t0 = time.monotonic()
    closer.start()
    closer.join()
    until(lambda: not any(t.is_alive() for t in clock._threads), seconds=3.0)
    assert time.monotonic() - t0 < 3.0
    assert clock.store.node("n1") is None  # nothing served after close: every read is a request
    assert clock.changed(0.01) is None


def test_close_while_a_watch_is_on_its_way_ends_it_when_it_is_answered(clock: KubeWatch) -> None:
    """Closed after the WATCH was sent and before its answer came: the stream is ended as soon as
    the answer arrives (the client's Watch.stop could not reach it yet), not at the server's next
    event or timeout (5 s in this fake)."""
    _Api.answer_after = 1.0
    clock.start()
    until(lambda: len(_Api.watches) == 2)
    clock.close()
    t0 = time.monotonic()
    until(lambda: not any(t.is_alive() for t in clock._threads), seconds=4.0)
    assert time.monotonic() - t0 < 4.0

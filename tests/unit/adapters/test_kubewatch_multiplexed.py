"""The watch streams multiplexed on the waiting thread (issue 17, reconciler/adapters/kube/watch.py):
the LIST and WATCH requests are the API client's over the keep-alive transport, the streams run in
greenlets of the waiting thread's hub (no thread of their own) and wake the wait with what changed,
a 410 on a watch lists again, close ends the streams and their connections, and the cache answers
from its copies only while the streams are being read."""

from __future__ import annotations

import json
import queue
import select
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest

from reconciler.adapters.kube import greenio
from reconciler.adapters.kube import transport as kubehttp
from reconciler.adapters.kube import watch as kubewatch
from reconciler.adapters.kube.cache import NODES, WatchCache
from reconciler.adapters.kube.objects import node_from
from reconciler.adapters.kube.watch import WatchClock
from tests.httpfake import QuietHandler, serving
from tests.unit.adapters.test_kubehttp import _api


def _node(name: str, rv: str, unschedulable: bool = False) -> dict[str, Any]:
    return {"kind": "Node", "apiVersion": "v1", "metadata": {"name": name, "resourceVersion": rv, "labels": {}},
            "spec": {"unschedulable": unschedulable}}


class _Api(QuietHandler):
    """A fake API server's LIST (``limit=1``: a resourceVersion) and chunked WATCH of nodes and pods.
    A watch streams what the test puts in ``events[kind]`` (a dict: one event; ``"410"``: an ERROR
    event 410 Gone; ``None``: end the stream); ``gone_once`` answers the first node watch 410."""

    protocol_version = "HTTP/1.1"
    events: ClassVar[dict[str, queue.Queue[Any]]] = {}
    requests: ClassVar[list[tuple[str, dict[str, list[str]], dict[str, str]]]] = []
    gone_once: ClassVar[bool] = False
    open_watches: ClassVar[int] = 0
    lock = threading.Lock()

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        q = parse_qs(url.query)
        kind = "nodes" if url.path == "/api/v1/nodes" else "pods"
        with _Api.lock:
            _Api.requests.append((url.path, q, {k.lower(): v for k, v in self.headers.items()}))
        if q.get("watch") != ["true"]:
            self.send_json(200, {"kind": "List", "metadata": {"resourceVersion": "100"}, "items": []})
            return
        if kind == "nodes" and _Api.gone_once:
            _Api.gone_once = False
            self.send_json(410, {"kind": "Status", "code": 410, "reason": "Expired"})
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        with _Api.lock:
            _Api.open_watches += 1
        try:
            while True:
                try:
                    ev = _Api.events[kind].get(timeout=0.2)
                except queue.Empty:
                    if select.select([self.connection], [], [], 0)[0] and not self.connection.recv(1, socket.MSG_PEEK):
                        break  # the client closed the stream
                    continue
                if ev is None:
                    break
                if ev == "410":
                    ev = {"type": "ERROR", "object": {"kind": "Status", "code": 410}}
                raw = json.dumps(ev, separators=(",", ":")).encode() + b"\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(raw), raw))
                self.wfile.flush()
                if ev["type"] == "ERROR":
                    break  # the API server ends a watch after an ERROR event
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            pass  # the client closed the stream
        finally:
            with _Api.lock:
                _Api.open_watches -= 1


@pytest.fixture
def api() -> Iterator[Any]:
    _Api.events = {"nodes": queue.Queue(), "pods": queue.Queue()}
    _Api.requests, _Api.gone_once, _Api.open_watches = [], False, 0
    with serving(_Api) as url:
        a = _api(url)
        try:
            yield a
        finally:
            for q in _Api.events.values():
                q.put(None)
            kubehttp.close_transport(a)
            a.close()


def _tracked(*nodes: str) -> WatchCache:
    cache = WatchCache({NODES: node_from})
    for n in nodes:
        cache.track(NODES, n)
    return cache


def _wait_for(clock: WatchClock, want: str, seconds: float = 5.0) -> set[str]:
    deadline = time.monotonic() + seconds
    seen: set[str] = set()
    while want not in seen and time.monotonic() < deadline:
        seen |= clock.wait(deadline - time.monotonic()) or set()
    return seen


def test_the_streams_run_on_the_waiting_thread_and_wake_it_with_what_changed(api: Any) -> None:
    cache = _tracked("n1")
    clock = WatchClock(api, cache=cache, max_sleep=5)
    assert clock.multiplex  # the API client's requests go over the keep-alive transport
    ours = lambda: {t for t in threading.enumerate() if "process_request" not in t.name}  # noqa: E731  (not the fake's)
    threads = ours()
    try:
        deadline = time.monotonic() + 5
        while clock.wait(0.1) is None and time.monotonic() < deadline:
            pass  # until both streams are open (healthy: the wait can tell what changed)
        assert clock.wait(0) is not None
        _Api.events["nodes"].put({"type": "MODIFIED", "object": _node("n2", "101")})  # not tracked
        _Api.events["nodes"].put({"type": "MODIFIED", "object": _node("n1", "102", unschedulable=True)})
        assert "n1" in _wait_for(clock, "n1")
        assert ours() == threads  # no watch thread
        assert cache.lookup(NODES, "n1") == (True, node_from(_node("n1", "102", unschedulable=True)))
        assert clock.events_skipped >= 1  # n2: never decoded
    finally:
        clock.close()
    watches = [(path, q) for path, q, _ in _Api.requests if q.get("watch") == ["true"]]
    assert sorted(path for path, _ in watches) == ["/api/v1/nodes", "/api/v1/pods"]
    for _, q in watches:
        assert q["resourceVersion"] == ["100"] and q["allowWatchBookmarks"] == ["true"]
        assert q["timeoutSeconds"] == [str(clock.timeout_seconds)]
    headers = _Api.requests[-1][2]
    assert headers["authorization"].startswith("Bearer ") and "gzip" not in headers.get("accept-encoding", "")


def test_close_ends_the_streams_and_their_connections(api: Any) -> None:
    clock = WatchClock(api, cache=_tracked(), max_sleep=5)
    clock.wait(0.5)
    deadline = time.monotonic() + 5
    while _Api.open_watches < 2 and time.monotonic() < deadline:
        clock.wait(0.1)
    assert _Api.open_watches == 2
    clock.close()
    assert greenio.active_hub() is None  # the clock was the hub's last user
    deadline = time.monotonic() + 5
    while _Api.open_watches and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _Api.open_watches == 0  # the server saw both connections close


def _healthy(clock: WatchClock, seconds: float = 8.0) -> None:
    deadline = time.monotonic() + seconds
    while clock.wait(0.1) is None and time.monotonic() < deadline:
        pass
    assert clock.wait(0) is not None, "the streams did not open"


def test_a_410_lists_again_and_streams_on(api: Any) -> None:
    _Api.gone_once = True
    cache = _tracked()
    clock = WatchClock(api, cache=cache, max_sleep=5)
    try:
        _healthy(clock)  # after the 1 s backoff: listed again, streaming
        cache.track(NODES, "n1")  # (a broken stream forgets what the cache held)
        _Api.events["nodes"].put({"type": "MODIFIED", "object": _node("n1", "150")})
        assert "n1" in _wait_for(clock, "n1")
        _Api.events["nodes"].put("410")  # too old mid-stream: list again
        assert clock.wait(5) is None  # not healthy until listed and streaming again
        _healthy(clock)
        cache.track(NODES, "n1")
        _Api.events["nodes"].put({"type": "MODIFIED", "object": _node("n1", "160", unschedulable=True)})
        assert "n1" in _wait_for(clock, "n1")
    finally:
        clock.close()
    node_lists = [q for path, q, _ in _Api.requests if path == "/api/v1/nodes" and q.get("watch") != ["true"]]
    assert len(node_lists) == 3  # the first list, after the 410 answer, after the 410 event


def test_the_cache_answers_only_while_the_streams_are_read(api: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = _tracked("n1")
    clock = WatchClock(api, cache=cache, max_sleep=5)
    try:
        _Api.events["nodes"].put({"type": "MODIFIED", "object": _node("n1", "102")})
        _wait_for(clock, "n1")
        assert cache.lookup(NODES, "n1")[0]
        monkeypatch.setattr(kubewatch, "MAX_LAG", 0.2)
        time.sleep(0.3)  # this thread does something else: the streams are not read
        assert cache.lookup(NODES, "n1") == (False, None)  # a request, not an old copy
        clock.wait(0.05)  # read again
        assert cache.lookup(NODES, "n1")[0]
    finally:
        clock.close()


def test_a_wait_from_another_thread_cannot_tell_what_changed(api: Any) -> None:
    clock = WatchClock(api, cache=_tracked("n1"), max_sleep=5)
    try:
        clock.wait(0.1)  # the streams belong to this thread
        got: list[Any] = []
        t = threading.Thread(target=lambda: got.append(clock.wait(0.1)))
        t.start()
        t.join(5)
        assert got == [None]
    finally:
        clock.close()


def test_without_the_transport_the_streams_keep_their_threads(api: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kubewatch.kubehttp, "transport_for", lambda a: None)
    assert not WatchClock(api).multiplex


@pytest.mark.parametrize("from_other_thread", [False, True])
def test_a_closed_clock_leaves_nothing_trusted(api: Any, from_other_thread: bool) -> None:
    cache = _tracked("n1")
    clock = WatchClock(api, cache=cache, max_sleep=5)
    try:
        _Api.events["nodes"].put({"type": "MODIFIED", "object": _node("n1", "102")})
        _wait_for(clock, "n1")
        assert cache.lookup(NODES, "n1")[0]
        if from_other_thread:
            t = threading.Thread(target=clock.close)
            t.start()
            t.join(5)
        else:
            clock.close()
        assert cache.lookup(NODES, "n1") == (False, None)  # forgotten at once, whichever thread closed
        t0 = time.monotonic()
        assert clock.wait(0.2) is None  # closed: it only sleeps, and cannot tell what changed
        assert time.monotonic() - t0 >= 0.15
    finally:
        clock.close()  # on the owning thread: the streams end here (again harmless otherwise)
        assert greenio.active_hub() is None

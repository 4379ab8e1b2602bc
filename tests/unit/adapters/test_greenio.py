"""A rollout's API requests multiplexed on its loop's thread (issue 17,
reconciler/adapters/kube/greenio.py): the requests of a GreenPool's jobs overlap on one thread, each job
keeps its own keep-alive connection, timeouts and errors come back as the thread pool's would,
TLS handshakes are cooperative, a connection made in a pool works from any thread later, and a
pool's close drops the jobs not started."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.kube import transport as kubehttp
from reconciler.adapters.kube.cluster import KubeCluster, greenio
from reconciler.adapters.kube.send import send_request
from reconciler.errors import ClusterError
from reconciler.execute.jobs import ThreadJobPool
from reconciler.ports import JobPool
from tests.unit.adapters import test_kubehttp
from tests.unit.adapters.test_kubehttp import _OK, _api, _Rec

#: test_kubehttp's recording fake and its TLS twin, the same fixtures
server = test_kubehttp.server
tls_server = test_kubehttp.tls_server


Done = dict[object, tuple[Any, BaseException | None]]


def _drain(pool: JobPool) -> Done:
    out: Done = {}
    while pool.pending():
        key, value, error = pool.next_done()
        out[key] = (value, error)
    return out


def _run(size: int, jobs: dict[object, Callable[[], Any]], api: Any = None) -> Done:
    """``jobs`` run in a GreenPool of ``size``: each key's (result, exception); the pool is closed
    afterwards, and ``api`` (an ApiClient) with its transport."""
    pool = greenio.GreenPool(size)
    try:
        for key, job in jobs.items():
            pool.submit(key, job)
        return _drain(pool)
    finally:
        pool.close()
        if api is not None:
            kubehttp.close_transport(api)
            api.close()


def _get(api: Any, i: int) -> Callable[[], bytes]:
    return lambda: send_request(api, "GET", f"/api/v1/nodes/n{i}", "get")


def test_the_requests_of_a_pool_overlap_on_the_callers_thread(server: str) -> None:
    _Rec.script = staticmethod(lambda c, r, m: "slow")  # each answer after 1 s
    api = _api(server)
    threads: set[int] = set()

    def get(i: int) -> Callable[[], bytes]:
        def job() -> bytes:
            threads.add(threading.get_ident())
            return send_request(api, "GET", f"/api/v1/nodes/n{i}", "get")
        return job

    t0 = time.monotonic()
    done = _run(8, {i: get(i) for i in range(8)}, api)
    took = time.monotonic() - t0
    assert done == {i: (_OK, None) for i in range(8)}
    assert threads == {threading.get_ident()}
    assert took < 4.0, f"8 requests of 1 s each took {took:.1f} s: they did not overlap"
    assert len(_Rec.seen) == 8 and _Rec.connections == 8


def test_each_job_greenlet_keeps_its_connection(server: str) -> None:
    api = _api(server)
    t = kubehttp.transport_for(api)
    assert t is not None
    done = _run(2, {i: _get(api, i) for i in range(10)}, api)
    assert all(v == (_OK, None) for v in done.values()) and len(done) == 10
    assert t.connections_opened <= 2 and len(_Rec.seen) == 10


def test_a_read_timeout_is_that_job_s_error_and_the_others_go_on(server: str) -> None:
    _Rec.script = staticmethod(lambda c, r, m: "slow" if m == "DELETE" else "ok")
    api = _api(server)
    slow = lambda: send_request(api, "DELETE", "/api/v1/nodes/x", "delete", timeout=(5, 0.3))  # noqa: E731
    done = _run(4, {"slow": slow, **{i: _get(api, i) for i in range(3)}}, api)
    value, error = done.pop("slow")
    assert value is None and isinstance(error, ClusterError) and "delete" in str(error)
    assert done == {i: (_OK, None) for i in range(3)}


def test_tls_handshakes_and_requests_are_cooperative(tls_server: tuple[str, Path]) -> None:
    url, cert = tls_server
    api = _api(url, ssl_ca_cert=str(cert))
    t = kubehttp.transport_for(api)
    assert t is not None
    done = _run(4, {i: _get(api, i) for i in range(8)}, api)
    assert done == {i: (_OK, None) for i in range(8)}
    assert 1 <= t.connections_opened <= 4


def test_a_refused_connection_is_the_job_s_error() -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    api = _api(f"http://127.0.0.1:{port}")
    done = _run(2, {"a": lambda: send_request(api, "GET", "/api/v1/nodes/a", "get node a")}, api)
    value, error = done["a"]
    assert value is None and isinstance(error, ClusterError) and "get node a" in str(error)


def test_connections_made_in_a_pool_serve_any_thread_afterwards(server: str) -> None:
    """Spare connections of ``request_all`` are shared by the transport's threads: one made
    cooperatively is used blocking once the pool is gone (and from the loop's own greenlet while
    it runs)."""
    api = _api(server)
    t = kubehttp.transport_for(api)
    assert t is not None
    reqs = [kubehttp.Request("GET", f"{server}/api/v1/nodes/n{i}",
                             {"User-Agent": "test", "Accept": "application/json"}, None) for i in range(4)]
    pool = greenio.GreenPool(2)
    try:
        pool.submit("all", lambda: t.request_all(reqs, (5, 5)))
        first = _drain(pool)["all"][0]
        during = t.request_all(reqs, (5, 5))  # from the loop's own greenlet: blocking waits
    finally:
        pool.close()
    opened = t.connections_opened
    after: list[Any] = []
    other = threading.Thread(target=lambda: after.extend(t.request_all(reqs, (5, 5))))
    other.start()
    other.join()
    kubehttp.close_transport(api)
    api.close()
    for answers in (first, during, after):
        assert [a.status for a in answers] == [200] * 4
    assert t.connections_opened - opened <= 1  # the new thread's own connection; the spares reused


def test_a_job_error_comes_back_with_its_key_and_the_pool_goes_on() -> None:
    done = _run(2, {"bad": lambda: 1 // 0, "good": lambda: 42})
    assert isinstance(done["bad"][1], ZeroDivisionError) and done["good"] == (42, None)


@pytest.mark.parametrize("make", [greenio.GreenPool, ThreadJobPool], ids=["green", "threads"])
def test_close_drops_the_jobs_not_started(make: Callable[[int], JobPool]) -> None:
    ran: list[int] = []
    pool = make(1)
    gate = threading.Event()
    pool.submit(0, lambda: (gate.wait(5) if make is ThreadJobPool else None, ran.append(0)))
    for i in (1, 2):
        pool.submit(i, lambda i=i: ran.append(i))
    if make is ThreadJobPool:
        time.sleep(0.1)  # the first job has started on the pool's one thread ...
        threading.Timer(0.3, gate.set).start()  # ... and ends while close() waits for it
    pool.close()
    assert ran == ([0] if make is ThreadJobPool else [])
    assert pool.pending() == 0


def test_one_pool_per_thread_and_the_hub_is_released() -> None:
    pool = greenio.GreenPool(1)
    assert greenio.active_hub() is pool.hub
    with pytest.raises(RuntimeError):
        greenio.GreenPool(1)
    pool.close()
    assert greenio.active_hub() is None
    with pytest.raises(RuntimeError):
        pool.next_done()  # nothing pending


def test_a_kube_cluster_multiplexes_only_over_its_own_transport(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    kc = KubeCluster(_api(server))
    try:
        pool = kc.job_pool(4)
        assert isinstance(pool, greenio.GreenPool)
        pool.close()
        monkeypatch.setattr(kubehttp, "transport_for", lambda api: None)  # e.g. a proxy: urllib3's path
        pool = kc.job_pool(4)
        assert isinstance(pool, ThreadJobPool)
        pool.close()
    finally:
        kc.close()


def test_a_pool_and_a_watch_clock_share_the_threads_hub() -> None:
    hub = greenio.acquire_hub()  # as a multiplexed watch clock does
    pool = greenio.GreenPool(1)
    assert pool.hub is hub
    pool.close()
    assert greenio.active_hub() is hub  # still the clock's
    assert not greenio.pool_running()
    greenio.release_hub(hub)
    assert greenio.active_hub() is None


def test_greenlets_sleep_through_the_hub_and_run_until_stops_when_done_or_due() -> None:
    hub = greenio.acquire_hub()
    try:
        order: list[str] = []
        hub.spawn(lambda: (greenio.sleep(0.3), order.append("slow")))
        hub.spawn(lambda: (greenio.sleep(0.05), order.append("fast")))
        t0 = time.monotonic()
        hub.run_until(t0 + 5, lambda: len(order) == 2)
        assert order == ["fast", "slow"] and time.monotonic() - t0 < 2.0  # slept together, not in turn
        t0 = time.monotonic()
        hub.run_until(t0 + 0.2, lambda: False)
        assert 0.15 <= time.monotonic() - t0 < 2.0
    finally:
        greenio.release_hub(hub)


def _reads(linger: float, messages: int = 20, gap: float = 0.015) -> tuple[int, bytes]:
    """(reads, bytes) of a greenlet reading a stream that sends ``messages`` small pieces ``gap``
    seconds apart, through a CoopSocket with ``linger``."""
    import socket

    a, b = socket.socketpair()
    sock = greenio.CoopSocket(a, 5.0)
    sock.linger = linger
    got = bytearray()
    reads = [0]

    def read() -> None:
        buf = bytearray(65536)
        while n := sock.recv_into(buf):
            reads[0] += 1
            got.extend(buf[:n])

    def write() -> None:
        for i in range(messages):
            b.sendall(b"event %02d\n" % i)
            time.sleep(gap)
        b.close()

    hub = greenio.acquire_hub()
    try:
        t = threading.Thread(target=write)
        t.start()
        g = hub.spawn(read)
        hub.run_until(time.monotonic() + 10, lambda: g.dead)
        t.join()
    finally:
        greenio.release_hub(hub)
        sock.close()
    return reads[0], bytes(got)


def test_a_lingering_socket_reads_a_busy_stream_in_bursts() -> None:
    expected = b"".join(b"event %02d\n" % i for i in range(20))
    eager, got = _reads(0.0)
    assert got == expected
    bursts, got = _reads(0.1)
    assert got == expected  # nothing lost or reordered, only read together
    assert bursts * 2 <= eager, f"{bursts} reads with a linger against {eager} without"


def test_an_answer_that_closes_the_connection_is_read_whole(server: str) -> None:
    """http.client closes a connection's socket as soon as the answer says ``Connection: close``
    and reads the body afterwards: a CoopSocket stays open until that read is done, as a socket
    does for its makefile (in a pool's greenlet and outside, on a thread that has a hub)."""
    body = b'{"kind":"Node","metadata":{"name":"n"}}' * 200
    _Rec.script = staticmethod(lambda c, r, m: (200, {"Connection": "close"}, body))
    api = _api(server)
    hub = greenio.acquire_hub()
    try:
        assert send_request(api, "GET", "/api/v1/nodes/n", "get") == body  # a CoopSocket, not in a greenlet
        done = _run(2, {i: _get(api, i) for i in range(4)})
        assert done == {i: (body, None) for i in range(4)}
    finally:
        greenio.release_hub(hub)
        kubehttp.close_transport(api)
        api.close()
    assert _Rec.connections == 5  # one per answer: each was closed after it

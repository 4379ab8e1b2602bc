"""Requests sent together (issue 17): ``kubehttp.Transport.request_all`` and what uses it,
``KubeCluster.evict_pods``. Against the loopback fake of test_kubehttp: every request of a round is
written before any answer is read (the fake holds each answer until all have arrived), answers come
back in the order asked, spare connections are kept and bounded, a failed request costs only its
own answer and a POST is never resent; a node's evictions are the same requests as one by one, with
each refusal mapped to its own error."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from kubernetes import client

from reconciler.adapters.kube import transport as kubehttp
from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.errors import ConflictError, NotFoundError, TooManyRequestsError, TransientError
from reconciler.ports import PodEviction
from tests.unit.adapters import test_kubehttp
from tests.unit.adapters.test_kubehttp import TOKEN, _api, _Rec, _transport

#: test_kubehttp's recording fake (answers ``ok`` unless a test scripts it), the same fixture
server = test_kubehttp.server


def _requests(api: client.ApiClient, paths: list[str], method: str = "GET") -> list[kubehttp.Request]:
    out = []
    for p in paths:
        url, headers = api.param_serialize(method=method, resource_path=p, header_params={"Accept": "application/json"},
                                           auth_settings=["BearerToken"])[1:3]
        out.append(kubehttp.Request(method, url, headers, b"{}" if method == "POST" else None))
    return out


def _hold_until(n: int) -> Any:
    """A script that answers no request before ``n`` have arrived (500 when they do not, in 5 s)."""
    barrier = threading.Barrier(n, timeout=5)

    def script(conn: int, req: int, method: str) -> Any:
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            return 500, {}, b'{"kind": "Status", "message": "not sent together"}'
        return "ok"
    return staticmethod(script)


def test_every_request_of_a_round_is_written_before_an_answer_is_read(server: str) -> None:
    api = _api(server)
    t = _transport(api)
    _Rec.script = _hold_until(6)
    answers = t.request_all(_requests(api, [f"/api/v1/nodes/n{i}" for i in range(6)]), (2, 10))
    assert [a.status for a in answers if isinstance(a, kubehttp.Answer)] == [200] * 6
    assert len({s["conn"] for s in _Rec.seen}) == 6  # each on its own connection
    # in the order asked, whatever order the server answered in
    assert [s["line"].split()[1] for s in sorted(_Rec.seen, key=lambda s: s["line"])] == sorted(
        f"/api/v1/nodes/n{i}".encode() for i in range(6))
    t.close()
    api.close()


def test_answers_come_back_in_the_order_asked(server: str) -> None:
    api = _api(server)
    t = _transport(api)

    def by_path(conn: int, req: int, method: str) -> Any:
        line = _Rec.seen[-1]["line"].decode()
        n = int(line.split()[1].rsplit("n", 1)[1])
        time.sleep(0.05 * (5 - n))  # the last asked answers first
        return 200, {}, json.dumps({"n": n}).encode()
    _Rec.script = staticmethod(by_path)
    answers = t.request_all(_requests(api, [f"/api/v1/nodes/n{i}" for i in range(5)]), (2, 10))
    assert [json.loads(a.data)["n"] for a in answers if isinstance(a, kubehttp.Answer)] == [0, 1, 2, 3, 4]
    t.close()
    api.close()


def test_spare_connections_are_kept_for_the_next_round_and_closed_by_close(server: str) -> None:
    api = _api(server)
    t = _transport(api)
    for _ in range(3):
        assert all(isinstance(a, kubehttp.Answer) and a.status == 200
                   for a in t.request_all(_requests(api, ["/a", "/b", "/c", "/d"]), (2, 10)))
    assert t.connections_opened == 4 and _Rec.connections == 4  # the thread's own and 3 spares, reused
    t.close()
    t.request_all(_requests(api, ["/a", "/b"]), (2, 10))
    assert t.connections_opened == 6  # closed ones are not reused
    t.close()
    api.close()


def test_spares_are_bounded_and_the_rest_go_one_at_a_time(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kubehttp, "MAX_SPARES", 2)
    api = _api(server)
    t = _transport(api)
    answers = t.request_all(_requests(api, [f"/p{i}" for i in range(7)]), (2, 10))
    assert [a.status for a in answers if isinstance(a, kubehttp.Answer)] == [200] * 7
    assert t.connections_opened == 3 and _Rec.connections == 3

    # other threads share the same spares: while this thread holds them, another gets none
    hold = threading.Event()
    release = threading.Event()

    def slow(conn: int, req: int, method: str) -> Any:
        if _Rec.seen[-1]["line"].split()[1].startswith(b"/held"):
            hold.set()
            release.wait(5)
        return "ok"
    _Rec.script = staticmethod(slow)
    first = threading.Thread(target=lambda: t.request_all(_requests(api, ["/held0", "/held1", "/held2"]), (2, 10)))
    first.start()
    assert hold.wait(5)
    time.sleep(0.1)
    before = t.connections_opened
    release.set()
    answers = t.request_all(_requests(api, ["/x", "/y"]), (2, 10))
    first.join(5)
    assert [a.status for a in answers if isinstance(a, kubehttp.Answer)] == [200, 200]
    assert t.connections_opened - before <= 1  # at most this thread's own: no third spare
    t.close()
    api.close()


def test_rounds_are_at_most_parallel_wide(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kubehttp, "PARALLEL", 3)
    api = _api(server)
    t = _transport(api)
    busy, peak, lock = [0], [0], threading.Lock()

    def counting(conn: int, req: int, method: str) -> Any:
        with lock:
            busy[0] += 1
            peak[0] = max(peak[0], busy[0])
        time.sleep(0.05)
        with lock:
            busy[0] -= 1
        return "ok"
    _Rec.script = staticmethod(counting)
    answers = t.request_all(_requests(api, [f"/p{i}" for i in range(8)]), (2, 10))
    assert len(answers) == 8 and all(isinstance(a, kubehttp.Answer) for a in answers)
    assert peak[0] == 3
    t.close()
    api.close()


def test_a_failed_request_costs_its_own_answer_and_a_post_is_never_resent(server: str) -> None:
    api = _api(server)
    t = _transport(api)
    t.request_all(_requests(api, ["/a", "/b", "/c"], "POST"), (2, 10))  # three connections, now idle
    _Rec.seen.clear()
    _Rec.script = staticmethod(lambda c, r, m: "drop" if _Rec.seen[-1]["line"].split()[1] == b"/b" else "ok")
    answers = t.request_all(_requests(api, ["/a", "/b", "/c"], "POST"), (2, 10))
    assert isinstance(answers[0], kubehttp.Answer) and isinstance(answers[2], kubehttp.Answer)
    assert isinstance(answers[1], Exception) and TOKEN not in repr(answers[1])
    assert [s["line"].split()[1] for s in _Rec.seen].count(b"/b") == 1  # written once, not resent
    # the broken connection is gone; the next round still works
    assert all(isinstance(a, kubehttp.Answer) for a in t.request_all(_requests(api, ["/a", "/c", "/d"]), (2, 10)))
    t.close()
    api.close()


def test_a_stale_spare_is_replaced_before_anything_is_sent(server: str) -> None:
    api = _api(server)
    t = _transport(api)
    _Rec.script = staticmethod(lambda c, r, m: "close-after")  # every connection closed after its answer
    t.request_all(_requests(api, ["/a", "/b", "/c"], "POST"), (2, 10))
    time.sleep(0.2)  # idle: the server's closes have arrived before the next round (as in test_kubehttp)
    _Rec.script = staticmethod(lambda c, r, m: "ok")
    _Rec.seen.clear()
    answers = t.request_all(_requests(api, ["/a", "/b", "/c"], "POST"), (2, 10))
    assert all(isinstance(a, kubehttp.Answer) and a.status == 200 for a in answers)
    assert len(_Rec.seen) == 3  # each POST written once, on a fresh connection
    t.close()
    api.close()


# -- KubeCluster.evict_pods -------------------------------------------------------------------------

def _cluster(host: str) -> KubeCluster:
    kc = KubeCluster(_api(host))
    assert kc._thin
    return kc


def _status(code: int, reason: str, message: str, causes: list[dict[str, str]] | None = None) -> bytes:
    return json.dumps({"kind": "Status", "code": code, "reason": reason, "message": message,
                       "details": {"causes": causes or []}}).encode()


def test_a_node_s_evictions_are_the_one_by_one_requests_sent_together(server: str) -> None:
    kc = _cluster(server)
    try:
        kc.evict_pod("ns", "solo", "u-solo", 30)
        one = _Rec.seen[-1]
        _Rec.seen.clear()
        _Rec.script = _hold_until(3)
        asked = [PodEviction("ns", "solo", "u-solo", 30), PodEviction("ns", "p 2", "u2"),
                 PodEviction("other", "p3", "u3", 0)]
        assert kc.evict_pods(asked) == [None, None, None]
        seen = {s["line"].split()[1]: s for s in _Rec.seen}
        assert set(seen) == {b"/api/v1/namespaces/ns/pods/solo/eviction", b"/api/v1/namespaces/ns/pods/p%202/eviction",
                             b"/api/v1/namespaces/other/pods/p3/eviction"}
        same = seen[b"/api/v1/namespaces/ns/pods/solo/eviction"]
        assert same["body"] == one["body"] and same["headers"] == one["headers"]
        assert json.loads(seen[b"/api/v1/namespaces/ns/pods/p%202/eviction"]["body"])["deleteOptions"] == {
            "preconditions": {"uid": "u2"}}
        assert json.loads(seen[b"/api/v1/namespaces/other/pods/p3/eviction"]["body"])["deleteOptions"] == {
            "preconditions": {"uid": "u3"}, "gracePeriodSeconds": 0}
    finally:
        kc.close()


def test_each_refusal_is_that_pod_s_own_error(server: str) -> None:
    answers = {
        b"ok": (201, {}, b'{"kind": "Status", "status": "Success"}'),
        b"gone": (404, {}, _status(404, "NotFound", 'pods "gone" not found')),
        b"held": (429, {}, _status(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption "
                                   "budget.", [{"reason": "DisruptionBudget", "message": "pdb web"}])),
        b"other": (409, {}, _status(409, "Conflict", "Precondition failed: UID")),
    }

    def by_name(conn: int, req: int, method: str) -> Any:
        name = _Rec.seen[-1]["line"].split()[1].split(b"/")[-2]
        if name == b"drop":
            return "drop"
        return answers[name]
    _Rec.script = staticmethod(by_name)
    kc = _cluster(server)
    try:
        got = kc.evict_pods([PodEviction("ns", n, "u") for n in ("ok", "gone", "held", "other", "drop")])
        assert got[0] is None
        assert isinstance(got[1], NotFoundError)
        assert isinstance(got[2], TooManyRequestsError) and got[2].disruption_budget
        assert isinstance(got[3], ConflictError)
        assert isinstance(got[4], TransientError) and "evict pod ns/drop" in str(got[4]) and TOKEN not in str(got[4])
    finally:
        kc.close()


def test_without_the_transport_evictions_go_one_by_one(server: str) -> None:
    api = _api(server, retries=3)  # a setting the transport does not reproduce: the ApiClient path
    assert kubehttp.transport_for(api) is None
    kc = KubeCluster(api)
    try:
        _Rec.script = staticmethod(lambda c, r, m: (404, {}, _status(404, "NotFound", "gone"))
                                   if _Rec.seen[-1]["line"].split()[1].split(b"/")[-2] == b"b" else "ok")
        got = kc.evict_pods([PodEviction("ns", "a", "u"), PodEviction("ns", "b", "u")])
        assert got[0] is None and isinstance(got[1], NotFoundError)
        assert [s["line"].split()[1] for s in _Rec.seen] == [b"/api/v1/namespaces/ns/pods/a/eviction",
                                                             b"/api/v1/namespaces/ns/pods/b/eviction"]
    finally:
        kc.close()

"""The keep-alive transport of ``send_request`` (issue 17, reconciler/adapters/kube/transport.py) against a
loopback fake API server: the request on the wire is the ApiClient's own (request line, headers in
order, body bytes), one TCP connection serves a thread's requests, a stale connection is resent
only when urllib3 would resend too, errors read as before and never carry the token, and unusual
client settings keep the ApiClient path."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import urllib3
from kubernetes import client

from reconciler.adapters.kube import cluster as kube
from reconciler.adapters.kube import transport as kubehttp
from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.adapters.kube.send import send_request
from reconciler.errors import ClusterError, ConflictError, NotFoundError, TooManyRequestsError, TransientError
from tests.httpfake import QuietHandler, serving

TOKEN = "s3cr3t-token-7f"
_OK = json.dumps({"kind": "Node", "metadata": {"name": "n"}}).encode()


class _Rec(QuietHandler):
    """HTTP/1.1 keep-alive fake. Records every request as it arrived; ``script(conn_no, req_no,
    method)`` (req_no counts from 0 on each connection) picks the answer: ``ok``, ``close-after``
    (answer, then close the connection without saying so, as an idle timeout does), ``drop``
    (read the request, close without answering), ``partial`` (headers and part of the body, then
    close), ``slow`` (answer after 1 s), or a ``(status, headers, body)`` tuple."""

    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[dict[str, Any]]] = []
    connections: ClassVar[int] = 0
    script: ClassVar[Callable[[int, int, str], Any]] = staticmethod(lambda c, r, m: "ok")
    lock = threading.Lock()

    def setup(self) -> None:
        super().setup()
        with _Rec.lock:
            _Rec.connections += 1
            self.conn_no = _Rec.connections
        self.req_no = 0

    def _handle(self) -> None:
        body = self.read_body()
        _Rec.seen.append({"conn": self.conn_no, "line": self.raw_requestline,
                          "headers": list(self.headers.raw_items()), "body": body})
        action = _Rec.script(self.conn_no, self.req_no, self.command)
        self.req_no += 1
        if action == "drop":
            self.close_connection = True
            return
        if action == "slow":
            time.sleep(1.0)
            action = "ok"
        code, headers, data = (200, {}, _OK) if action in ("ok", "close-after", "partial") else action
        self.send_response(code)
        for k, v in {"Content-Type": "application/json", **headers}.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if action == "partial":
            self.wfile.write(data[:5])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(data)
        if action == "close-after":
            self.close_connection = True

    do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _handle


@pytest.fixture
def server() -> Iterator[str]:
    _Rec.seen, _Rec.connections = [], 0
    _Rec.script = staticmethod(lambda c, r, m: "ok")
    with serving(_Rec) as url:
        yield url


def _api(host: str, token: str = TOKEN, **settings: Any) -> client.ApiClient:
    cfg = client.Configuration()
    cfg.host = host
    cfg.api_key = {"authorization": token}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    for k, v in settings.items():
        setattr(cfg, k, v)
    return client.ApiClient(cfg)


def _transport(api: client.ApiClient) -> kubehttp.Transport:
    t = kubehttp.transport_for(api)
    assert t is not None, "the keep-alive transport is not used"
    return t


def _get_over_transport(api: client.ApiClient) -> None:
    """One GET through ``send_request`` that must take the keep-alive transport and answer
    ``_OK``; closes the transport and the ApiClient either way."""
    try:
        _transport(api)
        assert send_request(api, "GET", "/api/v1/nodes/a", "get") == _OK
    finally:
        kubehttp.close_transport(api)
        api.close()


@pytest.fixture
def legacy(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Call to make ``send_request`` take the ApiClient (urllib3) path."""
    return lambda: monkeypatch.setattr(kube.kubehttp, "transport_for", lambda api: None)


REQUESTS: list[tuple[str, str, dict[str, Any]]] = [
    ("GET", "/api/v1/nodes/n%2F1", {}),
    ("GET", "/api/v1/namespaces/ns/pods/p/log",
     {"query": [("container", "c"), ("limitBytes", 16384), ("tailLines", 20)], "timeout": (5, 10)}),
    ("PATCH", "/api/v1/nodes/n1", {"query": [("fieldManager", "node-reconciler"), ("dryRun", "All")],
                                   "body": {"metadata": {"annotations": {"a": "ü €", "b": None},
                                                         "resourceVersion": "7"},
                                            "spec": {"unschedulable": True}},
                                   "content_type": "application/merge-patch+json"}),
    ("POST", "/api/v1/namespaces/ns/pods/p/eviction",
     {"body": {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": "ns"},
               "deleteOptions": {"preconditions": {"uid": "u-1"}, "gracePeriodSeconds": 30}},
      "content_type": "application/json"}),
    ("POST", "/api/v1/namespaces/ns/configmaps", {}),  # no body: Content-Length 0
    ("DELETE", "/api/v1/namespaces/ns/pods",
     {"query": [("labelSelector", "app.kubernetes.io/managed-by=node-reconciler,x in (a b),y!=z")]}),
    ("DELETE", "/api/v1/namespaces/ns/pods/p%20q", {}),
]


@pytest.mark.parametrize(("method", "path", "kw"), REQUESTS, ids=[f"{m} {p}" for m, p, _ in REQUESTS])
def test_the_request_on_the_wire_is_the_api_clients(server: str, legacy: Callable[[], None], method: str, path: str,
                                                    kw: dict[str, Any]) -> None:
    api = _api(server)
    try:
        assert send_request(api, method, path, "call", **kw) == _OK
        assert _transport(api).connections_opened == 1
    finally:
        kubehttp.close_transport(api)
        api.close()
    ours = _Rec.seen[-1]
    legacy()
    api = _api(server)
    try:
        assert send_request(api, method, path, "call", **kw) == _OK
    finally:
        api.close()
    theirs = _Rec.seen[-1]
    assert len(_Rec.seen) == 2
    for k in ("line", "headers", "body"):
        assert ours[k] == theirs[k], k
    assert ("authorization", f"Bearer {TOKEN}") in ours["headers"]


def test_one_connection_per_thread(server: str) -> None:
    api = _api(server)
    t = _transport(api)
    try:
        for i in range(5):
            send_request(api, "GET", f"/api/v1/nodes/n{i}", "get")
        assert t.connections_opened == 1 and _Rec.connections == 1
        other = threading.Thread(target=lambda: [send_request(api, "GET", "/api/v1/nodes/x", "get") for _ in range(3)])
        other.start()
        other.join()
        send_request(api, "GET", "/api/v1/nodes/y", "get")
        assert t.connections_opened == 2 and _Rec.connections == 2
        assert len(_Rec.seen) == 9
    finally:
        kubehttp.close_transport(api)
        api.close()


def test_close_closes_and_a_later_request_reconnects(server: str) -> None:
    kc = KubeCluster(_api(server))
    t = _transport(kc.api_client)
    send_request(kc.api_client, "GET", "/api/v1/nodes/a", "get")
    kc.close()
    send_request(kc.api_client, "GET", "/api/v1/nodes/a", "get")
    assert t.connections_opened == 2 and _Rec.connections == 2
    kc.close()


@pytest.mark.parametrize("method", ["GET", "POST", "PATCH", "DELETE"])
def test_an_idle_connection_closed_by_the_server_is_replaced_before_sending(server: str, method: str) -> None:
    _Rec.script = staticmethod(lambda c, r, m: "close-after")
    api = _api(server)
    try:
        for _ in range(3):
            send_request(api, method, "/api/v1/nodes/n", "call", body={"a": 1} if method != "GET" else None)
            time.sleep(0.1)  # idle: the server's close has arrived before the next request
    finally:
        kubehttp.close_transport(api)
        api.close()
    assert len(_Rec.seen) == 3, "a request was sent twice"
    assert _Rec.connections == 3


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_a_reused_connection_dropped_unanswered_is_resent_once_for_idempotent_methods(server: str, method: str) -> None:
    _Rec.script = staticmethod(lambda c, r, m: "drop" if (c, r) == (1, 1) else "ok")
    api = _api(server)
    try:
        send_request(api, method, "/api/v1/nodes/a", "call")
        assert send_request(api, method, "/api/v1/nodes/b", "call") == _OK
    finally:
        kubehttp.close_transport(api)
        api.close()
    assert [r["conn"] for r in _Rec.seen] == [1, 1, 2]  # the dropped one, then once more on a new connection
    assert _Rec.seen[1]["line"] == _Rec.seen[2]["line"]


@pytest.mark.parametrize("method", ["POST", "PATCH"])
def test_a_post_or_patch_dropped_unanswered_is_not_resent(server: str, legacy: Callable[[], None],
                                                           method: str) -> None:
    body = {"apiVersion": "policy/v1", "kind": "Eviction"}

    def run() -> tuple[str, int]:
        _Rec.seen, _Rec.connections = [], 0
        _Rec.script = staticmethod(lambda c, r, m: "drop" if (c, r) == (1, 1) else "ok")
        api = _api(server)
        try:
            send_request(api, method, "/api/v1/namespaces/ns/pods/p/eviction", "evict pod ns/p", body=body)
            with pytest.raises(TransientError) as e:
                send_request(api, method, "/api/v1/namespaces/ns/pods/p/eviction", "evict pod ns/p", body=body)
        finally:
            kubehttp.close_transport(api)
            api.close()
        return str(e.value), len(_Rec.seen)

    ours = run()
    legacy()
    theirs = run()
    assert ours[1] == 2, "sent twice"
    assert ours == theirs  # urllib3 does not resend it either, and says the same
    assert "connection dropped by the server" in ours[0]


def test_a_cut_answer_is_an_error_and_not_resent(server: str) -> None:
    _Rec.script = staticmethod(lambda c, r, m: "partial" if r == 1 else "ok")
    api = _api(server)
    try:
        send_request(api, "GET", "/api/v1/nodes/a", "get node a")
        with pytest.raises(TransientError, match=r"get node a: cannot reach .*connection dropped"):
            send_request(api, "GET", "/api/v1/nodes/a", "get node a")
        assert len(_Rec.seen) == 2
        send_request(api, "GET", "/api/v1/nodes/a", "get node a")  # a new connection after that
        assert _Rec.connections == 2
    finally:
        kubehttp.close_transport(api)
        api.close()


def test_a_read_timeout_is_an_error_and_not_resent(server: str) -> None:
    _Rec.script = staticmethod(lambda c, r, m: "slow" if r == 1 else "ok")
    api = _api(server)
    try:
        send_request(api, "GET", "/api/v1/nodes/a", "get node a")
        with pytest.raises(TransientError, match=r"get node a: cannot reach .*\(timed out\)"):
            send_request(api, "GET", "/api/v1/nodes/a", "get node a", timeout=(2, 0.3))
        assert len(_Rec.seen) == 2
    finally:
        kubehttp.close_transport(api)
        api.close()


def test_unreachable_reads_as_before(legacy: Callable[[], None]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    host = f"http://127.0.0.1:{port}"

    def err() -> str:
        api = _api(host)
        try:
            with pytest.raises(TransientError) as e:
                send_request(api, "PATCH", "/api/v1/nodes/n", "patch node n", body={"a": 1})
        finally:
            kubehttp.close_transport(api)
            api.close()
        return str(e.value)

    ours = err()
    legacy()
    assert ours == err()
    assert "connection refused" in ours and TOKEN not in ours


ERRORS = [
    (404, {}, {"kind": "Status", "reason": "NotFound", "message": "nodes \"n\" not found"}, NotFoundError),
    (409, {}, {"kind": "Status", "reason": "Conflict", "message": "the object has been modified"}, ConflictError),
    (429, {"Retry-After": "7"}, {"kind": "Status", "reason": "TooManyRequests", "message": "budget",
                                 "details": {"causes": [{"reason": "DisruptionBudget", "message": "pdb x"}]}},
     TooManyRequestsError),
    (503, {}, {"kind": "Status", "message": "unavailable"}, TransientError),
    (422, {}, {"kind": "Status", "reason": "Invalid", "message": "bad"}, ClusterError),
]


@pytest.mark.parametrize(("status", "headers", "doc", "kind"), ERRORS, ids=[str(e[0]) for e in ERRORS])
def test_error_answers_map_as_before(server: str, legacy: Callable[[], None], status: int, headers: dict[str, str],
                                     doc: dict[str, Any], kind: type[ClusterError]) -> None:
    answer = (status, headers, json.dumps(doc).encode())
    _Rec.script = staticmethod(lambda c, r, m: answer)

    def err() -> ClusterError:
        api = _api(server)
        try:
            with pytest.raises(ClusterError) as e:
                send_request(api, "POST", "/api/v1/namespaces/ns/pods/p/eviction", "evict pod ns/p", body={"k": 1})
        finally:
            kubehttp.close_transport(api)
            api.close()
        return e.value

    ours = err()
    legacy()
    theirs = err()
    assert type(ours) is type(theirs) is kind
    assert (str(ours), ours.status, ours.reason) == (str(theirs), theirs.status, theirs.reason)
    assert getattr(ours, "retry_after", None) == getattr(theirs, "retry_after", None)
    assert getattr(ours, "disruption_budget", None) == getattr(theirs, "disruption_budget", None)
    assert len(_Rec.seen) == 2  # one each: an error answer is never resent


def test_the_refresh_hook_runs_before_each_request(server: str) -> None:
    api = _api(server)
    calls: list[int] = []

    def hook(cfg: client.Configuration) -> None:
        calls.append(1)
        cfg.api_key["authorization"] = f"tok{len(calls)}"

    api.configuration.refresh_api_key_hook = hook
    try:
        _transport(api)
        for _ in range(3):
            send_request(api, "GET", "/api/v1/nodes/a", "get")
    finally:
        kubehttp.close_transport(api)
        api.close()
    assert [dict((k.lower(), v) for k, v in r["headers"])["authorization"] for r in _Rec.seen] == [
        "Bearer tok1", "Bearer tok2", "Bearer tok3"]


def test_the_token_is_in_no_error(server: str) -> None:
    messages: list[str] = []
    _Rec.script = staticmethod(lambda c, r, m: (401, {}, b"Unauthorized"))
    api = _api(server)
    try:
        with pytest.raises(ClusterError) as e:
            send_request(api, "GET", "/api/v1/nodes/a", "get node a")
        messages.append(str(e.value))
        _Rec.script = staticmethod(lambda c, r, m: "slow")
        with pytest.raises(TransientError) as e2:
            send_request(api, "GET", "/api/v1/nodes/a", "get node a", timeout=(2, 0.2))
        messages.append(str(e2.value))
    finally:
        kubehttp.close_transport(api)
        api.close()
    bad = _api(server, token=TOKEN + "\r\nX-Injected: 1")
    try:
        _transport(bad)
        with pytest.raises(ClusterError) as e3:
            send_request(bad, "GET", "/api/v1/nodes/a", "get node a")
        messages.append(str(e3.value))
        assert "header authorization" in messages[-1]
    finally:
        kubehttp.close_transport(bad)
        bad.close()
    assert messages and all(TOKEN not in m for m in messages), messages
    assert not any(r for r in _Rec.seen if any(k == "X-Injected" for k, _ in r["headers"]))


@pytest.mark.parametrize("settings", [
    {"proxy": "http://127.0.0.1:3128"},
    {"assert_hostname": False},
    {"tls_server_name": "kubernetes"},
    {"retries": 5},
    {"client_go_retries": True},
    {"socket_options": []},
    {"keep_alive": True},
], ids=lambda s: next(iter(s)))
def test_unusual_settings_keep_the_api_client_path(settings: dict[str, Any]) -> None:
    api = _api("https://127.0.0.1:6443", **settings)
    try:
        assert kubehttp.transport_for(api) is None
    finally:
        api.close()


def test_a_proxy_the_host_bypasses_still_gets_the_transport(server: str) -> None:
    api = _api(server, proxy="http://127.0.0.1:1", no_proxy="localhost,127.0.0.1")
    api.close()
    api = client.ApiClient(api.configuration)  # the REST layer reads the proxy when it is made
    _get_over_transport(api)


def test_with_a_proxy_requests_take_the_api_client_path(server: str) -> None:
    """The proxy is the fake server itself (it answers the absolute-URI request line)."""
    api = _api("http://kube.invalid:6443", proxy=server)
    try:
        assert send_request(api, "GET", "/api/v1/nodes/a", "get") == _OK
    finally:
        api.close()
    assert _Rec.seen[-1]["line"].startswith(b"GET http://kube.invalid:6443/api/v1/nodes/a ")


# -- TLS ---------------------------------------------------------------------------------------------


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An https fake (a self-signed certificate for IP 127.0.0.1) and its certificate file."""
    if not shutil.which("openssl"):
        pytest.skip("no openssl")
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    _Rec.seen, _Rec.connections = [], 0
    _Rec.script = staticmethod(lambda c, r, m: "ok")
    with serving(_Rec, ssl_context=ctx) as url:
        yield url.replace("http://", "https://"), cert


def test_tls_request_is_the_api_clients_and_reuses_the_connection(tls_server: tuple[str, Path],
                                                                  legacy: Callable[[], None]) -> None:
    url, cert = tls_server
    api = _api(url, ssl_ca_cert=str(cert))
    t = _transport(api)
    try:
        for _ in range(3):
            send_request(api, "PATCH", "/api/v1/nodes/n", "patch", query=[("fieldManager", "x")], body={"a": 1},
                         content_type="application/merge-patch+json")
        assert t.connections_opened == 1 and _Rec.connections == 1
    finally:
        kubehttp.close_transport(api)
        api.close()
    ours = _Rec.seen[-1]
    legacy()
    api = _api(url, ssl_ca_cert=str(cert))
    try:
        send_request(api, "PATCH", "/api/v1/nodes/n", "patch", query=[("fieldManager", "x")], body={"a": 1},
                     content_type="application/merge-patch+json")
    finally:
        api.close()
    theirs = _Rec.seen[-1]
    assert (ours["line"], ours["headers"], ours["body"]) == (theirs["line"], theirs["headers"], theirs["body"])


def test_tls_verification_failure_reads_as_before(tls_server: tuple[str, Path], legacy: Callable[[], None]) -> None:
    url, _ = tls_server

    def err(**settings: Any) -> str:
        api = _api(url, **settings)
        try:
            with pytest.raises(TransientError) as e:
                send_request(api, "GET", "/api/v1/nodes/a", "get node a")
        finally:
            kubehttp.close_transport(api)
            api.close()
        return str(e.value)

    ours = err()  # the system store does not know the self-signed certificate
    assert "(TLS handshake failed: self-signed certificate)" in ours
    legacy()
    assert ours == err()


def test_tls_without_verification(tls_server: tuple[str, Path]) -> None:
    url, _ = tls_server
    _get_over_transport(_api(url, verify_ssl=False))


def test_a_request_the_transport_cannot_reproduce_takes_the_api_client_path(server: str) -> None:
    api = _api(server)
    api.default_headers["X-Number"] = 5  # not a string: urllib3 sends it as "5", the transport does not try
    t = _transport(api)
    try:
        assert send_request(api, "GET", "/api/v1/nodes/a", "get") == _OK
        assert t.connections_opened == 0
        assert ("X-Number", "5") in _Rec.seen[-1]["headers"]
        with pytest.raises(kubehttp.Unsupported):
            t.request("GET", "http://kube.example.com./api", {"User-Agent": "x"}, None, (1, 1))
    finally:
        kubehttp.close_transport(api)
        api.close()


def test_a_stream_is_the_request_s_bytes_and_its_body_as_it_comes(server: str) -> None:
    api = _api(server)
    t = _transport(api)
    try:
        method, url, headers = api.param_serialize(method="GET", resource_path="/api/v1/nodes",
                                                   query_params=[("watch", True)], header_params={},
                                                   auth_settings=["BearerToken"])[:3]
        got = t.stream(method, url, headers, (5, 5))
        assert isinstance(got, kubehttp.Stream) and got.status == 200
        assert b"".join(got.chunks(4)) == _OK
        got.close()
        t.request(method, url, headers, None, (5, 5))
        streamed, requested = _Rec.seen[-2], _Rec.seen[-1]
        assert (streamed["line"], streamed["headers"]) == (requested["line"], requested["headers"])
        assert streamed["conn"] != requested["conn"]  # a stream has a connection of its own

        _Rec.script = staticmethod(lambda c, r, m: (410, {}, b'{"code":410}'))
        answer = t.stream(method, url, headers, (5, 5))
        assert isinstance(answer, kubehttp.Answer) and (answer.status, answer.data) == (410, b'{"code":410}')

        _Rec.script = staticmethod(lambda c, r, m: (200, {"Content-Encoding": "gzip"}, b"x"))
        with pytest.raises(urllib3.exceptions.ProtocolError):
            t.stream(method, url, headers, (5, 5))
    finally:
        kubehttp.close_transport(api)
        api.close()

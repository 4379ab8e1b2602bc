"""KubeCluster's paginated LISTs against a local fake API server: pages converted as they arrive,
continue tokens followed, a 410 on an expired token restarting the list, an answer that is not JSON
a TransientError, and the garbage collector paused while pages are decoded and restored after."""

from __future__ import annotations

import gc
import json
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pytest
from kubernetes import client

from reconciler.adapters.kube import nodes as kube_mod
from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.errors import ReconcilerError, TransientError
from reconciler.testing.fleetgen import make_node
from tests.httpfake import QuietHandler


def _node(i: int) -> dict[str, Any]:
    obj = make_node(f"n{i:02d}", {"pool": "gpu"}, uid=f"u{i}", boot_id=f"b{i}", resource_version=str(i + 1),
                    kubelet_labels=False)
    obj["metadata"]["managedFields"] = [{"manager": "kwok", "fieldsV1": {"f:status": {}}}]  # as a server lists it
    return obj


class _Api(QuietHandler):
    nodes: ClassVar[list[dict[str, Any]]] = []
    expire_once: ClassVar[str] = ""  # a continue token answered with 410 the first time it is used
    broken: ClassVar[bool] = False
    queries: ClassVar[list[dict[str, str]]] = []
    refuse: ClassVar[int] = 0  # answer every request with a Status of this code

    def _send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        url = urllib.parse.urlparse(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        _Api.queries.append(q)
        if _Api.broken:
            self._send(200, b"<html>proxy error</html>")
            return
        if _Api.refuse:
            self._send(_Api.refuse, json.dumps({"kind": "Status", "status": "Failure", "code": _Api.refuse,
                                                "message": "nodes is forbidden: User cannot list"}).encode())
            return
        token = q.get("continue", "")
        if token and token == _Api.expire_once:
            _Api.expire_once = ""
            self._send(410, json.dumps({"kind": "Status", "status": "Failure", "reason": "Expired", "code": 410,
                                        "message": "too old resource version"}).encode())
            return
        start, limit = int(token or 0), int(q.get("limit", 500))
        items = _Api.nodes[start:start + limit]
        more = str(start + limit) if start + limit < len(_Api.nodes) else ""
        self._send(200, json.dumps({"kind": "NodeList", "metadata": {"continue": more, "resourceVersion": "9"},
                                    "items": items}).encode())



@pytest.fixture
def api(http_server: Callable[[type[_Api]], str]) -> Iterator[client.ApiClient]:
    _Api.nodes, _Api.expire_once, _Api.broken, _Api.queries = [_node(i) for i in range(7)], "", False, []
    _Api.refuse = 0
    cfg = client.Configuration()
    cfg.host = http_server(_Api)
    api_client = client.ApiClient(cfg)
    try:
        yield api_client
    finally:
        api_client.close()


def test_pages_followed_and_converted(api: client.ApiClient) -> None:
    nodes = KubeCluster(api, page_size=3).nodes.list_nodes(label_selector="pool=gpu")
    assert [n.name for n in nodes] == [f"n{i:02d}" for i in range(7)]
    assert nodes[4].boot_id == "b4" and nodes[4].ready is True and dict(nodes[4].labels) == {"pool": "gpu"}
    assert [q.get("continue", "") for q in _Api.queries] == ["", "3", "6"]
    assert all(q["limit"] == "3" and q["labelSelector"] == "pool=gpu" for q in _Api.queries)


def test_expired_continue_token_restarts_without_duplicates(api: client.ApiClient) -> None:
    _Api.expire_once = "6"
    nodes = KubeCluster(api, page_size=3).nodes.list_nodes()
    assert [n.name for n in nodes] == [f"n{i:02d}" for i in range(7)]  # the first two pages' records dropped
    assert [q.get("continue", "") for q in _Api.queries] == ["", "3", "6", "", "3", "6"]


def test_pages_converted_as_they_arrive_with_the_collector_paused(
    api: client.ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, int, bool]] = []
    orig = kube_mod.node_from

    def spy(obj: dict[str, Any]) -> Any:
        seen.append((obj["metadata"]["name"], len(_Api.queries), gc.isenabled()))
        return orig(obj)

    monkeypatch.setattr(kube_mod, "node_from", spy)
    assert gc.isenabled()
    KubeCluster(api, page_size=3).nodes.list_nodes()
    # each item converted before the next page was asked for, with the collector off
    assert [(name, q) for name, q, _ in seen] == [(f"n{i:02d}", i // 3 + 1) for i in range(7)]
    assert not any(on for _, _, on in seen)
    assert gc.isenabled()


def test_collector_restored_after_errors_and_left_off_if_it_was(api: client.ApiClient) -> None:
    _Api.broken = True
    with pytest.raises(TransientError, match="list nodes: answer is not JSON"):
        KubeCluster(api).nodes.list_nodes()
    assert gc.isenabled()
    _Api.broken = False
    gc.disable()
    try:
        assert len(KubeCluster(api).nodes.list_nodes()) == 7
        assert not gc.isenabled()  # someone else's choice is kept
    finally:
        gc.enable()


def test_a_refused_list_reads_as_the_api_servers_error(api: client.ApiClient) -> None:
    """An answer outside 2xx becomes our error vocabulary with the server's message."""
    for code, kind in ((403, "ForbiddenError"), (500, "ServerError")):
        _Api.refuse = code
        with pytest.raises(ReconcilerError) as e:
            KubeCluster(api).nodes.list_nodes()
        assert type(e.value).__name__ == kind and "forbidden: User cannot list" in str(e.value)

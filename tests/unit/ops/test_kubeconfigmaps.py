"""The ConfigMap store for real clusters (recipe controls) against a local fake API server: read,
merge patch with null removing a key, create when absent, errors translated."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pytest
from kubernetes import client

from reconciler.adapters.kube.api import KubeApi
from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.adapters.kube.configmaps import MERGE_PATCH, KubeConfigMaps
from reconciler.errors import ForbiddenError
from reconciler.ops.controls import CONTROLS_CONFIGMAP, control_patch, held_reason, store_for
from tests.httpfake import QuietHandler

PATH = f"/api/v1/namespaces/node-reconciler/configmaps/{CONTROLS_CONFIGMAP}"


class _Api(QuietHandler):
    objects: ClassVar[dict[str, dict[str, Any]]] = {}
    calls: ClassVar[list[tuple[str, str, str]]] = []
    forbid: ClassVar[bool] = False

    def _send(self, code: int, body: dict[str, Any]) -> None:
        raw = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _body(self) -> dict[str, Any]:
        n = int(self.headers.get("Content-Length", 0))
        return json.loads(self.rfile.read(n)) if n else {}

    def _missing(self) -> None:
        self._send(404, {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404,
                         "message": "configmaps not found"})

    def do_GET(self) -> None:
        _Api.calls.append(("GET", self.path, ""))
        obj = _Api.objects.get(self.path)
        if obj:
            self._send(200, obj)
        else:
            self._missing()

    def do_PATCH(self) -> None:
        body = self._body()
        _Api.calls.append(("PATCH", self.path, self.headers.get("Content-Type", "")))
        if _Api.forbid:
            self._send(403, {"kind": "Status", "reason": "Forbidden", "code": 403, "message": "no patch for you"})
            return
        obj = _Api.objects.get(self.path)
        if obj is None:
            self._missing()
            return
        data = obj.setdefault("data", {})
        for k, v in body.get("data", {}).items():
            if v is None:
                data.pop(k, None)
            else:
                data[k] = v
        self._send(200, obj)

    def do_POST(self) -> None:
        body = self._body()
        _Api.calls.append(("POST", self.path, ""))
        _Api.objects[f"{self.path}/{body['metadata']['name']}"] = body
        self._send(201, body)



@pytest.fixture
def api(http_server: Callable[[type[_Api]], str]) -> Iterator[client.ApiClient]:
    _Api.objects, _Api.calls, _Api.forbid = {}, [], False
    cfg = client.Configuration()
    cfg.host = http_server(_Api)
    api_client = client.ApiClient(cfg)
    try:
        yield api_client
    finally:
        api_client.close()


def test_store_reads_creates_and_merges(api: client.ApiClient) -> None:
    store = KubeConfigMaps(KubeApi(api))
    assert store.get_config_map("node-reconciler", CONTROLS_CONFIGMAP) is None
    store.patch_config_map("node-reconciler", CONTROLS_CONFIGMAP, {"a": "1", "b": None})
    assert [c[0] for c in _Api.calls] == ["GET", "PATCH", "POST"]  # patch 404 → create
    created = _Api.objects[PATH]
    assert created["data"] == {"a": "1"} and created["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "node-reconciler"}
    store.patch_config_map("node-reconciler", CONTROLS_CONFIGMAP, {"a": None, "c": "3"})
    assert _Api.calls[-1] == ("PATCH", PATH, MERGE_PATCH)
    assert store.get_config_map("node-reconciler", CONTROLS_CONFIGMAP) == {"c": "3"}
    _Api.forbid = True
    with pytest.raises(ForbiddenError):
        store.patch_config_map("node-reconciler", CONTROLS_CONFIGMAP, {"x": "1"})


def test_controls_on_a_kube_like_cluster(api: client.ApiClient) -> None:
    cluster = KubeCluster(api, namespace="node-reconciler").ports  # the control store is one of its roles
    store = store_for(cluster)
    assert isinstance(store, KubeConfigMaps)
    patch, before, after = control_patch(cluster, "r1", "pause", reason="freeze", by="me", at="t")
    assert patch is not None and not before.active and after.paused
    patch.write(store)
    assert held_reason(cluster, "r1") == "paused (by me; at t; reason: freeze)"
    assert held_reason(cluster, "r2") == ""
    assert store_for(object()) is None

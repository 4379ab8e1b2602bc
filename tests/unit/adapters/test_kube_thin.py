"""The kube adapters' one request path (reconciler/adapters/kube/api.py): requests sent through the
ApiClient's ``param_serialize``/``call_api`` with a ready JSON body. Against a local fake API
server, each request must be the one the generated ``kubernetes`` method sends (method, path,
query, content type, body, bearer token), and error answers must map to our errors."""

from __future__ import annotations

import gzip
import json
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pytest
from kubernetes import client

from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.errors import ConflictError, NotFoundError, TooManyRequestsError, TransientError
from reconciler.ports import StageSpec
from reconciler.testing.fleetgen import make_node, make_pod
from tests.httpfake import QuietHandler, serving

_NODE = make_node("n/1", {"pool": "gpu"}, uid="u1", boot_id="b1", resource_version="7", kubelet_labels=False)
_POD = make_pod("node-reconciler", "p", "n/1", phase="Pending", uid="pu", resource_version="8")


class _Api(QuietHandler):
    seen: ClassVar[list[dict[str, Any]]] = []
    answer: ClassVar[tuple[int, dict[str, str], bytes] | None] = None  # forced answer

    def _handle(self) -> None:
        url = urllib.parse.urlparse(self.path)
        raw = self.read_body()
        _Api.seen.append({
            "method": self.command, "path": url.path, "query": sorted(urllib.parse.parse_qsl(url.query)),
            "content_type": self.headers.get("Content-Type"), "auth": self.headers.get("Authorization"),
            "encoding": self.headers.get("Accept-Encoding"),
            "body": json.loads(raw) if raw else None,
        })
        if _Api.answer is not None:
            code, headers, body = _Api.answer
        elif url.path == "/api/v1/nodes":  # a LIST: gzip-compressed when asked, as kube-apiserver does
            body = json.dumps({"kind": "NodeList", "metadata": {}, "items": [_NODE]}).encode()
            headers = {}
            if "gzip" in (self.headers.get("Accept-Encoding") or ""):
                body, headers = gzip.compress(body), {"Content-Encoding": "gzip"}
            code = 200
        elif "/configmaps/" in url.path:
            code, headers, body = 200, {}, json.dumps({"kind": "ConfigMap", "data": {"paused": "true"}}).encode()
        elif url.path.endswith("/log"):
            code, headers, body = 200, {}, b"one\ntwo\n"
        elif "/pods" in url.path:
            code, headers, body = 200, {}, json.dumps(_POD).encode()
        else:
            code, headers, body = 200, {}, json.dumps(_NODE).encode()
        self.send_response(code)
        for k, v in {"Content-Type": "application/json", **headers}.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PATCH = do_DELETE = _handle


@pytest.fixture
def server() -> Iterator[str]:
    _Api.seen, _Api.answer = [], None
    with serving(_Api) as url:
        yield url


def _cluster(host: str) -> KubeCluster:
    cfg = client.Configuration()
    cfg.host = host
    cfg.api_key = {"authorization": "tok"}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    return KubeCluster(client.ApiClient(cfg))


def _spec() -> StageSpec:
    return StageSpec(recipe="r", node="n/1", package="pkg", version="1.0", stage="apply", pull_ref="img@sha256:ab",
                     run_id="run-1", config_map={})


_SEL = "app.kubernetes.io/managed-by=node-reconciler,reconciler.nodewright.dev/recipe=r,kubernetes.io/hostname=n-1"
_Ours = Callable[[KubeCluster], object]
_Generated = Callable[[client.CoreV1Api], object]
CALLS: list[tuple[str, _Ours, _Generated]] = [
    ("get node", lambda kc: kc.nodes.get_node("n/1"), lambda c: c.read_node("n/1", _preload_content=False)),
    ("get pod", lambda kc: kc.pods.get_pod("ns", "p q"),
     lambda c: c.read_namespaced_pod("p q", "ns", _preload_content=False)),
    ("patch node", lambda kc: kc.nodes.patch_node("n/1", annotations={"a": "1", "b": None}, unschedulable=True,
                                                  resource_version="7"),
     lambda c: c.patch_node("n/1", {"metadata": {"annotations": {"a": "1", "b": None}, "resourceVersion": "7"},
                                    "spec": {"unschedulable": True}}, field_manager="node-reconciler",
                            _content_type="application/merge-patch+json", _preload_content=False)),
    ("evict", lambda kc: kc.pods.evict_pod("ns", "p", "uid-1", 30),
     lambda c: c.create_namespaced_pod_eviction("p", "ns", client.V1Eviction(
         api_version="policy/v1", kind="Eviction", metadata=client.V1ObjectMeta(name="p", namespace="ns"),
         delete_options=client.V1DeleteOptions(grace_period_seconds=30,
                                               preconditions=client.V1Preconditions(uid="uid-1"))),
         _preload_content=False)),
    ("delete stage", lambda kc: kc.stages.delete_stage(_spec()),
     lambda c: c.delete_namespaced_pod(_spec().pod_name, "node-reconciler", _preload_content=False)),
    ("log tail", lambda kc: kc.stages._log_tail("p", "c"),
     lambda c: c.read_namespaced_pod_log("p", "node-reconciler", container="c", tail_lines=20, limit_bytes=16384,
                                         _preload_content=False)),
]


def _requests(host: str, call: Callable[[KubeCluster], object]) -> list[dict[str, Any]]:
    """The requests ``call`` sent (with a KubeCluster, or with the generated API of the same
    client). A body sent without a Content-Type (the generated methods leave it out for plain
    JSON, and the API server reads JSON then) is counted as ``application/json``."""
    _Api.seen = []
    kc = _cluster(host)
    try:
        call(kc)
    finally:
        kc.close()
    for r in _Api.seen:
        if r["body"] is not None and r["content_type"] is None:
            r["content_type"] = "application/json"
        r.pop("encoding")
    return list(_Api.seen)


@pytest.mark.parametrize(("label", "ours", "generated"), CALLS, ids=[c[0] for c in CALLS])
def test_each_request_is_the_generated_methods_one(server: str, label: str, ours: _Ours,
                                                    generated: _Generated) -> None:
    """Our one request path sends what the client's generated method sends (method, path, query,
    content type, body, bearer token), without its argument validation and model round trips."""
    sent = _requests(server, ours)
    expected = _requests(server, lambda kc: generated(client.CoreV1Api(kc.api_client)))
    assert sent and sent == expected, label
    assert all(r["auth"] == "Bearer tok" for r in sent)


def test_stage_pod_create_sends_the_stage_pod(server: str) -> None:
    spec = StageSpec(recipe="r", node="n1", package="pkg", version="1.0", stage="apply", pull_ref="img@sha256:ab",
                     run_id="run-1", config_map={"a.conf": "x=1"}, grace_seconds=5, timeout_seconds=60)
    sent = _requests(server, lambda kc: kc.stages.start_stage(spec))
    pods = [r for r in sent if r["method"] == "POST" and r["path"].endswith("/pods")]
    assert len(pods) == 1
    assert pods[0]["query"] == [("fieldManager", "node-reconciler")]
    assert pods[0]["body"]["spec"]["nodeName"] == "n1"


def test_a_rerun_stage_pod_is_created_and_read_under_its_own_name(server: str) -> None:
    """The real-cluster path of `package rerun` (the pods of a failed run stay, for their logs):
    the rerun's spec (``StageSpec.rerun``, from ``InFlight.reruns``) is created and read back under
    a name of its own, never the earlier pod's, and says so in its stage-spec annotation."""
    from dataclasses import replace

    from reconciler.adapters.kube.stagepod import SPEC_ANNOTATION

    first = StageSpec(recipe="r", node="n1", package="pkg", version="1.0", stage="apply", pull_ref="img@sha256:ab",
                      run_id="run-1")
    again = replace(first, rerun=1)
    assert again.pod_name != first.pod_name and again.pod_name.startswith("r-pkg-apply-n1-")
    sent = _requests(server, lambda kc: (kc.stages.start_stage(again), kc.stages.stage_status(again)))
    posts = [r for r in sent if r["method"] == "POST" and r["path"].endswith("/pods")]
    assert len(posts) == 1 and posts[0]["body"]["metadata"]["name"] == again.pod_name
    assert json.loads(posts[0]["body"]["metadata"]["annotations"][SPEC_ANNOTATION])["rerun"] == 1
    assert [r["path"] for r in sent if r["method"] == "GET" and "/pods/" in r["path"]] == [
        f"/api/v1/namespaces/node-reconciler/pods/{again.pod_name}"]
    sent = _requests(server, lambda kc: kc.stages.start_stage(first))  # a pod never rerun: as before
    body = next(r["body"] for r in sent if r["method"] == "POST" and r["path"].endswith("/pods"))
    assert body["metadata"]["name"] == first.pod_name
    assert "rerun" not in json.loads(body["metadata"]["annotations"][SPEC_ANNOTATION])


def test_error_answers(server: str) -> None:
    kc = _cluster(server)
    try:
        _Api.answer = (404, {}, json.dumps({"kind": "Status", "reason": "NotFound", "message": "nope"}).encode())
        with pytest.raises(NotFoundError, match="get node x: nope"):
            kc.nodes.get_node("x")
        assert kc.pods.get_pod("ns", "gone") is None
        _Api.answer = (429, {"Retry-After": "7"}, json.dumps({
            "kind": "Status", "reason": "TooManyRequests", "message": "budget",
            "details": {"causes": [{"reason": "DisruptionBudget", "message": "pdb x"}]}}).encode())
        with pytest.raises(TooManyRequestsError) as e429:
            kc.pods.evict_pod("ns", "p", "u", None)
        assert e429.value.disruption_budget and e429.value.retry_after == 7.0
        _Api.answer = (409, {}, json.dumps({"kind": "Status", "reason": "Conflict", "message": "changed"}).encode())
        with pytest.raises(ConflictError):
            kc.nodes.patch_node("n", unschedulable=True, resource_version="3")
        _Api.answer = (200, {}, b"<html>proxy</html>")
        with pytest.raises(TransientError, match="not JSON"):
            kc.nodes.get_node("y")
    finally:
        kc.close()


def test_unreachable() -> None:
    kc = _cluster("http://127.0.0.1:1")
    try:
        with pytest.raises(TransientError):
            kc.nodes.patch_node("n", unschedulable=True)
    finally:
        kc.close()


def test_lists_ask_for_gzip_and_read_it(server: str) -> None:
    kc = _cluster(server)
    try:
        nodes = kc.nodes.list_nodes()
    finally:
        kc.close()
    assert [n.name for n in nodes] == ["n/1"]
    assert _Api.seen[-1]["encoding"] == "gzip"


def test_reading_the_control_switches(server: str) -> None:
    kc = _cluster(server)
    try:
        store = kc.controls
        assert store.get_config_map("node-reconciler", "node-reconciler-controls") == {"paused": "true"}
        assert _Api.seen[-1]["path"] == "/api/v1/namespaces/node-reconciler/configmaps/node-reconciler-controls"
        _Api.answer = (404, {}, json.dumps({"kind": "Status", "reason": "NotFound", "message": "no"}).encode())
        assert store.get_config_map("node-reconciler", "absent") is None
    finally:
        kc.close()


def test_kubeconfig_set_after_the_client_was_imported_is_read(server: str, tmp_path: Any,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """``$KUBECONFIG`` is read when a session connects, as kubectl reads it (the client reads it
    once, at import: a library user who sets it later was refused with "Invalid kube-config file")."""
    from tests.httpfake import token_kubeconfig

    path = token_kubeconfig(tmp_path / "kc", server, token="tok")
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config to fall back to
    kc = KubeCluster.from_kubeconfig()
    try:
        assert kc.nodes.get_node("n/1").name == "n/1"
        assert _Api.seen[-1]["auth"] == "Bearer tok"
    finally:
        kc.close()

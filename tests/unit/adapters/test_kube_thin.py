"""KubeCluster's thin request path (issue 17): node PATCHes, evictions, stage pod creation and
deletion, node/pod GETs and log reads sent through the ApiClient's ``param_serialize``/``call_api``
with a ready JSON body. Against a local fake API server, each request must be the one the
generated ``kubernetes`` method sends (method, path, query, content type, body, bearer token), and
error answers must map to the same errors."""

from __future__ import annotations

import gzip
import json
import threading
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


def _cluster(host: str, *, thin: bool) -> KubeCluster:
    cfg = client.Configuration()
    cfg.host = host
    cfg.api_key = {"authorization": "tok"}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    kc = KubeCluster(client.ApiClient(cfg))
    kc.__dict__["_thin"] = thin  # the cached property, forced: False = the generated methods
    return kc


def _spec() -> StageSpec:
    return StageSpec(recipe="r", node="n/1", package="pkg", version="1.0", stage="apply", pull_ref="img@sha256:ab",
                     run_id="run-1", config_map={})


CALLS: list[tuple[str, Callable[[KubeCluster], object]]] = [
    ("get node", lambda kc: kc.get_node("n/1")),
    ("get pod", lambda kc: kc.get_pod("ns", "p q")),
    ("patch node", lambda kc: kc.patch_node("n/1", annotations={"a": "1", "b": None}, unschedulable=True,
                                            resource_version="7")),
    ("evict", lambda kc: kc.evict_pod("ns", "p", "uid-1", 30)),
    ("evict, no grace", lambda kc: kc.evict_pod("ns", "p", "uid-1", None)),
    ("delete stage", lambda kc: kc.delete_stage(_spec())),
    ("delete stages", lambda kc: kc.delete_stages("r", "n/1")),
    ("log tail", lambda kc: kc._log_tail("p", "c")),
]


def _requests(host: str, thin: bool, call: Callable[[KubeCluster], object]) -> tuple[object, list[dict[str, Any]]]:
    """What ``call`` returned and the requests it sent. A body sent without a Content-Type (the
    generated methods leave it out for plain JSON, and the API server reads JSON then) is counted
    as ``application/json``, which the thin path names."""
    _Api.seen = []
    kc = _cluster(host, thin=thin)
    try:
        out = call(kc)
    finally:
        kc.close()
    for r in _Api.seen:
        if r["body"] is not None and r["content_type"] is None:
            r["content_type"] = "application/json"
    return out, list(_Api.seen)


@pytest.mark.parametrize(("label", "call"), CALLS, ids=[c[0] for c in CALLS])
def test_thin_request_is_the_generated_one(server: str, label: str, call: Callable[[KubeCluster], object]) -> None:
    thin_out, thin = _requests(server, True, call)
    gen_out, gen = _requests(server, False, call)
    assert thin and thin == gen, label
    assert thin_out == gen_out
    assert all(r["auth"] == "Bearer tok" for r in thin)


def test_stage_pod_create_sends_the_generated_body(server: str) -> None:
    spec = StageSpec(recipe="r", node="n1", package="pkg", version="1.0", stage="apply", pull_ref="img@sha256:ab",
                     run_id="run-1", config_map={"a.conf": "x=1"}, grace_seconds=5, timeout_seconds=60)
    _, thin = _requests(server, True, lambda kc: kc.start_stage(spec))
    _, gen = _requests(server, False, lambda kc: kc.start_stage(spec))
    pods = [[r for r in reqs if r["method"] == "POST" and r["path"].endswith("/pods")] for reqs in (thin, gen)]
    assert len(pods[0]) == 1 and pods[0] == pods[1]
    assert pods[0][0]["query"] == [("fieldManager", "node-reconciler")]
    assert pods[0][0]["body"]["spec"]["nodeName"] == "n1"


@pytest.mark.parametrize("thin", [True, False], ids=["thin", "generated"])
def test_a_rerun_stage_pod_is_created_and_read_under_its_own_name(server: str, thin: bool) -> None:
    """The real-cluster path of `package rerun` (the pods of a failed run stay, for their logs):
    the rerun's spec (``StageSpec.rerun``, from ``InFlight.reruns``) is created and read back under
    a name of its own, never the earlier pod's, and says so in its stage-spec annotation."""
    from dataclasses import replace

    from reconciler.adapters.kube.stagepod import SPEC_ANNOTATION

    first = StageSpec(recipe="r", node="n1", package="pkg", version="1.0", stage="apply", pull_ref="img@sha256:ab",
                      run_id="run-1")
    again = replace(first, rerun=1)
    assert again.pod_name != first.pod_name and again.pod_name.startswith("r-pkg-apply-n1-")
    _, sent = _requests(server, thin, lambda kc: (kc.start_stage(again), kc.stage_status(again)))
    posts = [r for r in sent if r["method"] == "POST" and r["path"].endswith("/pods")]
    assert len(posts) == 1 and posts[0]["body"]["metadata"]["name"] == again.pod_name
    assert json.loads(posts[0]["body"]["metadata"]["annotations"][SPEC_ANNOTATION])["rerun"] == 1
    assert [r["path"] for r in sent if r["method"] == "GET" and "/pods/" in r["path"]] == [
        f"/api/v1/namespaces/node-reconciler/pods/{again.pod_name}"]
    _, sent = _requests(server, thin, lambda kc: kc.start_stage(first))  # a pod never rerun: as before
    body = next(r["body"] for r in sent if r["method"] == "POST" and r["path"].endswith("/pods"))
    assert body["metadata"]["name"] == first.pod_name
    assert "rerun" not in json.loads(body["metadata"]["annotations"][SPEC_ANNOTATION])


def test_thin_path_errors(server: str) -> None:
    kc = _cluster(server, thin=True)
    try:
        _Api.answer = (404, {}, json.dumps({"kind": "Status", "reason": "NotFound", "message": "nope"}).encode())
        with pytest.raises(NotFoundError, match="get node x: nope"):
            kc.get_node("x")
        assert kc.get_pod("ns", "gone") is None
        _Api.answer = (429, {"Retry-After": "7"}, json.dumps({
            "kind": "Status", "reason": "TooManyRequests", "message": "budget",
            "details": {"causes": [{"reason": "DisruptionBudget", "message": "pdb x"}]}}).encode())
        with pytest.raises(TooManyRequestsError) as e429:
            kc.evict_pod("ns", "p", "u", None)
        assert e429.value.disruption_budget and e429.value.retry_after == 7.0
        _Api.answer = (409, {}, json.dumps({"kind": "Status", "reason": "Conflict", "message": "changed"}).encode())
        with pytest.raises(ConflictError):
            kc.patch_node("n", unschedulable=True, resource_version="3")
        _Api.answer = (200, {}, b"<html>proxy</html>")
        with pytest.raises(TransientError, match="not JSON"):
            kc.get_node("y")
    finally:
        kc.close()


def test_thin_path_unreachable() -> None:
    kc = _cluster("http://127.0.0.1:1", thin=True)
    try:
        with pytest.raises(TransientError):
            kc.patch_node("n", unschedulable=True)
    finally:
        kc.close()


def test_the_token_refresh_hook_no_longer_reads_the_environment_per_request(
        server: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """The kubeconfig loader's refresh hook sets ``host`` before every request; with the proxy
    taken from the environment that re-read every environment variable each time. After
    ``from_kubeconfig`` the environment is read while loading only, and the proxy it gave stays."""
    from kubernetes.client import configuration as conf_mod

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "tok"}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}))
    reads: list[int] = []
    real = conf_mod.getproxies

    me = threading.get_ident()

    def counting() -> dict[str, str]:
        if threading.get_ident() == me:  # not a thread an earlier test left running (CI runs e2e first)
            reads.append(1)
        return real()

    monkeypatch.setattr(conf_mod, "getproxies", counting)
    kc = KubeCluster.from_kubeconfig(str(kubeconfig))
    try:
        loaded = len(reads)
        proxy = kc.api_client.configuration.proxy
        kc.get_node("n/1")  # the first request may set up what a process sets up once
        assert len(reads) <= loaded + 1
        first = len(reads)
        for _ in range(5):
            kc.get_node("n/1")
        assert len(reads) == first, "the environment was read again per request"
        assert kc.api_client.configuration.proxy == proxy
        assert _Api.seen[-1]["auth"] == "Bearer tok"  # the hook still sets the token
    finally:
        kc.close()


def test_lists_ask_for_gzip_and_read_it(server: str) -> None:
    kc = _cluster(server, thin=True)
    try:
        nodes = kc.list_nodes()
    finally:
        kc.close()
    assert [n.name for n in nodes] == ["n/1"]
    assert _Api.seen[-1]["encoding"] == "gzip"


def test_reading_the_control_switches_needs_no_generated_api(server: str) -> None:
    """A ``plan`` reads the recipe control switches once; that read must not build CoreV1Api
    (importing it costs about 1.3 s of CPU)."""
    kc = _cluster(server, thin=True)
    try:
        store = kc.config_map_store()
        assert store.get_config_map("node-reconciler", "node-reconciler-controls") == {"paused": "true"}
        assert "_core" not in store.__dict__
        assert _Api.seen[-1]["path"] == "/api/v1/namespaces/node-reconciler/configmaps/node-reconciler-controls"
        _Api.answer = (404, {}, json.dumps({"kind": "Status", "reason": "NotFound", "message": "no"}).encode())
        assert store.get_config_map("node-reconciler", "absent") is None
    finally:
        kc.close()

"""The watch-based clock wakes on node and pod changes (no polling needed); on the real control
plane its streams are multiplexed on the waiting thread (no watch thread, issue 17)."""

from __future__ import annotations

import threading
import time
from typing import Any

from reconciler.adapters.kube.watch import WatchClock


def test_wait_returns_early_with_the_changed_node(kube: Any, make_nodes: Any) -> None:
    node = make_nodes(1, {"pool": "watch"})[0]
    clock = WatchClock(kube.api_client, max_sleep=20)
    assert clock.multiplex  # the API client's requests go over the keep-alive transport
    try:
        deadline = time.monotonic() + 20
        while clock.wait(1.0) is None and time.monotonic() < deadline:
            pass  # watches starting
        clock.wait(0.5)
        assert not [t for t in threading.enumerate() if t.name.startswith("watch-")]
        kube.patch_node(node, annotations={"example.com/touch": "1"})
        t0 = time.monotonic()
        changed: set[str] = set()
        while node not in changed and time.monotonic() - t0 < 15:
            got = clock.wait(15)
            changed |= got or set()
        assert node in changed
        assert time.monotonic() - t0 < 10  # woke on the event, not at the timeout
    finally:
        clock.close()


def test_cache_answers_tracked_node_and_stage_pod_reads_from_watch_events(kube: Any, make_nodes: Any) -> None:
    from kubernetes.client import CoreV1Api

    from reconciler.adapters.kube.cache import NODES, WatchCache
    from reconciler.adapters.kube.cluster import KubeCluster
    from reconciler.adapters.kube.objects import node_from
    from reconciler.ports import StageSpec

    node = make_nodes(1, {"pool": "cache"})[0]
    cache = WatchCache({NODES: node_from})
    cached = KubeCluster(kube.api_client, namespace=kube.namespace, cache=cache)
    clock = WatchClock(kube.api_client, max_sleep=20, cache=cache)
    core = CoreV1Api(kube.api_client)
    reads: list[str] = []
    orig_read_node, orig_read_pod = core.read_node, core.read_namespaced_pod
    orig_send = cached._send

    def send(method: str, path: str, what: str, **kw: Any) -> bytes:  # the thin request path (issue 17)
        if method == "GET" and path.startswith("/api/v1/nodes/"):
            reads.append("node")
        elif method == "GET" and "/pods/" in path and not path.endswith("/log"):
            reads.append("pod")
        return orig_send(method, path, what, **kw)

    try:
        deadline = time.monotonic() + 20
        while clock.wait(1.0) is None and time.monotonic() < deadline:
            pass  # watches starting
        cached._send = send  # type: ignore[method-assign]
        cached._core.read_node = lambda *a, **k: (reads.append("node"), orig_read_node(*a, **k))[1]  # type: ignore[method-assign]
        cached._core.read_namespaced_pod = (  # type: ignore[method-assign]
            lambda *a, **k: (reads.append("pod"), orig_read_pod(*a, **k))[1])
        assert cached.get_node(node).name == node
        assert reads == ["node"]  # first read: one GET, and the node is tracked from then on
        kube.patch_node(node, annotations={"example.com/touch": "2"})  # someone else changes it
        t0 = time.monotonic()
        while cached.get_node(node).annotations.get("example.com/touch") != "2" and time.monotonic() - t0 < 10:
            clock.wait(0.5)
        assert cached.get_node(node).annotations.get("example.com/touch") == "2"
        assert reads == ["node"]  # the change came by the watch, not by GETs
        # our own write's answer is what later reads see, without a read
        cached.patch_node(node, annotations={"example.com/touch": "3"})
        assert cached.get_node(node).annotations["example.com/touch"] == "3"

        spec = StageSpec(recipe="cache", node=node, package="p", version="1.0.0", stage="apply",
                         pull_ref="registry.example/p@sha256:" + "a" * 64, run_id="run-cache", attempt=1,
                         env=(), timeout_seconds=60)
        cached.start_stage(spec)
        t0 = time.monotonic()
        while cached.stage_status(spec).phase != "succeeded" and time.monotonic() - t0 < 30:
            clock.wait(1.0)
        assert cached.stage_status(spec).phase == "succeeded"  # kwok ran it; the watch told us
        assert "pod" not in reads
        cached.delete_stages("cache", node)
        t0 = time.monotonic()
        while cached.stage_status(spec).phase != "missing" and time.monotonic() - t0 < 30:
            clock.wait(1.0)
        assert cached.stage_status(spec).phase == "missing"
        assert cache.hits > 0
    finally:
        clock.close()

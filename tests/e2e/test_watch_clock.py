"""The watch streams on the real control plane: a wait wakes on a change of a node the run works
on (no polling), and reads the streams already hold (a node, the pods on it, a stage pod) are not
requests (issue 37)."""

from __future__ import annotations

import time
from typing import Any

from reconciler.adapters.kube.api import KubeApi
from reconciler.ports import StageSpec


def _started(clock: Any) -> None:
    deadline = time.monotonic() + 20
    while clock.changed(1.0) is None and time.monotonic() < deadline:
        pass  # the streams are listing


def test_wait_returns_early_with_the_changed_node(kube: Any, make_nodes: Any, api: Any) -> None:
    from kubernetes import client

    node = make_nodes(1, {"pool": "watch"})[0]
    clock = kube.watch(max_sleep=20)
    try:
        _started(clock)
        kube.nodes.get_node(node)  # the run works on it from now on
        clock.changed(0.5)
        touch = {"metadata": {"annotations": {"example.com/touch": "1"}}}
        client.CoreV1Api(api).patch_node(node, touch)  # someone else
        t0 = time.monotonic()
        changed: set[str] = set()
        while node not in changed and time.monotonic() - t0 < 15:
            got = clock.changed(15)
            changed |= got or set()
        assert node in changed
        assert time.monotonic() - t0 < 10  # woke on the event, not at the timeout
    finally:
        clock.close()


def test_reads_the_streams_hold_are_not_requests(kube: Any, make_nodes: Any, api: Any,
                                                 monkeypatch: Any) -> None:
    from kubernetes import client

    node = make_nodes(1, {"pool": "cache"})[0]
    clock = kube.watch(max_sleep=20)
    reads: list[str] = []
    real = KubeApi.send

    def counting(self: KubeApi, method: str, path: str, what: str, **kw: Any) -> bytes:
        if method == "GET" and "/log" not in path:
            reads.append(path)
        return real(self, method, path, what, **kw)

    try:
        _started(clock)
        monkeypatch.setattr(KubeApi, "send", counting)
        assert kube.nodes.get_node(node).name == node
        assert kube.pods.list_pods(node_name=node) == []
        client.CoreV1Api(api).patch_node(node, {"metadata": {"annotations": {"example.com/touch": "2"}}})
        t0 = time.monotonic()
        while kube.nodes.get_node(node).annotations.get("example.com/touch") != "2" and time.monotonic() - t0 < 10:
            clock.changed(0.5)
        assert kube.nodes.get_node(node).annotations.get("example.com/touch") == "2"  # by the watch
        kube.nodes.patch_node(node, unschedulable=True)  # our cordon: its answer is what reads see
        assert kube.nodes.get_node(node).unschedulable
        spec = StageSpec(recipe="cache", node=node, package="p", version="1.0.0", stage="apply",
                         pull_ref="registry.example/p@sha256:" + "a" * 64, run_id="run-cache", attempt=1,
                         env=(), timeout_seconds=60)
        kube.stages.start_stage(spec)
        t0 = time.monotonic()
        while kube.stages.stage_status(spec).phase != "succeeded" and time.monotonic() - t0 < 30:
            clock.changed(1.0)
        assert kube.stages.stage_status(spec).phase == "succeeded"  # kwok ran it; the watch told us
        assert [p.name for p in kube.pods.list_pods(node_name=node)] == [spec.pod_name]
        kube.stages.delete_stages("cache", node)
        t0 = time.monotonic()
        while kube.stages.stage_status(spec).phase != "missing" and time.monotonic() - t0 < 30:
            clock.changed(1.0)
        assert kube.stages.stage_status(spec).phase == "missing"
        assert [r for r in reads if "/namespaces/" not in r or "/pods" in r] == [], reads  # no node or pod GET/LIST
        assert kube.store.hits > 0
    finally:
        clock.close()

"""Table tests of the pure kube functions on objects captured from the real control plane
(issue 13): ``tests/data/kube/*.json``, written by ``python -m tests.controlplane.capture``
(kube-apiserver v1.36, its controllers and kwok; see that module for what each file is). The same
expectations run on a fresh capture under ``--e2e`` (tests/e2e/test_captured_e2e.py), so the
fixtures are what the control plane serves today, and the simulated fleet's answers for the same
situations are compared in the conformance suites."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.kube.api import translate_api_error
from reconciler.adapters.kube.objects import node_from, pdb_from, pod_from
from reconciler.adapters.kube.stagepod import stage_status_from_pod
from reconciler.errors import (
    ClusterError,
    ConflictError,
    NotFoundError,
    ServerError,
    TooManyRequestsError,
)
from reconciler.model.vocab import UnhealthyPodEvictionPolicy

DATA = Path(__file__).resolve().parents[2] / "data" / "kube"
Obj = dict[str, Any]


def _node(o: Obj) -> None:
    n = node_from(o)
    assert n.name == "capture-node" and n.uid == o["metadata"]["uid"]
    assert n.ready is True and not n.unschedulable and n.taints == ()
    assert n.boot_id and n.boot_id == o["status"]["nodeInfo"]["bootID"]
    assert n.labels["kubernetes.io/hostname"] == "capture-node"
    assert n.created is not None and n.created > 1.7e9


def _pod_web(o: Obj) -> None:
    p = pod_from(o)
    assert (p.namespace, p.node_name, p.phase, p.ready) == ("capture", "capture-node", "Running", True)
    (owner,) = p.owners
    assert owner.kind == "ReplicaSet" and owner.controller and owner.name.startswith("web-")
    assert p.uid == o["metadata"]["uid"] and p.labels["app"] == "web"
    assert p.grace_seconds == 30 and p.deletion_ts is None and not p.emptydir
    assert p.start_time is not None and p.start_time > 1.7e9
    # the defaults kube-apiserver adds: not-ready/unreachable NoExecute for 300 s
    assert {(t.key, t.operator, t.effect, t.tolerationSeconds) for t in p.tolerations} == {
        ("node.kubernetes.io/not-ready", "Exists", "NoExecute", 300),
        ("node.kubernetes.io/unreachable", "Exists", "NoExecute", 300)}


def _pod_pending(o: Obj) -> None:
    p = pod_from(o)
    assert (p.phase, p.ready, p.owners, p.start_time) == ("Pending", False, (), None)


def _pdb(o: Obj) -> None:
    b = pdb_from(o)
    assert (b.namespace, b.name, b.min_available, b.max_unavailable) == ("capture", "web", 2, None)
    assert (b.disruptions_allowed, b.current_healthy, b.desired_healthy, b.expected_pods) == (0, 2, 2, 2)
    assert b.unhealthy_pod_eviction_policy is UnhealthyPodEvictionPolicy.IF_HEALTHY_BUDGET
    assert b.selector is not None and b.selector.matchLabels == {"app": "web"}


def _error(kind: type[ClusterError], status: int, **attrs: Any) -> Callable[[Obj], None]:
    def check(o: Obj) -> None:
        raw = json.dumps(o["body"]).encode()
        e = translate_api_error(o["status"], raw, o["headers"], "call")
        assert type(e) is kind, (type(e), e)
        assert e.status == status and e.message.startswith("call: ")
        assert o["body"]["message"] in e.message
        for k, v in attrs.items():
            assert getattr(e, k) == v, (k, getattr(e, k))
    return check


def _stage(phase: str, exit_code: int | None, reason: str, container_suffix: str) -> Callable[[Obj], None]:
    def check(o: Obj) -> None:
        st, container = stage_status_from_pod(o)
        assert (st.phase, st.exit_code) == (phase, exit_code)
        assert st.reason.startswith(reason), st.reason
        assert container.endswith(container_suffix)
        assert st.started is not None and st.started > 1.7e9
    return check


EXPECT: dict[str, Callable[[Obj], None]] = {
    "node.json": _node,
    "pod-web.json": _pod_web,
    "pod-pending.json": _pod_pending,
    "pdb-web.json": _pdb,
    "error-evict-429.json": _error(TooManyRequestsError, 429, disruption_budget=True, retry_after=None),
    "error-evict-500.json": _error(ServerError, 500),
    "error-get-404.json": _error(NotFoundError, 404),
    "error-patch-409.json": _error(ConflictError, 409, reason="Conflict"),
    "error-create-409.json": _error(ConflictError, 409, reason="AlreadyExists"),
    "error-create-422.json": _error(ClusterError, 422),
    "stagepod-succeeded.json": _stage("succeeded", 0, "", ""),
    "stagepod-failed.json": _stage("failed", 3, "", "-apply"),
    "stagepod-pullerror.json": _stage("pending", None, "ErrImagePull", ""),
}


def check_captured(directory: Path) -> list[str]:
    """Run every expectation on the captures in ``directory``; returns the names checked.
    Raises AssertionError (naming the file) on the first that does not hold."""
    names = sorted(p.name for p in directory.glob("*.json"))
    assert names == sorted(EXPECT), f"captures and expectations differ: {set(names) ^ set(EXPECT)}"
    for name in names:
        try:
            EXPECT[name](json.loads((directory / name).read_text()))
        except AssertionError as e:
            raise AssertionError(f"{directory / name}: {e}") from e
    return names


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_captured_object(name: str) -> None:
    EXPECT[name](json.loads((DATA / name).read_text()))


def test_every_capture_has_an_expectation() -> None:
    assert check_captured(DATA) == sorted(EXPECT)


def test_the_expectations_can_fail() -> None:
    """A captured object changed the way a mistake would change it is caught."""
    node = json.loads((DATA / "node.json").read_text())
    for c in node["status"]["conditions"]:
        if c["type"] == "Ready":
            c["status"] = "False"
    with pytest.raises(AssertionError):
        _node(node)
    evict = json.loads((DATA / "error-evict-429.json").read_text())
    evict["body"]["details"]["causes"] = []
    with pytest.raises(AssertionError):
        EXPECT["error-evict-429.json"](evict)

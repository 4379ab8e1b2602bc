"""kubectl drain filter chain (drain-and-scenarios.md §1.2), scenarios S07 and S08."""

from __future__ import annotations

import pytest

from reconciler.adapters.kube.objects import pod_from
from reconciler.model.recipe import DrainOptions
from reconciler.model.selector import LabelSelector
from reconciler.plan.drain import OWN_POD_REFUSAL, classify_pods
from reconciler.testing.fleetgen import make_pod

N = "n1"


def _pods() -> list:
    raw = [
        make_pod("batch", "report-28931-x", N, owner=("Job", "report-28931"), phase="Succeeded", emptydir=True),
        make_pod("default", "oneoff", N, phase="Failed"),
        make_pod("default", "debug-shell", N),
        make_pod("web", "cache-1", N, owner=("ReplicaSet", "cache"), emptydir=True),
        make_pod("web", "db-2", N, owner=("ReplicaSet", "db")),
        make_pod("kube-system", "kube-proxy-abc", N, owner=("DaemonSet", "kube-proxy")),
        make_pod("kube-system", "old-agent-def", N, owner=("DaemonSet", "legacy-agent")),
        make_pod("ml", "train-7", N, labels={"workload": "training"}, owner=("Job", "train-7")),
    ]
    mirror = make_pod("kube-system", "kube-apiserver-n1", N)
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    raw.append(mirror)
    return [pod_from(p) for p in raw]


def _exists(ns: str, name: str) -> bool:
    return name != "legacy-agent"


@pytest.mark.parametrize(
    ("force", "emptydir", "blocked", "evicted"),
    [
        (False, False, {"default/debug-shell", "web/cache-1", "kube-system/old-agent-def"}, {"web/db-2"}),
        (True, False, {"web/cache-1"}, {"web/db-2", "default/debug-shell", "kube-system/old-agent-def"}),
        (False, True, {"default/debug-shell", "kube-system/old-agent-def"}, {"web/db-2", "web/cache-1"}),
        (True, True, set(), {"web/db-2", "web/cache-1", "default/debug-shell", "kube-system/old-agent-def"}),
    ],
    ids=["strict", "force", "emptydir", "force+emptydir"],
)
def test_s08_filter_matrix(force: bool, emptydir: bool, blocked: set[str], evicted: set[str]) -> None:
    opts = DrainOptions(force=force, deleteEmptyDirData=emptydir)
    cls = classify_pods(_pods(), opts, LabelSelector(matchLabels={"workload": "training"}), daemonset_exists=_exists)
    assert {p.ref for p, _ in cls.blockers} == blocked
    assert {p.ref for p in cls.evict} == evicted
    # finished pods are always removable, whatever the flags (kubectl filter 6)
    assert {p.ref for p in cls.remove_finished} == {"batch/report-28931-x", "default/oneoff"}
    # protected pods are never evicted, live DaemonSet and mirror pods are skipped
    assert {p.ref for p in cls.protected} == {"ml/train-7"}
    skipped = {p.ref for p, _ in cls.skipped}
    assert {"kube-system/kube-proxy-abc", "kube-system/kube-apiserver-n1"} <= skipped
    assert "ml/train-7" not in {p.ref for p in cls.to_remove}


def test_s07_daemonset_refused_without_ignore_daemonsets() -> None:
    cls = classify_pods(_pods(), DrainOptions(ignoreDaemonSets=False, force=True, deleteEmptyDirData=True),
                        None, daemonset_exists=_exists)
    assert [p.ref for p, _ in cls.blockers] == ["kube-system/kube-proxy-abc"]
    assert "ignoreDaemonSets" in cls.blockers[0][1]


def test_stage_pods_and_pod_selector_are_left_alone() -> None:
    mine = {"app.kubernetes.io/managed-by": "node-reconciler"}
    ours = pod_from(make_pod("node-reconciler", "stage-x", N, labels=mine))
    other = pod_from(make_pod("web", "x", N, owner=("ReplicaSet", "x"), labels={"tier": "web"}))
    picked = pod_from(make_pod("web", "y", N, owner=("ReplicaSet", "y"), labels={"tier": "db"}))
    opts = DrainOptions(podSelector=LabelSelector(matchLabels={"tier": "db"}))
    cls = classify_pods([ours, other, picked], opts, None)
    assert [p.ref for p in cls.evict] == ["web/y"]
    assert {p.ref for p, _ in cls.skipped} == {"node-reconciler/stage-x", "web/x"}


def test_skip_wait_for_delete_timeout_counts_from_deletion_timestamp() -> None:
    raw = make_pod("a", "api-x", N, owner=("ReplicaSet", "api"))
    raw["metadata"]["deletionTimestamp"] = "2026-11-30T12:00:00Z"
    pod = pod_from(raw)
    assert pod.deletion_ts is not None
    opts = DrainOptions(skipWaitForDeleteTimeoutSeconds=60)
    assert classify_pods([pod], opts, None, now_wall=pod.deletion_ts + 59).evict
    assert not classify_pods([pod], opts, None, now_wall=pod.deletion_ts + 61).evict


@pytest.mark.parametrize("opts", [DrainOptions(), DrainOptions(force=True, deleteEmptyDirData=True,
                                                                podSelector=LabelSelector(matchLabels={"x": "y"}))],
                         ids=["defaults", "force+emptydir+podSelector"])
def test_the_reconcilers_own_pod_refuses_the_drain_whatever_the_flags(opts: DrainOptions) -> None:
    """The chart's controller (or pipeline Job, or hook) pod on the node: the drain refuses the
    node instead of evicting the reconciler that drains it; a finished Job pod of it does not."""
    own = {"app.kubernetes.io/name": "node-reconciler", "app.kubernetes.io/component": "controller"}
    ctl = pod_from(make_pod("node-reconciler", "node-reconciler-controller-7d9-x", N, labels=own,
                            owner=("ReplicaSet", "node-reconciler-controller-7d9"), emptydir=True))
    done = pod_from(make_pod("node-reconciler", "node-reconciler-apply-3-q", N, phase="Succeeded",
                             labels={**own, "app.kubernetes.io/component": "apply"}, owner=("Job", "apply-3")))
    web = pod_from(make_pod("web", "db-2", N, owner=("ReplicaSet", "db"), labels={"x": "y"}))
    cls = classify_pods([ctl, done, web], opts, None)
    assert [(p.ref, why) for p, why in cls.blockers] == [
        ("node-reconciler/node-reconciler-controller-7d9-x", OWN_POD_REFUSAL)]
    assert "placement" in OWN_POD_REFUSAL and "own pod" in OWN_POD_REFUSAL
    assert "node-reconciler/node-reconciler-controller-7d9-x" not in {p.ref for p in cls.to_remove}

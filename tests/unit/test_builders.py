"""The test builders (reconciler/testing): records are what the adapters read from the objects,
and the policy shorthand means the model form."""

from __future__ import annotations

import pytest

from reconciler.adapters.kube.objects import node_from, pod_from
from reconciler.model.observed import NodeCondition
from reconciler.model.vocab import UnhealthyPodEvictionPolicy
from reconciler.testing import builders as b
from reconciler.testing.fleetgen import make_node, make_pdb, make_pod, pdb_keywords


def test_a_node_record_is_what_the_adapters_read_from_its_object() -> None:
    n = b.node("n1", labels={"pool": "gpu"}, taints=["gpu=yes:NoSchedule"], ready=False, created=300.0)
    assert (n.uid, n.boot_id, n.created, n.ready) == ("uid-n1", "boot-1", 300.0, False)
    assert dict(n.labels) == {"pool": "gpu"}  # no kubelet labels unless asked
    assert [str(t) for t in n.taints] == ["gpu=yes:NoSchedule"]
    ready = n.condition("Ready")
    assert ready is not None and ready.reason == "KubeletNotReady"
    assert b.node("n2", ready=None).ready is None and b.node("n2", ready=None).conditions == ()


def test_make_node_and_make_pod_carry_the_new_keywords_into_the_object() -> None:
    obj = make_node("n1", {}, uid="u1", boot_id="b9", kubelet_labels=False)
    assert node_from(obj).uid == "u1" and node_from(obj).boot_id == "b9" and obj["metadata"]["labels"] == {}
    pod = pod_from(make_pod("ns", "p", "n1", owner=("Node", "n1"), phase="Pending", ready=True, start=None,
                            deletion=5.0, annotations={"a": "b"}, uid="pu"))
    assert (pod.uid, pod.ready, pod.start_time, pod.deletion_ts, dict(pod.annotations)) == ("pu", True, None, 5.0,
                                                                                             {"a": "b"})
    assert pod.owners[0].api_version == "v1"  # a mirror pod's owner is its Node
    assert pod_from(make_pod("ns", "q", "n1", phase="Succeeded")).ready is False  # default: Ready only when Running


def test_a_pod_and_a_pdb_keep_the_builders_defaults() -> None:
    p = b.pod("web", phase="Succeeded", deleting=True, mirror=True)
    assert (p.uid, p.node_name, p.ready, p.deletion_ts, p.mirror, p.start_time) == (
        "uid-default-web", "n1", True, 1.0, True, None)
    assert p.controller is not None and (p.controller.kind, p.controller.name) == ("ReplicaSet", "web-owner")
    budget = b.pdb("web", {"app": "web"}, allowed=0, unhealthy_policy="AlwaysAllow")
    assert budget.disruptions_allowed == 0 and budget.selector == b.as_selector({"app": "web"})
    assert budget.unhealthy_pod_eviction_policy.value == "AlwaysAllow" and budget.expected_pods == 0


def test_resource_versions_heartbeats_conditions_and_budget_counts_reach_the_records() -> None:
    obj = make_node("n1", {}, resource_version="12", heartbeat=1795000040.0,
                    conditions=[{"type": "example.com/Validated", "status": "False", "reason": "R"}])
    assert list(obj["metadata"]) == ["name", "uid", "resourceVersion", "creationTimestamp", "labels"]  # the API's order
    assert obj["status"]["conditions"][0]["lastHeartbeatTime"] == "2026-11-18T11:07:20Z"
    assert make_node("n1", {}, ready=None, heartbeat=5.0)["status"]["conditions"] == []
    n = b.node("n1", resource_version="7", conditions=[NodeCondition("example.com/Validated", "True", "", "ok")])
    assert n.resource_version == "7" and [c.type for c in n.conditions] == ["Ready", "example.com/Validated"]
    assert n.condition("example.com/Validated") == NodeCondition("example.com/Validated", "True", "", "ok")
    assert b.node("n1").resource_version == "" and "resourceVersion" not in make_node("n1", {})["metadata"]
    assert make_pod("ns", "p", "n1", resource_version="8")["metadata"]["resourceVersion"] == "8"
    budget = b.pdb("web", {"app": "web"}, allowed=0, current_healthy=1, desired_healthy=2, expected_pods=3,
                   unhealthy_policy=UnhealthyPodEvictionPolicy.ALWAYS_ALLOW)
    assert (budget.current_healthy, budget.desired_healthy, budget.expected_pods) == (1, 2, 3)
    assert budget.unhealthy_pod_eviction_policy is UnhealthyPodEvictionPolicy.ALWAYS_ALLOW
    raw = make_pdb("ml", "inference", {}, generation=3, current_healthy=5, resource_version="4")
    assert raw["metadata"] == {"name": "inference", "namespace": "ml", "resourceVersion": "4", "generation": 3}
    assert raw["status"] == {"currentHealthy": 5} and "status" not in make_pdb("ml", "x", {})


def test_a_pdb_spec_in_the_api_names_becomes_make_pdb_keywords() -> None:
    kw = pdb_keywords({"maxUnavailable": "50%", "unhealthyPodEvictionPolicy": "AlwaysAllow"})
    assert kw == {"max_unavailable": "50%", "unhealthy_policy": "AlwaysAllow"}
    assert make_pdb("ns", "p", {"app": "a"}, **kw)["spec"] == {
        "selector": {"matchLabels": {"app": "a"}}, "unhealthyPodEvictionPolicy": "AlwaysAllow", "maxUnavailable": "50%"}
    with pytest.raises(ValueError, match=r"not \['selector'\]"):
        pdb_keywords({"minAvailable": 1, "selector": {}})


def test_the_policy_shorthand_builds_the_model_form() -> None:
    short = b.policy(count=2, default_strategy="fixed", initialBatch=2)
    assert short == b.policy(default_budget=b.budget(count=2), default_strategy=b.strategy("fixed", initialBatch=2))
    assert b.policy(percent=25).default.strategy is None
    with pytest.raises(ValueError, match="not both"):
        b.policy(count=1, default_budget=b.budget(count=1))
    with pytest.raises(ValueError, match="need default_strategy"):
        b.policy(count=1, initialBatch=2)

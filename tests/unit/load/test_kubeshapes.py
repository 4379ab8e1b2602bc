"""Table tests for the Kubernetes field shapes of fleet snapshots (reconciler.load.kubeshapes):
each row is a value and whether the API server accepts it (rules cited in the module docstring)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from reconciler.load import kubeshapes as k


def _ok(tp: Any, value: Any) -> bool:
    try:
        TypeAdapter(tp).validate_python(value)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize(("value", "ok"), [
    ("gpu-a-001", True), ("a", True), ("a.b-c.d", True), ("0node", True), ("a" * 253, True),
    ("a" * 254, False), ("GPU-A", False), ("gpu_a", False), ("-gpu", False), ("gpu-", False), ("gpu..a", False),
    ("gpu-a\n", False), ("", False), ("a/b", False), (123, False), (None, False), ("gpu a", False),
])
def test_object_names_are_dns_subdomains(value: Any, ok: bool) -> None:
    assert _ok(k.DnsSubdomain, value) is ok


@pytest.mark.parametrize(("value", "ok"), [
    ("default", True), ("kube-system", True), ("a" * 63, True), ("a" * 64, False), ("ml.team", False),
    ("ML", False), ("ml\n", False),
])
def test_namespaces_are_dns_labels(value: Any, ok: bool) -> None:
    assert _ok(k.DnsLabel, value) is ok


@pytest.mark.parametrize(("labels", "ok"), [
    ({"app": "web"}, True), ({"kubernetes.io/hostname": "n1"}, True), ({"a": ""}, True),
    ({"example.com/A_b.c-D": "x.Y_z-1"}, True), ({"x": "a" * 63}, True), ({"x": "a" * 64}, False),
    ({"a" * 63: "v"}, True), ({"a" * 64: "v"}, False), ({"Example.com/a": "v"}, False),
    ({"example.com/": "v"}, False), ({"/a": "v"}, False), ({"a b": "v"}, False), ({"app": "web\n"}, False),
    ({"app\n": "web"}, False), ({"app": "-web"}, False), ({"app": 5}, False), ({"app": True}, False),
    ({"app": None}, False), (["app=web"], False), ("app=web", False), ({("a" * 250) + ".com/x": "v"}, False),
])
def test_label_maps_follow_kubernetes_rules(labels: Any, ok: bool) -> None:
    assert _ok(k.Labels, labels) is ok


@pytest.mark.parametrize(("annotations", "ok"), [
    ({"example.com/x": "any text at all\nwith lines"}, True), ({"Example.COM/Key": "v"}, True),
    ({"x": "a" * (256 * 1024 - 1)}, True), ({"x": "a" * (256 * 1024)}, False),
    ({"a": "a" * (200 * 1024), "b": "b" * (60 * 1024)}, False), ({"x": "é" * (140 * 1024)}, False),
    ({"x": {"a": 1}}, False), ({"x": 1}, False), ({"bad key": "v"}, False),
])
def test_annotations_are_strings_under_256_kib_in_total(annotations: Any, ok: bool) -> None:
    assert _ok(k.Annotations, annotations) is ok


@pytest.mark.parametrize(("taints", "ok"), [
    ([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}], True),
    ([{"key": "a", "effect": "PreferNoSchedule"}, {"key": "a", "effect": "NoExecute"}], True),
    ([{"effect": "NoSchedule"}], False), ([{"key": "a"}], False), ([{"key": "a", "effect": "noschedule"}], False),
    ([{"key": "a", "effect": "NoSchedule"}, {"key": "a", "value": "b", "effect": "NoSchedule"}], False),
    ([{"key": "a", "value": "b c", "effect": "NoSchedule"}], False), ([{"key": "", "effect": "NoSchedule"}], False),
    (["a=b:NoSchedule"], False), ({"key": "a", "effect": "NoSchedule"}, False),
])
def test_taints(taints: Any, ok: bool) -> None:
    assert _ok(k.NodeSpec, {"taints": taints}) is ok


@pytest.mark.parametrize(("toleration", "ok"), [
    ({"operator": "Exists"}, True), ({"key": "a", "operator": "Equal", "value": "b"}, True), ({"key": "a"}, True),
    ({"key": "a", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}, True),
    ({"key": "a", "operator": "Exists", "value": "b"}, False), ({"operator": "Equal", "value": "b"}, False),
    ({"value": "b"}, False), ({"key": "a", "operator": "In"}, False),
    ({"key": "a", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 1}, False),
    ({"key": "a", "effect": "Never"}, False), ({"key": "a b", "operator": "Exists"}, False),
])
def test_tolerations_follow_validate_tolerations(toleration: Any, ok: bool) -> None:
    assert _ok(k.Toleration, toleration) is ok


@pytest.mark.parametrize(("conditions", "ok"), [
    ([{"type": "Ready", "status": "True"}], True), ([{"type": "Ready", "status": "Unknown", "reason": "x"}], True),
    ([], True), ("Ready", False), ([{"type": "Ready"}], False), ([{"status": "True"}], False),
    ([{"type": "Ready", "status": True}], False), ([{"type": "Ready", "status": "true"}], False),
    ([{"type": "", "status": "True"}], False), (["Ready"], False),
])
def test_conditions_are_lists_of_type_and_status(conditions: Any, ok: bool) -> None:
    assert _ok(k.NodeStatus, {"conditions": conditions}) is ok


@pytest.mark.parametrize(("spec", "ok"), [
    ({"maxUnavailable": 1}, True), ({"minAvailable": "50%"}, True), ({"maxUnavailable": "0%"}, True),
    ({"maxUnavailable": "100%"}, True), ({"minAvailable": 0}, True), ({}, True),
    ({"maxUnavailable": "abc%"}, False), ({"maxUnavailable": "101%"}, False), ({"maxUnavailable": "5"}, False),
    ({"maxUnavailable": -1}, False), ({"maxUnavailable": 1.5}, False), ({"maxUnavailable": True}, False),
    ({"maxUnavailable": "10 %"}, False), ({"maxUnavailable": "10%\n"}, False),
    ({"minAvailable": 1, "maxUnavailable": 1}, False),
])
def test_pdb_budgets_are_int_or_percent(spec: Any, ok: bool) -> None:
    assert _ok(k.PdbSpec, spec) is ok


@pytest.mark.parametrize(("selector", "ok"), [
    ({"matchLabels": {"app": "web"}}, True), ({}, True),
    ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]}, True),
    ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, True),
    ({"matchExpressions": [{"key": "app", "operator": "Equals", "values": ["a"]}]}, False),
    ({"matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]}, False),
    ({"matchExpressions": [{"key": "app", "operator": "NotIn"}]}, False),
    ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": []}]}, False),
    ({"matchExpressions": [{"key": "app", "operator": "Exists", "values": ["a"]}]}, False),
    ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["a b"]}]}, False),
    ({"matchExpressions": [{"operator": "Exists"}]}, False), ({"matchLabels": {"app": "a b"}}, False),
    ("app=web", False),
])
def test_label_selectors_follow_apimachinery(selector: Any, ok: bool) -> None:
    assert _ok(k.LabelSelector, selector) is ok


@pytest.mark.parametrize(("spec", "ok"), [
    ({"terminationGracePeriodSeconds": 0}, True), ({"terminationGracePeriodSeconds": 30}, True),
    ({"terminationGracePeriodSeconds": 2**63 - 1}, True), ({"terminationGracePeriodSeconds": 2**63}, False),
    ({"terminationGracePeriodSeconds": -1}, False), ({"terminationGracePeriodSeconds": "forever"}, False),
    ({"terminationGracePeriodSeconds": "30"}, False), ({"terminationGracePeriodSeconds": 30.0}, False),
    ({"terminationGracePeriodSeconds": True}, False), ({"activeDeadlineSeconds": 1}, True),
    ({"activeDeadlineSeconds": 0}, False), ({"nodeName": ""}, True), ({"nodeName": "Node 1"}, False),
])
def test_pod_durations_are_non_negative_integers(spec: Any, ok: bool) -> None:
    assert _ok(k.PodSpec, spec) is ok


@pytest.mark.parametrize(("meta", "ok"), [
    ({"name": "n", "resourceVersion": "12345"}, True), ({"name": "n", "resourceVersion": ""}, True),
    ({"name": "n", "resourceVersion": 12}, False), ({"name": "n", "resourceVersion": "latest"}, False),
    ({"name": "n", "creationTimestamp": "2026-11-30T12:00:00Z"}, True),
    ({"name": "n", "creationTimestamp": "2026-11-30T12:00:00.123456+01:00"}, True),
    ({"name": "n", "creationTimestamp": "2026-11-30"}, False), ({"name": "n", "creationTimestamp": "yesterday"}, False),
    ({"name": "n", "creationTimestamp": "2026-11-30T12:00:00Z\n"}, False), ({"name": "n", "uid": {}}, False),
    ({}, False), ({"name": 5}, False),
])
def test_metadata_fields(meta: Any, ok: bool) -> None:
    assert _ok(k.ClusterMeta, meta) is ok


def test_every_pattern_has_an_explanation_and_is_anchored() -> None:
    for pattern, text in k.PATTERN_HELP.items():
        assert pattern.startswith("^") and pattern.endswith("$") and text


@pytest.mark.parametrize(("doc", "ok"), [
    ({"neverReturns": ["gpu-a-001"]}, True), ({"neverReturns": ["gpu-a-001\n"]}, False),
    ({"failures": [{"node": "*", "package": "tuned"}]}, True), ({"failures": [{"node": "gpu\n"}]}, False),
    ({"failures": [{"reason": "ImagePullBackOff"}]}, True), ({"failures": [{"reason": "Image Pull"}]}, False),
    ({"failures": [{"reason": "Error\n"}]}, False), ({"startTime": "2026-11-30T12:00:00Z\n"}, False),
    ({"stageSeconds": {"apply": 60, "default": 30}}, True), ({"stageSeconds": {"apply\n": 60}}, False),
])
def test_sim_config_names_match_the_whole_value(doc: Any, ok: bool) -> None:
    from reconciler.adapters.sim.config import SimConfig

    try:
        SimConfig.model_validate(doc)
    except ValidationError:
        assert not ok
    else:
        assert ok

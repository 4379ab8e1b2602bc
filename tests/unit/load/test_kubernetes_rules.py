"""Table tests of the Kubernetes API rules applied at load (issue #14): what we send to the API must
be what the API accepts. Sources: ``k8s.io/apimachinery/pkg/util/validation`` (IsQualifiedName,
IsValidLabelValue, IsConfigMapKey), ``pkg/apis/core/validation`` (ValidateTolerations,
ValidateResourceRequirements, validateEnvVarValueFrom), the OCI distribution reference grammar,
Go's ``time.ParseDuration`` range; and the bounds we add (each documented where it is defined)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from pydantic import ValidationError

from reconciler.errors import InputError
from reconciler.jsonsafe import deeper_than, parse_json
from reconciler.model.nodestate import InFlight, NodeStateError, check_model, parse_model, parse_state
from reconciler.model.policy import Budget, Compartment, ExponentialParams, StrategyParams
from reconciler.model.recipe import (
    EnvVar,
    Interrupt,
    Package,
    Recipe,
    Resources,
    check_image,
    configmap_key_problem,
    parse_duration,
    parse_quantity,
)
from reconciler.model.selector import Toleration, check_label_key, check_label_value, check_toleration

SHA = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("toleration", "problem"),
    [
        ({"key": "dedicated", "operator": "Exists"}, None),
        ({"operator": "Exists"}, None),  # empty key + Exists: tolerates everything
        ({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}, None),
        ({"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0}, None),
        ({"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 315360000}, None),
        ({"key": "example.com/k", "value": ""}, None),  # Equal with an empty value is valid
        ({"key": "k", "operator": "Exists", "value": "v"}, "takes no value"),
        ({"operator": "Equal", "value": "v"}, "empty key"),
        ({"effect": "NoSchedule"}, "empty key"),
        ({"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}, "NoExecute"),
        ({"key": "k", "operator": "Exists", "tolerationSeconds": 5}, "NoExecute"),
        ({"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": -1}, "must be 0 to"),
        ({"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 315360001}, "must be 0 to"),
        ({"key": "a/b/c", "operator": "Exists"}, "label key"),
        ({"key": "k\n", "operator": "Exists"}, "label key"),
        ({"key": "k", "value": "has space"}, "label value"),
        ({"key": "k", "value": "v" * 64}, "label value"),
    ],
)
def test_toleration_rules(toleration: dict[str, Any], problem: str | None) -> None:
    t = Toleration.model_validate(toleration)
    if problem is None:
        assert check_toleration(t) is t
    else:
        with pytest.raises(ValueError, match=problem):
            check_toleration(t)


@pytest.mark.parametrize("bad", [{"effect": "NoRun"}, {"operator": "Lt"}, {"operator": "exists"}])
def test_toleration_closed_vocabularies(bad: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        Toleration.model_validate({"key": "k", **bad})


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("a", True), ("intent.conf", True), ("-._a1", True), (".hidden", True), ("a" * 253, True),
        ("..data", False), (".", False), ("..", False), ("../x", False), ("a/b", False), ("", False),
        ("a b", False), ("a\n", False), ("a" * 254, False), ("é", False), ("a:b", False),
    ],
)
def test_configmap_keys(key: str, ok: bool) -> None:
    assert (configmap_key_problem(key) is None) is ok


def test_configmap_total_size_is_capped_at_one_mebibyte() -> None:
    base = {"name": "pk", "version": "1.0.0", "image": "x", "containerSHA": SHA}
    Package.model_validate({**base, "configMap": {"a": "x" * (1024 * 1024 - 1)}})
    with pytest.raises(ValidationError, match="1 MiB"):
        Package.model_validate({**base, "configMap": {"a": "x" * (1024 * 1024)}})


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("pool", True), ("example.com/pool", True), ("a.b-c_d", True), ("k8s.io/x", True),
        ("a" * 63, True), ("/".join(["a" * 253, "x"]), True), ("/".join(["a" * 254, "x"]), False),
        (".".join(["a" * 63] * 4)[:253] + "/x", True),
        ("/pool", False), ("Example.com/pool", False), ("a/b/c", False), ("a" * 64, False), ("", False),
        ("-a", False), ("a-", False), ("pool\n", False), ("example.com/", False), ("exa mple.com/x", False),
    ],
)
def test_label_keys(key: str, ok: bool) -> None:
    if ok:
        assert check_label_key(key) == key
    else:
        with pytest.raises(ValueError, match="label key"):
            check_label_key(key)


@pytest.mark.parametrize(
    ("value", "ok"),
    [("", True), ("gpu", True), ("a.b_c-d", True), ("A1", True), ("a" * 63, True),
     ("a" * 64, False), ("-a", False), ("a.", False), ("a b", False), ("gpu\n", False), ("a/b", False)],
)
def test_label_values(value: str, ok: bool) -> None:
    if ok:
        assert check_label_value(value) == value
    else:
        with pytest.raises(ValueError, match="label value"):
            check_label_value(value)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30.0), ("1m30s", 90.0), ("500ms", 0.5), ("1h", 3600.0), ("2562047h", 2562047 * 3600.0),
     ("100000000000000000000h", None), ("1" * 65 + "s", None), ("-1s", None), ("30", None), ("30s\n", None),
     ("", None), ("1e3s", None)],
)
def test_durations_are_go_durations_within_range(text: str, seconds: float | None) -> None:
    if seconds is None:
        with pytest.raises(ValueError):
            parse_duration(text)
    else:
        assert parse_duration(text) == seconds


def test_graceful_shutdown_is_at_most_a_day() -> None:
    base = {"name": "pk", "version": "1.0.0", "image": "x", "containerSHA": SHA}
    assert Package.model_validate({**base, "gracefulShutdown": "24h"}).gracefulShutdown == "24h"
    with pytest.raises(ValidationError, match="longer than"):
        Package.model_validate({**base, "gracefulShutdown": "24h1s"})


@pytest.mark.parametrize(("given", "says"), [
    (60, 'a duration needs a unit, e.g. "60s"'),  # YAML ``gracefulShutdown: 60``: it said "quote it ("60")"
    (1.5, 'e.g. "1.5s"'),
    ("60", "(a duration needs a unit: 60s)"),  # and quoting it then failed without saying why
])
def test_a_duration_given_without_a_unit_says_which_to_add(given: object, says: str) -> None:
    base = {"name": "pk", "version": "1.0.0", "image": "x", "containerSHA": SHA}
    with pytest.raises(ValidationError) as info:
        Package.model_validate({**base, "gracefulShutdown": given})
    assert says in str(info.value) and "quote it" not in str(info.value)


@pytest.mark.parametrize(
    ("text", "value"),
    [("500m", Decimal("0.5")), ("2", Decimal(2)), ("1Gi", Decimal(2**30)), ("1.5k", Decimal(1500)),
     ("1e3", Decimal(1000)), ("7Ei", Decimal(7 * 2**60)), ("8Ei", None), ("1E", Decimal(10**18)),
     ("-1", None), ("1e99", None), ("100Ei", None), ("1Zi", None), ("500m\n", None), ("", None), ("1" * 65, None)],
)
def test_quantities(text: str, value: Decimal | None) -> None:
    if value is None:
        with pytest.raises(ValueError):
            parse_quantity(text)
    else:
        assert parse_quantity(text) == value


def test_requests_may_not_exceed_limits() -> None:
    Resources(cpuRequest="1", cpuLimit="1", memoryRequest="1Gi", memoryLimit="1024Mi")
    with pytest.raises(ValidationError, match="memoryRequest 2Gi is more than memoryLimit 1Gi"):
        Resources(cpuRequest="1", cpuLimit="2", memoryRequest="2Gi", memoryLimit="1Gi")


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({"name": "A", "value": "x"}, None),
        ({"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}, None),
        ({"name": "A", "value": "x", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}, "both"),
        ({"name": "A", "valueFrom": {}}, "exactly one"),
        ({"name": "A", "valueFrom": {"vault": {"p": "x"}}}, "exactly one"),
        ({"name": "A\n"}, "environment variable name"),
        ({"name": "1A"}, "environment variable name"),
    ],
)
def test_env_vars(env: dict[str, Any], problem: str | None) -> None:
    if problem is None:
        EnvVar.model_validate(env)
    else:
        with pytest.raises(ValidationError, match=problem):
            EnvVar.model_validate(env)


@pytest.mark.parametrize(
    ("image", "full", "ok"),
    [
        ("x", False, True), ("ghcr.io/example/base", False, True), ("localhost:5000/org/pkg", False, True),
        ("nvcr.io/nvidia/skyhook-packages/tuning", False, True), ("a__b/c.d-e", False, True),
        ("ghcr.io/Example/x", False, False), ("ghcr.io/x:1.0", False, False), ("x ", False, False),
        ("x\n", False, False), ("", False, False), ("a" * 256, False, False),
        ("ghcr.io/nvidia/agent:1.2.3", True, True), ("ghcr.io/a@" + SHA, True, True),
        ("ghcr.io/a:v1@" + SHA, True, True), ("ghcr.io/a:", True, False), ("not an image!", True, False),
    ],
)
def test_image_references(image: str, full: bool, ok: bool) -> None:
    if ok:
        assert check_image(image, full=full) == image
    else:
        with pytest.raises(ValueError):
            check_image(image, full=full)


@pytest.mark.parametrize(
    ("services", "ok"),
    [(["kubelet"], True), (["containerd.service", "getty@tty1.service"], True), (["kubelet; reboot"], False),
     (["a b"], False), (["x\n"], False), ([f"s{i}" for i in range(65)], False), (["a" * 256], False)],
)
def test_interrupt_services_are_systemd_unit_names(services: list[str], ok: bool) -> None:
    if ok:
        Interrupt(type="service", services=tuple(services))
    else:
        with pytest.raises(ValidationError):
            Interrupt(type="service", services=tuple(services))


@pytest.mark.parametrize(
    ("model", "data", "ok"),
    [
        (Budget, {"count": 1_000_000}, True), (Budget, {"count": 1_000_001}, False),
        (StrategyParams, {"initialBatch": 1_000_000}, True), (StrategyParams, {"initialBatch": 1_000_001}, False),
        (StrategyParams, {"failureThreshold": 1_000_001}, False),
        (ExponentialParams, {"growthFactor": 1000}, True), (ExponentialParams, {"growthFactor": 1001}, False),
        (Recipe, {"name": "r", "priority": 2**31 - 1}, True), (Recipe, {"name": "r", "priority": 2**31}, False),
        (Recipe, {"name": "r", "version": "2026.11 rc1"}, True), (Recipe, {"name": "r", "version": "v1\n"}, False),
        (Compartment, {"name": "gpu\n", "selector": {}, "budget": {"count": 1}}, False),
        (Compartment, {"name": "gpu-a", "selector": {}, "budget": {"count": 1}}, True),
    ],
)
def test_counts_and_names_are_bounded(model: Any, data: dict[str, Any], ok: bool) -> None:
    if ok:
        model.model_validate(data)
    else:
        with pytest.raises(ValidationError):
            model.model_validate(data)


# ---------------------------------------------------------------------------------------------
# JSON boundary: one reader for every JSON input, including node annotations (cluster data)


@pytest.mark.parametrize(
    ("text", "problem", "at"),
    [
        ('{"a": 1}', None, ""),
        ('{"a": NaN}', "NaN is not a JSON number", "1:7"),
        ('{"a": [Infinity]}', "Infinity is not a JSON number", "1:8"),
        ('{"a": 1e400}', "too large", "1:7"),
        ('{"a": ' + "1" * 5000 + "}", "out of range", "1:7"),
        ('{"a": -9223372036854775809}', "out of range", "1:7"),
        ('{"a": -9223372036854775808}', None, ""),
        ('{"a": 1,\n "a": 2}', "duplicate key 'a' (first defined at line 1)", "2:2"),
        ("[" * 65 + "]" * 65, "deeper than 64", "1:65"),
        ("[" * 64 + "]" * 64, None, ""),
        # brackets in strings neither hide depth nor add to it
        ('["]]]]]]]]]]", ' + "[" * 64 + "]" * 64 + "]", "deeper than 64", "1:79"),
        ('["' + "[" * 100 + '"]', None, ""),
        ("[" * 100_000, "deeper than 64", "1:65"),
        ('"\\udc00"', "surrogate", "1:2"),
        ('"\\ud83d\\ude00"', None, ""),
        ("", "syntax error", "1:1"),
        ('{"a": }', "syntax error", "1:7"),
    ],
)
def test_json_reader_guards(text: str, problem: str | None, at: str) -> None:
    if problem is None:
        parse_json(text, "f.json")
    else:
        with pytest.raises(InputError) as info:
            parse_json(text, "f.json")
        assert problem in info.value.message and str(info.value).startswith(f"f.json:{at}: "), str(info.value)


@pytest.mark.parametrize(
    "text",
    ['{"a|1": {"name": "a", "version": "1", "stage": "apply", "state": "complete", "restarts": ' + "9" * 5000 + "}}",
     "[" * 100_000, '{"x": NaN}', '{"a": 1, "a": 2}', "{"],
)
def test_a_hostile_state_annotation_is_a_node_state_error_naming_node_and_annotation(text: str) -> None:
    with pytest.raises(NodeStateError) as info:
        parse_state(text, node="n7", key="reconciler.nodewright.dev/nodeState_r")
    assert "node n7" in str(info.value) and "nodeState_r" in str(info.value)


@pytest.mark.parametrize("text", ["[" * 100_000, '{"runId": "r", "planHash": "h", "phase": "drain", "since": 1e400}',
                                  '{"runId": "r", "planHash": "h", "phase": "drain", "since": NaN}', "{"])
def test_a_hostile_inflight_annotation_is_ignored_or_explained(text: str) -> None:
    assert parse_model(InFlight, text) is None
    with pytest.raises(NodeStateError, match=r"node n1: annotation reconciler\.nodewright\.dev/inflight_r"):
        check_model(InFlight, text, node="n1", key="reconciler.nodewright.dev/inflight_r")


@pytest.mark.parametrize(
    ("text", "limit", "at"),
    [
        ("[" * 3 + "]" * 3, 3, None),
        ("[" * 4 + "]" * 4, 3, 3),
        ('{"a": "[[[[[[", "b": [[[[]]]]}', 3, 23),  # brackets in strings do not count
        ('["\\"[[[", [[[]]]]', 3, 12),  # nor does an escaped quote end the string
        ('{"a":\n [\n  [[]]]}', 3, 12),
    ],
)
def test_deeper_than_finds_the_bracket_that_crosses_the_limit(text: str, limit: int, at: int | None) -> None:
    assert deeper_than(text, limit) == at


def test_duplicate_keys_may_be_let_through_for_json_we_wrote() -> None:
    assert parse_json('{"a": 1, "a": 2}', "ann", allow_duplicates=True) == {"a": 2}
    with pytest.raises(InputError, match="deeper than 64"):
        parse_json('{"a": 1, "a": ' + "[" * 70 + "]" * 70 + "}", "ann", allow_duplicates=True)


@pytest.mark.parametrize(("image", "says"), [
    ("https://bob:pw@ghcr.io/x/y", "is a URL"),  # the user-info's "@" was taken for a digest
    ("ghcr.io/x/y@sha256:" + "a" * 64, "carries a digest; put it in containerSHA"),
    ("ghcr.io/x/y:2.0.0", "does not match version '1.0.0'"),
    ("ghcr.io/x/y:1.0.0", None),
])
def test_image_references_are_told_apart(image: str, says: str | None) -> None:
    from reconciler.load.recipes import split_image

    _, problem = split_image(image, "1.0.0")
    assert (problem is None) if says is None else (problem is not None and says in problem)
    assert "pw@" not in (problem or "")  # the credentials are not echoed

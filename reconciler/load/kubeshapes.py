"""The fields the reconciler reads from Kubernetes objects, validated in the shapes Kubernetes defines.

Used for fleet snapshots (``--cluster sim:FILE``): what ``kubectl get nodes,pods,pdb -A -o json``
prints passes; what the API server would refuse fails with the field's path. Models ignore every
field we do not read (kubectl dumps carry many), are strict (``"30"`` is not an integer, ``1`` is not
a string) and check strings with Rust regexes inside pydantic-core, so 100,000 nodes validate in
seconds. Sources of the rules (k8s.io/apimachinery ``pkg/util/validation``,
``pkg/api/validation``; k8s.io/kubernetes ``pkg/apis/core/validation``, ``pkg/apis/policy/validation``):

* object names: DNS-1123 subdomain (≤ 253, ``[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.…)*``) for Nodes, Pods,
  PodDisruptionBudgets, DaemonSets and ConfigMaps; namespaces: DNS-1123 label (≤ 63);
* label keys and annotation keys: qualified names (``[prefix/]name``, prefix a DNS-1123 subdomain
  ≤ 253, name ≤ 63 of ``[-A-Za-z0-9_.]`` with alphanumerics at both ends; annotation keys are
  checked lowercased, as ``ValidateAnnotations`` does); label values ≤ 63, empty or a name;
  annotation values strings, all annotations of one object together at most 256 KiB
  (``TotalAnnotationSizeLimitB``);
* taints: ``key`` required, ``effect`` NoSchedule | PreferNoSchedule | NoExecute, ``value`` a label
  value, no two with the same key and effect; tolerations: operator Equal | Exists, an empty key
  only with Exists, no value with Exists, ``tolerationSeconds`` only with NoExecute;
* conditions: a list of ``{type, status}``, status True | False | Unknown;
* PodDisruptionBudget ``minAvailable``/``maxUnavailable``: an integer ≥ 0 or a percentage
  ``0%``–``100%`` (int-or-string), not both; label selectors: operators In | NotIn | Exists |
  DoesNotExist, values required for In/NotIn and forbidden otherwise;
* ``terminationGracePeriodSeconds`` an integer ≥ 0, ``activeDeadlineSeconds`` ≥ 1;
  ``resourceVersion`` a decimal string; timestamps RFC 3339 (``2026-11-30T12:00:00Z``).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, NotRequired

from pydantic import AfterValidator, ConfigDict, Field, PlainValidator, StringConstraints, with_config
from typing_extensions import TypedDict

INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1

#: Kubernetes' cap on the total size of one object's annotations (apimachinery
#: ``TotalAnnotationSizeLimitB = 256 * 1024``), keys and values counted in UTF-8 bytes.
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024

_SUB = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*"
_SUB_ANY_CASE = r"[A-Za-z0-9](?:[-A-Za-z0-9]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[-A-Za-z0-9]*[A-Za-z0-9])?)*"
_NAME63 = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"

DNS_SUBDOMAIN = rf"^{_SUB}$"
DNS_LABEL = r"^[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?$"
QUALIFIED_NAME = rf"^(?:{_SUB}/)?{_NAME63}$"
ANNOTATION_KEY = rf"^(?:{_SUB_ANY_CASE}/)?{_NAME63}$"
LABEL_VALUE = rf"^(?:{_NAME63})?$"
NODE_NAME_OR_EMPTY = rf"^(?:{_SUB})?$"
CONFIGMAP_KEY = r"^[-._a-zA-Z0-9]+$"
NAME_OR_PACKAGE = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
REASON = r"^[A-Za-z][A-Za-z0-9]{0,62}$"
PERCENT = r"^(?:100|[1-9]?[0-9])%$"
RESOURCE_VERSION = r"^[0-9]{0,20}$"
RFC3339 = (r"^(?:[0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)"  # years 0001-9999, never 0000
           r"-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])[Tt ](?:[01][0-9]|2[0-3]):[0-5][0-9]:"
           r"(?:[0-5][0-9]|60)(?:\.[0-9]{1,9})?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$")

#: What each pattern means, for error messages (pydantic reports the pattern that failed).
PATTERN_HELP = {
    DNS_SUBDOMAIN: "is not a valid name (a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', "
                   "starting and ending with a letter or digit)",
    DNS_LABEL: "is not a valid namespace (a DNS-1123 label: at most 63 lowercase letters, digits and '-', "
               "starting and ending with a letter or digit)",
    QUALIFIED_NAME: "is not a valid key ([prefix/]name: prefix a DNS subdomain, name at most 63 characters "
                    "of [-A-Za-z0-9_.] starting and ending with a letter or digit)",
    ANNOTATION_KEY: "is not a valid annotation key ([prefix/]name: prefix a DNS subdomain, name at most 63 "
                    "characters of [-A-Za-z0-9_.] starting and ending with a letter or digit)",
    LABEL_VALUE: "is not a valid label value (empty, or at most 63 characters of [-A-Za-z0-9_.] starting and "
                 "ending with a letter or digit)",
    NODE_NAME_OR_EMPTY: "is not a valid node name (a DNS-1123 subdomain)",
    NAME_OR_PACKAGE: "is not a node or package name (lowercase letters, digits, '-' and '.')",
    REASON: "is not a reason (a CamelCase word such as Error or ImagePullBackOff)",
    CONFIGMAP_KEY: "is not a valid ConfigMap key (letters, digits, '-', '_' and '.')",
    PERCENT: "is not an integer or a percentage from 0% to 100%",
    RESOURCE_VERSION: "is not a resourceVersion (a decimal string)",
    RFC3339: "is not an RFC 3339 time (like 2026-11-30T12:00:00Z)",
}


def _prefix_ok(keys: Any) -> None:
    for k in keys:
        if len(k) > 253 and len(k.rpartition("/")[0]) > 253:
            raise ValueError(f"key {k[:40]!r}...: its prefix is longer than 253 characters")


def _check_labels(d: dict[str, str]) -> dict[str, str]:
    _prefix_ok(d)
    return d


def _check_annotations(d: dict[str, str]) -> dict[str, str]:
    _prefix_ok(d)
    total = 0
    for k, v in d.items():
        total += len(k) + len(v)
    if total * 4 > TOTAL_ANNOTATION_SIZE_LIMIT:  # only then count UTF-8 bytes exactly
        total = sum(len(k.encode("utf-8", "surrogatepass")) + len(v.encode("utf-8", "surrogatepass"))
                    for k, v in d.items())
        if total > TOTAL_ANNOTATION_SIZE_LIMIT:
            raise ValueError(f"annotations total {total} bytes, more than Kubernetes' limit of "
                             f"{TOTAL_ANNOTATION_SIZE_LIMIT} bytes (256 KiB) per object")
    return d


def _pattern(p: str, max_length: int | None = None, min_length: int | None = None) -> Any:
    return StringConstraints(pattern=p, max_length=max_length, min_length=min_length)


DnsSubdomain = Annotated[str, _pattern(DNS_SUBDOMAIN, 253)]
DnsLabel = Annotated[str, _pattern(DNS_LABEL, 63)]
QualifiedName = Annotated[str, _pattern(QUALIFIED_NAME, 317)]
AnnotationKey = Annotated[str, _pattern(ANNOTATION_KEY, 317)]
LabelValue = Annotated[str, _pattern(LABEL_VALUE, 63)]
Labels = Annotated[dict[QualifiedName, LabelValue], AfterValidator(_check_labels)]
Annotations = Annotated[dict[AnnotationKey, str], AfterValidator(_check_annotations)]
Time = Annotated[str, _pattern(RFC3339, 64)]
ResourceVersion = Annotated[str, _pattern(RESOURCE_VERSION)]
def _int_or_percent(v: Any) -> int | str:
    """Kubernetes int-or-string for PDB budgets: an integer ≥ 0 or a percentage ``0%``–``100%``."""
    if isinstance(v, int) and not isinstance(v, bool):
        if not 0 <= v <= INT32_MAX:
            raise ValueError(f"{v} must be between 0 and {INT32_MAX}")
        return v
    if isinstance(v, str):
        if not _PERCENT.fullmatch(v):
            raise ValueError(f"{v[:40]!r} is not a percentage from 0% to 100% (a number needs no quotes)")
        return v
    kind = "a boolean" if isinstance(v, bool) else "a number" if isinstance(v, float) else type(v).__name__
    raise ValueError(f"must be an integer or a percentage string like '10%', not {kind} ({str(v)[:40]})")


_PERCENT = re.compile(r"(?:100|[1-9]?[0-9])%")
IntOrPercent = Annotated[int | str, PlainValidator(_int_or_percent)]
Uid = Annotated[str, Field(max_length=128)]
Effect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


_CFG = ConfigDict(strict=True, extra="ignore", allow_inf_nan=False)


def _k(cls: Any) -> Any:
    """Strict, unknown keys ignored (a kubectl dump carries many fields we do not read)."""
    return with_config(_CFG)(cls)


@_k
class OwnerReference(TypedDict):
    """``metadata.ownerReferences[]``: ``kind`` and ``name`` are read (drain classes, recreation)."""

    apiVersion: NotRequired[str]
    kind: Annotated[str, Field(min_length=1)]
    name: Annotated[str, Field(min_length=1)]
    uid: NotRequired[Uid]
    controller: NotRequired[bool | None]


@_k
class ClusterMeta(TypedDict):
    """Metadata of a cluster-scoped object (a Node)."""

    name: DnsSubdomain
    uid: NotRequired[Uid]
    labels: NotRequired[Labels | None]
    annotations: NotRequired[Annotations | None]
    resourceVersion: NotRequired[ResourceVersion | None]
    creationTimestamp: NotRequired[Time | None]
    deletionTimestamp: NotRequired[Time | None]
    generation: NotRequired[Annotated[int, Field(ge=0, le=INT64_MAX)] | None]


@_k
class NamespacedMeta(TypedDict):
    """Metadata of a namespaced object (namespace absent: ``default``)."""

    name: DnsSubdomain
    namespace: NotRequired[DnsLabel | None]
    uid: NotRequired[Uid]
    labels: NotRequired[Labels | None]
    annotations: NotRequired[Annotations | None]
    resourceVersion: NotRequired[ResourceVersion | None]
    creationTimestamp: NotRequired[Time | None]
    deletionTimestamp: NotRequired[Time | None]
    generation: NotRequired[Annotated[int, Field(ge=0, le=INT64_MAX)] | None]
    ownerReferences: NotRequired[list[OwnerReference] | None]


@_k
class Condition(TypedDict):
    """One entry of ``status.conditions``."""

    type: Annotated[str, Field(min_length=1, max_length=316)]
    status: Literal["True", "False", "Unknown"]
    lastTransitionTime: NotRequired[Time | None]


@_k
class Taint(TypedDict):
    """``spec.taints[]`` of a Node."""

    key: QualifiedName
    value: NotRequired[LabelValue | None]
    effect: Effect
    timeAdded: NotRequired[Time | None]


def _unique_taints(taints: list[Taint] | None) -> list[Taint] | None:
    seen: set[tuple[str, str]] = set()
    for t in taints or ():
        if (t["key"], t["effect"]) in seen:
            raise ValueError(f"two taints with key {t['key']!r} and effect {t['effect']} (Kubernetes allows one)")
        seen.add((t["key"], t["effect"]))
    return taints


@_k
class NodeSpec(TypedDict):
    """What is read from a Node's spec."""

    unschedulable: NotRequired[bool | None]
    taints: NotRequired[Annotated[list[Taint] | None, AfterValidator(_unique_taints)]]


@_k
class NodeSystemInfo(TypedDict):
    """``status.nodeInfo``: the bootID tells a reboot happened."""

    bootID: NotRequired[str]


@_k
class NodeStatus(TypedDict):
    """What is read from a Node's status."""

    conditions: NotRequired[list[Condition] | None]
    nodeInfo: NotRequired[NodeSystemInfo | None]


@_k
class Node(TypedDict):
    """A ``v1`` Node."""

    apiVersion: Literal["v1"]
    kind: Literal["Node"]
    metadata: ClusterMeta
    spec: NotRequired[NodeSpec | None]
    status: NotRequired[NodeStatus | None]


def _toleration_rules(t: dict[str, Any]) -> dict[str, Any]:
    if not t.get("key") and (t.get("operator") or "Equal") != "Exists":
        raise ValueError("operator must be Exists when key is empty")
    if t.get("operator") == "Exists" and t.get("value"):
        raise ValueError("value must be empty when operator is Exists")
    if t.get("tolerationSeconds") is not None and t.get("effect") != "NoExecute":
        raise ValueError("tolerationSeconds is only allowed with effect NoExecute")
    return t


@_k
class _Toleration(TypedDict):
    key: NotRequired[QualifiedName | Literal[""] | None]
    operator: NotRequired[Literal["Equal", "Exists", ""] | None]
    value: NotRequired[LabelValue | None]
    effect: NotRequired[Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] | None]
    tolerationSeconds: NotRequired[Annotated[int, Field(ge=-(2**63), le=INT64_MAX)] | None]


Toleration = Annotated[_Toleration, AfterValidator(_toleration_rules)]
"""``spec.tolerations[]`` of a Pod (Kubernetes ``validateTolerations``)."""


@_k
class Volume(TypedDict):
    """``spec.volumes[]``: only whether it is an emptyDir is read."""

    name: DnsLabel


@_k
class PodSpec(TypedDict):
    """What is read from a Pod's spec."""

    nodeName: NotRequired[Annotated[str, _pattern(NODE_NAME_OR_EMPTY, 253)] | None]
    terminationGracePeriodSeconds: NotRequired[Annotated[int, Field(ge=0, le=INT64_MAX)] | None]
    activeDeadlineSeconds: NotRequired[Annotated[int, Field(ge=1, le=INT64_MAX)] | None]
    tolerations: NotRequired[list[Toleration] | None]
    volumes: NotRequired[list[Volume] | None]


@_k
class PodStatus(TypedDict):
    """What is read from a Pod's status."""

    phase: NotRequired[Literal["Pending", "Running", "Succeeded", "Failed", "Unknown"] | None]
    conditions: NotRequired[list[Condition] | None]
    startTime: NotRequired[Time | None]


@_k
class Pod(TypedDict):
    """A ``v1`` Pod."""

    apiVersion: Literal["v1"]
    kind: Literal["Pod"]
    metadata: NamespacedMeta
    spec: NotRequired[PodSpec | None]
    status: NotRequired[PodStatus | None]


def _values_fit_operator(r: dict[str, Any]) -> dict[str, Any]:
    if r["operator"] in ("In", "NotIn") and not r.get("values"):
        raise ValueError(f"operator {r['operator']} needs at least one value")
    if r["operator"] in ("Exists", "DoesNotExist") and r.get("values"):
        raise ValueError(f"operator {r['operator']} takes no values")
    return r


@_k
class _Requirement(TypedDict):
    key: QualifiedName
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: NotRequired[list[LabelValue] | None]


Requirement = Annotated[_Requirement, AfterValidator(_values_fit_operator)]
"""A ``matchExpressions`` entry (apimachinery ``ValidateLabelSelectorRequirement``)."""


@_k
class LabelSelector(TypedDict):
    """A ``metav1.LabelSelector``."""

    matchLabels: NotRequired[Labels | None]
    matchExpressions: NotRequired[list[Requirement] | None]


def _one_of(spec: dict[str, Any]) -> dict[str, Any]:
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        raise ValueError("minAvailable and maxUnavailable cannot be both set")
    return spec


@_k
class _PdbSpec(TypedDict):
    selector: NotRequired[LabelSelector | None]
    minAvailable: NotRequired[IntOrPercent | None]
    maxUnavailable: NotRequired[IntOrPercent | None]
    # kube-apiserver refuses any other value (ValidatePodDisruptionBudgetSpec)
    unhealthyPodEvictionPolicy: NotRequired[Literal["IfHealthyBudget", "AlwaysAllow"] | None]


PdbSpec = Annotated[_PdbSpec, AfterValidator(_one_of)]
"""A PodDisruptionBudget's spec (``ValidatePodDisruptionBudgetSpec``)."""

NonNegative = Annotated[int, Field(ge=0, le=INT32_MAX)]


@_k
class PdbStatus(TypedDict):
    """A PodDisruptionBudget's status (as the disruption controller writes it)."""

    disruptionsAllowed: NotRequired[NonNegative | None]
    currentHealthy: NotRequired[NonNegative | None]
    desiredHealthy: NotRequired[NonNegative | None]
    expectedPods: NotRequired[NonNegative | None]


@_k
class PodDisruptionBudget(TypedDict):
    """A ``policy/v1`` PodDisruptionBudget."""

    apiVersion: Literal["policy/v1", "policy/v1beta1"]
    kind: Literal["PodDisruptionBudget"]
    metadata: NamespacedMeta
    spec: NotRequired[PdbSpec | None]
    status: NotRequired[PdbStatus | None]


@_k
class DaemonSet(TypedDict):
    """An ``apps/v1`` DaemonSet: only its existence is read."""

    apiVersion: Literal["apps/v1"]
    kind: Literal["DaemonSet"]
    metadata: NamespacedMeta


def _no_dot_keys(d: dict[str, str] | None) -> dict[str, str] | None:
    for k in d or ():
        if k in (".", ".."):
            raise ValueError(f"ConfigMap key {k!r} is not allowed")
    return d


@_k
class ConfigMap(TypedDict):
    """A ``v1`` ConfigMap (recipe controls, the simulated clock)."""

    apiVersion: Literal["v1"]
    kind: Literal["ConfigMap"]
    metadata: NamespacedMeta
    data: NotRequired[Annotated[dict[Annotated[str, _pattern(CONFIGMAP_KEY, 253)], str] | None,
                                AfterValidator(_no_dot_keys)]]


#: The kinds a snapshot may hold that the reconciler reads, by ``kind``: TypedDict shapes
#: (pydantic validates them without building model instances, about twice as fast).
MODELS: dict[str, Any] = {
    "Node": Node,
    "Pod": Pod,
    "PodDisruptionBudget": PodDisruptionBudget,
    "DaemonSet": DaemonSet,
    "ConfigMap": ConfigMap,
}

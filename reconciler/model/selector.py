"""Kubernetes label selectors, taints and tolerations, with their matching rules.

Semantics follow the Kubernetes API (``metav1.LabelSelector``, ``corev1.Toleration.ToleratesTaint``):
``matchLabels`` and ``matchExpressions`` are ANDed; operators In, NotIn, Exists, DoesNotExist.
An empty selector matches everything.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from pydantic import Field, model_validator

from reconciler.model.base import Frozen

_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def check_label_key(key: str) -> str:
    """A Kubernetes label key: optional DNS-subdomain prefix (≤ 253) + ``/`` + name (≤ 63,
    alphanumerics, ``-_.``, alphanumeric at both ends). Raises ValueError otherwise."""
    prefix, _, name = key.rpartition("/")
    if (prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix))) or len(name) > 63 or not (
        _LABEL_NAME.match(name)
    ):
        raise ValueError(f"{key!r} is not a valid label key ([prefix/]name, name ≤ 63 chars of [-A-Za-z0-9_.])")
    return key


def check_selector(selector: LabelSelector) -> LabelSelector:
    """Every key and value of ``selector`` is a valid Kubernetes label key/value (inputs only:
    selectors read back from a cluster are not checked). Raises ValueError naming the first bad one."""
    for k, v in selector.matchLabels.items():
        check_label_key(k)
        check_label_value(v)
    for r in selector.matchExpressions:
        check_label_key(r.key)
        for v in r.values:
            check_label_value(v)
    return selector


def check_label_value(value: str) -> str:
    """A Kubernetes label value: empty, or ≤ 63 chars as a label name. Raises ValueError otherwise."""
    if value and (len(value) > 63 or not _LABEL_NAME.match(value)):
        raise ValueError(f"{value!r} is not a valid label value (≤ 63 chars of [-A-Za-z0-9_.])")
    return value


class Requirement(Frozen):
    """One ``matchExpressions`` entry."""

    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _values_fit_operator(self) -> Requirement:
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"operator {self.operator} needs at least one value")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"operator {self.operator} takes no values")
        return self

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this requirement."""
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.operator == "In":
            return labels.get(self.key) in self.values
        return self.key not in labels or labels[self.key] not in self.values


class LabelSelector(Frozen):
    """``{matchLabels, matchExpressions}``; the empty selector matches every object."""

    matchLabels: dict[str, str] = Field(default_factory=dict)
    matchExpressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether an object with ``labels`` is selected."""
        for k, v in self.matchLabels.items():
            if labels.get(k) != v:
                return False
        return all(r.matches(labels) for r in self.matchExpressions)

    def is_empty(self) -> bool:
        """True when the selector has no terms (selects everything)."""
        return not self.matchLabels and not self.matchExpressions

    def canonical(self) -> str:
        """A stable text form, used to detect compartments with identical selectors."""
        labels = ",".join(f"{k}={v}" for k, v in sorted(self.matchLabels.items()))
        exprs = ",".join(
            sorted(f"{r.key} {r.operator} ({'|'.join(sorted(r.values))})" for r in self.matchExpressions)
        )
        return f"{labels};{exprs}"


class Taint(Frozen):
    """A node taint."""

    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"

    @classmethod
    def parse(cls, text: str) -> Taint:
        """Parse ``key[=value]:Effect`` (the kubelet ``--register-with-taints`` form).

        Raises:
            ValueError: the text is not of that form.
        """
        head, sep, effect = text.rpartition(":")
        if not sep or not head:
            raise ValueError(f"taint {text!r} is not key[=value]:Effect")
        key, _, value = head.partition("=")
        return cls(key=key, value=value, effect=effect)


class Toleration(Frozen):
    """A pod toleration (``operator`` Equal or Exists; empty ``effect`` tolerates every effect)."""

    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""
    tolerationSeconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes ``ToleratesTaint``: effect, key and (for Equal) value must match."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value and bool(self.key)


UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"

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

#: Kubernetes' qualified-name part (``apimachinery/pkg/util/validation`` ``qualifiedNameFmt``);
#: always matched with ``fullmatch`` (Python's ``$`` would accept a trailing newline).
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
#: A DNS-1123 subdomain (``dns1123SubdomainFmt``), at most 253 characters.
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def check_label_key(key: str) -> str:
    """A Kubernetes label key (``IsQualifiedName``): an optional prefix, a DNS-1123 subdomain of at
    most 253 characters, then ``/``, then a name of 1-63 alphanumerics, ``-``, ``_`` or ``.``
    starting and ending alphanumeric; at most one ``/``. Raises ValueError otherwise."""
    prefix, slash, name = key.partition("/")
    if not slash:
        prefix, name = "", key
    bad_prefix = bool(slash) and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix))
    if bad_prefix or "/" in name or len(name) > 63 or not _LABEL_NAME.fullmatch(name):
        raise ValueError(
            f"{key[:300]!r} is not a valid label key ([prefix/]name: prefix a DNS subdomain of at most 253 "
            "characters, name at most 63 characters of [-A-Za-z0-9_.] starting and ending alphanumeric)"
        )
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
    """A Kubernetes label value (``IsValidLabelValue``): empty, or at most 63 characters of
    ``[-A-Za-z0-9_.]`` starting and ending alphanumeric. Raises ValueError otherwise."""
    if value and (len(value) > 63 or not _LABEL_NAME.fullmatch(value)):
        raise ValueError(
            f"{value[:100]!r} is not a valid label value (at most 63 characters of [-A-Za-z0-9_.], "
            "starting and ending alphanumeric)"
        )
    return value


#: Longest ``tolerationSeconds`` accepted: ten years. Kubernetes takes any int64, but a NoExecute
#: toleration longer than that is "forever" in practice; leave ``tolerationSeconds`` out for that.
MAX_TOLERATION_SECONDS = 10 * 365 * 24 * 3600


def check_toleration(t: Toleration) -> Toleration:
    """Kubernetes' own validation of a toleration (``pkg/apis/core/validation``
    ``ValidateTolerations``), for tolerations we send to the API (inputs only):

    * a non-empty ``key`` is a label key (:func:`check_label_key`);
    * an empty ``key`` needs ``operator: Exists`` (match every taint);
    * ``operator: Exists`` takes no ``value``; ``Equal`` needs a label value;
    * ``tolerationSeconds`` only with ``effect: NoExecute``, and 0 to :data:`MAX_TOLERATION_SECONDS`
      (ours: bounded so it is a sane duration).

    ``effect`` and ``operator`` are closed by the model. Raises ValueError naming the rule.
    """
    if t.key:
        check_label_key(t.key)
    elif t.operator != "Exists":
        raise ValueError("a toleration with an empty key must use operator Exists (it then matches every taint)")
    if t.operator == "Exists" and t.value:
        raise ValueError(f"a toleration with operator Exists takes no value (found {t.value[:80]!r})")
    if t.operator == "Equal":
        check_label_value(t.value)
    if t.tolerationSeconds is not None:
        if t.effect != "NoExecute":
            raise ValueError("tolerationSeconds is only allowed with effect NoExecute")
        if not 0 <= t.tolerationSeconds <= MAX_TOLERATION_SECONDS:
            raise ValueError(
                f"tolerationSeconds {t.tolerationSeconds} must be 0 to {MAX_TOLERATION_SECONDS} (ten years); "
                "leave it out to tolerate forever"
            )
    return t


class Requirement(Frozen):
    """One ``matchExpressions`` entry."""

    key: str = Field(description="Label key the requirement tests.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = Field(
        description="In, NotIn (values required), Exists or DoesNotExist (no values)."
    )
    values: tuple[str, ...] = Field(default=(), description="Label values for In and NotIn.")

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

    matchLabels: dict[str, str] = Field(
        default_factory=dict,
        description="Labels an object must carry with exactly these values."
    )
    matchExpressions: tuple[Requirement, ...] = Field(
        default=(),
        description="Requirements an object's labels must all meet."
    )

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether an object with ``labels`` is selected."""
        for k, v in self.matchLabels.items():
            if labels.get(k) != v:
                return False
        return all(r.matches(labels) for r in self.matchExpressions)

    def is_empty(self) -> bool:
        """True when the selector has no terms (selects everything)."""
        return not self.matchLabels and not self.matchExpressions

    def kubectl_text(self) -> str:
        """The selector as ``kubectl -l`` spells it: ``k=v,k in (a,b),k notin (c),k,!k``."""
        parts = [f"{k}={v}" for k, v in sorted(self.matchLabels.items())]
        for r in self.matchExpressions:
            vals = ",".join(sorted(r.values))
            parts.append({"In": f"{r.key} in ({vals})", "NotIn": f"{r.key} notin ({vals})", "Exists": r.key,
                          "DoesNotExist": f"!{r.key}"}.get(r.operator, f"{r.key} {r.operator} ({vals})"))
        return ",".join(parts)

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

    key: str = Field(default="", description="Taint key tolerated; empty with operator Exists: every taint.")
    operator: Literal["Equal", "Exists"] = Field(
        default="Equal",
        description="Equal (key and value must match) or Exists (any value)."
    )
    value: str = Field(default="", description="Taint value tolerated, for operator Equal.")
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(
        default="",
        description="Taint effect tolerated (NoSchedule, PreferNoSchedule, NoExecute); empty: every effect."
    )
    tolerationSeconds: int | None = Field(
        default=None,
        description="How long a NoExecute taint is tolerated before the pod is evicted; unset: forever."
    )

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

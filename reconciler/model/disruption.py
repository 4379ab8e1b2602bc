"""PodDisruptionBudget arithmetic and the Eviction API's answer, as Kubernetes computes them (pure).

Two rules, one place, used by the simulated fleet (which plays the disruption controller and the
eviction subresource) and by the plan (which predicts what a drain's evictions will meet):

* :func:`budget_status` is the disruption controller's status computation
  (``pkg/controller/disruption/disruption.go``: ``getExpectedPodCount``, ``countHealthyPods``,
  ``updatePdbStatus``);
* :func:`eviction_answer` is the eviction subresource's decision
  (``pkg/registry/core/pod/storage/eviction.go``: ``canIgnorePDB``, the PDB count check, the
  unhealthy-pod policy, ``checkAndDecrement``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from reconciler.model.observed import PdbInfo
from reconciler.model.vocab import UnhealthyPodEvictionPolicy

__all__ = [
    "BudgetStatus",
    "EvictionAnswer",
    "UnhealthyPodEvictionPolicy",
    "budget_status",
    "eviction_answer",
    "scaled_value",
]


def scaled_value(value: int | str, total: int, *, round_up: bool) -> int:
    """An int-or-percent against ``total``: an int as is, ``"N%"`` as ``N * total / 100`` rounded
    up (``round_up``) or down. Source: apimachinery ``intstr.GetScaledValueFromIntOrPercent``.

    Raises:
        ValueError: a string that is not ``<integer>%`` (the API server's validation refuses it).
    """
    if isinstance(value, bool):
        raise ValueError(f"invalid int-or-percent {value!r}")
    if isinstance(value, int):
        return value
    text = str(value)
    if not text.endswith("%") or not text[:-1].isdigit():
        raise ValueError(f"invalid int-or-percent {value!r}: a string must be a percentage")
    q, r = divmod(int(text[:-1]) * total, 100)
    return q + (1 if round_up and r else 0)


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    """A PDB's status as the disruption controller writes it (all counts of pods)."""

    expected_pods: int
    desired_healthy: int
    current_healthy: int
    disruptions_allowed: int


def budget_status(
    min_available: int | str | None, max_unavailable: int | str | None, *, pods: int, scale: int, healthy: int,
) -> BudgetStatus:
    """The status of a PDB selecting ``pods`` pods (any phase), ``healthy`` of them Ready and not
    terminating, whose controllers ask for ``scale`` replicas in all (ReplicaSet/StatefulSet
    ``spec.replicas``; pods without a controller add nothing).

    * ``maxUnavailable``: expected = ``scale``; desired = expected − maxUnavailable (percent of
      expected, rounded up), at least 0;
    * ``minAvailable`` integer: expected = ``pods``, desired = minAvailable;
    * ``minAvailable`` percent: expected = ``scale``, desired = percent of it rounded up;
    * neither: expected = desired = 0.

    ``disruptionsAllowed`` = current − desired, but 0 when that is negative or nothing is expected.
    Source: disruption controller ``getExpectedPodCount`` / ``updatePdbStatus``.

    Raises:
        ValueError: a budget string that is not a percentage.
    """
    expected = desired = 0
    if max_unavailable is not None:
        expected = scale
        desired = max(0, expected - scaled_value(max_unavailable, expected, round_up=True))
    elif min_available is not None:
        if isinstance(min_available, int) and not isinstance(min_available, bool):
            expected, desired = pods, min_available
        else:
            expected = scale
            desired = scaled_value(min_available, expected, round_up=True)
    allowed = healthy - desired
    if expected <= 0 or allowed <= 0:
        allowed = 0
    return BudgetStatus(expected, desired, healthy, allowed)


class EvictionAnswer(StrEnum):
    """What the eviction subresource does with one eviction request (see :func:`eviction_answer`)."""

    NO_CHECK = "no-check"  # Pending/Succeeded/Failed or terminating: deleted, no budget consulted
    NO_BUDGET = "no-budget"  # no PDB selects the pod: deleted
    UNHEALTHY = "unhealthy"  # not Ready and the PDB's unhealthy-pod policy lets it go: deleted, no decrement
    ALLOWED = "allowed"  # the PDB allows a disruption: decremented, deleted
    REFUSED = "refused"  # 429 TooManyRequests (DisruptionBudget cause)
    MULTIPLE_BUDGETS = "multiple-budgets"  # 500: more than one PDB selects the pod

    @property
    def evicts(self) -> bool:
        """Whether the pod is deleted."""
        return self not in (EvictionAnswer.REFUSED, EvictionAnswer.MULTIPLE_BUDGETS)

    @property
    def http_status(self) -> int:
        """The HTTP status of the answer (201 when the pod is deleted)."""
        return {EvictionAnswer.REFUSED: 429, EvictionAnswer.MULTIPLE_BUDGETS: 500}.get(self, 201)


def eviction_answer(phase: str, terminating: bool, ready: bool, covering: Sequence[PdbInfo]) -> EvictionAnswer:
    """The Eviction API's answer for a pod in ``phase`` (``terminating``: has a deletionTimestamp;
    ``ready``: its Ready condition is True) selected by the PDBs ``covering`` (with their status).

    In order: a pod Pending, Succeeded, Failed or terminating is deleted without a budget check
    (a pod in any other phase — Running, Unknown — is checked); more than one PDB → 500; none →
    deleted; a pod that is not Ready is deleted without a decrement when its PDB's
    ``unhealthyPodEvictionPolicy`` is ``AlwaysAllow``, or (``IfHealthyBudget``, the default) when
    ``currentHealthy >= desiredHealthy`` and ``desiredHealthy > 0``; otherwise the pod is deleted
    only if ``disruptionsAllowed > 0`` (else 429). Source: kube-apiserver
    ``pkg/registry/core/pod/storage/eviction.go`` (``canIgnorePDB``, ``checkAndDecrement``).
    """
    if terminating or phase in ("Pending", "Succeeded", "Failed"):
        return EvictionAnswer.NO_CHECK
    if len(covering) > 1:
        return EvictionAnswer.MULTIPLE_BUDGETS
    if not covering:
        return EvictionAnswer.NO_BUDGET
    pdb = covering[0]
    if not ready:
        if pdb.unhealthy_pod_eviction_policy is UnhealthyPodEvictionPolicy.ALWAYS_ALLOW:
            return EvictionAnswer.UNHEALTHY
        if pdb.current_healthy >= pdb.desired_healthy > 0:
            return EvictionAnswer.UNHEALTHY
    return EvictionAnswer.ALLOWED if pdb.disruptions_allowed > 0 else EvictionAnswer.REFUSED

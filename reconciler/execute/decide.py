"""Pure decisions of the node lifecycle about ownership: take, share or leave a cordon; release it
and the runtime-required taint at the end; recognise a finished reboot (issue 12: decisions are
pure functions with table tests; the lifecycle performs what they decide).

Every function takes the node as just read (its resourceVersion is the precondition of the write
that carries the decision out) and returns a frozen decision; none reads a clock or the cluster.
Rules: semantics-nodewright.md decision (c) — we only undo a cordon we placed, a claim per recipe
(``cordon_<recipe>``, recording the node's UID: a claim of another machine under the same name is
none), shared across recipes, released when the last claim goes; decision (f) —
a reboot is done when the node's bootID differs from the one recorded before the request and
the node is Ready; §3.6 — the runtime-required taint leaves a node only when every
runtime-required recipe selecting it is complete there; a recipe's readiness gate passes when the
external validator's condition is True and/or its labels match (:func:`judge_gate`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from reconciler.model.nodestate import cordon_claims, holds_claim, recorded_status, validated_key
from reconciler.model.observed import NodeInfo
from reconciler.model.recipe import DEFAULT_RUNTIME_REQUIRED_TAINTS, ReadinessGate
from reconciler.model.selector import Taint
from reconciler.model.utctime import to_rfc3339
from reconciler.model.vocab import IMAGE_PULL_REASONS, FailureReason


class CordonAction(StrEnum):
    """What to do about the cordon before a node is drained."""

    CORDON = "cordon"  # schedulable: cordon it and claim the cordon
    SHARE = "share"  # cordoned by another recipe of ours: add our claim, it is released with the last
    OURS = "ours"  # our claim is already there (a run resumed, or our cordon's answer was lost)
    SOMEONE_ELSES = "someone-elses"  # cordoned without a claim of ours: it stays cordoned after the run


@dataclass(frozen=True)
class CordonDecision:
    """``action``; ``claim``: write our claim annotation; ``cordon``: set ``spec.unschedulable``;
    ``others``: the other recipes' claims; ``detail``: the timeline event's text."""

    action: CordonAction
    claim: bool
    cordon: bool
    others: tuple[str, ...]
    detail: str


def decide_cordon(node: NodeInfo, recipe: str) -> CordonDecision:
    """The cordon decision for ``recipe`` on ``node`` as just read (see :class:`CordonAction`)."""
    others = cordon_claims(node.annotations, recipe, node.uid)
    if holds_claim(node.annotations, recipe, node.uid):
        return CordonDecision(CordonAction.OURS, claim=not node.unschedulable, cordon=not node.unschedulable,
                              others=others,
                              detail="cordon already held by this recipe" if node.unschedulable
                              else "our claim was recorded; cordoned again")
    if not node.unschedulable:
        return CordonDecision(CordonAction.CORDON, claim=True, cordon=True, others=others, detail="")
    if others:
        return CordonDecision(CordonAction.SHARE, claim=True, cordon=False, others=others,
                              detail=f"sharing the cordon held by {', '.join(others)}")
    return CordonDecision(CordonAction.SOMEONE_ELSES, claim=False, cordon=False, others=(),
                          detail="already cordoned by someone else; it stays cordoned after the run")


@dataclass(frozen=True)
class ReleaseDecision:
    """At the end of a node's lifecycle: ``uncordon`` (ours was the last claim), ``others`` (claims
    that keep it cordoned), ``taints`` (the node's new taint list without the runtime-required
    taint, or None to leave the taints alone)."""

    uncordon: bool
    others: tuple[str, ...]
    taints: tuple[Taint, ...] | None


def _default_required(taint: Taint) -> bool:
    return any(m.tolerates(taint) for m in DEFAULT_RUNTIME_REQUIRED_TAINTS)


def decide_release(node: NodeInfo, recipe: str, *, owns_cordon: bool, runtime_required: bool,
                   runtime_required_recipes: tuple[str, ...],
                   required_taint: Callable[[Taint], bool] | None = None) -> ReleaseDecision:
    """What the end of ``recipe``'s lifecycle on ``node`` (as just read) releases. ``owns_cordon``:
    we hold a claim; ``runtime_required``: the recipe is runtime-required;
    ``runtime_required_recipes``: every runtime-required recipe selecting the node;
    ``required_taint``: which taints are runtime-required (:meth:`Recipe.is_required_taint`;
    default :data:`~reconciler.model.recipe.DEFAULT_RUNTIME_REQUIRED_TAINTS`), all removed together."""
    if required_taint is None:
        required_taint = _default_required
    others = cordon_claims(node.annotations, recipe, node.uid)
    uncordon = owns_cordon and node.unschedulable and not others
    waiting = [r for r in runtime_required_recipes if r != recipe and _status(node, r) != "complete"]
    taints = None
    if runtime_required and not waiting and any(required_taint(t) for t in node.taints):
        taints = tuple(t for t in node.taints if not required_taint(t))
    return ReleaseDecision(uncordon, others, taints)


def reboot_confirmed(node: NodeInfo, boot_id_before: str) -> bool:
    """A requested reboot is done: the node reports a bootID other than the one recorded before the
    request, and is Ready (decision (f); an unknown bootID on either side is never "done")."""
    return bool(node.boot_id and boot_id_before and node.boot_id != boot_id_before and node.ready is True)


class StageVerdict(StrEnum):
    """What a stage pod's observed status means for the step (:func:`judge_stage`)."""

    RUNNING = "running"  # look again by ``wake_in``
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # with ``reason`` (exit code and log tail come from the status)
    MISSING = "missing"  # the pod is not there: create it again (a run stopped before it did)


@dataclass(frozen=True)
class StageJudgement:
    """``verdict``; ``reason`` for FAILED (the pod's reason, ``StageTimeout``, or an image-pull
    reason once the pull grace is over); ``wake_in``: seconds until the next look for RUNNING (the
    earlier of the stage timeout and, while pending, the image-pull grace; capped by the caller's
    poll interval)."""

    verdict: StageVerdict
    reason: str = ""
    wake_in: float = 0.0


def judge_stage(phase: str, reason: str, elapsed: float, *, timeout: float, pull_grace: float) -> StageJudgement:
    """Judge a stage pod from its ``phase`` (pending|running|succeeded|failed|missing) and waiting
    ``reason``, ``elapsed`` seconds after it started (UTC, from the pod's start time), under the
    stage ``timeout`` and the image-pull grace (decision (e): image-pull failures and pods that
    never start fail the stage; exit codes are kept by the caller)."""
    if phase == "missing":
        return StageJudgement(StageVerdict.MISSING)
    if phase == "succeeded":
        return StageJudgement(StageVerdict.SUCCEEDED)
    pull_stuck = phase == "pending" and reason in IMAGE_PULL_REASONS and elapsed >= pull_grace
    timed_out = elapsed >= timeout
    if phase == "failed":
        fallback = FailureReason.STAGE_TIMEOUT.value if timed_out else "Error"
        return StageJudgement(StageVerdict.FAILED, reason or fallback)
    if pull_stuck:
        return StageJudgement(StageVerdict.FAILED, reason)
    if timed_out:
        return StageJudgement(StageVerdict.FAILED, FailureReason.STAGE_TIMEOUT.value)
    wake = timeout - elapsed
    if phase == "pending" and elapsed < pull_grace:  # once the grace is over it no longer sets the pace
        wake = min(wake, pull_grace - elapsed)
    return StageJudgement(StageVerdict.RUNNING, wake_in=wake)


@dataclass(frozen=True)
class GateVerdict:
    """Whether a node passes a recipe's readiness gate: ``ready``, and ``detail`` — what was seen
    (the condition's status and reason, the labels that do not match), for the timeline and the
    failure message."""

    ready: bool
    detail: str


def judge_gate(node: NodeInfo, gate: ReadinessGate) -> GateVerdict:
    """Judge ``node`` (as just read) against ``gate``: ready when the condition
    ``gate.conditionType`` (if given) has status ``"True"`` and the labels match
    ``gate.labelSelector`` (if given). An absent condition or an ``Unknown``/``False`` status is
    not ready, as a pod readiness gate reads its condition (Kubernetes pod readiness gates, KEP 580)."""
    seen: list[str] = []
    ready = True
    if gate.conditionType is not None:
        c = node.condition(gate.conditionType)
        if c is None:
            ready = False
            seen.append(f"condition {gate.conditionType} absent")
        else:
            ready = ready and c.status == "True"
            why = f" ({c.reason}: {c.message[:200]})" if c.reason or c.message else ""
            seen.append(f"condition {gate.conditionType}={c.status}{why}")
    if gate.labelSelector is not None:
        if gate.labelSelector.matches(node.labels):
            seen.append(f"labels {gate.labelSelector.kubectl_text()} match")
        else:
            ready = False
            have = {k: node.labels[k] for k in _selector_keys(gate) if k in node.labels}
            shown = ",".join(f"{k}={v}" for k, v in sorted(have.items())) or "none of its keys"
            seen.append(f"labels {gate.labelSelector.kubectl_text()} do not match (node has {shown})")
    return GateVerdict(ready, "; ".join(seen))


@dataclass(frozen=True)
class Freshness:
    """Whether the validation that satisfies a readiness gate is newer than the work the gate
    holds (:func:`judge_freshness`), and what showed it (or why not), for the timeline."""

    fresh: bool
    detail: str


def judge_freshness(node: NodeInfo, gate: ReadinessGate, *, recipe: str, token: str, work_start: float,
                    armed: bool) -> Freshness:
    """Whether the validation ``node`` shows for ``gate`` is newer than the work the gate holds
    (issue 34: a condition left True a month ago must not pass the gate of today's release). Any of:

    * the validator echoed the gate's ``token`` (annotation :func:`~reconciler.model.nodestate.validated_key`
      equal to the :func:`~reconciler.model.nodestate.validate_key` request written at the gate);
    * ``armed``: the gate was seen not passing since it opened (the validator set what it sets later);
    * the gate's condition last changed (``lastTransitionTime``, whole seconds as the API keeps it)
      at or after ``work_start`` (UTC epoch seconds: the start of the last change the gate holds
      the node for, its last stage pod, or the gate's opening when not known) — a validator that
      resets its condition when the node changes, as NVCRE does.

    A condition that stayed ``True`` through the work, or labels that already matched when the gate
    opened, are an earlier validation: not fresh (labels carry no time). Pure."""
    if token and node.annotations.get(validated_key(recipe)) == token:
        return Freshness(True, f"the validator echoed {token}")
    if armed:
        return Freshness(True, "validated since the gate opened")
    since = to_rfc3339(math.floor(work_start))
    if gate.conditionType is not None:
        c = node.condition(gate.conditionType)
        if c is not None and c.since is not None and c.since >= math.floor(work_start):
            return Freshness(True, f"condition {gate.conditionType} changed at {to_rfc3339(c.since)}, after the work")
        when = f"since {to_rfc3339(c.since)}" if c is not None and c.since is not None else "with no transition time"
        return Freshness(False, f"condition {gate.conditionType} True {when}, before the work it gates (started "
                                f"{since}): an earlier validation; waiting for a new one (or the token echoed)")
    return Freshness(False, f"labels already matched when the gate opened, before its work was validated (started "
                            f"{since}): waiting for the validator to set them again or echo the token")


def _selector_keys(gate: ReadinessGate) -> list[str]:
    sel = gate.labelSelector
    if sel is None:
        return []
    return [*sel.matchLabels, *(r.key for r in sel.matchExpressions)]


def _status(node: NodeInfo, recipe: str) -> str:
    return recorded_status(node.labels, node.annotations, recipe)


__all__ = ["CordonAction", "CordonDecision", "Freshness", "GateVerdict", "ReleaseDecision", "StageJudgement",
           "StageVerdict", "decide_cordon", "decide_release", "judge_freshness", "judge_gate", "judge_stage",
           "reboot_confirmed"]

"""Batch math of a compartment: ceiling, next batch size, batch evaluation, prediction (pure).

Rules are NodeWright's ``DeploymentPolicy`` arithmetic (semantics-nodewright.md §1.2.2-§1.2.4) with
our decisions:

* (a) the budget ceiling caps every batch: ``size = max(1, min(strategy size, ceiling, remaining))``
  while nodes remain (NodeWright v0.15 does not cap, §1.2.2);
* (i) a positive percent that rounds down to 0 nodes gives a ceiling of 1 (the planner warns);
* no strategy (the legacy ``interruptionBudget`` compartment, §1.2.6) = fixed batches of the
  ceiling, batch threshold 100 %;
* safe by default (issue 34): a compartment whose policy sets no ``failureThreshold`` (and one
  with no strategy) halts at its first failed batch, at any progress (:func:`halt_rule`); only
  ``failureThreshold: never``, written explicitly, means "never halt" (NodeWright's default).

The executor's rollout calls :func:`next_batch_size` before each batch and :func:`evaluate_batch`
after it, carrying a :class:`BatchState` per compartment; the planner calls
:func:`predict_batches` (every node assumed to succeed) and :func:`assign_compartments`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from reconciler.model.observed import NodeInfo
from reconciler.model.plan import HaltRule
from reconciler.model.policy import (
    DEFAULT_COMPARTMENT,
    STRATEGY_SAFETY,
    Budget,
    DeploymentPolicy,
    Strategy,
)

#: The batch threshold of a compartment with no strategy (legacy fixed batches, semantics §1.2.6).
LEGACY_BATCH_THRESHOLD = 100

#: Consecutive failed batches that halt a compartment whose policy sets no ``failureThreshold``
#: (issue 34: a failing package must not reach every node because nobody wrote a threshold).
DEFAULT_FAILURE_THRESHOLD = 1


def halt_rule(strategy: Strategy | None) -> HaltRule:
    """The halting rule of a compartment with ``strategy`` (None: the legacy compartment, batch
    threshold 100 %): its ``failureThreshold`` below its ``safetyLimit`` (NodeWright); left out,
    :data:`DEFAULT_FAILURE_THRESHOLD` at any progress (``safetyLimit`` 100: the safe default,
    which a progress limit would switch off for the second half of the fleet); ``never``: no halt.

    Examples: None → 1 at any progress (the first failed node fails its batch);
    ``fixed {batchThreshold: 80}`` → 1 at any progress; ``fixed {failureThreshold: 2,
    safetyLimit: 50}`` → 2 below 50 %; ``fixed {failureThreshold: never}`` → never.
    """
    if strategy is None:
        return HaltRule(failureThreshold=DEFAULT_FAILURE_THRESHOLD, safetyLimit=100,
                        batchThreshold=LEGACY_BATCH_THRESHOLD, default=True)
    p = strategy.params
    if p.failureThreshold is None:
        return HaltRule(failureThreshold=DEFAULT_FAILURE_THRESHOLD, safetyLimit=100, batchThreshold=p.batchThreshold,
                        default=True)
    return HaltRule(failureThreshold=p.failureThreshold, safetyLimit=p.safetyLimit, batchThreshold=p.batchThreshold)


@dataclass(frozen=True)
class BatchState:
    """Rollout bookkeeping of one compartment (NodeWright ``batchState``, semantics §1.2).

    ``current_batch`` is 1-based (the batch about to run). ``completed``/``failed`` are cumulative
    node counts (processed = their sum). ``last_batch_size`` is 0 before the first batch.
    ``should_stop`` is sticky: once set the compartment selects no more nodes until reset.
    """

    current_batch: int = 1
    consecutive_failures: int = 0
    completed: int = 0
    failed: int = 0
    last_batch_size: int = 0
    last_batch_failed: bool = False
    should_stop: bool = False

    @property
    def processed(self) -> int:
        """Nodes done so far, successfully or not."""
        return self.completed + self.failed


def ceiling(budget: Budget, matched: int) -> int:
    """Nodes of a compartment that may be disrupted at once.

    ``count`` → count; ``percent`` → ``max(1, floor(matched × percent / 100))``; 0 when
    ``matched`` is 0 (NodeWright ``CalculateCeiling``, semantics §1.2.2, decision (i)).
    Examples: 2 @33 % → 1, 100 @29 % → 29, 5 @10 % → 1, 7 @50 % → 3.
    """
    return budget.ceiling(matched)


def progress_percent(processed: int, total: int) -> int:
    """``floor(processed × 100 / total)``; 100 when ``total`` is 0 (nothing to do is done, S22)."""
    if total <= 0:
        return 100
    return processed * 100 // total


def next_batch_size(strategy: Strategy | None, ceiling: int, total: int, state: BatchState) -> int:
    """Size of the next batch of a compartment with ``total`` nodes to process.

    NodeWright ``CalculateBatchSize`` (semantics §1.2.3), capped by the budget (decision (a)):

    * no strategy: ``ceiling`` (legacy fixed batches of the budget);
    * fixed: ``initialBatch``;
    * linear: ``initialBatch`` first; after a failed batch while progress < ``safetyLimit``
      ``max(1, last − delta)``; otherwise ``last + delta``;
    * exponential: ``initialBatch`` first; after a failed batch while progress < ``safetyLimit``
      ``max(1, last // growthFactor)``; otherwise ``last × growthFactor`` (capped at ``total``);
    * then ``max(1, min(size, ceiling, remaining))`` while ``remaining = total − completed −
      failed`` is positive, else 0. ``progress = floor(processed × 100 / total)``.

    A compartment with no nodes (S22) or with every node processed returns 0, never divides by
    zero. ``should_stop`` is not consulted here: the caller stops asking once it is set.
    """
    remaining = total - state.processed
    if remaining <= 0:
        return 0
    progress = progress_percent(state.processed, total)
    size: int
    if strategy is None:
        size = ceiling
    else:
        params = strategy.params
        shrink = state.last_batch_failed and progress < params.safetyLimit
        if strategy.linear is not None:
            lin = strategy.linear
            if state.last_batch_size == 0:
                size = lin.initialBatch
            elif shrink:
                size = max(1, state.last_batch_size - lin.delta)
            else:
                size = state.last_batch_size + lin.delta
        elif strategy.exponential is not None:
            exp = strategy.exponential
            if state.last_batch_size == 0:
                size = exp.initialBatch
            elif shrink:
                size = max(1, state.last_batch_size // exp.growthFactor)
            else:
                size = min(state.last_batch_size * exp.growthFactor, total)
        else:
            size = params.initialBatch
    return max(1, min(size, ceiling, remaining))


def evaluate_batch(
    strategy: Strategy | None,
    total: int,
    state: BatchState,
    batch_size: int,
    succeeded: int,
    failed: int,
) -> BatchState:
    """The compartment's state after a batch of ``batch_size`` nodes ended.

    NodeWright ``EvaluateBatchResult`` (semantics §1.2.4): ``success% = floor(succeeded × 100 /
    batch_size)``; the batch failed when ``success% < batchThreshold``. A failed batch increments
    ``consecutive_failures`` and sets ``should_stop`` when the compartment's :func:`halt_rule`
    holds: its ``failureThreshold`` is not ``never`` (unset: 1, at any progress), progress
    (computed *after* adding this batch's nodes, as in the worked example §1.2.7) is below its
    ``safetyLimit`` and ``consecutive_failures ≥ failureThreshold``; a passed batch resets
    ``consecutive_failures``. Always ``last_batch_size = batch_size`` and ``current_batch += 1``.

    Blocked nodes (released without a disruption, S09) are excluded from ``batch_size`` by the
    caller; a batch of size 0 (every node blocked) advances without counting as failed.

    Raises:
        ValueError: negative counts, or ``succeeded + failed > batch_size``.
    """
    if min(batch_size, succeeded, failed, total) < 0:
        raise ValueError("batch counts must not be negative")
    if succeeded + failed > batch_size:
        raise ValueError(f"succeeded ({succeeded}) + failed ({failed}) exceeds the batch size ({batch_size})")
    rule = halt_rule(strategy)
    completed = state.completed + succeeded
    failed_total = state.failed + failed
    batch_failed = batch_size > 0 and succeeded * 100 // batch_size < rule.batchThreshold
    consecutive = state.consecutive_failures + 1 if batch_failed else 0
    progress = progress_percent(completed + failed_total, total)
    stop = state.should_stop or (
        batch_failed and rule.failureThreshold != "never" and progress < rule.safetyLimit
        and consecutive >= rule.failureThreshold
    )
    return replace(
        state,
        current_batch=state.current_batch + 1,
        consecutive_failures=consecutive,
        completed=completed,
        failed=failed_total,
        last_batch_size=batch_size,
        last_batch_failed=batch_failed,
        should_stop=stop,
    )


def resume_state(strategy: Strategy | None, total: int, failed_before: int) -> BatchState:
    """The state a run starts a compartment in when ``failed_before`` of its ``total`` nodes (the
    nodes of this run plus those) were left failed by an earlier run with the same inputs.

    A halt is not persisted anywhere but in the node records, so it is found again there: each
    such node counts as one failed batch (``failed`` and ``consecutive_failures`` = ``failed_before``,
    progress ``failed_before / total``) and ``should_stop`` is set when :func:`halt_rule` holds.
    So the next ``apply``, a restarted controller or a pass of a runtime-required recipe does not
    try one more batch of a package that failed: with the default rule one such node halts the
    compartment; with an explicit ``failureThreshold`` N, N of them below ``safetyLimit``
    (conservative: the records cannot tell whether the earlier failures were consecutive).
    ``never``: never. Retried nodes (``--retry-failed``, ``reset``) are not left failed, and a
    changed recipe is other inputs: either starts afresh (NodeWright resets its batch state on a
    version change, semantics §1.2.5).

    Examples: (None, 24, 1) → should_stop; (fixed failureThreshold 2, 24, 1) → not;
    (fixed failureThreshold 2 safetyLimit 50, 4, 2) → not (progress 50 %); (any, n, 0) → BatchState().
    """
    if failed_before <= 0:
        return BatchState()
    rule = halt_rule(strategy)
    stop = (rule.failureThreshold != "never" and failed_before >= rule.failureThreshold
            and progress_percent(failed_before, total) < rule.safetyLimit)
    return BatchState(consecutive_failures=failed_before, failed=failed_before, should_stop=stop)


def predict_batches(strategy: Strategy | None, ceiling: int, nodes: Sequence[str]) -> list[list[str]]:
    """Split ``nodes`` (already in rollout order) into the batches a rollout would run if every
    node succeeded: sizes from :func:`next_batch_size`, each batch evaluated as fully successful.

    Examples (semantics §1.2.7): 20 nodes, exponential ×2 from 1, ceiling 5 → sizes 1, 2, 4, 5, 5, 3;
    10 nodes, linear +2 from 1, ceiling 10 → 1, 3, 5, 1. No nodes → no batch.
    """
    total = len(nodes)
    state = BatchState()
    out: list[list[str]] = []
    while True:
        size = next_batch_size(strategy, ceiling, total, state)
        if size <= 0:
            return out
        start = state.processed
        out.append(list(nodes[start : start + size]))
        state = evaluate_batch(strategy, total, state, size, size, 0)


def _strategy_rank(strategy: Strategy | None) -> int:
    return STRATEGY_SAFETY[strategy.kind if strategy is not None else "unknown"]


def assign_compartments(policy: DeploymentPolicy, nodes: Sequence[NodeInfo]) -> dict[str, str]:
    """Place each node in one compartment of ``policy``: node name → compartment name.

    ``nodes`` are the recipe's selected nodes. A node matching no compartment selector goes to
    ``__default__``. A node matching several takes the first after sorting candidates by
    (1) strategy safety fixed < linear < exponential < none, (2) smaller ceiling, computed against
    the number of ``nodes`` matching that compartment's selector, (3) name (NodeWright
    ``AssignNodeToCompartment``, semantics §1.2.1).
    """
    matched = {c.name: sum(1 for n in nodes if c.selector.matches(n.labels)) for c in policy.compartments}
    rank = {
        c.name: (_strategy_rank(c.strategy), ceiling(c.budget, matched[c.name]), c.name) for c in policy.compartments
    }
    out: dict[str, str] = {}
    for n in nodes:
        candidates = [c.name for c in policy.compartments if c.selector.matches(n.labels)]
        out[n.name] = min(candidates, key=rank.__getitem__) if candidates else DEFAULT_COMPARTMENT
    return out


def compartment_spec(policy: DeploymentPolicy, name: str) -> tuple[Budget, Strategy | None]:
    """Budget and strategy of compartment ``name`` (``__default__`` → the policy's default).

    Raises:
        KeyError: no compartment of that name.
    """
    if name == DEFAULT_COMPARTMENT:
        return policy.default.budget, policy.default.strategy
    for c in policy.compartments:
        if c.name == name:
            return c.budget, c.strategy
    raise KeyError(name)

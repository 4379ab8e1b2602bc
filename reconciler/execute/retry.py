"""One failure classifier for API errors met by a node's lifecycle or the rollout loop (issue 12).

:func:`classify` turns an error, the attempt number and the time already spent retrying into a
decision: :class:`Retry` after some seconds, :class:`Fail` with a named reason, or :class:`Gone`
(the object is not there any more). Every retry is bounded by count *and* time
(:class:`RetryBounds`); the bound ends in :attr:`FailureReason.API_ERROR_PERSISTS`, never in a
loop. Backoff is exponential from ``base`` seconds, capped, and never shorter than the server's
``Retry-After``. Pure: no clock, no I/O.

Which errors are worth retrying follows the Kubernetes API conventions: 409 Conflict (re-read,
decide again), 429 TooManyRequests (honour Retry-After), 500/503 and connection errors
(transient); 400/422 are the request's own fault and 403 is RBAC or a terminating namespace:
retrying cannot help, so they fail at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.errors import (
    ClusterError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    ServerError,
    TooManyRequestsError,
    TransientError,
)
from reconciler.model.vocab import FailureReason


@dataclass(frozen=True)
class RetryBounds:
    """How long one error streak may be retried: at most ``attempts`` tries and ``seconds`` of
    retrying (whichever ends first); backoff ``base`` · 2^(attempt-1), capped at ``cap`` seconds;
    a 409 Conflict is retried after ``conflict`` seconds (it is cured by reading again)."""

    attempts: int = 12
    seconds: float = 600.0
    base: float = 5.0
    cap: float = 60.0
    conflict: float = 1.0


DEFAULT_BOUNDS = RetryBounds()


@dataclass(frozen=True)
class Retry:
    """Try again ``after`` seconds from now."""

    after: float


@dataclass(frozen=True)
class Fail:
    """Stop retrying: the node (or run) fails with ``reason``; ``message`` says what was tried."""

    reason: FailureReason
    message: str


@dataclass(frozen=True)
class Gone:
    """The object the call was about does not exist (404): the caller decides what that means
    (a deleted node ends its lifecycle as removed; an evicted pod is gone)."""


Decision = Retry | Fail | Gone


def classify(error: ClusterError, attempt: int, elapsed: float, bounds: RetryBounds = DEFAULT_BOUNDS) -> Decision:
    """Decide what to do about ``error``, the ``attempt``-th consecutive failure (1-based) of one
    streak that has lasted ``elapsed`` seconds.

    Returns :class:`Gone` for 404, :class:`Fail` for errors retrying cannot fix (403 → Forbidden,
    400/422 → Invalid) and for a streak past its bounds (→ ApiErrorPersists), else :class:`Retry`.
    """
    if isinstance(error, NotFoundError):
        return Gone()
    if isinstance(error, ForbiddenError):
        return Fail(FailureReason.FORBIDDEN, f"the API refused a call: {error}")
    retryable = isinstance(error, ConflictError | TooManyRequestsError | ServerError | TransientError)
    if not retryable and error.status in (400, 422):
        return Fail(FailureReason.INVALID, f"the API rejected a request as invalid: {error}")
    if attempt > bounds.attempts or elapsed >= bounds.seconds:
        return Fail(FailureReason.API_ERROR_PERSISTS,
                    f"the same API error persisted over {attempt - 1} retries in {elapsed:.0f} s: {error}")
    delay = min(bounds.cap, bounds.base * 2 ** max(0, attempt - 1))
    if isinstance(error, ConflictError):
        delay = min(delay, bounds.conflict)  # a conflict is cured by reading again, not by waiting long
    return Retry(max(delay, error.retry_after or 0.0))

"""UTC instants as they are persisted in node records: RFC 3339 with a ``Z`` suffix.

Anything one process writes and another reads (an in-flight record's phase start, the time a
reboot was requested, a cordon claim) is a UTC wall-clock instant, never a reading of a
monotonic clock: a monotonic clock has an arbitrary origin per process (per boot on Linux), so
``time.monotonic()`` written by one Job pod and compared by the next is meaningless
(issue 12, finding 1). In-process deadlines use the clock port's monotonic reading instead
(:meth:`reconciler.ports.Clock.now`).

Pure: no clock is read here; callers pass epoch seconds from :meth:`reconciler.ports.Clock.utc`.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

#: Instants outside [1970, 9999] cannot be written by a real clock; parsing refuses them.
_MIN_EPOCH = 0.0
_MAX_EPOCH = 253402300799.0  # 9999-12-31T23:59:59Z


#: The simulated clock starts within [1970-01-01, 9000-01-01): the records it writes are UTC
#: instants from 1970 on (:func:`to_rfc3339`), and a rollout simulated from the latest start has
#: 999 years before RFC 3339's last year (9999) runs out.
SIM_START_RANGE = (0.0, 221845392000.0)  # 1970-01-01T00:00:00Z, 9000-01-01T00:00:00Z
#: Its words, for error messages.
SIM_START_WORDS = "between 1970-01-01T00:00:00Z and 9000-01-01T00:00:00Z"


def sim_start_ok(epoch: float) -> bool:
    """Whether a simulated clock may start at ``epoch`` (:data:`SIM_START_RANGE`)."""
    return math.isfinite(epoch) and SIM_START_RANGE[0] <= epoch < SIM_START_RANGE[1]


def to_rfc3339(epoch: float) -> str:
    """Epoch seconds (UTC) → ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (microseconds kept, so two records
    written within one second still order). Raises ValueError for NaN, infinities or instants
    outside years 1970..9999."""
    if not math.isfinite(epoch) or not _MIN_EPOCH <= epoch <= _MAX_EPOCH:
        raise ValueError(f"not a representable UTC instant: {epoch!r}")
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def utc_text(epoch: float) -> str:
    """Epoch seconds (UTC) → ``YYYY-MM-DDTHH:MM:SS.fffZ``: an event stream's instant, to the
    millisecond (:func:`to_rfc3339`'s range and errors)."""
    return to_rfc3339(epoch)[:23] + "Z"


def from_rfc3339(text: str | None) -> float | None:
    """RFC 3339 text (``Z`` or a numeric offset; fraction optional) → epoch seconds; None when
    empty or not an RFC 3339 instant (callers treat an unreadable time as unknown, never as 0)."""
    if not text or not isinstance(text, str) or len(text) > 40:
        return None
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is None:  # RFC 3339 requires an offset; a naive time is ambiguous
        return None
    return dt.timestamp()


def elapsed_since(start: str | None, utc_now: float) -> float | None:
    """Seconds from the persisted instant ``start`` to ``utc_now`` (epoch seconds), or None when
    ``start`` is unknown. Negative values (the writer's clock ran ahead of ours) count as 0:
    a clock skew never shortens a timeout below what has visibly elapsed here."""
    t = from_rfc3339(start)
    if t is None:
        return None
    return max(0.0, utc_now - t)

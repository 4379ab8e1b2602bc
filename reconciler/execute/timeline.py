"""What happened during a run: the :class:`Timeline` of node events ``execute`` appends to.

The result types (:class:`~reconciler.model.run.Event`, :class:`~reconciler.model.run.NodeOutcome`,
:class:`~reconciler.model.run.BatchRecord`, :class:`~reconciler.model.run.RunResult`) live in
:mod:`reconciler.model.run` so ``report`` can render them without importing ``execute``; they are
re-exported here for existing callers.
"""

from __future__ import annotations

import contextvars
import threading
from dataclasses import dataclass, field
from typing import Any

from reconciler.model.run import EVENTS, BatchRecord, Event, NodeOutcome, RunResult
from reconciler.model.vocab import NodeResult

__all__ = ["EVENTS", "BatchRecord", "Event", "NodeOutcome", "NodeResult", "RunResult", "Timeline", "in_job"]

#: True inside a job of a rollout's job pool (a worker thread); each thread has its own value.
_IN_JOB: contextvars.ContextVar[bool] = contextvars.ContextVar("reconciler_in_job", default=False)


def in_job() -> None:
    """Mark the calling thread as running a job of the rollout's job pool:
    events it adds wait for :meth:`Timeline.flush`, even on the loop's own thread."""
    _IN_JOB.set(True)


@dataclass
class Timeline:
    """Ordered run events; ``listeners`` (observers: the terminal, the status object, metrics) are
    called for each, always on the thread that owns the timeline — the rollout loop's (issue 12:
    decisions and observers on one thread) — and outside the rollout's jobs (:func:`in_job`). An
    event added from a worker thread or a job is recorded at once and announced when the loop calls
    :meth:`flush` (after each round of node advances), in the order the events were added, so an
    observer is never entered again while a call of it waits on I/O."""

    start: float
    #: the wall-clock instant (UTC epoch seconds) of ``start``; each event's ``at`` is read from it
    utc_start: float | None = None
    events: list[Event] = field(default_factory=list)
    listeners: list[Any] = field(default_factory=list)
    _owner: int = field(default_factory=threading.get_ident, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _unannounced: list[Event] = field(default_factory=list, repr=False)

    def own(self) -> None:
        """Make the calling thread the one that announces events (the rollout loop calls this
        when its run starts)."""
        self._owner = threading.get_ident()

    def add(self, now: float, node: str, event: str, detail: str = "") -> None:
        """Append an event at clock time ``now``; announced now on the owner thread, else at the
        next :meth:`flush`."""
        t = now - self.start
        ev = Event(t, node, event, detail, None if self.utc_start is None else self.utc_start + t)
        with self._lock:
            self.events.append(ev)
            self._unannounced.append(ev)
        if threading.get_ident() == self._owner and not _IN_JOB.get():
            self.flush()

    def flush(self) -> None:
        """Announce the events not announced yet to every listener (owner thread only).

        Raises:
            RuntimeError: called from another thread than the owner, or from a job.
        """
        if threading.get_ident() != self._owner or _IN_JOB.get():
            raise RuntimeError("Timeline.flush called off the rollout loop's thread")
        with self._lock:
            pending, self._unannounced = self._unannounced, []
        for ev in pending:
            for fn in self.listeners:
                fn(ev)

    def for_node(self, node: str) -> list[Event]:
        """Events of one node, in order."""
        return [e for e in self.events if e.node == node]

"""What happened during a run: the :class:`Timeline` of node events ``execute`` appends to.

The result types (:class:`~reconciler.model.run.Event`, :class:`~reconciler.model.run.NodeOutcome`,
:class:`~reconciler.model.run.BatchRecord`, :class:`~reconciler.model.run.RunResult`) live in
:mod:`reconciler.model.run` so ``report`` can render them without importing ``execute``; they are
re-exported here for existing callers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reconciler.model.run import EVENTS, BatchRecord, Event, NodeOutcome, NodeResult, RunResult

__all__ = ["EVENTS", "BatchRecord", "Event", "NodeOutcome", "NodeResult", "RunResult", "Timeline"]


@dataclass
class Timeline:
    """Ordered run events; ``listeners`` are called for each (the live progress display)."""

    start: float
    events: list[Event] = field(default_factory=list)
    listeners: list[Any] = field(default_factory=list)

    def add(self, now: float, node: str, event: str, detail: str = "") -> None:
        """Append an event at clock time ``now``."""
        ev = Event(now - self.start, node, event, detail)
        self.events.append(ev)
        for fn in self.listeners:
            fn(ev)

    def for_node(self, node: str) -> list[Event]:
        """Events of one node, in order."""
        return [e for e in self.events if e.node == node]

"""A coalescing work queue: "a pass is needed, for these reasons" (thread-safe).

Watch threads :meth:`WorkQueue.add` reasons; the decision thread :meth:`WorkQueue.take` them all
at once (any number of events before a pass becomes one pass, as a client-go workqueue
coalesces a key). ``on_add`` (set by the controller) is called after each add, outside the lock,
with the reason and whether it is new work: the controller uses it to preempt a running pass so
new work does not wait for a long rollout (a change the running pass waits for anyway, such as
its own node coming back from a reboot, is queued without preempting).
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class WorkQueue:
    """Reasons for a pass, coalesced (at most ``max_reasons`` kept, for the log). ``added`` counts every add."""

    def __init__(self) -> None:
        self._reasons: dict[str, None] = {}  # insertion-ordered set
        self._cond = threading.Condition()
        self.added = 0
        self.on_add: Callable[[str, bool], None] | None = None
        self.max_reasons = 1000

    def add(self, reason: str, *, preempt: bool = True) -> None:
        """Queue ``reason`` (a pass is needed); wakes :meth:`take`. ``preempt``: new work that may
        stop a running pass (told to ``on_add``)."""
        with self._cond:
            if len(self._reasons) < self.max_reasons:
                self._reasons[reason] = None
            else:
                self._reasons.setdefault("and more changes", None)
            self.added += 1
            self._cond.notify_all()
        hook = self.on_add
        if hook is not None:
            hook(reason, preempt)

    def pending(self) -> bool:
        """Whether reasons are waiting."""
        with self._cond:
            return bool(self._reasons)

    def take(self, stop: threading.Event, timeout: float | None = None) -> list[str]:
        """Every queued reason (oldest first), waiting until there is one, ``stop`` is set or
        ``timeout`` seconds passed (then ``[]``)."""
        with self._cond:
            waited = 0.0
            while not self._reasons and not stop.is_set():
                step = 0.5 if timeout is None else min(0.5, timeout - waited)
                if step <= 0:
                    break
                self._cond.wait(step)
                waited += step
            out, self._reasons = list(self._reasons), {}
            return out

    def wake(self) -> None:
        """Wake :meth:`take` (after ``stop`` was set)."""
        with self._cond:
            self._cond.notify_all()

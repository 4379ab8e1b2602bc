"""Stopping a pass cleanly: on SIGTERM, on lost leadership, or to start over with new work.

The application service runs a rollout to its end; the controller must be able to end it early
without leaving anything half done. Two hooks do it, both outside ``reconciler.execute``:

* :class:`StoppableCluster` — the port decorator of fenced writes
  (:class:`~reconciler.execute.fence.FencedCluster`) with :class:`StopFence`: once a stop is
  requested (or leadership is lost) no further write reaches the cluster; the write raises
  :class:`PassStopped` (a :class:`~reconciler.execute.lock.LeaseLostError`), which the rollout
  treats as a lost Lease: it stops at once, nodes keep their records (the current step is
  recorded there), and the next pass or leader resumes them.
* :class:`StoppableClock` — the rollout waits between its loop passes in ``Clock.wait``; this
  clock waits in slices of at most ``slice_seconds`` and raises :class:`PassStopped` as soon as a
  stop is requested, so a rollout waiting for a long stage notices within a second. The raise
  happens between loop passes, never inside a node step. The service then releases the recipe
  Leases (its ``except`` path) and re-raises to the controller.

``StopSignal`` says why: ``"shutdown"`` (SIGTERM: the controller exits after the pass),
``"preempt"`` (new work: the pass ends and a new one starts at once), or leadership lost.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from typing import Any

from reconciler.execute.fence import FencedCluster
from reconciler.execute.lock import LeaseLostError
from reconciler.ports import ChangeFeed, Clock, Cluster, ClusterPorts


class PassStopped(LeaseLostError):
    """The pass was asked to stop (``reason``: shutdown, preempt, or leadership lost)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"reconcile pass stopped: {reason}")
        self.reason = reason
        #: preempted by new work or stopped by SIGTERM: asked for, not an error (leadership lost is one)
        self.requested = not reason.startswith("leadership lost")


class StopSignal:
    """A stop request with its reason; thread-safe. ``shutdown`` is sticky (the process ends);
    ``preempt`` is cleared by :meth:`clear_preempt` when the next pass starts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.shutdown = threading.Event()
        self._preempt = ""
        self.lost_leadership: Callable[[], str] = lambda: ""

    def request_shutdown(self) -> None:
        """SIGTERM/SIGINT: stop the pass and the controller."""
        self.shutdown.set()

    def preempt(self, reason: str) -> None:
        """End the running pass so a new one starts with ``reason``'s work."""
        with self._lock:
            if not self._preempt:
                self._preempt = reason

    def clear_preempt(self) -> None:
        """Forget a preemption (a new pass starts and takes every queued reason)."""
        with self._lock:
            self._preempt = ""

    def reason(self) -> str:
        """Why the pass must stop now (``""``: it may go on)."""
        if self.shutdown.is_set():
            return "shutdown (SIGTERM)"
        lost = self.lost_leadership()
        if lost:
            return f"leadership lost: {lost}"
        with self._lock:
            return f"preempted: {self._preempt}" if self._preempt else ""


class StopFence:
    """A :class:`~reconciler.execute.fence.WriteFence` that refuses writes once ``signal`` says stop."""

    def __init__(self, signal: StopSignal) -> None:
        self.signal = signal

    def check(self) -> None:
        """Raise :class:`PassStopped` when a stop was requested."""
        why = self.signal.reason()
        if why:
            raise PassStopped(why)


class StoppableCluster(FencedCluster):
    """``inner`` with writes fenced by ``signal`` (module docstring). Attributes the service reads
    from the adapter (``namespace``, ...) are the inner one's."""

    def __init__(self, inner: Cluster | ClusterPorts, signal: StopSignal) -> None:
        super().__init__(inner, StopFence(signal))

    def __getattr__(self, name: str) -> Any:
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


class StoppableClock:
    """``inner`` whose :meth:`wait` raises :class:`PassStopped` once ``signal`` says stop (waits
    are cut into slices of ``slice_seconds``)."""

    def __init__(self, inner: Clock, signal: StopSignal, *, slice_seconds: float = 1.0) -> None:
        self.inner, self.signal, self.slice_seconds = inner, signal, slice_seconds

    def now(self) -> float:
        """The inner clock's monotonic seconds."""
        return self.inner.now()

    def utc(self) -> float:
        """The inner clock's UTC epoch seconds."""
        return self.inner.utc()

    def wait(self, seconds: float) -> None:
        """Wait ``seconds`` (see the class docstring). Raises PassStopped."""

        def slice_of(s: float) -> Collection[str]:
            self.inner.wait(s)
            return ()  # a clock cannot tell what changed: the whole time is waited

        _sliced(self.signal, self.inner, seconds, self.slice_seconds, slice_of)


class StoppableFeed:
    """``inner`` (a ``ChangeFeed``) whose :meth:`changed` raises :class:`PassStopped` once
    ``signal`` says stop; waits are cut into slices of ``slice_seconds`` timed by ``clock``, and a
    slice that says something changed (or ``None``: cannot tell) ends the wait with that answer."""

    def __init__(self, inner: ChangeFeed, clock: Clock, signal: StopSignal, *, slice_seconds: float = 1.0) -> None:
        self.inner, self.clock, self.signal, self.slice_seconds = inner, clock, signal, slice_seconds

    def changed(self, within: float) -> Collection[str] | None:
        """Wait up to ``within`` seconds (see the class docstring). Raises PassStopped."""
        return _sliced(self.signal, self.clock, within, self.slice_seconds, self.inner.changed)


def _sliced(signal: StopSignal, clock: Clock, seconds: float, slice_seconds: float,
            wait: Callable[[float], Collection[str] | None]) -> Collection[str] | None:
    """``wait`` in slices until ``seconds`` of ``clock`` passed or a slice tells a change (or
    cannot tell); PassStopped as soon as ``signal`` says stop."""
    end = clock.now() + max(0.0, seconds)
    while True:
        why = signal.reason()
        if why:
            raise PassStopped(why)
        got = wait(max(0.0, min(end - clock.now(), slice_seconds)))
        if got is None or got or clock.now() >= end:
            why = signal.reason()
            if why:
                raise PassStopped(why)
            return got

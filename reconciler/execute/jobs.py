"""Where a rollout's node I/O runs on a real cluster: one thread per job in flight (issue 17); every
decision stays on the rollout loop's thread."""

from __future__ import annotations

import queue
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor


class ThreadJobPool:
    """Jobs on up to ``size`` threads named ``node_N`` (``ThreadPoolExecutor``); finished jobs
    come back through a queue (O(1) per answer: ``wait(FIRST_COMPLETED)`` re-arms a waiter on
    every job in flight for each answer, O(n²) per loop pass with a batch's n nodes)."""

    def __init__(self, size: int) -> None:
        self._executor = ThreadPoolExecutor(max_workers=max(1, size), thread_name_prefix="node")
        self._finished: queue.SimpleQueue[Future[object]] = queue.SimpleQueue()
        self._keys: dict[Future[object], object] = {}

    def submit(self, key: object, job: Callable[[], object]) -> None:
        """Start ``job`` on a free thread (queued when none is); ``key`` comes back with it."""
        f = self._executor.submit(job)
        self._keys[f] = key
        f.add_done_callback(self._finished.put)

    def pending(self) -> int:
        """Jobs submitted whose result :meth:`next_done` has not returned yet."""
        return len(self._keys)

    def next_done(self) -> tuple[object, object, BaseException | None]:
        """(key, result, None) or (key, None, exception) of the next job to end. Raises
        RuntimeError when no job is pending."""
        if not self._keys:
            raise RuntimeError("no job pending")
        f = self._finished.get()
        key = self._keys.pop(f)
        e = f.exception()
        return (key, None, e) if e is not None else (key, f.result(), None)

    def close(self) -> None:
        """Drop the jobs not started yet, wait for the running ones (results dropped), stop the
        threads."""
        self._executor.shutdown(wait=True, cancel_futures=True)
        self._keys.clear()

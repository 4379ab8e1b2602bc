"""The real clock for runs against a real cluster."""

from __future__ import annotations

import time


class RealClock:
    """``Clock`` on ``time.monotonic``; ``wait`` sleeps at most ``max_sleep`` seconds at a time so
    the rollout loop looks at the cluster regularly."""

    def __init__(self, max_sleep: float = 5.0) -> None:
        self.max_sleep = max_sleep

    def now(self) -> float:
        """Monotonic seconds."""
        return time.monotonic()

    def wait(self, seconds: float) -> None:
        """Sleep ``min(seconds, max_sleep)``."""
        time.sleep(max(0.0, min(seconds, self.max_sleep)))

"""The watch-based clock wakes on node and pod changes (no polling needed)."""

from __future__ import annotations

import time
from typing import Any

from reconciler.adapters.kubewatch import WatchClock


def test_wait_returns_early_with_the_changed_node(kube: Any, make_nodes: Any) -> None:
    node = make_nodes(1, {"pool": "watch"})[0]
    clock = WatchClock(kube.api_client, max_sleep=20)
    try:
        deadline = time.monotonic() + 20
        while clock.wait(1.0) is None and time.monotonic() < deadline:
            pass  # watches starting
        clock.wait(0.5)
        kube.patch_node(node, annotations={"example.com/touch": "1"})
        t0 = time.monotonic()
        changed: set[str] = set()
        while node not in changed and time.monotonic() - t0 < 15:
            got = clock.wait(15)
            changed |= got or set()
        assert node in changed
        assert time.monotonic() - t0 < 10  # woke on the event, not at the timeout
    finally:
        clock.close()

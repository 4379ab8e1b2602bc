"""The test control plane's emulated reboot: one request, exactly one new boot ID (issue 34).

kwok plays a node stage from the copy of the node its watch event carried, and queues it again at
every later event of the node; the reconciler writes its records on the node while it reboots. Before
the reboot stages moved their state with a tested JSON patch, a node written during its reboot
either rebooted twice (two new boot IDs for one request) or never came back (each write restarted
the delay). Reboot counts in the e2e tests and the benches mean what they say only if this holds.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from kubernetes import client

from tests.controlplane.cluster import BootIdRecorder, ControlPlane


def _wait(what: str, fn: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def test_one_new_boot_id_per_reboot_while_the_node_is_written(controlplane: ControlPlane, api: Any,
                                                               make_nodes: Any, test_id: str) -> None:
    core = client.CoreV1Api(api)
    nodes = make_nodes(24)
    stop = threading.Event()
    written = [0]

    def writer() -> None:  # what the reconciler does during a reboot: write its records on the node
        with controlplane.api_client() as own:
            c = client.CoreV1Api(own)
            i = 0
            while not stop.is_set():
                for n in nodes:
                    c.patch_node(n, {"metadata": {"annotations": {"e2e.test/tick": str(i)}}},
                                 _preload_content=False).drain_conn()
                    written[0] += 1
                i += 1

    with BootIdRecorder(controlplane, label_selector=f"e2e.test/group={test_id}") as boots:
        threads = [threading.Thread(target=writer, daemon=True) for _ in range(2)]
        for t in threads:
            t.start()
        try:
            t0 = time.monotonic()
            for n in nodes:
                core.patch_node(n, {"metadata": {"annotations": {"sim.test/reboot": "requested",
                                                                 "sim.test/reboot-for": "2s"}}})

            def all_back() -> bool:
                states = {(core.read_node(n).metadata.annotations or {}).get("sim.test/reboot") for n in nodes}
                return states == {"done"}

            # the delay counts from the request, not from the last write: back within seconds
            _wait("every node rebooted and back", all_back, timeout=45)
            took = time.monotonic() - t0
            time.sleep(3)  # a second reboot of any node would show within the reboot time
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=10)
        assert written[0] > 5 * len(nodes), "the nodes were not written during their reboots"
        assert not boots.errors, boots.errors
        assert {n: boots.changes(n) for n in nodes} == dict.fromkeys(nodes, 1)
    assert took >= 2.0
    for n in nodes:
        node = core.read_node(n)
        assert [c.status for c in node.status.conditions if c.type == "Ready"] == ["True"], n

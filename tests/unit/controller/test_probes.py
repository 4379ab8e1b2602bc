"""/healthz, /readyz and /metrics (reconciler.adapters.kube.probes) over real HTTP on loopback."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from reconciler.adapters.kube.probes import Endpoints, parse_bind_address
from reconciler.controller.metrics import ControllerMetrics
from reconciler.errors import InputError


@pytest.mark.parametrize(("value", "expected"), [
    (":8080", ("", 8080)), ("127.0.0.1:0", ("127.0.0.1", 0)), ("[::1]:9090", ("::1", 9090)), ("0", ("", -1)),
])
def test_bind_addresses_are_parsed_as_controller_runtime_writes_them(value: str, expected: tuple[str, int]) -> None:
    assert parse_bind_address(value, "--metrics-bind-address") == expected


@pytest.mark.parametrize("value", ["8080", "host:", ":70000", ":http", ""])
def test_a_bad_bind_address_names_the_option(value: str) -> None:
    with pytest.raises(InputError, match="--metrics-bind-address"):
        parse_bind_address(value, "--metrics-bind-address")


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_health_readiness_and_metrics_are_served() -> None:
    metrics = ControllerMetrics()
    metrics.passes.labels("succeeded").inc()
    state = {"ready": "waiting for the initial LIST of nodes"}
    ep = Endpoints(metrics.registry, lambda: "", lambda: state["ready"])
    mport, pport = ep.serve(("127.0.0.1", 0), ("127.0.0.1", 0))
    try:
        assert _get(pport, "/healthz") == (200, "ok\n")
        assert _get(pport, "/readyz") == (503, "waiting for the initial LIST of nodes\n")
        state["ready"] = ""
        assert _get(pport, "/readyz") == (200, "ok\n")
        code, body = _get(mport, "/metrics")
        assert code == 200 and 'reconciler_controller_passes_total{outcome="succeeded"} 1.0' in body
        assert _get(pport, "/metrics")[0] == 404  # each address serves its own paths
        assert _get(mport, "/healthz")[0] == 404
    finally:
        ep.close()


def test_one_address_for_both_serves_every_path_and_0_turns_one_off() -> None:
    import socket

    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        free = sk.getsockname()[1]
    ep = Endpoints(ControllerMetrics().registry, lambda: "", lambda: "")
    try:
        assert ep.serve(("127.0.0.1", free), ("127.0.0.1", free)) == [free, free]
        assert [_get(free, p)[0] for p in ("/metrics", "/healthz", "/readyz")] == [200, 200, 200]
    finally:
        ep.close()
    ep = Endpoints(ControllerMetrics().registry, lambda: "", lambda: "")
    ports = ep.serve(("127.0.0.1", 0), ("", -1))
    try:
        assert ports[1] == -1 and _get(ports[0], "/metrics")[0] == 200
    finally:
        ep.close()

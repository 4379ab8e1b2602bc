"""/healthz, /readyz and /metrics (reconciler.adapters.kube.probes) over real HTTP on loopback."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest

from reconciler.adapters.kube.probes import Endpoints, parse_bind_address
from reconciler.controller.metrics import ControllerMetrics
from reconciler.errors import InputError

ROOT = Path(__file__).resolve().parents[3]


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


@pytest.mark.parametrize("which", ["metrics", "probes", "both"])
def test_an_address_in_use_names_the_option_and_the_address(which: str, tmp_path: Path) -> None:
    """The controller (not --once: that serves no endpoint) exits 2 at once, naming both."""
    import socket
    import subprocess
    import sys

    from reconciler.testing.fleetgen import make_node, write_fleet

    fleet = tmp_path / "fleet.yaml"
    write_fleet(fleet, [make_node("n1", {"pool": "gpu"})])
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        addr = f"127.0.0.1:{busy.getsockname()[1]}"
        metrics = addr if which in ("metrics", "both") else "0"
        probes = addr if which in ("probes", "both") else "0"
        cp = subprocess.run([sys.executable, "-m", "reconciler", "controller", "--source", "directory", "--recipes",
                             str(ROOT / "recipes"), "--cluster", f"sim:{fleet}", "--metrics-bind-address", metrics,
                             "--health-probe-bind-address", probes], capture_output=True, text=True, timeout=120)
    option = {"metrics": "--metrics-bind-address", "probes": "--health-probe-bind-address",
              "both": "--metrics-bind-address and --health-probe-bind-address"}[which]
    assert cp.returncode == 2, cp.stderr
    assert f"{option} {addr}: cannot listen there: Address already in use" in cp.stderr, cp.stderr
    assert "Errno" not in cp.stderr and "Traceback" not in cp.stderr


def test_an_address_not_of_this_host_is_named() -> None:
    ep = Endpoints(ControllerMetrics().registry, lambda: "", lambda: "")
    with pytest.raises(InputError, match=r"--health-probe-bind-address 192\.0\.2\.1:0: cannot listen there: Cannot "
                                         "assign requested address"):
        ep.serve(("127.0.0.1", 0), ("192.0.2.1", 0))  # TEST-NET-1: never an address of this host
    assert ep.servers == []  # the metrics server started first was stopped

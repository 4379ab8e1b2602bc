"""``reconciler version``: client version from package metadata, server version via the adapter
(``GET /version`` of a local stand-in API server), text and JSON output, and a clear error for an
unreachable server."""

from __future__ import annotations

import json
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import pytest

from reconciler.cli.main import main
from reconciler.version import UNKNOWN, package_version
from tests.httpfake import QuietHandler, token_kubeconfig

ROOT = Path(__file__).resolve().parents[3]
PYPROJECT_VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
SERVER = {"major": "1", "minor": "36", "gitVersion": "v1.36.3", "platform": "linux/amd64", "goVersion": "go1.26.8"}


class _VersionHandler(QuietHandler):
    paths: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.paths.append(self.path)
        if self.path.rstrip("/") != "/version":  # the Python client asks for /version/
            self.send_error(404)
            return
        body = json.dumps(SERVER).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)



@pytest.fixture
def apiserver(tmp_path: Path, http_server: Callable[[type[_VersionHandler]], str]) -> tuple[Path, list[str]]:
    """A loopback HTTP server answering ``/version`` and a kubeconfig pointing at it."""
    _VersionHandler.paths = []
    return token_kubeconfig(tmp_path / "kubeconfig", http_server(_VersionHandler)), _VersionHandler.paths


def test_client_version_comes_from_the_package_metadata() -> None:
    assert package_version() == PYPROJECT_VERSION != UNKNOWN
    import reconciler

    assert reconciler.__version__ == PYPROJECT_VERSION


def test_text_output_without_a_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"Client Version: {PYPROJECT_VERSION}"
    assert out[1].startswith(f"Python: {sys.version_info.major}.{sys.version_info.minor}.")
    assert not any(line.startswith("Server Version") for line in out)


def test_json_output_with_a_server(apiserver: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]) -> None:
    kc, paths = apiserver
    assert main(["version", "--kubeconfig", str(kc), "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["client"]["version"] == PYPROJECT_VERSION
    assert doc["server"] == SERVER
    assert [p.rstrip("/") for p in paths] == ["/version"]  # one read, nothing else


def test_text_output_with_a_server(apiserver: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]) -> None:
    kc, _ = apiserver
    assert main(["version", "--kubeconfig", str(kc)]) == 0
    assert "Server Version: v1.36.3" in capsys.readouterr().out.splitlines()


def test_simulated_fleet_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    fleet = ROOT / "examples" / "fleets" / "gpu-24.yaml"
    assert main(["version", "--cluster", f"sim:{fleet}", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["server"] == {"simulated": str(fleet)}


def test_unreachable_server_is_a_cluster_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kc = tmp_path / "kubeconfig"
    kc.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "t",
        "clusters": [{"name": "t", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "t", "user": {"token": "secret-token-value"}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}]}))
    assert main(["version", "--kubeconfig", str(kc)]) == 4
    got = capsys.readouterr()
    err = got.err
    assert err.startswith("error: get server version:") and "secret-token-value" not in err
    assert got.out.startswith(f"Client Version: {PYPROJECT_VERSION}\n")  # as kubectl version: the client's first
    assert main(["version", "--kubeconfig", str(kc), "-o", "json"]) == 4
    assert capsys.readouterr().out == ""  # a document only when it is complete


def test_missing_kubeconfig_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version", "--kubeconfig", str(tmp_path / "nope")]) == 2
    assert "--kubeconfig" in capsys.readouterr().err

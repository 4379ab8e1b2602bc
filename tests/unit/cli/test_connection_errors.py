"""Friendly connection errors (issue 16): a server that refuses, cannot be resolved or fails the TLS
handshake gives one line on stderr naming the call and the server URL (credentials masked) and what
to check, exit 4, on every kind of verb (read, switch, version); no urllib3 retry noise."""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import Callable
from pathlib import Path

import pytest
import urllib3

from reconciler.adapters.kube.conn import Failure, classify, unreachable
from reconciler.cli.main import main
from tests.httpfake import QuietHandler

TOKEN = "secret-token-value"


def _kubeconfig(tmp_path: Path, server: str) -> Path:
    kc = tmp_path / "kubeconfig"
    kc.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "t",
        "clusters": [{"name": "t", "cluster": {"server": server}}],
        "users": [{"name": "t", "user": {"token": TOKEN}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}]}))
    return kc


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Plain(QuietHandler):
    def do_GET(self) -> None:
        self.send_error(404)



@pytest.fixture
def plain_http(http_server: Callable[[type[_Plain]], str]) -> int:
    """A plain-HTTP server: an https:// kubeconfig pointing at it fails the TLS handshake."""
    return int(http_server(_Plain).rsplit(":", 1)[1])


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "MaxRetryError" not in err and "urllib3" not in err and TOKEN not in err
    return lines[0]


@pytest.mark.parametrize("argv", [["status"], ["pause", "r1", "-y"], ["node", "status"], ["version"],
                                  ["reset", "r1", "-y"], ["package", "status", "p"]])
def test_refused_connection_is_one_line_exit_4(argv: list[str], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    port = _free_port()
    kc = _kubeconfig(tmp_path, f"http://127.0.0.1:{port}")
    assert main([*argv, "--kubeconfig", str(kc)]) == 4
    line = _one_error_line(capsys.readouterr().err)
    assert f"cannot reach the Kubernetes API server at http://127.0.0.1:{port} (connection refused)" in line
    assert "--kubeconfig" in line and "--context" in line  # what to check


def test_tls_failure_says_so_and_points_at_certificates(plain_http: int, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    kc = _kubeconfig(tmp_path, f"https://127.0.0.1:{plain_http}")
    assert main(["status", "--kubeconfig", str(kc)]) == 4
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith("error: list nodes: cannot reach the Kubernetes API server at https://127.0.0.1:")
    assert "TLS handshake failed" in line and "certificate" in line


def test_unresolvable_host_masks_url_credentials(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kc = _kubeconfig(tmp_path, "https://admin:hunter2@no-such-host.invalid:6443")
    assert main(["status", "--kubeconfig", str(kc)]) == 4
    line = _one_error_line(capsys.readouterr().err)
    assert "hunter2" not in line and "https://***@no-such-host.invalid:6443" in line
    assert "host name not resolved" in line and "DNS" in line


@pytest.mark.parametrize(("exc", "kind"), [
    (urllib3.exceptions.MaxRetryError(None, "/api", urllib3.exceptions.NewConnectionError(  # type: ignore[arg-type]
        None, "Failed to establish a new connection: [Errno 111] Connection refused")), Failure.REFUSED),
    (ConnectionRefusedError(111, "refused"), Failure.REFUSED),
    (urllib3.exceptions.MaxRetryError(None, "/api", urllib3.exceptions.SSLError(  # type: ignore[arg-type]
        ssl.SSLError(1, "[SSL: CERTIFICATE_VERIFY_FAILED]"))), Failure.TLS),
    (socket.gaierror(-2, "Name or service not known"), Failure.DNS),
    (urllib3.exceptions.ReadTimeoutError(None, "/api", "read timed out"), Failure.TIMEOUT),  # type: ignore[arg-type]
    (urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104, "reset")), Failure.DROPPED),
    (urllib3.exceptions.HTTPError("odd"), Failure.OTHER),
])
def test_classify(exc: BaseException, kind: Failure) -> None:
    assert classify(exc)[0] is kind
    msg = str(unreachable(exc, "list nodes", "https://u:p@h:6443/?token=abc"))
    assert msg.startswith(f"list nodes: cannot reach the Kubernetes API server at https://***@h:6443/?token=*** "
                          f"({kind.value}") and "abc" not in msg and ":p@" not in msg

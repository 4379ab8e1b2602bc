"""Through an HTTP proxy to the real control plane (issue 37): with ``proxy-url`` in the kubeconfig
(kubectl's field) every request of the one request path and both watch streams go through the
proxy (HTTP CONNECT, then TLS to the API server), as the official client does it; a ``reconciler``
verb works the same way."""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.kube.cache import WatchStore
from reconciler.adapters.kube.cluster import KubeCluster
from reconciler.cli.main import main


class ConnectProxy:
    """A tiny HTTP CONNECT proxy on loopback: each tunnel's target is recorded, bytes are copied
    both ways until either side closes."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.targets: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="connect-proxy", daemon=True)

    def __enter__(self) -> ConnectProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.listener.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._tunnel, args=(conn,), daemon=True).start()

    def _tunnel(self, conn: socket.socket) -> None:
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                head += chunk
            method, target, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
            if method != "CONNECT":
                conn.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                return
            self.targets.append(target)
            host, port = target.rsplit(":", 1)
            with socket.create_connection((host, int(port))) as up:
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                rest = head.split(b"\r\n\r\n", 1)[1]
                if rest:
                    up.sendall(rest)
                pair = {conn: up, up: conn}
                while not self._stop.is_set():
                    ready, _, _ = select.select(list(pair), [], [], 0.5)
                    for s in ready:
                        data = s.recv(65536)
                        if not data:
                            return
                        pair[s].sendall(data)


@pytest.fixture
def proxy() -> Iterator[ConnectProxy]:
    with ConnectProxy() as p:
        yield p


def _proxied_kubeconfig(controlplane: Any, proxy: ConnectProxy, tmp_path: Path) -> Path:
    doc = json.loads(Path(controlplane.kubeconfig).read_text())
    for c in doc["clusters"]:
        c["cluster"]["proxy-url"] = f"http://127.0.0.1:{proxy.port}"
    path = tmp_path / "proxied.kubeconfig"
    path.write_text(json.dumps(doc))
    return path


def test_requests_and_watches_go_through_the_proxy(controlplane: Any, proxy: ConnectProxy, make_nodes: Any,
                                                   tmp_path: Path) -> None:
    node = make_nodes(1, {"pool": "proxied"})[0]
    server = controlplane.server.split("://", 1)[1]
    kc = KubeCluster.from_kubeconfig(str(_proxied_kubeconfig(controlplane, proxy, tmp_path)),
                                     store=WatchStore("node-reconciler"))
    clock = kc.watch(max_sleep=10)
    try:
        assert node in {n.name for n in kc.nodes.list_nodes()}
        assert proxy.targets and set(proxy.targets) == {server}
        kc.nodes.get_node(node)  # the run works on it
        deadline = time.monotonic() + 20
        while clock.changed(1.0) is None and time.monotonic() < deadline:
            pass  # both streams listed and watching, through the proxy
        assert len(proxy.targets) >= 2  # the two streams at once: a connection each (one the LIST's, reused)
        kc.nodes.patch_node(node, annotations={"example.com/proxied": "1"})
        assert kc.nodes.get_node(node).annotations["example.com/proxied"] == "1"
    finally:
        clock.close()
        kc.close()
    assert set(proxy.targets) == {server}


def test_a_verb_goes_through_the_proxy(controlplane: Any, proxy: ConnectProxy, make_nodes: Any, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    make_nodes(1, {"pool": "proxied-verb"})
    rc = main(["status", "--kubeconfig", str(_proxied_kubeconfig(controlplane, proxy, tmp_path)), "-o", "json"])
    out = capsys.readouterr()
    assert rc == 0, out.err[-2000:]
    assert proxy.targets

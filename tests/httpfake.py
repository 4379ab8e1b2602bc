"""The one fake-HTTP-server mechanism of the tests (issue 13): a loopback server for a test's own
request handler, and the pieces every fake repeats.

* :func:`serving` — context manager: ``ThreadingHTTPServer`` on ``127.0.0.1`` and a free port for
  ``handler``, served from a daemon thread; yields the base URL (``http://127.0.0.1:<port>``);
  shut down, closed and joined on exit; ``ssl_context`` makes it an https server. The
  ``http_server`` fixture (tests/conftest.py) is the same as a factory whose servers stop at the
  end of the test.
* :class:`QuietHandler` — a ``BaseHTTPRequestHandler`` that logs nothing, with
  :meth:`~QuietHandler.read_body` and :meth:`~QuietHandler.send_json`.
* :func:`token_kubeconfig` — a kubeconfig file pointing at a fake API server with a bearer token.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler], *, ssl_context: ssl.SSLContext | None = None) -> Iterator[str]:
    """Serve ``handler`` on loopback while the block runs; yields the base URL (``http://``
    even with ``ssl_context``, a server-side context: then it speaks TLS, the handshake done by
    the handler thread on its first read)."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if ssl_context is not None:
        srv.socket = ssl_context.wrap_socket(srv.socket, server_side=True, do_handshake_on_connect=False)
    # a short poll interval: shutdown() waits for the serving loop's next poll (0.5 s by default,
    # which was half a second of every test's teardown)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02},
                         name=f"fake-http-{handler.__name__}", daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(timeout=10)


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing, with JSON helpers."""

    def read_body(self) -> bytes:
        """The request body (``Content-Length`` bytes; empty without one)."""
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def send_json(self, code: int, doc: Any) -> None:
        """Answer ``code`` with ``doc`` as JSON."""
        raw = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: Any) -> None:
        """Silence the per-request log line."""


def token_kubeconfig(path: Path, server: str, token: str = "x") -> Path:
    """Write a kubeconfig for ``server`` (context ``t``, bearer ``token``) to ``path``; returns it."""
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "t",
        "clusters": [{"name": "t", "cluster": {"server": server}}],
        "users": [{"name": "t", "user": {"token": token}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}]}))
    return path

"""The controller's HTTP endpoints: ``/healthz`` (liveness), ``/readyz`` (readiness) and
``/metrics`` (Prometheus text format), as controller-runtime serves them on
``--health-probe-bind-address`` and ``--metrics-bind-address``.

``/healthz`` and ``/readyz`` answer ``200 ok`` or ``503`` with the reason (one line of text);
``/metrics`` is :func:`prometheus_client.generate_latest` of the controller's registry. Anything
else is 404. Each address gets one :class:`http.server.ThreadingHTTPServer` in a daemon thread;
when both addresses are the same, one server serves all three paths.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from reconciler.errors import InputError

log = logging.getLogger(__name__)

Check = Callable[[], str]  # "" when fine, else why not


def parse_bind_address(value: str, option: str) -> tuple[str, int]:
    """``:8080``, ``0.0.0.0:8080``, ``127.0.0.1:0`` or ``[::1]:8080`` → ``(host, port)``; ``0``
    disables the endpoint in controller-runtime, here ``("", -1)``.

    Raises:
        InputError: not ``[host]:port`` with a port 0..65535.
    """
    if value == "0":
        return "", -1
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise InputError(f"{option} {value!r}: expected [host]:port (e.g. :8080), or 0 to turn it off")
    return host.strip("[]"), int(port)


class Endpoints:
    """The HTTP servers (module docstring). ``healthy``/``ready`` are checks returning ``""`` or why not."""

    def __init__(self, registry: CollectorRegistry, healthy: Check, ready: Check) -> None:
        self.registry, self.healthy, self.ready = registry, healthy, ready
        self.servers: list[ThreadingHTTPServer] = []

    def _handler(self, paths: frozenset[str]) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path not in paths:
                    self._send(404, b"not found\n", "text/plain; charset=utf-8")
                elif path == "/metrics":
                    self._send(200, generate_latest(outer.registry), CONTENT_TYPE_LATEST)
                else:
                    why = (outer.healthy if path == "/healthz" else outer.ready)()
                    self._send(503 if why else 200, (why or "ok").encode() + b"\n", "text/plain; charset=utf-8")

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                log.debug("http %s", format % args)

        return Handler

    def serve(self, metrics: tuple[str, int], probes: tuple[str, int]) -> list[int]:
        """Start serving; returns the bound ports (metrics first, then probes; -1 when turned off).

        Raises:
            InputError: an address cannot be bound (in use, not an address of this host, no
                permission): the option and the address named, every server started is stopped.
        """
        same = metrics == probes and metrics[1] > 0  # port 0: each gets its own free port
        plan: list[tuple[tuple[str, int], set[str], str]] = []
        if same:
            plan.append((metrics, {"/metrics", "/healthz", "/readyz"},
                         "--metrics-bind-address and --health-probe-bind-address"))
        else:
            if metrics[1] >= 0:
                plan.append((metrics, {"/metrics"}, "--metrics-bind-address"))
            if probes[1] >= 0:
                plan.append((probes, {"/healthz", "/readyz"}, "--health-probe-bind-address"))
        ports: dict[str, int] = {}
        for addr, paths, option in plan:
            try:
                server = ThreadingHTTPServer(addr, self._handler(frozenset(paths)))
            except (OSError, OverflowError) as e:
                self.close()
                shown = f"[{addr[0]}]:{addr[1]}" if ":" in addr[0] else f"{addr[0]}:{addr[1]}"
                reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
                raise InputError(f"{option} {shown}: cannot listen there: {reason}") from None
            server.daemon_threads = True
            # poll every 0.1 s: close() (a SIGTERM'd controller) waits for the loop's next poll
            threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, name=f"http-{addr[1]}",
                             daemon=True).start()
            self.servers.append(server)
            for path in paths:
                ports[path] = int(server.server_address[1])
        return [ports.get("/metrics", -1), ports.get("/healthz", -1)]

    def close(self) -> None:
        """Stop every server."""
        for s in self.servers:
            s.shutdown()
            s.server_close()
        self.servers = []

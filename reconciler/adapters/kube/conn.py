"""Transport failures on the way to the Kubernetes API server, as one readable line.

A refused connection, an unknown host name, a timeout or a failed TLS handshake reaches the
adapters as a urllib3 ``MaxRetryError`` wrapping the cause several levels deep. :func:`unreachable`
turns it into a :class:`~reconciler.errors.TransientError` (exit 4, still retried by the rollout
like any transient failure) whose message says what was tried — the call and the server URL,
credentials masked by :func:`reconciler.report.redact.redact_url` — what went wrong in words, and
what to check. The raw exception text is never part of it (it repeats the URL and the retry state).
"""

from __future__ import annotations

import enum
import socket
import ssl

import urllib3

from reconciler.errors import TransientError
from reconciler.report.redact import redact, redact_url


class Failure(enum.Enum):
    """What kind of transport failure it was (the words printed)."""

    REFUSED = "connection refused"
    DNS = "host name not resolved"
    TIMEOUT = "timed out"
    TLS = "TLS handshake failed"
    DROPPED = "connection dropped by the server"
    OTHER = "transport error"


_CHECK = {
    Failure.REFUSED: "check the kubeconfig's server and context (--kubeconfig, --context, $KUBECONFIG) "
                     "and that the API server is up",
    Failure.DNS: "check the kubeconfig's server and context (--kubeconfig, --context, $KUBECONFIG) "
                 "and this machine's DNS",
    Failure.TIMEOUT: "check that the API server is up and reachable from here (firewall, VPN, proxy), "
                     "or raise --request-timeout",
    Failure.TLS: "check the server's certificate and the kubeconfig's certificate-authority-data "
                 "(and that the server URL's host is a name the certificate is for)",
    Failure.DROPPED: "check that the server URL points at the API server (scheme http/https, port)",
    Failure.OTHER: "check the kubeconfig and context (--kubeconfig, --context) and that the API server is up",
}


def _chain(e: BaseException) -> list[BaseException]:
    """``e``, its ``reason`` (urllib3), causes and contexts, and exception arguments; no repeats."""
    out: list[BaseException] = []
    todo = [e]
    while todo and len(out) < 20:
        x = todo.pop(0)
        if any(x is y for y in out):
            continue
        out.append(x)
        for nxt in (getattr(x, "reason", None), x.__cause__, x.__context__, *getattr(x, "args", ())):
            if isinstance(nxt, BaseException):
                todo.append(nxt)
    return out


def classify(e: BaseException) -> tuple[Failure, str]:
    """The kind of failure and a short detail (the TLS library's reason, e.g.
    ``CERTIFICATE_VERIFY_FAILED``; empty otherwise)."""
    chain = _chain(e)
    for x in chain:
        if isinstance(x, (ssl.SSLError, urllib3.exceptions.SSLError)):
            inner = next((y for y in chain if isinstance(y, ssl.SSLError)), None)
            detail = (getattr(inner, "verify_message", "") or getattr(inner, "reason", "") or "") if inner else ""
            return Failure.TLS, str(detail)
    for x in chain:
        if isinstance(x, socket.gaierror) or type(x).__name__ == "NameResolutionError":
            return Failure.DNS, ""
    for x in chain:
        if isinstance(x, ConnectionRefusedError) or "Connection refused" in str(x):
            return Failure.REFUSED, ""
    for x in chain:
        if isinstance(x, (TimeoutError, socket.timeout, urllib3.exceptions.TimeoutError)):
            return Failure.TIMEOUT, ""
    for x in chain:
        if isinstance(x, (ConnectionResetError, BrokenPipeError, urllib3.exceptions.ProtocolError)):
            return Failure.DROPPED, ""
    return Failure.OTHER, type(e).__name__


def unreachable(e: BaseException, what: str, server: str) -> TransientError:
    """The error for transport failure ``e`` of call ``what`` (``list nodes``) to ``server`` (the
    API server URL): ``list nodes: cannot reach the Kubernetes API server at https://10.0.0.1:6443
    (connection refused); check ...``."""
    kind, detail = classify(e)
    words = f"{kind.value}: {detail}" if detail else kind.value
    url = redact_url(server) if server else "(no server URL)"
    return TransientError(redact(f"{what}: cannot reach the Kubernetes API server at {url} ({words}); {_CHECK[kind]}"))

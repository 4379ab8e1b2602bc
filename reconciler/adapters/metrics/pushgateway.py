"""Export the rollout metrics (:mod:`reconciler.report.metrics`) for ``apply`` and ``metrics``: a
textfile for the node-exporter textfile collector, and/or a Prometheus Pushgateway, one group
per recipe, through ``prometheus_client``'s ``push_to_gateway`` (``PUT
/metrics/job/<job>/recipe/<recipe>``, replacing the group; values with ``/`` or empty in its
``@base64`` form).

The textfile is ``prometheus_client``'s exposition written through the one output writer
(:mod:`reconciler.fileio.writing`: temporary file, fsync, rename; ``/dev/stdout`` and FIFOs in
place) rather than ``write_to_textfile``, whose renamed temporary file cannot serve those and
whose errors would not name ``--metrics-file``.

The base URL is checked for shape before any work (:func:`check_url`); credentials in its
user-info are sent as HTTP basic auth (the Pushgateway's ``--web.config.file``) with
``prometheus_client``'s ``basic_auth_handler`` and never shown: every message carries the URL
without them, redacted (:mod:`reconciler.report.redact`).
"""

from __future__ import annotations

import urllib.error
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import basic_auth_handler, default_handler, push_to_gateway

from reconciler.errors import InputError
from reconciler.fileio.writing import Output
from reconciler.report.metrics import MetricsError, MetricSet, exposition
from reconciler.report.redact import redact
from reconciler.report.safetext import visible


def check_url(base: str) -> str:
    """``base`` when it is a well-formed Pushgateway base URL.

    Raises:
        InputError: another scheme than http(s), no host, a port that is not a number in 1..65535,
            a query or fragment (the Pushgateway API has none), whitespace or control characters.
            The message names ``--pushgateway`` and never shows a credential.
    """
    shown = visible(redact(base))

    def bad(why: str) -> InputError:
        return InputError(f"--pushgateway {shown!r}: {why}")

    if any(c.isspace() or ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0 for c in base):
        raise bad("whitespace or control characters in the URL")
    try:
        parts = urllib.parse.urlsplit(base)
        port = parts.port
    except ValueError as e:
        raise bad(f"not a URL ({redact(e)})") from None
    if parts.scheme not in ("http", "https"):
        raise bad("expected an http:// or https:// URL")
    if not parts.hostname:
        raise bad("no host in the URL")
    if port == 0:
        raise bad("port 0 is not a port")
    if parts.query or base.rstrip().endswith("?"):
        raise bad("a query string is not part of a Pushgateway URL (use the path only)")
    if parts.fragment or "#" in base:
        raise bad("a fragment is not part of a Pushgateway URL")
    return base


def _without_credentials(base: str) -> tuple[str, Callable[..., Any]]:
    """``base`` without its user-info, and the ``prometheus_client`` handler sending them as
    basic auth (urllib would otherwise take ``user:token@host`` for the host)."""
    parts = urllib.parse.urlsplit(base)
    if parts.username is None:
        return base, default_handler
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    user = urllib.parse.unquote(parts.username)
    password = urllib.parse.unquote(parts.password or "")

    def handler(url: str, method: str, timeout: float | None, headers: list[tuple[str, str]],
                data: bytes) -> Callable[[], None]:
        return basic_auth_handler(url, method, timeout, headers, data, user, password)

    return urllib.parse.urlunsplit(parts._replace(netloc=netloc)), handler


def push(base: str, metrics: MetricSet, *, job: str = "node-reconciler", grouping: Mapping[str, str] | None = None,
         timeout: float = 10.0) -> str:
    """Replace the Pushgateway group ``job`` + ``grouping`` with ``metrics``; returns where it went,
    redacted (for messages).

    Raises:
        InputError: bad URL. MetricsError: connection failure or a non-2xx answer (its body's
            first 300 characters, redacted).
    """
    url, handler = _without_credentials(check_url(base))
    groups = "".join(f"/{k}/{v}" for k, v in sorted((grouping or {}).items()))
    shown = redact(f"{url.rstrip('/')}/metrics/job/{job}{groups}")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    try:
        push_to_gateway(url, job, registry, grouping_key=dict(grouping or {}), timeout=timeout, handler=handler)
    except urllib.error.HTTPError as e:
        body = e.read(300).decode("utf-8", "replace").strip()
        e.close()
        raise MetricsError(redact(f"pushgateway {shown}: HTTP {e.code} {body}")) from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise MetricsError(redact(f"pushgateway {shown}: {reason}")) from None
    return shown


def export(sets: Mapping[str, MetricSet], *, file: Output | None = None, pushgateway: str | None = None,
           job: str = "node-reconciler") -> list[str]:
    """Write every recipe's metrics to one textfile and/or push each recipe as its own group
    (``job``, ``recipe``). Returns what was done, one line per target.

    Raises:
        OutputError: the file could not be written; MetricsError: a push failed."""
    done: list[str] = []
    if file is not None:
        file.write(exposition(*(sets[name] for name in sorted(sets))))
        done.append(f"metrics written to {file.path}")
    if pushgateway:
        for name in sorted(sets):
            done.append(f"metrics pushed to {push(pushgateway, sets[name], job=job, grouping={'recipe': name})}")
    return done

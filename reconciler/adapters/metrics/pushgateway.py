"""Pushgateway client: PUT a recipe's metrics (rendered by :mod:`reconciler.report.metrics`) to a
Prometheus Pushgateway group, and :func:`export` (textfile and/or push) for ``apply`` and ``metrics``.

The push API is the Pushgateway's ``PUT /metrics/job/<job>{/<label>/<value>}`` (replace the
group), with the ``@base64`` form for values that are empty or contain ``/``
(https://github.com/prometheus/pushgateway#url). The only network I/O of the metrics feature.

The base URL is checked for shape before any work (:func:`push_url`); credentials in its
user-info are sent as HTTP basic auth (the Pushgateway's ``--web.config.file``) and never shown:
every message carries the URL without them, redacted (:mod:`reconciler.report.redact`).
"""

from __future__ import annotations

import base64
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping

from reconciler.errors import InputError
from reconciler.fileio.writing import Output
from reconciler.report.metrics import CONTENT_TYPE, MetricsError, MetricSet, write_textfile
from reconciler.report.redact import redact
from reconciler.report.safetext import visible


def _segment(key: str, value: str) -> str:
    if value and "/" not in value:
        return f"/{key}/{urllib.parse.quote(value, safe='')}"
    enc = base64.urlsafe_b64encode(value.encode()).decode().rstrip("=") or "="
    return f"/{key}@base64/{enc}"


def push_url(base: str, job: str, grouping: Mapping[str, str]) -> str:
    """The Pushgateway URL of a group: ``<base>/metrics/job/<job>/<label>/<value>…`` (values
    with ``/`` or empty use the ``@base64`` form). User-info in ``base`` is kept (see :func:`push`).

    Raises:
        InputError: ``base`` is not a well-formed http(s) URL: another scheme, no host, a port
            that is not a number in 1..65535, a query or fragment (the Pushgateway API has
            none), whitespace or control characters. The message names ``--pushgateway`` and
            never shows a credential.
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
    url = base.rstrip("/") + "/metrics" + _segment("job", job)
    for k in sorted(grouping):
        url += _segment(k, grouping[k])
    return url


def push(base: str, text: str, *, job: str = "node-reconciler", grouping: Mapping[str, str] | None = None,
         timeout: float = 10.0) -> str:
    """PUT ``text`` to the Pushgateway group (replacing the group's previous metrics); returns the URL.

    Raises:
        InputError: bad URL. MetricsError: connection failure or a non-2xx answer.
    """
    url = push_url(base, job, grouping or {})
    url, headers = _credentials(url)
    shown = redact(url)
    req = urllib.request.Request(url, data=text.encode("utf-8"), method="PUT",
                                 headers={"Content-Type": CONTENT_TYPE, **headers})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status = int(resp.status)
    except urllib.error.HTTPError as e:
        body = e.read(300).decode("utf-8", "replace").strip()
        e.close()
        raise MetricsError(redact(f"pushgateway {shown}: HTTP {e.code} {body}")) from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise MetricsError(redact(f"pushgateway {shown}: {reason}")) from None
    if not 200 <= status < 300:
        raise MetricsError(f"pushgateway {shown}: HTTP {status}")
    return shown


def _credentials(url: str) -> tuple[str, dict[str, str]]:
    """``url`` without its user-info, and the ``Authorization: Basic`` header it stood for
    (RFC 7617; the Pushgateway's ``--web.config.file`` basic auth). urllib would otherwise take
    ``user:token@host`` for the host."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return url, {}
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    user = urllib.parse.unquote(parts.username)
    password = urllib.parse.unquote(parts.password or "")
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc)), {"Authorization": f"Basic {token}"}


def export(sets: Mapping[str, MetricSet], *, file: str | Output | None = None, pushgateway: str | None = None,
           job: str = "node-reconciler") -> list[str]:
    """Write every recipe's metrics to one textfile and/or push each recipe as its own group
    (``job``, ``recipe``). Returns what was done, one line per target.

    Raises:
        OutputError: the file could not be written; MetricsError: a push failed."""
    done: list[str] = []
    if file:
        merged = MetricSet()
        for name in sorted(sets):
            merged.update(sets[name])
        write_textfile(file, merged.render())
        done.append(f"metrics written to {getattr(file, 'path', file)}")
    if pushgateway:
        for name in sorted(sets):
            url = push(pushgateway, sets[name].render(), job=job, grouping={"recipe": name})
            done.append(f"metrics pushed to {redact(url)}")
    return done

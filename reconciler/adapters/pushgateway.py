"""Pushgateway client: PUT a recipe's metrics (rendered by :mod:`reconciler.report.metrics`) to a
Prometheus Pushgateway group, and :func:`export` (textfile and/or push) for ``apply`` and ``metrics``.

The push API is the Pushgateway's ``PUT /metrics/job/<job>{/<label>/<value>}`` (replace the
group), with the ``@base64`` form for values that are empty or contain ``/``
(https://github.com/prometheus/pushgateway#url). The only network I/O of the metrics feature.
"""

from __future__ import annotations

import base64
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping

from reconciler.errors import InputError, SourcePos
from reconciler.report.metrics import CONTENT_TYPE, MetricsError, MetricSet, write_textfile


def _segment(key: str, value: str) -> str:
    if value and "/" not in value:
        return f"/{key}/{urllib.parse.quote(value, safe='')}"
    enc = base64.urlsafe_b64encode(value.encode()).decode().rstrip("=") or "="
    return f"/{key}@base64/{enc}"


def push_url(base: str, job: str, grouping: Mapping[str, str]) -> str:
    """The Pushgateway URL of a group: ``<base>/metrics/job/<job>/<label>/<value>…`` (values
    with ``/`` or empty use the ``@base64`` form).

    Raises:
        InputError: ``base`` is not an http(s) URL.
    """
    parts = urllib.parse.urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InputError(f"--pushgateway {base!r}: expected an http:// or https:// URL", SourcePos(base))
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
    req = urllib.request.Request(url, data=text.encode("utf-8"), method="PUT",
                                 headers={"Content-Type": CONTENT_TYPE})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status = int(resp.status)
    except urllib.error.HTTPError as e:
        body = e.read(300).decode("utf-8", "replace").strip()
        e.close()
        raise MetricsError(f"pushgateway {url}: HTTP {e.code} {body}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise MetricsError(f"pushgateway {url}: {reason}") from None
    if not 200 <= status < 300:
        raise MetricsError(f"pushgateway {url}: HTTP {status}")
    return url


def export(sets: Mapping[str, MetricSet], *, file: str | None = None, pushgateway: str | None = None,
           job: str = "node-reconciler") -> list[str]:
    """Write every recipe's metrics to one textfile and/or push each recipe as its own group
    (``job``, ``recipe``). Returns what was done, one line per target."""
    done: list[str] = []
    if file:
        merged = MetricSet()
        for name in sorted(sets):
            merged.update(sets[name])
        write_textfile(file, merged.render())
        done.append(f"metrics written to {file}")
    if pushgateway:
        for name in sorted(sets):
            url = push(pushgateway, sets[name].render(), job=job, grouping={"recipe": name})
            done.append(f"metrics pushed to {url}")
    return done

"""A small JSON-over-HTTPS client for the review-host adapters (GitHub REST, GitLab REST).

``urllib`` only. The token goes into one header chosen by the adapter and is never part of an
error message or a log line; error messages name the method, the path (no query string) and the
HTTP status with the API's own ``message``. 502/503/504 and connection errors are retried a few
times with a short backoff; everything else raises :class:`ReviewHostError` at once.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler import __version__
from reconciler.errors import EXIT_CLUSTER, ReconcilerError

log = logging.getLogger(__name__)

USER_AGENT = f"node-reconciler/{__version__}"


class ReviewHostError(ReconcilerError):
    """A review host (GitHub, GitLab) refused or failed a request (exit code 4).
    ``status`` is the HTTP status (0 when no answer came)."""

    exit_code = EXIT_CLUSTER

    def __init__(self, message: str, status: int = 0) -> None:
        self.status = status
        super().__init__(message)


@dataclass(frozen=True)
class Response:
    """Decoded answer: HTTP ``status``, response ``headers`` (lower-case names), JSON ``data``."""

    status: int
    headers: Mapping[str, str]
    data: Any


class JsonClient:
    """JSON requests against ``base_url`` with fixed ``headers`` (the auth header among them).

    ``host`` names the service in error messages (``GitHub``/``GitLab``).
    """

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str],
        *,
        host: str,
        timeout: float = 30.0,
        retries: int = 3,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = {"User-Agent": USER_AGENT, **headers}
        # credential values (and the token inside "Bearer <token>"): never in a message, even when
        # a server or proxy echoes them back in its answer
        self._secrets = sorted(
            {p for k, v in headers.items() if k.lower() in ("authorization", "private-token") or "token" in k.lower()
             for p in (v, v.split(" ", 1)[-1]) if len(p) >= 8},
            key=len, reverse=True,
        )
        self.host = host
        self.timeout = timeout
        self.retries = retries
        self.sleep = sleep

    def url(self, path: str, query: Mapping[str, Any] | None = None) -> str:
        """Absolute URL of ``path`` (starting with ``/``) with an encoded ``query``."""
        q = f"?{urllib.parse.urlencode(query)}" if query else ""
        return f"{self.base_url}{path}{q}"

    def request(self, method: str, url: str, body: Any = None) -> Response:
        """Send one request (``url`` absolute, from :meth:`url` or a pagination link).

        Raises:
            ReviewHostError: a 4xx/5xx answer, or no answer after the retries.
        """
        data = json.dumps(body).encode() if body is not None else None
        headers = dict(self.headers)
        if data is not None:
            headers["Content-Type"] = "application/json"
        where = urllib.parse.urlsplit(url).path
        for attempt in range(1, self.retries + 1):
            req = urllib.request.Request(url, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    raw = resp.read()
                    hdrs = {k.lower(): v for k, v in resp.headers.items()}
                    return Response(resp.status, hdrs, json.loads(raw) if raw.strip() else None)
            except urllib.error.HTTPError as e:
                status = e.code
                msg = _api_message(e.read())
                if status in (502, 503, 504) and attempt < self.retries:
                    self.sleep(0.5 * attempt)
                    continue
                raise ReviewHostError(
                    self._redact(f"{self.host} API {method} {where}: HTTP {status} {msg}".rstrip()), status
                ) from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
                reason = getattr(e, "reason", e)
                if attempt < self.retries:
                    log.info("%s API %s %s: %s; retrying", self.host, method, where, reason)
                    self.sleep(0.5 * attempt)
                    continue
                raise ReviewHostError(self._redact(f"{self.host} API {method} {where}: no answer ({reason})")) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


def _api_message(raw: bytes) -> str:
    try:
        doc = json.loads(raw)
    except ValueError:
        return ""
    if isinstance(doc, dict):
        msg = doc.get("message") or doc.get("error") or ""
        return str(msg)[:200]
    return ""

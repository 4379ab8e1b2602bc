"""The one request path to the API server, shared by the kube adapters.

* :class:`KubeApi`: every request, through the ``kubernetes`` ApiClient (its URL, headers,
  authentication, TLS, proxies and pool) without the generated methods' argument validation and
  model round trips;
* :func:`translate_api_error`: every HTTP error answer → the :mod:`reconciler.errors` vocabulary
  (which the generated path in :mod:`reconciler.adapters.kube.cluster` uses too);
* :func:`decode` / :func:`decode_page`: answer bodies → dicts (orjson; LIST pages pruned with
  msgspec to the fields the record converters read).

Uses the ``kubernetes`` client, so it lives in ``adapters``.
"""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import quote

import msgspec
import orjson
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.adapters.kube.conn import unreachable
from reconciler.errors import (
    ClusterError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    ServerError,
    TooManyRequestsError,
    TransientError,
)
from reconciler.load.snapshotfast import list_page_decoder

Obj = dict[str, Any]
_T = TypeVar("_T")


def translate_api_error(
    status: int, body: str | bytes | None, headers: Mapping[str, str] | None, what: str
) -> ClusterError:
    """Map an HTTP error answer of the API server to our error vocabulary.

    ``body`` is the response body (a ``metav1.Status`` JSON for API errors); ``what`` names the call
    (e.g. ``evict pod ns/name``) and prefixes the message. The message is the Status ``message`` plus
    the messages of its ``details.causes`` (e.g. which disruption budget), trimmed; request headers
    (tokens) are never part of it.

    * 404 → NotFoundError; 409 → ConflictError (``reason`` AlreadyExists or Conflict)
    * 429 → TooManyRequestsError, ``disruption_budget`` when a cause's reason/type is
      ``DisruptionBudget`` (eviction.go), ``retry_after`` from the ``Retry-After`` header or
      ``details.retryAfterSeconds``
    * 403 → ForbiddenError, ``reason`` ``NamespaceTerminating`` when a cause says so, else Forbidden
    * 500 → ServerError (for evictions: more than one PodDisruptionBudget selects the pod)
    * 502/503/504 and other 5xx, status 0 (no answer) → TransientError
    * anything else (400, 401, 422, ...) → ClusterError with that status
    """
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else (body or "")
    st: Obj = {}
    try:
        parsed = json.loads(text) if text else {}
        if isinstance(parsed, dict):
            st = parsed
    except ValueError:
        st = {}
    raw_details = st.get("details")
    details: Obj = raw_details if isinstance(raw_details, dict) else {}
    causes = [c for c in details.get("causes") or () if isinstance(c, dict)]
    cause_kinds = {str(c.get("reason") or c.get("type") or "") for c in causes}
    message = str(st.get("message") or "") or " ".join(text.split())[:300] or f"HTTP {status}"
    extra = [str(c["message"]) for c in causes if c.get("message") and str(c["message"]) not in message]
    if extra:
        message = f"{message} ({'; '.join(extra)})"
    message = f"{what}: {message}" if what else message
    reason = str(st.get("reason") or "")
    retry_after: float | None = None
    hdr = _header(headers, "Retry-After")
    if hdr:
        try:
            retry_after = float(hdr)
        except ValueError:
            retry_after = None
    if retry_after is None and details.get("retryAfterSeconds"):
        retry_after = float(details["retryAfterSeconds"])

    if status == 404:
        return NotFoundError(message, 404, reason or "NotFound")
    if status == 409:
        return ConflictError(message, 409, reason or "Conflict")
    if status == 429:
        return TooManyRequestsError(
            message, disruption_budget="DisruptionBudget" in cause_kinds, retry_after=retry_after
        )
    if status == 403:
        why = "NamespaceTerminating" if "NamespaceTerminating" in cause_kinds else (reason or "Forbidden")
        return ForbiddenError(message, 403, why)
    if status == 500:
        return ServerError(message, 500, reason or "InternalError", retry_after)
    if status == 0 or status >= 500:
        return TransientError(message, status, reason or "Unavailable", retry_after)
    return ClusterError(message, status, reason)


def _header(headers: Mapping[str, str] | None, name: str) -> str | None:
    if not headers:
        return None
    for k, v in headers.items():
        if k.lower() == name.lower():
            return str(v)
    return None


def decode(data: bytes, what: str) -> Obj:
    """An answer's JSON body → its top-level object (``{}`` for an empty body or a non-object).
    Raises TransientError when the body is not JSON (a proxy's error page, a cut connection)."""
    if not data:
        return {}
    try:
        # orjson: 40 % less CPU than json.loads on a page of 500 kwok pods (11 ms against 19 ms),
        # the largest single cost of a ``plan`` on thousands of nodes
        obj = orjson.loads(data)
    except ValueError:  # orjson.JSONDecodeError is a ValueError
        raise TransientError(f"{what}: answer is not JSON: {data[:200]!r}") from None
    return obj if isinstance(obj, dict) else {}


def decode_page(data: bytes, what: str) -> Obj:
    """A LIST answer's page with each item pruned to the fields the record converters read
    (:func:`reconciler.load.snapshotfast.list_page_decoder`: about 2.5x less CPU than decoding
    whole kwok pods with orjson, and half the conversion time on the smaller dicts); any answer it
    does not take whole is decoded by :func:`decode`, with its errors."""
    try:
        page = list_page_decoder().decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, ValueError, TypeError):
        return decode(data, what)
    return page if isinstance(page, dict) else {}


class KubeApi:
    """The one request path to the API server: every request of the kube adapters goes through
    the official client's ``ApiClient`` (``param_serialize`` then ``call_api``: the generated
    methods' own two steps), so the URL, the default headers, the authentication (bearer token,
    exec credential plugins and their refresh hook), TLS options, proxies and the connection pool
    are the client's. Left out are the generated methods' per-call argument validation and the
    model round trip of bodies and answers (measured for a node PATCH: more client CPU than the
    request itself; answers are decoded with orjson/msgspec instead), and the import of the
    generated API classes (about 1.3 s of CPU for ``CoreV1Api``).

    ``request_timeout``: read timeout of a request in seconds (connect timeout 10 s);
    ``page_size``: ``limit`` of each LIST page. Thread-safe (the client's pool is)."""

    def __init__(self, api_client: client.ApiClient, request_timeout: float = 30.0, page_size: int = 500) -> None:
        self.api_client = api_client
        self.request_timeout = request_timeout
        self.page_size = page_size

    @property
    def server(self) -> str:
        """The API server URL (for messages; credentials are masked where it is shown)."""
        return str(self.api_client.configuration.host or "")

    def _call(self, method: str, path: str, what: str, query: list[tuple[str, Any]] | None,
              headers: dict[str, str], body: Any, timeout: tuple[float, float] | None) -> Any:
        """The client's urllib3 response of a 2xx answer (body not read); raises ClusterError."""
        try:
            req = self.api_client.param_serialize(method=method, resource_path=path, query_params=query or None,
                                                  header_params=headers, auth_settings=["BearerToken"])
            raw = self.api_client.call_api(req[0], req[1], header_params=req[2], body=body,
                                           _request_timeout=timeout or (10, self.request_timeout)).response
        except ApiException as e:  # the REST layer's own (an SSL error is status 0)
            raise translate_api_error(int(e.status or 0), e.body, plain_headers(e.headers), what) from None
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise unreachable(e, what, self.server) from None
        if not 200 <= int(raw.status) <= 299:
            try:
                data = bytes(raw.data or b"")
            except (urllib3.exceptions.HTTPError, OSError):
                data = b""
            finally:
                raw.release_conn()
            raise translate_api_error(int(raw.status), data, plain_headers(raw.headers), what)
        return raw

    def send(self, method: str, path: str, what: str, *, query: list[tuple[str, Any]] | None = None,
             body: Any = None, content_type: str | None = None, gzip: bool = False,
             timeout: tuple[float, float] | None = None) -> bytes:
        """One request: ``path`` already quoted (:func:`q`), ``query`` as (name, value) pairs,
        ``body`` a JSON-ready dict (serialised by the client's REST layer), ``timeout`` (connect,
        read) seconds (default 10 and ``request_timeout``), ``gzip``: ask for a compressed answer
        (kube-apiserver compresses answers over 128 KB; a page of 500 pods is a tenth of the bytes).
        Returns the body bytes of a 2xx answer; raises ClusterError (:func:`translate_api_error`,
        :func:`~reconciler.adapters.kube.conn.unreachable`). ``what`` names the call in messages."""
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        if gzip:
            headers["Accept-Encoding"] = "gzip"
        raw = self._call(method, path, what, query, headers, body, timeout)
        try:
            return bytes(raw.data or b"")
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise unreachable(e, what, self.server) from None
        finally:
            raw.release_conn()

    def json(self, method: str, path: str, what: str, **kwargs: Any) -> Obj:
        """:meth:`send`, the answer decoded (:func:`decode`)."""
        return decode(self.send(method, path, what, **kwargs), what)

    def list_all(self, path: str, what: str, convert: Callable[[Obj], _T], *,
             query: list[tuple[str, Any]] | None = None) -> list[_T]:
        """A paginated LIST of ``path`` (``limit`` :attr:`page_size`, ``continue``; gzip asked), each
        page's items converted by ``convert`` as the page arrives: at most one page's bytes and
        decoded dicts are alive at a time, never the whole list (at 5,000 nodes and 25,000 pods
        the decoded pods alone are several hundred MB; their records a few tens). A 410 on an
        expired continue token restarts the list (up to 3 times). Decoding and conversion run
        with the cyclic garbage collector paused (:data:`GC_PAUSE`). Raises ClusterError
        (TransientError for an answer that is not JSON)."""
        out: list[_T] = []
        token: str | None = None
        restarts = 0
        with GC_PAUSE:
            while True:
                params = [*(query or ()), ("limit", self.page_size), *((("continue", token),) if token else ())]
                try:
                    data = self.send("GET", path, what, query=params, gzip=True)
                except ClusterError as e:
                    if e.status == 410 and token and restarts < 3:  # continue token expired: start over
                        out, token, restarts = [], None, restarts + 1
                        continue
                    raise
                page = decode_page(data, what)
                del data
                out.extend(convert(i) for i in page.get("items") or () if isinstance(i, dict))
                meta = page.get("metadata")
                token = (meta.get("continue") if isinstance(meta, dict) else None) or None
                del page
                if not token:
                    return out

    def stream(self, path: str, what: str, query: list[tuple[str, Any]], timeout: tuple[float, float]) -> Any:
        """A GET whose answer is read as it arrives (a watch): the client's urllib3 response, for
        ``kubernetes.watch.Watch``; raises ClusterError for an answer outside 2xx."""
        return self._call("GET", path, what, query, {"Accept": "application/json"}, None, timeout)


class _GcPause:
    """Process-wide pause of the cyclic garbage collector, nestable and shared between threads.

    Why: decoding a LIST page allocates tens of thousands of fresh dicts and lists at once, each a
    container the collector tracks; the allocation count trips generation-0 collections every few
    hundred objects and, as survivors pile up, full collections that walk every tracked object of
    the process (measured: 14 full passes, 3.5-4.5 s of a 10.8 s ``plan`` against 5,000 nodes).
    None of it is garbage with cycles: a page's dicts are freed by reference counting once its
    items are converted. The collector is off from the first holder's entry to the last holder's
    exit and restored to its previous state then (still off if someone else had disabled it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._was_enabled = False

    def __enter__(self) -> None:
        with self._lock:
            if self._holders == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._holders += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._holders -= 1
            if self._holders == 0 and self._was_enabled:
                gc.enable()


#: The one :class:`_GcPause` of the process (``with GC_PAUSE: ...``).
GC_PAUSE = _GcPause()


def q(part: str) -> str:
    """One path segment, percent-encoded as the generated methods do (nothing left unescaped but
    the unreserved characters)."""
    return quote(part, safe="")


def plain_headers(h: Any) -> Mapping[str, str] | None:
    """An answer's headers (urllib3's HTTPHeaderDict) as a plain mapping."""
    if h is None:
        return None
    try:
        return {str(k): str(v) for k, v in h.items()}
    except AttributeError:
        return None



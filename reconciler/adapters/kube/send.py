"""The thin request path to the API server (issue 17), shared by the cluster adapters.

* :func:`send_request` / :func:`send_all`: requests built with the ``kubernetes`` ApiClient's own
  ``param_serialize`` (URL, default headers, bearer token and its refresh hook) without the
  generated methods' argument validation and model round trips, sent over the keep-alive
  transport of :mod:`reconciler.adapters.kube.transport` when it reproduces the client's settings, else
  through the client's REST layer;
* :func:`translate_api_error`: every HTTP error answer → the :mod:`reconciler.errors` vocabulary
  (which the generated path in :mod:`reconciler.adapters.kube.cluster` uses too);
* :func:`decode` / :func:`decode_page`: answer bodies → dicts (orjson; LIST pages pruned with
  msgspec to the fields the record converters read).

Uses the ``kubernetes`` client, so it lives in ``adapters``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import orjson
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.adapters.kube import transport as kubehttp
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


def thin_requests(api_client: client.ApiClient) -> bool:
    """Whether :func:`send_request` can be used with ``api_client`` (its ``param_serialize`` and
    ``call_api``: client v31+); with an older client requests go through the generated methods."""
    return hasattr(api_client, "param_serialize") and hasattr(api_client, "call_api")


def send_request(api_client: client.ApiClient, method: str, path: str, what: str, *,
                 query: list[tuple[str, Any]] | None = None, body: Obj | None = None,
                 content_type: str | None = None, timeout: tuple[float, float] = (10, 30)) -> bytes:
    """One request on the thin path (issue 17): ``path`` already quoted, ``query`` as (name, value)
    pairs, ``body`` a JSON-ready dict (serialised once by the client's REST layer), ``timeout``
    (connect, read) seconds. The URL, the default headers (User-Agent), the authentication
    (bearer token, its refresh hook included) and the connection pool are the ApiClient's own, as
    in the generated methods; what is left out is their per-call argument validation (pydantic),
    the model round trip of the body (``sanitize_for_serialization``), which cost more than the
    request itself for a node PATCH, an eviction or a stage pod, and the import of the generated
    API module (about 1.3 s of CPU for ``CoreV1Api``). When :func:`kubehttp.transport_for` gives
    a transport for the ApiClient (its settings are ones that module reproduces), the request
    itself (the same bytes) goes over its keep-alive connection instead of urllib3's pool (about
    1 ms of CPU less per request; resending rules in :mod:`reconciler.adapters.kube.transport`).
    Returns the body bytes of a 2xx answer; raises ClusterError (see :func:`translate_api_error`,
    :func:`unreachable`; a header value that cannot be sent is a ClusterError naming the header,
    never its value)."""
    headers: dict[str, str] = {"Accept": "application/json"}
    if content_type:
        headers["Content-Type"] = content_type
    transport = kubehttp.transport_for(api_client)
    if transport is not None and (content_type is None or _JSON_TYPE.fullmatch(content_type)):
        try:
            return _send_kept_alive(transport, api_client, method, path, what, query, headers, body, timeout)
        except kubehttp.Unsupported:
            headers = {"Accept": "application/json", **({"Content-Type": content_type} if content_type else {})}
    try:
        req = api_client.param_serialize(method=method, resource_path=path, query_params=query or None,
                                         header_params=headers, auth_settings=["BearerToken"])
        resp = api_client.call_api(req[0], req[1], header_params=req[2], body=body, _request_timeout=timeout)
        raw = resp.response
        try:
            data = bytes(raw.data or b"")
            status = int(raw.status)
            answer_headers = raw.headers
        finally:
            raw.release_conn()
    except ApiException as e:  # the REST layer's own (an SSL error is status 0)
        raise translate_api_error(int(e.status or 0), e.body, exception_headers(e), what) from None
    except (urllib3.exceptions.HTTPError, OSError) as e:
        raise unreachable(e, what, str(api_client.configuration.host or "")) from None
    if not 200 <= status <= 299:
        raise translate_api_error(status, data, plain_headers(answer_headers), what)
    return data


#: Content types the REST layer sends a dict body of as ``json.dumps(body)`` (its
#: ``contenttype_matches(ct, "application", "json")``: application/json and application/*+json).
_JSON_TYPE = re.compile(r"application/(?:[^+;]+\+)?json(?:[ \t]*;.*)?", re.IGNORECASE)


def _send_kept_alive(transport: kubehttp.Transport, api_client: client.ApiClient, method: str, path: str, what: str,
                     query: list[tuple[str, Any]] | None, headers: dict[str, str], body: Obj | None,
                     timeout: tuple[float, float]) -> bytes:
    """:func:`send_request` over the keep-alive transport (:mod:`reconciler.adapters.kube.transport`):
    URL, headers and authentication from ``param_serialize`` as before, the body serialised as
    the REST layer does (``json.dumps``, UTF-8). Same errors as the ApiClient path; raises
    kubehttp.Unsupported (nothing sent) when the request must take that path."""
    r = _kept_alive_request(api_client, method, path, query, headers, body)
    try:
        answer = transport.request(r.method, r.url, r.headers, r.body, timeout)
    except kubehttp.InvalidHeader as e:  # the message names the header only, never its value
        raise ClusterError(f"{what}: {e}") from None
    except (urllib3.exceptions.HTTPError, OSError) as e:
        raise unreachable(e, what, str(api_client.configuration.host or "")) from None
    if not 200 <= answer.status <= 299:
        raise translate_api_error(answer.status, answer.data, answer.headers, what)
    return answer.data


def _kept_alive_request(api_client: client.ApiClient, method: str, path: str, query: list[tuple[str, Any]] | None,
                        headers: dict[str, str], body: Obj | None) -> kubehttp.Request:
    """The request as the ApiClient would send it (``param_serialize``: URL, default headers,
    the bearer token after the refresh hook; the body as ``json.dumps``, UTF-8)."""
    req = api_client.param_serialize(method=method, resource_path=path, query_params=query or None,
                                     header_params=headers, auth_settings=["BearerToken"])
    return kubehttp.Request(req[0], req[1], req[2], None if body is None else json.dumps(body).encode("utf-8"))


def send_all(api_client: client.ApiClient, calls: Sequence[tuple[str, str, str, Obj | None]], *,
             content_type: str = "application/json",
             timeout: tuple[float, float] = (10, 30)) -> list[ClusterError | None]:
    """Independent requests of the thin path (:func:`send_request`) sent together: each
    ``(method, path, what, body)``; over the keep-alive transport they are written before their
    answers are read (:meth:`kubehttp.Transport.request_all`), else one after another. Returns,
    in order, None for a 2xx answer or the ClusterError :func:`send_request` would have raised."""
    transport = kubehttp.transport_for(api_client)
    headers = {"Accept": "application/json", "Content-Type": content_type}
    if transport is not None and len(calls) > 1 and _JSON_TYPE.fullmatch(content_type):
        try:
            reqs = [_kept_alive_request(api_client, m, path, None, dict(headers), body) for m, path, _, body in calls]
            answers = transport.request_all(reqs, timeout)
        except kubehttp.Unsupported:
            pass
        except kubehttp.InvalidHeader as e:  # nothing sent; the message names the header, never its value
            return [ClusterError(f"{what}: {e}") for _, _, what, _ in calls]
        else:
            host = str(api_client.configuration.host or "")
            out: list[ClusterError | None] = []
            for (_, _, what, _), a in zip(calls, answers, strict=True):
                if isinstance(a, Exception):
                    out.append(unreachable(a, what, host))
                elif not 200 <= a.status <= 299:
                    out.append(translate_api_error(a.status, a.data, a.headers, what))
                else:
                    out.append(None)
            return out
    results: list[ClusterError | None] = []
    for m, path, what, body in calls:
        try:
            send_request(api_client, m, path, what, body=body, content_type=content_type, timeout=timeout)
            results.append(None)
        except ClusterError as e:
            results.append(e)
    return results


def plain_headers(h: Any) -> Mapping[str, str] | None:
    """An answer's headers (urllib3's HTTPHeaderDict) as a plain mapping."""
    if h is None:
        return None
    try:
        return {str(k): str(v) for k, v in h.items()}
    except AttributeError:
        return None


def exception_headers(e: ApiException) -> Mapping[str, str] | None:
    """An ApiException's answer headers as a plain mapping (:func:`plain_headers`)."""
    return plain_headers(getattr(e, "headers", None))

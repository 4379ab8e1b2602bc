"""A keep-alive HTTP/1.1 transport to the Kubernetes API server on the standard library (issue 17).

Why: on a real kube-apiserver, the ``kubernetes`` client's REST layer (urllib3's PoolManager,
connection pool, Retry and response objects over ``http.client``) costs about 1 ms of CPU per
request, most of the client-side CPU of a changed node. :func:`transport_for` gives
:func:`reconciler.adapters.kube.send.send_request` a :class:`Transport` that sends the very same bytes
(request line, headers, body) over one persistent ``http.client`` connection per thread.

What stays the ApiClient's: the URL, the headers and the authentication still come from
``ApiClient.param_serialize`` (default headers such as User-Agent, the bearer token after the
configuration's ``refresh_api_key_hook``, run before each request as today); the body is
``json.dumps(body)`` encoded as UTF-8, as the REST layer serialises a dict. Only the
``call_api`` step (urllib3) is replaced.

When it is used (decided once per ApiClient, :func:`transport_for`): only for an ApiClient whose
REST layer is the stock one (``RESTClientObject`` over a plain ``urllib3.PoolManager``: no proxy,
no SOCKS) built from settings this module reproduces exactly: ``verify_ssl`` (``cert_reqs``),
``ssl_ca_cert``, ``ca_cert_data``, ``cert_file``/``key_file``, ``connection_pool_maxsize``. Any
other setting (``assert_hostname``, ``tls_server_name``, ``socket_options``, ``keep_alive``,
``retries``, ``client_go_retries``, a proxy that applies to the host, a non-http(s) host) means
None: the caller keeps the ApiClient path. The TLS settings are the ones urllib3 took when the
ApiClient was made (``pool_manager.connection_pool_kw``), so a later change of the configuration
affects neither path.

Resending (never more than urllib3 with the client's default ``Retry(3)``, which is what the
``kubernetes`` client uses when ``configuration.retries`` is None):

* A connection that could not be made (refused, unresolvable name, connect timeout: the request
  was never sent) is tried again, up to ``Retry.DEFAULT``'s connect budget (3 more attempts,
  no back-off), for every method, as urllib3 does. A failed TLS handshake is not retried (urllib3
  retries it; the certificate will not change).
* Before an idle connection is reused it is checked for a close by the server (readable with
  nothing asked: EOF), as urllib3 does; such a connection is replaced before anything is sent.
* A *reused* connection that fails after the request was written but before any answer byte
  (``RemoteDisconnected``, ``ConnectionResetError``, ``BrokenPipeError``: the server closed it
  while we were sending) is resent once on a new connection, only for the methods urllib3 retries
  after a request was sent (``Retry.DEFAULT.allowed_methods``: GET, HEAD, PUT, DELETE, OPTIONS,
  TRACE). POST and PATCH (an eviction, a pod create, a node patch) are never resent once written:
  urllib3 does not resend them either.
* Read timeouts and failures after the first answer byte are never resent (urllib3 resends them
  for GET/PUT/DELETE; this transport does less).

Errors: transport failures are raised as ``OSError`` (``TimeoutError``, ``ConnectionError``,
``ssl.SSLError``, ``socket.gaierror``) or ``urllib3.exceptions.ProtocolError`` wrapping an
``http.client.HTTPException`` (the same class urllib3 raises, so
:func:`reconciler.adapters.kube.conn.classify` words them alike); a request this transport cannot
send as the ApiClient would is :class:`Unsupported` (the caller then uses the ApiClient path). No
exception raised here carries a header value (the bearer token). Redirects (3xx) are not
followed: they are returned as answers like any other status.
"""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import threading
import weakref
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import urllib3
from greenlet import getcurrent, greenlet
from kubernetes.client import rest
from kubernetes.client.api_client import ApiClient
from urllib3.util import create_urllib3_context, parse_url
from urllib3.util.retry import Retry

from reconciler.adapters.kube import greenio

#: ``connection_pool_kw`` keys of urllib3 this transport reproduces.
_UNDERSTOOD_POOL_KW = frozenset({"cert_reqs", "ca_certs", "cert_file", "key_file", "ca_cert_data", "maxsize"})
#: Requests :meth:`Transport.request_all` writes before reading their answers (one round).
PARALLEL = 16
#: Spare connections a transport keeps open at most, over all its threads (:meth:`Transport.request_all`).
MAX_SPARES = 64
_S = TypeVar("_S")
#: Send-phase errors after which an idempotent request on a reused connection is resent once.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class InvalidHeader(ValueError):
    """A request header value that cannot be sent (CR, LF or NUL in it); the message names the
    header, never the value (it may be the bearer token). Nothing was sent."""


class Unsupported(Exception):
    """This request cannot be sent here exactly as the ApiClient would send it (a non-http(s)
    URL, a header value that is not a string, no User-Agent); nothing was sent."""


@dataclass(frozen=True)
class Answer:
    """One HTTP answer: ``status`` code, ``headers`` (names as sent by the server, repeated
    headers joined with ``", "`` as urllib3's HTTPHeaderDict does), ``data`` the whole body
    (gzip/deflate content encoding already undone)."""

    status: int
    headers: Mapping[str, str]
    data: bytes
    #: the server closes the connection after this answer (``Connection: close``)
    closed: bool = False


class _Slot:
    """One thread's connection: the ``http.client`` connection, the origin it is for
    (scheme, host, port) and the transport generation it belongs to (see :meth:`Transport.close`)."""

    __slots__ = ("__weakref__", "busy", "conn", "generation", "origin", "spare")

    def __init__(self, conn: http.client.HTTPConnection, origin: tuple[str, str, int], generation: int) -> None:
        self.conn = conn
        self.origin = origin
        self.generation = generation
        self.busy = False
        #: a spare connection of :meth:`Transport.request_all` (any thread's), not a thread's own
        self.spare = False


class Transport:
    """Keep-alive HTTP/1.1 to one API server: one persistent connection per calling thread, or
    per calling greenlet of a :class:`~reconciler.adapters.kube.greenio.GreenPool`.

    Thread-safe. :meth:`close` closes every idle connection (one in use is closed by its thread
    when its request ends); later requests open new ones. A thread's or greenlet's connection is
    also closed when it ends (its slot, held weakly by its greenlet, is released)."""

    def __init__(self, tls: ssl.SSLContext | None, *, connect_retries: int,
                 resend_methods: frozenset[str]) -> None:
        """``tls``: the context for https origins (None: https is :class:`Unsupported`);
        ``connect_retries``: further attempts after a failed TCP connect; ``resend_methods``:
        the methods resent once after a stale reused connection (see the module docstring)."""
        self._tls = tls
        self._connect_retries = connect_retries
        self._resend_methods = resend_methods
        #: each thread's (or each greenlet's, :mod:`reconciler.adapters.kube.greenio`) own connection
        self._owned: weakref.WeakKeyDictionary[greenlet, _Slot] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self._slots: weakref.WeakSet[_Slot] = weakref.WeakSet()
        self._generation = 0
        self._idle_spares: list[_Slot] = []  # spare connections not in use (request_all)
        self._spares_open = 0  # spare connections open, idle or in use
        #: TCP connections opened so far (for tests and diagnostics)
        self.connections_opened = 0

    # -- connections ----------------------------------------------------------------------------

    def _new_conn(self, origin: tuple[str, str, int], connect_timeout: float) -> http.client.HTTPConnection:
        scheme, host, port = origin
        conn: http.client.HTTPConnection
        if scheme == "https":
            if self._tls is None:
                raise Unsupported("https without a TLS context")
            conn = http.client.HTTPSConnection(host, port, timeout=connect_timeout, context=self._tls)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=connect_timeout)
        conn.auto_open = 0  # never reconnect behind our back: a reconnect is a decision made here
        if greenio.active_hub() is not None:  # this thread multiplexes its requests (greenio.GreenPool)
            coop = self._tcp_connect(host, port, connect_timeout, greenio.connect_tcp)
            if scheme == "https":
                assert self._tls is not None
                coop = greenio.start_tls(coop, self._tls, _server_hostname(host), connect_timeout)
            conn.sock = coop  # the socket interface http.client uses
            with self._lock:
                self.connections_opened += 1
            return conn
        sock = self._tcp_connect(host, port, connect_timeout, socket.create_connection)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # urllib3's default socket option
            if scheme == "https":
                assert self._tls is not None
                # the TLS handshake runs under the connect timeout, as in urllib3
                sock = self._tls.wrap_socket(sock, server_hostname=_server_hostname(host))
        except BaseException:
            sock.close()
            raise
        conn.sock = sock
        with self._lock:
            self.connections_opened += 1
        return conn

    def _tcp_connect(self, host: str, port: int, connect_timeout: float,
                     connect: Callable[[tuple[str, int], float], _S]) -> _S:
        """The TCP connection alone (a failure here is known to precede any byte sent), tried
        again up to ``connect_retries`` times without delay. Raises OSError."""
        tries = 0
        while True:
            try:
                return connect((host, port), connect_timeout)
            except OSError:
                if tries >= self._connect_retries:
                    raise
                tries += 1

    def _slot(self, origin: tuple[str, str, int], connect_timeout: float) -> tuple[_Slot, bool]:
        """This thread's connection for ``origin``, marked busy, and whether it is a reused one.
        The generation check and the busy mark are made under the lock :meth:`close` takes, so
        a connection is never closed by another thread while a request uses it."""
        slot = self._owned.get(getcurrent())
        if slot is not None:
            with self._lock:
                current = slot.generation == self._generation
                if current:
                    slot.busy = True
            if current and slot.origin == origin and slot.conn.sock is not None and not _dropped(slot.conn.sock):
                return slot, True
            slot.busy = False
            self._discard(slot)
        conn = self._new_conn(origin, connect_timeout)
        with self._lock:
            slot = _Slot(conn, origin, self._generation)
            slot.busy = True
            self._slots.add(slot)
        weakref.finalize(slot, conn.close)
        self._owned[getcurrent()] = slot
        return slot, False

    def _discard(self, slot: _Slot) -> None:
        slot.conn.close()
        me = getcurrent()
        if self._owned.get(me) is slot:
            del self._owned[me]

    def close(self) -> None:
        """Close every idle connection; one in use is closed when its request ends."""
        with self._lock:
            self._generation += 1
            slots = list(self._slots)
            self._slots.clear()
            self._spares_open -= len(self._idle_spares)
            self._idle_spares.clear()
            for slot in slots:
                if not slot.busy:
                    slot.conn.close()

    # -- requests -------------------------------------------------------------------------------

    def request(self, method: str, url: str, headers: Mapping[str, Any], body: bytes | None,
                timeout: tuple[float, float]) -> Answer:
        """Send one request and read the whole answer.

        ``url``: absolute ``http(s)://host[:port]/path?query`` as ``param_serialize`` made it;
        ``headers``: as ``param_serialize`` returned them (sent in that order after ``Host``,
        ``Accept-Encoding: identity`` and ``Content-Length``, as urllib3 sends them); ``body``:
        the exact bytes (None: no body, ``Content-Length: 0`` for POST/PUT/PATCH); ``timeout``:
        (connect, read) seconds. Returns the answer whatever its status.

        Raises:
            Unsupported: nothing sent, use the ApiClient path.
            InvalidHeader: nothing sent, a header value cannot be sent.
            OSError, urllib3.exceptions.ProtocolError: transport failure (see the module docstring
                for what is resent before that).
        """
        origin, target, hdrs = _prepare(url, headers)
        return self._one(origin, method, target, hdrs, body, timeout)

    def stream(self, method: str, url: str, headers: Mapping[str, Any], timeout: tuple[float, float], *,
               linger: float = 0.0) -> Stream | Answer:
        """Send one request on a connection of its own and keep its answer open for streaming (a
        watch): a :class:`Stream` when the answer is 2xx, else the whole :class:`Answer` (its
        connection closed). Arguments as :meth:`request` (no body); ``timeout`` (connect, read)
        seconds, the read timeout applying to each read of the stream; ``linger``: see
        :class:`~reconciler.adapters.kube.greenio.CoopSocket` (on a thread with a hub; ignored
        otherwise). Nothing is resent. Raises as :meth:`request`; an answer with a content
        encoding is a ProtocolError (none is asked for)."""
        origin, target, hdrs = _prepare(url, headers)
        conn = self._new_conn(origin, timeout[0])
        try:
            _send(conn, method, target, hdrs, None, timeout[1])
            resp = conn.getresponse()
            if not 200 <= resp.status <= 299:
                answer = _answer(resp)
                conn.close()
                return answer
            if (resp.getheader("Content-Encoding") or "identity").strip().lower() != "identity":
                raise urllib3.exceptions.ProtocolError("a streamed answer with a content encoding")
        except http.client.HTTPException as e:
            conn.close()
            raise urllib3.exceptions.ProtocolError("Connection aborted.", e) from None
        except BaseException:
            conn.close()
            raise
        if isinstance(conn.sock, greenio.CoopSocket):
            conn.sock.linger = linger
        return Stream(conn, resp)

    def request_all(self, requests: Sequence[Request], timeout: tuple[float, float]) -> list[Answer | Exception]:
        """Send independent requests at once and read their answers: up to :data:`PARALLEL` at a
        time, each on its own connection (this thread's own and spare ones shared by the
        transport's threads, at most :data:`MAX_SPARES` of them open), every request of a round
        written before any answer is read. For requests the API server holds (an eviction: about
        100 ms), the thread then waits once per round instead of once per request, which is what
        costs client CPU (measured: 0.72-0.83 ms of CPU per eviction one after another, 0.21-0.31
        ms ten at a time), and the round takes one answer's time instead of ten (``kubectl drain``
        evicts a node's pods in parallel too). Use only for requests whose order does not matter.

        Returns one entry per request, in order: its :class:`Answer`, or the transport failure
        :meth:`request` would have raised for it (OSError, urllib3.exceptions.ProtocolError); a
        request is resent under the same rules as there (never a POST or PATCH once written).
        Raises Unsupported (use the ApiClient path) or InvalidHeader before anything is sent.
        """
        prepared = [(_prepare(r.url, r.headers), r) for r in requests]
        out: list[Answer | Exception] = []
        for i in range(0, len(prepared), PARALLEL):
            out.extend(self._round(prepared[i:i + PARALLEL], timeout))
        return out

    def _caught(self, origin: tuple[str, str, int], method: str, target: str, hdrs: dict[str, str],
                body: bytes | None, timeout: tuple[float, float], *, resent: bool = False) -> Answer | Exception:
        try:
            return self._one(origin, method, target, hdrs, body, timeout, resent=resent)
        except (OSError, urllib3.exceptions.ProtocolError) as e:
            return e

    def _round(self, batch: Sequence[tuple[tuple[tuple[str, str, int], str, dict[str, str]], Request]],
               timeout: tuple[float, float]) -> list[Answer | Exception]:
        """One round of :meth:`request_all`: the first request on this thread's connection, the
        others on spare ones (those that cannot get one wait for the sequential pass at the end)."""
        connect_timeout, read_timeout = timeout
        results: list[Answer | Exception | None] = [None] * len(batch)
        sent: list[tuple[int, _Slot, bool]] = []  # (index, slot, reused), written, answer not read yet
        later: list[int] = []  # sent one at a time after the round: no spare connection was free
        resend: list[int] = []  # likewise, resent once: a reused connection was found closed
        try:
            for k, ((origin, target, hdrs), r) in enumerate(batch):
                try:
                    got = self._slot(origin, connect_timeout) if k == 0 else self._spare(origin, connect_timeout)
                except OSError as e:
                    results[k] = e
                    continue
                slot, reused = got
                if slot is None:
                    later.append(k)
                    continue
                try:
                    _send(slot.conn, r.method, target, hdrs, r.body, read_timeout)
                except _STALE:
                    self._release(slot, broken=True)
                    if reused and r.method.upper() in self._resend_methods:
                        resend.append(k)
                    else:
                        results[k] = ConnectionResetError("the connection closed while the request was sent")
                    continue
                except BaseException:
                    self._release(slot, broken=True)
                    raise
                sent.append((k, slot, reused))
            while sent:
                k, slot, reused = sent.pop(0)
                r = batch[k][1]
                broken = True
                try:
                    answer = _receive(slot.conn)
                    results[k], broken = answer, answer.closed
                except _STALE as e:
                    if reused and r.method.upper() in self._resend_methods:
                        resend.append(k)
                    else:
                        results[k] = e
                except http.client.HTTPException as e:
                    results[k] = urllib3.exceptions.ProtocolError("Connection aborted.", e)
                except (OSError, urllib3.exceptions.ProtocolError) as e:
                    results[k] = e
                finally:
                    self._release(slot, broken=broken)
        except BaseException:
            for _, slot, _ in sent:
                self._release(slot, broken=True)
            raise
        for k in sorted([*later, *resend]):
            (origin, target, hdrs), r = batch[k]
            results[k] = self._caught(origin, r.method, target, hdrs, r.body, timeout, resent=k in resend)
        return [r if r is not None else ConnectionError("not sent") for r in results]

    def _spare(self, origin: tuple[str, str, int], connect_timeout: float) -> tuple[_Slot | None, bool]:
        """A spare connection for ``origin`` (an idle one, checked as :meth:`_slot` checks, or a new
        one while fewer than :data:`MAX_SPARES` are open), marked busy; (None, False) when none."""
        while True:
            with self._lock:
                slot = self._idle_spares.pop() if self._idle_spares else None
                if slot is None:
                    if self._spares_open >= MAX_SPARES:
                        return None, False
                    self._spares_open += 1
                else:
                    slot.busy = True
            if slot is None:
                try:
                    conn = self._new_conn(origin, connect_timeout)
                except BaseException:
                    with self._lock:
                        self._spares_open -= 1
                    raise
                with self._lock:
                    slot = _Slot(conn, origin, self._generation)
                    slot.busy = True
                    slot.spare = True
                    self._slots.add(slot)
                weakref.finalize(slot, conn.close)
                return slot, False
            if slot.origin == origin and slot.conn.sock is not None and not _dropped(slot.conn.sock):
                return slot, True
            self._release(slot, broken=True)

    def _release(self, slot: _Slot, *, broken: bool) -> None:
        """Hand a connection back after a request: this thread's own stays with it (or is dropped
        when ``broken``); a spare goes back to the idle spares, or is closed when broken or when
        :meth:`close` was called meanwhile."""
        with self._lock:
            slot.busy = False
            stale = slot.generation != self._generation
            if slot.spare and not (broken or stale):
                self._idle_spares.append(slot)
                return
            if slot.spare:
                self._spares_open -= 1
        if slot.spare:
            slot.conn.close()
        elif broken or stale:
            self._discard(slot)

    def _one(self, origin: tuple[str, str, int], method: str, target: str, hdrs: dict[str, str],
             body: bytes | None, timeout: tuple[float, float], *, resent: bool = False) -> Answer:
        """One request on this thread's connection (``resent``: it was resent once already)."""
        connect_timeout, read_timeout = timeout
        while True:
            slot, reused = self._slot(origin, connect_timeout)
            try:
                _send(slot.conn, method, target, hdrs, body, read_timeout)
                answer = _receive(slot.conn)
            except _STALE:
                self._discard(slot)
                if reused and not resent and method.upper() in self._resend_methods:
                    resent = True
                    continue
                raise
            except http.client.HTTPException as e:
                self._discard(slot)
                raise urllib3.exceptions.ProtocolError("Connection aborted.", e) from None
            except BaseException:
                self._discard(slot)
                raise
            finally:
                with self._lock:
                    slot.busy = False
                    stale_generation = slot.generation != self._generation
                if stale_generation:  # closed by close() meanwhile
                    self._discard(slot)
            if answer.closed:
                self._discard(slot)
            return answer


class Stream:
    """The open 2xx answer of :meth:`Transport.stream`: its ``status``, ``headers`` and body read
    piece by piece (chunked transfer encoding undone) on its own connection."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        self._conn, self._resp = conn, resp
        self.status = resp.status
        self.headers = dict(resp.getheaders())

    def chunks(self, amt: int = 65536) -> Iterator[bytes]:
        """The body's bytes as they come, at most ``amt`` at a time, until it ends. Raises
        OSError or urllib3.exceptions.ProtocolError (the stream broke)."""
        while True:
            try:
                data = self._resp.read1(amt)
            except http.client.HTTPException as e:
                raise urllib3.exceptions.ProtocolError("Connection broken", e) from None
            if not data:
                return
            yield data

    def close(self) -> None:
        """Close the connection (a stream's connection is never reused)."""
        self._conn.close()


@dataclass(frozen=True)
class Request:
    """One request for :meth:`Transport.request_all`: as the arguments of :meth:`Transport.request`."""

    method: str
    url: str
    headers: Mapping[str, Any]
    body: bytes | None


def _prepare(url: str, headers: Mapping[str, Any]) -> tuple[tuple[str, str, int], str, dict[str, str]]:
    """(origin, request target, headers) of a request, checked as the module docstring says.
    Raises Unsupported or InvalidHeader (nothing sent)."""
    u = parse_url(url)
    if u.scheme not in ("http", "https") or not u.host:
        raise Unsupported(f"scheme {u.scheme!r}")
    hdrs: dict[str, str] = {}
    for name, value in headers.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise Unsupported(f"header {name!r} is not a string")
        if "\r" in value or "\n" in value or "\0" in value:
            raise InvalidHeader(f"request header {name} has an invalid value")  # never the value itself
        hdrs[name] = value
    if "user-agent" not in {k.lower() for k in hdrs}:
        raise Unsupported("no User-Agent header")  # urllib3 would add its own
    host = u.host
    if host.endswith(".") or "%" in host:
        raise Unsupported("host with a trailing dot or a zone id")  # urllib3 rewrites these
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]  # an IPv6 literal: http.client brackets it in the Host header again
    origin = (u.scheme, host, u.port or (443 if u.scheme == "https" else 80))
    return origin, u.request_uri, hdrs


def _send(conn: http.client.HTTPConnection, method: str, target: str, headers: dict[str, str],
          body: bytes | None, read_timeout: float) -> None:
    """Write one request on ``conn`` (its answer is read by :func:`_receive`)."""
    assert conn.sock is not None
    conn.sock.settimeout(read_timeout)
    try:
        conn.request(method, target, body=body, headers=headers)
    except BrokenPipeError:
        pass  # as urllib3: the server may have answered before closing; the answer is read below
    except ConnectionResetError:
        pass  # likewise (urllib3 passes ECONNRESET here too)


def _receive(conn: http.client.HTTPConnection) -> Answer:
    """Read the answer to the request :func:`_send` wrote on ``conn``. Raises what
    ``getresponse`` raises before the first answer byte (the caller decides about resending);
    urllib3.exceptions.ProtocolError after it (never resent)."""
    return _answer(conn.getresponse())


def _answer(resp: http.client.HTTPResponse) -> Answer:
    """The whole answer ``resp`` (its status and headers read). Raises ProtocolError."""
    try:
        data = resp.read()
    except http.client.IncompleteRead as e:
        raise urllib3.exceptions.ProtocolError("Connection broken: IncompleteRead", e) from None
    # the answer started: from here on a failure is raised, never resent
    except _STALE as e:
        raise urllib3.exceptions.ProtocolError("Connection broken", e) from None
    answer_headers: dict[str, str] = {}
    for k, v in resp.getheaders():
        answer_headers[k] = f"{answer_headers[k]}, {v}" if k in answer_headers else v
    encoding = (resp.getheader("Content-Encoding") or "").strip().lower()
    if encoding and encoding != "identity":
        data = _decoded(data, encoding)
    return Answer(resp.status, answer_headers, data, closed=bool(resp.will_close))


def _decoded(data: bytes, encoding: str) -> bytes:
    """``data`` with its gzip/deflate content encoding undone (as urllib3 does by default).
    Raises ProtocolError for another encoding or a broken stream."""
    try:
        if encoding in ("gzip", "x-gzip"):
            return zlib.decompress(data, 16 + zlib.MAX_WBITS)
        if encoding == "deflate":
            try:
                return zlib.decompress(data)
            except zlib.error:
                return zlib.decompress(data, -zlib.MAX_WBITS)
    except zlib.error as e:
        raise urllib3.exceptions.ProtocolError("Received response with content-encoding but failed to decode it",
                                               e) from None
    raise urllib3.exceptions.ProtocolError(f"unsupported content-encoding {encoding!r}")


def _dropped(sock: socket.socket) -> bool:
    """Whether an idle connection was closed (or written to) by the server: readable with
    nothing asked (urllib3's ``is_connection_dropped``)."""
    try:
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            return bool(poller.poll(0))
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def _server_hostname(host: str) -> str:
    """The name for SNI and certificate matching: an IPv6 literal without brackets or zone id,
    as urllib3 passes it."""
    name = host.strip("[]")
    if "%" in name:
        name = name[: name.rfind("%")]
    return name


# ------------------------------------------------------------------------------------------------
# which ApiClient gets a transport


def _tls_context(kw: Mapping[str, Any]) -> ssl.SSLContext:
    """The SSLContext urllib3 would build for ``kw`` (``connection_pool_kw``): its defaults
    (TLS 1.2+, no compression, no tickets, ALPN http/1.1), ``cert_reqs``, the CA file/data or the
    system store, the client certificate. Raises ssl.SSLError/OSError when a file is unreadable."""
    cert_reqs = kw.get("cert_reqs", ssl.CERT_REQUIRED)
    ctx = create_urllib3_context(cert_reqs=cert_reqs)
    ctx.verify_mode = cert_reqs
    if kw.get("ca_certs") or kw.get("ca_cert_data"):
        ctx.load_verify_locations(kw.get("ca_certs"), None, kw.get("ca_cert_data"))
    else:
        ctx.load_default_certs()
    if kw.get("cert_file"):
        # an encrypted key raises (urllib3 refuses it too) instead of OpenSSL asking on the terminal
        ctx.load_cert_chain(kw["cert_file"], kw.get("key_file"), password=_no_password)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def _no_password() -> bytes:
    raise ssl.SSLError("the client key is encrypted")


def _resend_budget() -> tuple[int, frozenset[str]]:
    """(connect retries, methods resent after a stale connection) from urllib3's ``Retry.DEFAULT``
    (what the client uses when ``configuration.retries`` is None): never more than it allows."""
    r = Retry.DEFAULT
    limits = [x for x in (r.total, r.connect) if x is not None]
    if any(x is False for x in limits) or any(not isinstance(x, int) for x in limits):
        return 0, frozenset()
    connect = max(0, min(limits)) if limits else 0
    allowed = r.allowed_methods
    reads = [x for x in (r.total, r.read) if x is not None]
    if allowed is None or any(x is False or not isinstance(x, int) or x < 1 for x in reads):
        return connect, frozenset()
    return connect, frozenset(m.upper() for m in allowed)


def build_transport(api_client: ApiClient) -> Transport | None:
    """A Transport for ``api_client``, or None when its settings are not ones this module
    reproduces exactly (see the module docstring). Does no I/O but reading the CA and client
    certificate files; an error reading them also means None (the ApiClient path reports it)."""
    cfg = api_client.configuration
    if type(api_client).call_api is not ApiClient.call_api:
        return None
    rc = getattr(api_client, "rest_client", None)
    if type(rc) is not rest.RESTClientObject:
        return None
    pm = rc.pool_manager
    if type(pm) is not urllib3.PoolManager or pm.headers:
        return None
    kw = dict(pm.connection_pool_kw)
    if not set(kw) <= _UNDERSTOOD_POOL_KW:
        return None
    if kw.get("cert_reqs", ssl.CERT_REQUIRED) not in (ssl.CERT_REQUIRED, ssl.CERT_NONE):
        return None
    if getattr(cfg, "retries", None) is not None or getattr(cfg, "client_go_retries", False):
        return None
    if getattr(cfg, "assert_hostname", None) is not None or getattr(cfg, "tls_server_name", None):
        return None
    if getattr(cfg, "socket_options", None) is not None or getattr(cfg, "keep_alive", False):
        return None
    host = str(cfg.host or "")
    if not host.startswith(("http://", "https://")):
        return None
    proxy = getattr(cfg, "proxy", None)
    if proxy and not rest.should_bypass_proxies(host, getattr(cfg, "no_proxy", None) or ""):
        return None
    tls: ssl.SSLContext | None = None
    try:
        tls = _tls_context(kw)
    except (ssl.SSLError, OSError, ValueError):
        if host.startswith("https://"):
            return None
    connect, resend = _resend_budget()
    return Transport(tls, connect_retries=connect, resend_methods=resend)


_TRANSPORTS: weakref.WeakKeyDictionary[ApiClient, Transport | None] = weakref.WeakKeyDictionary()
_TRANSPORTS_LOCK = threading.Lock()


def transport_for(api_client: ApiClient) -> Transport | None:
    """The ApiClient's Transport (built on first call, :func:`build_transport`), or None when
    the ApiClient path must be used; the decision is cached per ApiClient."""
    try:
        return _TRANSPORTS[api_client]
    except KeyError:
        pass
    except TypeError:  # not weak-referenceable or not hashable (a test double)
        return None
    with _TRANSPORTS_LOCK:
        if api_client not in _TRANSPORTS:
            _TRANSPORTS[api_client] = build_transport(api_client)
        return _TRANSPORTS[api_client]


def close_transport(api_client: ApiClient) -> None:
    """Close the ApiClient's transport connections, if it has a transport (no-op otherwise)."""
    try:
        t = _TRANSPORTS.get(api_client)
    except TypeError:
        return
    if t is not None:
        t.close()

"""A ``Clock`` for the real cluster that wakes the rollout on change instead of polling.

Two watch streams (nodes, and pods of every namespace) run beside the rollout; each event
records the name of the node it concerns (the node itself, or the pod's ``spec.nodeName``).
:meth:`WatchClock.wait` returns as soon as something changed (or after ``seconds``, at most
``max_sleep``) with the set of nodes that changed, so the rollout looks only at those nodes (and
at nodes whose own timer is due) rather than GET-polling every node in progress. When a watch is
not healthy (starting, reconnecting after an error) ``wait`` returns ``None``: "anything may have
changed", and the rollout looks at every node, as with plain polling.

Watches are raw (``_preload_content=False``, JSON lines) so large fleets are not deserialised into
client model objects; a 410 Gone restarts from a fresh LIST's resourceVersion, as client-go's
reflector does. Given a :class:`~reconciler.adapters.kube.cache.WatchCache`, every event also
updates the nodes and stage pods the cluster adapter tracks there, so its reads of them need no
request. Uses the ``kubernetes`` client, so it lives in ``adapters``.

Watch economy (with a cache; issue 17). The run works on the nodes it tracks in the cache (every
node run reads its node first) and their pods:

* **What is watched.** Nodes: every node (the API has no selector that fits an arbitrary recipe's
  node selector *and* the nodes in progress). Pods: every pod of every namespace, because a drain
  waits for the workload pods of the node to go, whatever their namespace and labels. A field
  selector ``spec.nodeName=<node>`` per draining node would be one more stream (connection, TLS,
  thread) per node of a batch, up to 128; a label selector can select our stage pods but not the
  workload pods. So two streams, filtered on our side, cheaply.
* **Skipped without decoding.** Before decoding an ``ADDED``/``MODIFIED``/``DELETED`` line, a
  byte scan collects every ``"name":"…"`` (nodes) or ``"nodeName":"…"`` and
  ``"namespace":"…"``/``"name":"…"`` (pods) of the line. The object's own name, namespace and
  ``spec.nodeName`` are among them (the API server writes compact JSON; names never need
  escapes), so when none of them is a tracked node or stage pod the event cannot concern the run
  and is dropped after a ``"resourceVersion"`` scan (the smallest one found, so the resume point
  is never ahead of the stream). Any other line (``BOOKMARK``, ``ERROR``, another layout) is
  decoded.
* **Workload pods wake without decoding.** A pod event that passes that scan but none of whose
  (namespace, name) candidates is a tracked pod can only matter as a wake-up of its node (the
  cache keeps nothing of it): the tracked nodes among its ``"nodeName":"…"`` candidates are woken
  and the line is not decoded (issue 17: the pods a drain evicts send three events each).
* **Decoded once, with orjson** (about 2.3 times faster than ``json.loads`` on kwok's node
  events, 24 against 55 µs), and converted only for tracked objects.
* **Read in bursts.** While a stream is busy, a read that would block first waits
  ``coalesce_seconds`` (:data:`LINGER`, 100 ms, multiplexed; 20 ms in threads), so the events
  that arrive meanwhile cost the thread one wake-up instead of one each
  (:mod:`reconciler.adapters.kube.watchreads`, with the measurements).
* **Woken only by a change.** A tracked node or stage pod wakes the rollout only when the event
  changed what a read of it returns (:meth:`WatchCache.observe`); the echo of our own write
  (already stored from the write's answer) and heartbeats that only move timestamps do not. Any
  event of a pod bound to a tracked node (a workload pod leaving a draining node) wakes it.

Without a cache every event is decoded and every node reported, as before.

Where the streams run (issue 17). When every request of the API client goes over the keep-alive
transport (:func:`multiplexable`; the same rule that gives a rollout its
:class:`~reconciler.adapters.kube.greenio.GreenPool`), the streams are multiplexed on the thread that
waits: two greenlets of that thread's hub (:func:`~reconciler.adapters.kube.greenio.acquire_hub`), their
LIST and WATCH requests the API client's own bytes (``param_serialize``) over connections of
their own (:meth:`~reconciler.adapters.kube.transport.Transport.stream`). They run whenever the thread
waits: in :meth:`WatchClock.wait` (which drives the hub until a change or the deadline) and while
the rollout's node I/O waits on the same hub. Measured on a real control plane (500 kwok nodes,
5,000 pods, 1 s stages): two watch threads cost 5-6 s of CPU per run, nearly all of it their
wake-ups and the GIL handed back and forth with the rollout's thread (the same events read on one
thread cost about 25 µs each), so the whole reconciler went from 17.4 to 14.8 s. A busy stream is
read in bursts as with threads, by its socket's ``linger``
(:class:`~reconciler.adapters.kube.greenio.CoopSocket`). Otherwise (another REST layer, an older client)
the streams run in two daemon threads as before.

The price of running on the rollout's thread is that the streams are not read while that thread
is busy elsewhere (a long pass, a controller idle between passes). So that nothing is decided from
an old copy, the cache answers only while the streams were read within :data:`MAX_LAG` seconds
(``WatchCache.fresh``); otherwise a read is a request. A wait from another thread (or from inside
one of the hub's greenlets) cannot run the streams: it sleeps and answers ``None`` ("look at
everything").
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
from collections.abc import Callable, Collection, Iterator
from typing import Any

import orjson
import urllib3
from greenlet import GreenletExit, greenlet
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.adapters.kube import greenio, watchreads
from reconciler.adapters.kube import transport as kubehttp
from reconciler.adapters.kube.cache import NODES, PODS, WatchCache, key_of, parse_resource_version
from reconciler.adapters.kube.send import thin_requests

log = logging.getLogger(__name__)


class WatchClock:
    """Monotonic clock whose ``wait`` returns early on node or pod changes.

    Args:
        api_client: the ``kubernetes`` ApiClient of the cluster adapter.
        max_sleep: longest single wait in seconds (a safety net if a watch silently stalls).
        timeout_seconds: server-side timeout of each watch request (it is re-opened after).
        cache: fed with every event and told when a stream is (not) in sync (see kubecache).
        coalesce_seconds: how long a busy stream waits before a read that would block, so that
            its events are read in bursts rather than one wake-up each (0: never;
            :mod:`reconciler.adapters.kube.watchreads`, or the socket's ``linger`` when multiplexed).
            At most this much latency per burst. None: :data:`LINGER` when multiplexed, else
            ``watchreads.WINDOW``.
        multiplex: run the streams as greenlets of the waiting thread's hub rather than in two
            threads (module docstring); None: when :func:`multiplexable`.
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        max_sleep: float = 30.0,
        timeout_seconds: int = 290,
        cache: WatchCache | None = None,
        coalesce_seconds: float | None = None,
        multiplex: bool | None = None,
    ) -> None:
        self._api_client = api_client
        if multiplex is None:
            multiplex = api_client is not None and multiplexable(api_client)
        #: the streams run in greenlets on the waiting thread (module docstring), not in threads
        self.multiplex = multiplex
        self._hub: greenio.Hub | None = None
        self._greenlets: list[greenlet] = []
        if coalesce_seconds is None:
            coalesce_seconds = LINGER if multiplex else watchreads.WINDOW
        self.coalesce_seconds = coalesce_seconds
        self.cache = cache
        self.max_sleep = max_sleep
        self.timeout_seconds = timeout_seconds
        self._changed: set[str] = set()
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._healthy = {"nodes": False, "pods": False}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.events_seen = 0  # events decoded
        self.events_skipped = 0  # events dropped undecoded (they concern nothing tracked)

    @functools.cached_property
    def _core(self) -> client.CoreV1Api:
        # made when the first watch starts: importing the generated CoreV1Api costs about 1.3 s of
        # CPU, which a command that never waits (``plan``) should not pay
        return client.CoreV1Api(self._api_client)

    # ------------------------------------------------------------------ Clock
    def now(self) -> float:
        """Monotonic seconds (in-process deadlines only; never persisted)."""
        return time.monotonic()

    def utc(self) -> float:
        """UTC wall-clock epoch seconds (what node records persist, as RFC 3339)."""
        return time.time()

    def wait(self, seconds: float) -> set[str] | None:
        """Wait up to ``seconds`` (at most ``max_sleep``) for a change. Returns the names of nodes
        that changed since the last call (with a cache: tracked nodes whose node, stage pods or
        pods changed for a reader, see the module docstring), or ``None`` when a watch is not
        (yet) healthy, or the clock was closed (a closed clock only sleeps).

        Multiplexed, the streams belong to the thread of the first call (they run while it
        waits); a call from any other thread, or from inside one of its hub's greenlets, sleeps
        and answers ``None``."""
        seconds = max(0.0, min(seconds, self.max_sleep))
        if self._stop.is_set():
            greenio.sleep(seconds)
            return None
        self._start()
        hub = self._hub
        if hub is None:
            self._event.wait(seconds)
        elif threading.get_ident() == hub.thread and not hub.cooperative():
            hub.run_until(time.monotonic() + seconds, self._event.is_set)  # the streams run meanwhile
        else:  # another thread, or a greenlet, cannot run the streams: it cannot tell what changed
            greenio.sleep(seconds)
            return None
        with self._lock:
            changed, self._changed = self._changed, set()
            self._event.clear()
            healthy = all(self._healthy.values())
        return changed if healthy else None

    def close(self) -> None:
        """Stop the watches for good (the clock is not reused: a later :meth:`wait` only sleeps
        and answers ``None``). The cache is told at once that no stream is in sync, so it
        forgets what it held and every read is a request from here on, whichever thread calls.
        Threads (daemons) stop at their next event; multiplexed streams are ended and their
        connections closed at once when called on the thread that owns them, else they stop at
        their next event and their connections close with them (or when ``close`` is called again
        on the owning thread)."""
        self._stop.set()
        for kind in list(self._healthy):
            self._set_health(kind, False)
        hub = self._hub
        if hub is not None and threading.get_ident() == hub.thread and not hub.cooperative():
            self._hub = None
            for g in self._greenlets:
                if not g.dead:
                    g.throw(GreenletExit)
            self._greenlets.clear()
            greenio.release_hub(hub)

    # ------------------------------------------------------------------ watches
    def _start(self) -> None:
        if self._threads or self._greenlets or self._stop.is_set():
            return
        if self.multiplex:
            hub = self._hub = greenio.acquire_hub()
            for kind, path in (("nodes", "/api/v1/nodes"), ("pods", "/api/v1/pods")):
                self._greenlets.append(hub.spawn(self._loop, kind, self._transport_lister(path)))
            if self.cache is not None:
                # read from the cache only while the streams are being read (module docstring)
                self.cache.fresh = lambda: time.monotonic() - hub.polled_at <= MAX_LAG
            return
        for kind, lister in (("nodes", self._core.list_node), ("pods", self._core.list_pod_for_all_namespaces)):
            t = threading.Thread(target=self._loop, args=(kind, lister), name=f"watch-{kind}", daemon=True)
            t.start()
            self._threads.append(t)

    def _mark(self, node: str | None) -> None:
        """Count an event; ``node``: the node it changed for the rollout (None: nobody to wake)."""
        with self._lock:
            self.events_seen += 1
            if node:
                self._changed.add(node)
                self._event.set()

    def _wake(self, nodes: Collection[str]) -> None:
        """Wake the rollout for ``nodes`` (an event skipped undecoded that concerns them)."""
        with self._lock:
            self._changed.update(nodes)
            self._event.set()

    def _set_health(self, kind: str, ok: bool) -> None:
        if ok and self._stop.is_set():
            return  # a stream opened while the clock was being closed: never trusted again
        with self._lock:
            self._healthy[kind] = ok
        if self.cache is not None:
            self.cache.set_synced(kind, ok)
        if not ok:
            self._event.set()

    def _woken(self, kind: str, event_type: str, obj: dict[str, Any]) -> str | None:
        """Feed a decoded event to the cache; the node whose rollout it should wake, or None.

        Without a cache: the node itself (nodes) or the pod's ``spec.nodeName`` (pods). With one:
        a tracked node or stage pod only when :meth:`WatchCache.observe` saw a change; any other
        pod only when it is bound to a tracked node (its drain waits for it)."""
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        if kind == NODES:
            name = meta.get("name")
        else:
            spec = obj.get("spec")
            name = spec.get("nodeName") if isinstance(spec, dict) else None
        cache = self.cache
        if cache is None:
            return name if isinstance(name, str) else None
        changed = cache.observe(kind, event_type, obj)
        if not isinstance(name, str) or not name:
            return None
        if kind == NODES:
            return name if changed else None
        pod_key = key_of(PODS, obj)
        if pod_key is not None and cache.tracks_any(PODS, (pod_key,)):
            return name if changed else None
        return name if cache.tracks_any(NODES, (name,)) else None

    def _loop(self, kind: str, lister: Callable[..., Any]) -> None:
        rv = ""
        backoff = 1.0
        while not self._stop.is_set():
            try:
                if not rv:
                    listing = lister(limit=1, _preload_content=False, _request_timeout=(10, 30))
                    rv = str((orjson.loads(listing.data).get("metadata") or {}).get("resourceVersion") or "")
                    listing.release_conn()
                resp = lister(
                    watch=True,
                    resource_version=rv,
                    allow_watch_bookmarks=True,
                    timeout_seconds=self.timeout_seconds,
                    _preload_content=False,
                    _request_timeout=(10, self.timeout_seconds + 30),
                )
                self._set_health(kind, True)  # streaming from rv: no event is lost from here on
                if not self.multiplex:  # bursts, not one wake-up per event (multiplexed: the socket's linger)
                    watchreads.coalesce_reads(resp, window=self.coalesce_seconds)
                try:
                    for line in _lines(resp):
                        if self._stop.is_set():
                            return
                        fields = scan(line) if self.cache is not None else None  # the one byte scan
                        if self.cache is not None and not concerns_tracked(kind, line, self.cache, fields):
                            self.events_skipped += 1
                            rv = resume_version(rv, line, fields)
                            continue
                        if (self.cache is not None and kind == PODS
                                and (nodes := wakes_only(line, self.cache, fields))):
                            # a workload pod of a tracked node: its node is woken (a drain waits for
                            # it to go); nothing of it is kept, so it need not be decoded
                            self.events_skipped += 1
                            rv = resume_version(rv, line, fields)
                            self._wake(nodes)
                            continue
                        ev = orjson.loads(line)
                        ev = ev if isinstance(ev, dict) else {}
                        obj = ev.get("object")
                        obj = obj if isinstance(obj, dict) else {}
                        if ev.get("type") == "ERROR":
                            if obj.get("code") == 410:  # too old: list again (events were lost)
                                rv = ""
                                self._set_health(kind, False)
                            break
                        meta = obj.get("metadata")
                        rv = str((meta.get("resourceVersion") if isinstance(meta, dict) else None) or rv)
                        if ev.get("type") == "BOOKMARK":
                            continue
                        self._mark(self._woken(kind, str(ev.get("type")), obj))
                finally:
                    resp.release_conn()
                backoff = 1.0
            except Exception as e:  # a dead watch thread would leave the cache trusted
                # ApiException, urllib3 and socket errors, a line that is not JSON, and an object
                # the cache cannot convert (a hostile field): the stream is given up and re-opened
                # after this event (rv already points past it); until then nothing is served from
                # the cache and the rollout looks at every node
                if not isinstance(e, (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError)):
                    log.warning("watch %s: event not usable (%s: %s)", kind, type(e).__name__, str(e)[:200])
                self._set_health(kind, False)
                if isinstance(e, ApiException) and e.status == 410:
                    rv = ""
                log.info("watch %s interrupted (%s); reconnecting in %.0f s", kind, type(e).__name__, backoff)
                if self.multiplex:
                    greenio.sleep(backoff)
                else:
                    self._stop.wait(backoff)
                backoff = min(30.0, backoff * 2)

    def _transport_lister(self, resource_path: str) -> Callable[..., Any]:
        """The LIST/WATCH call of ``resource_path`` over the keep-alive transport, with the
        generated ``list_*`` methods' keywords as :meth:`_loop` uses them (``limit``, ``watch``,
        ``resource_version``, ``allow_watch_bookmarks``, ``timeout_seconds``,
        ``_request_timeout``): the request bytes the API client would send (its
        ``param_serialize``). Returns an object with ``data`` (a LIST) or ``stream`` (a watch) and
        ``release_conn``; raises ApiException for an answer that is not 2xx, OSError or
        urllib3's HTTPError for a transport failure, kubehttp.Unsupported when the request
        cannot go over the transport."""
        api = self._api_client

        def call(*, _preload_content: bool = False, _request_timeout: tuple[float, float] = (10, 30),
                 **params: Any) -> Any:
            transport = kubehttp.transport_for(api)
            if transport is None:
                raise kubehttp.Unsupported("no keep-alive transport for this API client")
            query = [(_WATCH_PARAMS[k], v) for k, v in params.items() if v is not None]
            req = api.param_serialize(method="GET", resource_path=resource_path, query_params=query,
                                      header_params={"Accept": "application/json"}, auth_settings=["BearerToken"])
            method, url, headers = req[0], req[1], req[2]
            if not params.get("watch"):
                answer = transport.request(method, url, headers, None, _request_timeout)
                _raise_for(answer)
                return _Listed(answer.data)
            got = transport.stream(method, url, headers, _request_timeout, linger=self.coalesce_seconds)
            if isinstance(got, kubehttp.Answer):
                _raise_for(got)
            assert isinstance(got, kubehttp.Stream)
            return _Streamed(got)

        return call


#: Default seconds a busy multiplexed stream waits before a read that would block (the socket's
#: ``linger``). Measured on a real control plane (500 kwok nodes, 5,000 pods, 1 s stages, three
#: runs each, back to back): 20 ms → 100 ms took the reconciler's CPU from 30 to 24 ms per changed
#: node with the same wall time (111 and 110 s in the first pair: fewer wake-ups of the one thread,
#: and more of the 2 cores left to the API server and kwok). At most this much latency per burst.
LINGER = 0.1
#: Seconds a multiplexed stream may go unread (its thread busy elsewhere) before the cache stops
#: answering from what it holds (each read is then a request until the streams are read again).
MAX_LAG = 0.5
#: The ``list_*`` keywords :meth:`WatchClock._loop` uses → query parameters.
_WATCH_PARAMS = {"limit": "limit", "watch": "watch", "resource_version": "resourceVersion",
                 "allow_watch_bookmarks": "allowWatchBookmarks", "timeout_seconds": "timeoutSeconds"}


def multiplexable(api_client: client.ApiClient) -> bool:
    """Whether the watch streams of ``api_client`` can run multiplexed on the waiting thread:
    every request goes over the keep-alive transport, as for
    :meth:`~reconciler.adapters.kube.cluster.KubeCluster.job_pool`'s green pool."""
    return thin_requests(api_client) and kubehttp.transport_for(api_client) is not None


def _raise_for(answer: kubehttp.Answer) -> None:
    if not 200 <= answer.status <= 299:
        e = ApiException(status=answer.status, reason=None)
        e.body, e.headers = answer.data.decode("utf-8", "replace"), answer.headers
        raise e


class _Listed:
    """A LIST answer as :meth:`WatchClock._loop` reads it (``data``, ``release_conn``)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def release_conn(self) -> None:
        """Nothing to release (the connection stays the transport's)."""


class _Streamed:
    """A watch answer as :func:`_lines` reads it (``stream``, ``release_conn``)."""

    def __init__(self, stream: kubehttp.Stream) -> None:
        self._stream = stream

    def stream(self, amt: int, decode_content: bool = True) -> Iterator[bytes]:
        return self._stream.chunks(amt)

    def release_conn(self) -> None:
        self._stream.close()


#: How the API server starts the line of an event that may be skipped (compact JSON, WatchEvent's
#: field order: type, then object). Any other line is decoded.
_OBJECT_EVENTS = (b'{"type":"ADDED",', b'{"type":"MODIFIED",', b'{"type":"DELETED",')
_RESOURCE_VERSION = re.compile(rb'"resourceVersion":"([1-9][0-9]*)"')
#: The fields the triage looks at, in one pattern so that a line is scanned once (issue 17): the
#: separate scans of ``"name"``, ``"nodeName"``, ``"namespace"`` and ``"resourceVersion"`` cost
#: 14 µs on a 4 KB pod event against 10 µs for this one, and a wake-only pod event was scanned
#: seven times (its triage, the wake-up test, the resume point). Values with an escape are not
#: matched (the API server never escapes a name). In valid JSON a match starts at the quote that
#: opens a key and ends at the one that closes its value, so matches never overlap and this finds
#: exactly what one pattern per key would.
_FIELDS = re.compile(rb'"(name|nodeName|namespace|resourceVersion)":"([^"\\]*)"')
_INTEGER = re.compile(rb"[1-9][0-9]*")


class Fields:
    """What one scan of a raw ADDED/MODIFIED/DELETED line found (:func:`scan`): every
    ``"name":"…"``, ``"nodeName":"…"``, ``"namespace":"…"`` string (in line order) and every
    ``"resourceVersion":"<integer>"`` as an int."""

    __slots__ = ("names", "namespaces", "node_names", "versions")

    def __init__(self) -> None:
        self.names: list[str] = []
        self.node_names: list[str] = []
        self.namespaces: list[str] = []
        self.versions: list[int] = []


def scan(line: bytes) -> Fields | None:
    """The fields of the raw watch event ``line`` in one pass; None when the line is not an
    ADDED/MODIFIED/DELETED event in the API server's compact layout (it must be decoded)."""
    if not line.startswith(_OBJECT_EVENTS):
        return None
    f = Fields()
    for key, value in _FIELDS.findall(line):
        if key == b"name":
            f.names.append(value.decode("utf-8", "replace"))
        elif key == b"nodeName":
            f.node_names.append(value.decode("utf-8", "replace"))
        elif key == b"namespace":
            f.namespaces.append(value.decode("utf-8", "replace"))
        elif _INTEGER.fullmatch(value):
            f.versions.append(int(value))
    return f


_UNSCANNED: Any = object()


def concerns_tracked(kind: str, line: bytes, cache: WatchCache, fields: Fields | None = _UNSCANNED) -> bool:
    """Whether the raw watch event ``line`` of ``kind`` (``nodes``/``pods``) may concern a tracked
    node or pod of ``cache``; False only when it certainly does not (then it need not be decoded).
    ``fields``: ``scan(line)`` when already made (else it is made here).

    The test is a superset: every ``"name":"…"`` string of a node's line (its ``metadata.name`` is
    one of them), every ``"nodeName":"…"`` of a pod's line (``spec.nodeName``) and every
    (``"namespace":"…"``, ``"name":"…"``) pair (its key) are looked up; keys of labels,
    annotations or volume attributes that happen to be called so only add candidates. A line that
    is not an ADDED/MODIFIED/DELETED event in the API server's compact layout is always decoded."""
    f = scan(line) if fields is _UNSCANNED else fields
    if f is None:
        return True
    if kind == NODES:
        return cache.tracks_any(NODES, f.names)
    if cache.tracks_any(NODES, f.node_names):
        return True
    return cache.tracks_any(PODS, [(ns, n) for ns in f.namespaces for n in f.names])


def wakes_only(line: bytes, cache: WatchCache, fields: Fields | None = _UNSCANNED) -> set[str]:
    """For a raw pod event ``line`` that :func:`concerns_tracked` let through: the tracked nodes
    it may be bound to, when that is all it can matter for, i.e. none of its (``namespace``,
    ``name``) candidates is a tracked pod (the cache keeps nothing of it; the watch would only
    wake its node). Empty when it must be decoded (a tracked stage pod, or another layout). Every
    ``"nodeName":"…"`` of the line is a candidate (the pod's ``spec.nodeName`` is one of them), so
    the set may hold a node the pod is not bound to: a spurious wake-up costs one look at that
    node, never a missed one. ``fields``: ``scan(line)`` when already made."""
    f = scan(line) if fields is _UNSCANNED else fields
    if f is None:
        return set()
    if cache.tracks_any(PODS, [(ns, n) for ns in f.namespaces for n in f.names]):
        return set()
    return {n for n in f.node_names if cache.tracks_any(NODES, (n,))}


def resume_version(current: str, line: bytes, fields: Fields | None = _UNSCANNED) -> str:
    """The resourceVersion to resume the watch from after skipping the event ``line``: the smallest
    ``"resourceVersion":"<integer>"`` of the line (its ``metadata.resourceVersion`` is one of them,
    so the result is never ahead of the stream), but not below ``current``; ``current`` when the
    line has none or ``current`` is not an integer (KEP-5504). ``fields``: ``scan(line)`` when
    already made (None: a line of another layout, whose versions are then scanned here)."""
    cur = parse_resource_version(current)
    if fields is _UNSCANNED or fields is None:
        found = [int(m) for m in _RESOURCE_VERSION.findall(line)]
    else:
        found = fields.versions
    if cur is None or not found:
        return current
    return str(max(cur, min(found)))


def _lines(resp: Any) -> Iterator[bytes]:
    """Split a streaming HTTP body into JSON lines (the API server sends one event per chunk)."""
    buf = b""
    for chunk in resp.stream(65536, decode_content=True):
        if b"\n" not in chunk:
            buf += chunk
            continue
        *lines, buf = (buf + chunk).split(b"\n")
        for line in lines:
            if line.strip():
                yield line

"""The real cluster's ``ChangeFeed``: the watch streams that keep the
:class:`~reconciler.adapters.kube.cache.WatchStore` current and wake the rollout on change instead
of polling.

Two streams (nodes, and pods of every namespace) run in two daemon threads, each with the official
client's ``kubernetes.watch.Watch`` over the one request path
(:class:`~reconciler.adapters.kube.api.KubeApi`): a LIST fills the store, then a WATCH from the
LIST's resourceVersion with bookmarks, re-opened from the last version seen when the server ends it
(``timeoutSeconds``) or the connection breaks, re-listed after ``410 Gone`` (as client-go's
reflector does). The client's own ``SharedInformer`` is not used: see the store's docstring.

:meth:`KubeWatch.changed` returns as soon as a node the run takes an interest in changed (or after
``within`` seconds, at most ``max_sleep``) with the names of those nodes, so the rollout looks only
at them (and at nodes whose own timer is due) rather than polling every node in progress. While a
stream is not in sync (starting, reconnecting) it returns ``None``: "anything may have changed".
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Collection
from typing import Any

from kubernetes.client.exceptions import ApiException
from kubernetes.watch import Watch as _Watch

from reconciler.adapters.kube.api import KubeApi, decode
from reconciler.adapters.kube.cache import NODES, PODS, WatchStore, parse_resource_version
from reconciler.errors import ClusterError

log = logging.getLogger(__name__)

#: The client's watch (untyped).
Watch: Callable[[], Any] = _Watch

_PATHS = {NODES: "/api/v1/nodes", PODS: "/api/v1/pods"}


class KubeWatch:
    """The two watch streams, as a ``ChangeFeed`` of the nodes the run works on.

    Args:
        api: the request path of the cluster adapter (its ApiClient).
        store: fed by the streams (the cluster adapter reads it).
        max_sleep: longest single wait in seconds (a safety net if a stream silently stalls).
        timeout_seconds: server-side timeout of each WATCH request (it is re-opened after).
        page_size: ``limit`` of each LIST page.
    """

    def __init__(self, api: KubeApi, store: WatchStore, *, max_sleep: float = 30.0, timeout_seconds: int = 290,
                 page_size: int = 500) -> None:
        self.api, self.store = api, store
        self.max_sleep, self.timeout_seconds, self.page_size = max_sleep, timeout_seconds, page_size
        self._changed: set[str] = set()
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._healthy = {NODES: False, PODS: False}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._watches: dict[str, Any] = {}
        self._responses: dict[str, Any] = {}  # each stream's open answer (urllib3), for close
        self.events_seen = 0

    # ------------------------------------------------------------------ ChangeFeed
    def changed(self, within: float) -> set[str] | None:
        """Wait up to ``within`` seconds (at most ``max_sleep``) for a change. Returns the names of
        the nodes of interest that changed since the last call, or ``None`` when a stream is not
        (yet) in sync or the feed was closed (a closed feed only sleeps). Any thread may call it."""
        seconds = max(0.0, min(within, self.max_sleep))
        if self._stop.is_set():
            time.sleep(seconds)
            return None
        self.start()
        self._event.wait(seconds)
        with self._lock:
            changed, self._changed = self._changed, set()
            self._event.clear()
            healthy = all(self._healthy.values())
        return changed if healthy else None

    def start(self) -> None:
        """Start the two streams (once; :meth:`changed` starts them too)."""
        with self._lock:
            if self._threads or self._stop.is_set():
                return
            for kind in (NODES, PODS):
                t = threading.Thread(target=self._loop, args=(kind,), name=f"watch-{kind}", daemon=True)
                self._threads.append(t)
        for t in self._threads:
            t.start()

    def close(self) -> None:
        """Stop the streams for good (a later :meth:`changed` only sleeps and answers ``None``); the
        store stops answering at once (its reads are requests from here on). Safe from any thread;
        each stream's connection is shut down, so its thread ends at once."""
        self._stop.set()
        for kind in (NODES, PODS):
            self._set_health(kind, False)
        with self._lock:
            watches, responses = list(self._watches.values()), list(self._responses.values())
        for w in watches:
            w.stop()
        for resp in responses:  # a stream whose watch had not taken its answer yet
            _shutdown(resp)

    # ------------------------------------------------------------------ streams
    def _set_health(self, kind: str, ok: bool) -> None:
        if ok and self._stop.is_set():
            return  # a stream opened while the feed was being closed: never trusted again
        with self._lock:
            self._healthy[kind] = ok
        if ok:
            self.store.resynced(kind)
        else:
            self.store.unsynced(kind)
            self._event.set()

    def _wake(self, nodes: Collection[str]) -> None:
        with self._lock:
            self.events_seen += 1
            if nodes:
                self._changed.update(nodes)
                self._event.set()

    def _relist(self, kind: str) -> int:
        """LIST every object of ``kind`` into the store (pages decoded whole: the store keeps the
        stage pods' raw objects); the version to watch from."""
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            query: list[tuple[str, Any]] = [("limit", self.page_size), *((("continue", token),) if token else ())]
            page = decode(self.api.send("GET", _PATHS[kind], f"list {kind}", query=query, gzip=True, timeout=(10, 60)),
                          f"list {kind}")
            items.extend(o for o in page.get("items") or () if isinstance(o, dict))
            meta = page.get("metadata")
            meta = meta if isinstance(meta, dict) else {}
            token = meta.get("continue") or None
            if not token:
                version = parse_resource_version(meta.get("resourceVersion")) or 0
                self.store.replace(kind, items, version)
                return version

    def _watch_call(self, kind: str) -> Callable[..., Any]:
        """The WATCH request of ``kind`` as ``Watch.stream`` calls a list method (its keywords).
        It names no return type, so the client's watch hands over each event's object as the
        decoded JSON (no model deserialisation) and still reads ERROR events (``410 Gone`` raised
        as an ApiException); its ``deserialize=False`` fails on an ERROR event (KeyError
        ``raw_object``, client 37.0)."""

        def call(*, watch: bool, resource_version: str, allow_watch_bookmarks: bool, timeout_seconds: int,
                 _preload_content: bool, _request_timeout: tuple[float, float]) -> Any:
            query = [("watch", "true"), ("resourceVersion", resource_version),
                     ("allowWatchBookmarks", "true" if allow_watch_bookmarks else "false"),
                     ("timeoutSeconds", timeout_seconds)]
            resp = self.api.stream(_PATHS[kind], f"watch {kind}", query, _request_timeout)
            with self._lock:
                self._responses[kind] = resp
            if self._stop.is_set():  # closed while the request was on its way: end it now
                _shutdown(resp)
            self._set_health(kind, True)  # streaming from the store's version: no event is lost from here on
            return resp

        return call

    def _loop(self, kind: str) -> None:
        version = 0
        backoff = 1.0
        while not self._stop.is_set():
            try:
                if not version:
                    version = self._relist(kind)
                w = Watch()
                with self._lock:
                    self._watches[kind] = w
                if self._stop.is_set():
                    return
                stream = w.stream(self._watch_call(kind), resource_version=str(version), allow_watch_bookmarks=True,
                                  timeout_seconds=self.timeout_seconds,
                                  _request_timeout=(10, self.timeout_seconds + 30))
                for ev in stream:
                    if self._stop.is_set():
                        return
                    obj = ev.get("object") if isinstance(ev, dict) else None
                    if not isinstance(obj, dict):
                        continue
                    self._wake(self.store.apply(kind, str(ev.get("type")), obj))
                    meta = obj.get("metadata")
                    version = max(version, parse_resource_version(meta.get("resourceVersion")
                                                                  if isinstance(meta, dict) else None) or 0)
                backoff = 1.0
            except Exception as e:  # a dead stream would leave the store trusted
                # ApiException (410 Gone: list again), ClusterError and transport errors, a line that
                # is not JSON, an object the store cannot convert: the stream is given up and
                # re-opened; until then nothing of its kind is served from the store
                self._set_health(kind, False)
                if self._stop.is_set():
                    return
                if isinstance(e, (ApiException, ClusterError)) and e.status == 410:
                    version = 0
                    continue
                if not isinstance(e, (ApiException, ClusterError, OSError, ValueError)):
                    log.warning("watch %s: event not usable (%s: %s)", kind, type(e).__name__, str(e)[:200])
                log.info("watch %s interrupted (%s); reconnecting in %.0f s", kind, type(e).__name__, backoff)
                self._stop.wait(backoff)
                backoff = min(30.0, backoff * 2)


def _shutdown(resp: Any) -> None:
    """End a streaming answer from any thread: its socket is shut down, so the read blocked on it
    returns at once (urllib3's ``HTTPResponse.shutdown``; the client's ``Watch.stop`` does the same
    only once the watch holds the answer)."""
    with contextlib.suppress(Exception):
        resp.shutdown()

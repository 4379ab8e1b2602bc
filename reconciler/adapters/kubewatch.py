"""A ``Clock`` for the real cluster that wakes the rollout on change instead of polling.

Two watch streams (nodes, and pods of every namespace) run in background threads; each event
records the name of the node it concerns (the node itself, or the pod's ``spec.nodeName``).
:meth:`WatchClock.wait` returns as soon as something changed (or after ``seconds``, at most
``max_sleep``) with the set of nodes that changed, so the rollout looks only at those nodes (and
at nodes whose own timer is due) rather than GET-polling every node in progress. When a watch is
not healthy (starting, reconnecting after an error) ``wait`` returns ``None``: "anything may have
changed", and the rollout looks at every node, as with plain polling.

Watches are raw (``_preload_content=False``, JSON lines) so large fleets are not deserialised into
client model objects; a 410 Gone restarts from a fresh LIST's resourceVersion, as client-go's
reflector does. Given a :class:`~reconciler.adapters.kubecache.WatchCache`, every event also
updates the nodes and stage pods the cluster adapter tracks there, so its reads of them need no
request. Uses the ``kubernetes`` client, so it lives in ``adapters``.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.adapters.kubecache import WatchCache

log = logging.getLogger(__name__)


class WatchClock:
    """Monotonic clock whose ``wait`` returns early on node or pod changes.

    Args:
        api_client: the ``kubernetes`` ApiClient of the cluster adapter.
        max_sleep: longest single wait in seconds (a safety net if a watch silently stalls).
        timeout_seconds: server-side timeout of each watch request (it is re-opened after).
        cache: fed with every event and told when a stream is (not) in sync (see kubecache).
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        max_sleep: float = 30.0,
        timeout_seconds: int = 290,
        cache: WatchCache | None = None,
    ) -> None:
        self._api_client = api_client
        self.cache = cache
        self.max_sleep = max_sleep
        self.timeout_seconds = timeout_seconds
        self._changed: set[str] = set()
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._healthy = {"nodes": False, "pods": False}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.events_seen = 0

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
        that changed since the last call, or ``None`` when a watch is not (yet) healthy."""
        self._start()
        self._event.wait(max(0.0, min(seconds, self.max_sleep)))
        with self._lock:
            changed, self._changed = self._changed, set()
            self._event.clear()
            healthy = all(self._healthy.values())
        return changed if healthy else None

    def close(self) -> None:
        """Stop the watch threads (they are daemons; this only makes the stop prompt)."""
        self._stop.set()

    # ------------------------------------------------------------------ watches
    def _start(self) -> None:
        if self._threads:
            return
        for kind, lister in (("nodes", self._core.list_node), ("pods", self._core.list_pod_for_all_namespaces)):
            t = threading.Thread(target=self._loop, args=(kind, lister), name=f"watch-{kind}", daemon=True)
            t.start()
            self._threads.append(t)

    def _mark(self, node: str | None) -> None:
        with self._lock:
            if node:
                self._changed.add(node)
            self.events_seen += 1
            self._event.set()

    def _set_health(self, kind: str, ok: bool) -> None:
        with self._lock:
            self._healthy[kind] = ok
        if self.cache is not None:
            self.cache.set_synced(kind, ok)
        if not ok:
            self._event.set()

    def _loop(self, kind: str, lister: Callable[..., Any]) -> None:
        rv = ""
        backoff = 1.0
        while not self._stop.is_set():
            try:
                if not rv:
                    listing = lister(limit=1, _preload_content=False, _request_timeout=(10, 30))
                    rv = json.loads(listing.data).get("metadata", {}).get("resourceVersion", "")
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
                try:
                    for line in _lines(resp):
                        if self._stop.is_set():
                            return
                        ev = json.loads(line)
                        obj = ev.get("object") or {}
                        if ev.get("type") == "ERROR":
                            if obj.get("code") == 410:  # too old: list again (events were lost)
                                rv = ""
                                self._set_health(kind, False)
                            break
                        rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                        if ev.get("type") == "BOOKMARK":
                            continue
                        if self.cache is not None:
                            self.cache.observe(kind, str(ev.get("type")), obj)
                        node = (obj.get("metadata") or {}).get("name") if kind == "nodes" else (
                            (obj.get("spec") or {}).get("nodeName"))
                        self._mark(node)
                finally:
                    resp.release_conn()
                backoff = 1.0
            except (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as e:
                self._set_health(kind, False)
                if isinstance(e, ApiException) and e.status == 410:
                    rv = ""
                log.info("watch %s interrupted (%s); reconnecting in %.0f s", kind, type(e).__name__, backoff)
                self._stop.wait(backoff)
                backoff = min(30.0, backoff * 2)


def _lines(resp: Any) -> Any:
    """Split a streaming HTTP body into JSON lines."""
    buf = b""
    for chunk in resp.stream(4096, decode_content=True):
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.strip():
                yield line

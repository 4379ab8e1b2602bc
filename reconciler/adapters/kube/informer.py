"""LIST once, then WATCH: the event source of ``reconciler controller`` (client-go's reflector and
informer, reduced to what the controller needs).

:class:`Informer` runs one daemon thread per resource: a paginated LIST (``limit`` +
``continue``) fills its store and reports every object as ``ADDED`` (the initial sync; after a
re-list the store is diffed so only real changes are reported: ``ADDED``/``MODIFIED``/
``DELETED``), then one WATCH from the LIST's resourceVersion with bookmarks, re-opened from the
last resourceVersion seen when the server ends it (``timeoutSeconds``). A ``410 Gone`` (the
resourceVersion is too old) or a broken stream re-lists, with a capped backoff between attempts.
There is no polling: between events nothing is requested.

The handler gets ``(event_type, old, new)`` with objects as ``convert`` made them (``old`` None
when the object was not known; ``new`` None for ``DELETED``) and is called on the informer's
thread. Watches are the client's ``kubernetes.watch.Watch`` with events as decoded JSON, as in
:mod:`reconciler.adapters.kube.watch`. The client's ``SharedInformer`` is not used: it
deserialises every object into client models and hands its handlers only the new object, where
the controller wants ``(event, old, new)`` records.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.watch import Watch as _Watch

log = logging.getLogger(__name__)

#: The client's watch (untyped).
Watch: Callable[[], Any] = _Watch

Obj = dict[str, Any]
Handler = Callable[[str, Any, Any], None]


def _key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


class Informer:
    """One resource listed and watched (module docstring).

    Args:
        name: for logs and thread names (``nodes``, ``noderecipes``, ...).
        lister: a ``kubernetes`` list call of the resource (supports ``watch``, ``limit``,
            ``_continue``, ``resource_version``, ``_preload_content``), with its positional and
            keyword arguments already bound (``functools.partial``).
        handler: called for each change (see the module docstring).
        convert: raw object → stored value (default: the dict itself).
        page_size: LIST page size. timeout_seconds: server-side timeout of each WATCH.
    """

    def __init__(self, name: str, lister: Callable[..., Any], handler: Handler, *,
                 convert: Callable[[Obj], Any] | None = None, page_size: int = 500,
                 timeout_seconds: int = 290) -> None:
        self.name, self.lister, self.handler = name, lister, handler
        self.convert = convert or (lambda o: o)
        self.page_size, self.timeout_seconds = page_size, timeout_seconds
        self.store: dict[str, Any] = {}
        self._raw_rv: dict[str, str] = {}
        self.synced = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch: Any = None
        self.lists = 0
        self.events = 0
        self.last_error = ""

    def start(self) -> Informer:
        """Start the thread (a daemon)."""
        self._thread = threading.Thread(target=self._run, name=f"informer-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ask the thread to end (it ends at the next event or when the WATCH times out)."""
        self._stop.set()
        if self._watch is not None:
            self._watch.stop()

    def alive(self) -> bool:
        """The thread is running."""
        return self._thread is not None and self._thread.is_alive()

    # ------------------------------------------------------------------ internals
    def _emit(self, event: str, obj: Obj) -> None:
        key = _key(obj)
        old = self.store.get(key)
        if event == "DELETED":
            self.store.pop(key, None)
            self._raw_rv.pop(key, None)
            new = None
        else:
            new = self.convert(obj)
            self.store[key] = new
            self._raw_rv[key] = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        self.events += 1
        try:
            self.handler(event, old, new if event != "DELETED" else None)
        except Exception:  # a handler bug must not kill the watch
            log.exception("informer %s: handler failed on %s %s", self.name, event, key)

    def _list(self) -> str:
        items: list[Obj] = []
        cont = ""
        rv = ""
        while True:
            kwargs: dict[str, Any] = {"limit": self.page_size, "_preload_content": False, "_request_timeout": (10, 60)}
            if cont:
                kwargs["_continue"] = cont
            resp = self.lister(**kwargs)
            try:
                page = json.loads(resp.data)
            finally:
                resp.release_conn()
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            rv = str(meta.get("resourceVersion") or rv)
            cont = str(meta.get("continue") or "")
            if not cont:
                break
        self.lists += 1
        seen = set()
        for obj in items:
            key = _key(obj)
            seen.add(key)
            rv_obj = str((obj.get("metadata") or {}).get("resourceVersion") or "")
            if key not in self.store:
                self._emit("ADDED", obj)
            elif self._raw_rv.get(key) != rv_obj:
                self._emit("MODIFIED", obj)
        for key in [k for k in self.store if k not in seen]:
            ns, _, name = key.partition("/")
            self._emit("DELETED", {"metadata": {"name": name, "namespace": ns or None}})
        return rv

    def _run(self) -> None:
        rv = ""
        backoff = 1.0
        while not self._stop.is_set():
            try:
                if not rv:
                    rv = self._list()
                    self.synced.set()
                w = self._watch = Watch()
                # the lister wrapped so that the watch finds no model type: events come as decoded
                # JSON, ERROR events included (its deserialize=False fails on those, client 37.0)
                for ev in w.stream(lambda **kw: self.lister(**kw), resource_version=rv, allow_watch_bookmarks=True,
                                   timeout_seconds=self.timeout_seconds,
                                   _request_timeout=(10, self.timeout_seconds + 30)):
                    if self._stop.is_set():
                        return
                    obj = ev.get("object") or {}
                    kind = str(ev.get("type"))
                    rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                    if kind == "BOOKMARK":
                        continue
                    self._emit(kind, obj)
                backoff = 1.0
            except (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as e:
                self.last_error = f"{type(e).__name__}: {getattr(e, 'status', '') or e}"
                if isinstance(e, ApiException) and e.status == 410:
                    rv = ""
                log.info("informer %s interrupted (%s); again in %.0f s", self.name, self.last_error, backoff)
                self._stop.wait(backoff)
                backoff = min(30.0, backoff * 2)


def node_informer(api_client: client.ApiClient, handler: Handler) -> Informer:
    """Nodes (stored as :class:`~reconciler.model.observed.NodeInfo`)."""
    from reconciler.adapters.kube.objects import node_from

    return Informer("nodes", client.CoreV1Api(api_client).list_node, handler, convert=node_from)


def pdb_informer(api_client: client.ApiClient, handler: Handler) -> Informer:
    """PodDisruptionBudgets of every namespace (policy/v1; raw dicts)."""
    return Informer("poddisruptionbudgets",
                    client.PolicyV1Api(api_client).list_pod_disruption_budget_for_all_namespaces, handler)


def recipe_informer(api_client: client.ApiClient, handler: Handler) -> Informer:
    """NodeRecipe objects (``reconciler.nodewright.dev/v1alpha1``, cluster-scoped; raw dicts)."""
    import functools

    lister = client.CustomObjectsApi(api_client).list_cluster_custom_object
    return Informer("noderecipes", functools.partial(lister, "reconciler.nodewright.dev", "v1alpha1", "noderecipes"),
                    handler)


def config_map_informer(api_client: client.ApiClient, namespace: str, name: str, handler: Handler) -> Informer:
    """One ConfigMap (``fieldSelector metadata.name``, so RBAC may grant list/watch on that name only)."""
    import functools

    lister = client.CoreV1Api(api_client).list_namespaced_config_map
    return Informer(f"configmap-{name}", functools.partial(lister, namespace, field_selector=f"metadata.name={name}"),
                    handler)

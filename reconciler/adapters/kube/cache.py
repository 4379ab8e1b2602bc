"""What the watch streams hold: every node and every pod of the cluster, kept current by the
streams of :class:`~reconciler.adapters.kube.watch.KubeWatch` and by the answers of our own writes,
so that reading a node, the pods on a node or a stage pod costs no request (issue 37: "reads the
watches already hold are not requests").

Why our own store and not the client's ``kubernetes.informer.SharedInformer``: that informer lists
and watches through the generated methods into client models (``V1Pod``). Measured on this
project's machine (2026-12-07, a 640-byte workload pod, loaded machine): 1.3 ms of CPU to
deserialise it into a model against 14 µs for ``json.loads`` plus
:func:`~reconciler.adapters.kube.objects.pod_from`; a 2,000-node rollout's streams carried 194,000
events (docs/benchmarks.md). It would also keep the models where we keep records, and it offers no
"track our own writes' answers" nor "pods by node". The streams themselves are the client's
(``kubernetes.watch.Watch``).

Correctness rules:

* **Never backwards.** Every entry keeps its ``metadata.resourceVersion``; an event or answer not
  newer than the entry is ignored (resource versions are comparable integers since Kubernetes 1.35,
  KEP-5504; an object whose version is not such an integer is not kept: its reads are requests).
* **Only while in sync.** A kind is served only while its stream is streaming; an error stops
  serving it until the stream is re-opened (from its last version: nothing was lost) or re-listed
  (after ``410 Gone``: the store is replaced).
* **A node's pods no older than our last write of the node.** :meth:`WatchStore.pods_on` answers
  only once the pod stream has reached the resourceVersion of our last write of the node (our
  cordon), waiting :data:`CATCH_UP` seconds at most: a pod bound to the node before the cordon is
  then certainly in the store (kube-apiserver's resource versions are one etcd revision sequence
  for nodes and pods; a cluster that stores them in different etcd clusters would make the gate
  wait, then LIST). Otherwise the caller LISTs, as before.
* **Unusable is not served.** An object that cannot be converted (a hostile field) is dropped:
  its reads are requests, and the stream goes on.
* **Absent is not gone.** An object the store does not hold (created an instant ago) is asked for;
  a stage pod whose deletion the stream reported is known gone (a tombstone, bounded).

Wake-ups: an event wakes a node only when the run takes an interest in it (:meth:`interest`, until
:meth:`forget_node`) and it changed what a reader sees (the node, beyond its resourceVersion: a
kubelet heartbeat does not; or a pod bound to it).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any

from reconciler.adapters.kube.objects import node_from, pod_from
from reconciler.adapters.kube.stagepod import COMPONENT, MANAGED_BY_LABEL
from reconciler.model.observed import NodeInfo, PodInfo

Obj = dict[str, Any]

NODES = "nodes"
PODS = "pods"
#: What converting a hostile object may raise (pydantic's ValidationError is a ValueError).
_UNUSABLE = (ValueError, TypeError, KeyError, AttributeError)
#: Seconds :meth:`WatchStore.pods_on` waits for the pod stream to reach a node's version.
CATCH_UP = 0.5


def parse_resource_version(value: object) -> int | None:
    """``metadata.resourceVersion`` as an integer, or None when it is not a well-formed positive
    integer without leading zeros (KEP-5504's comparable form)."""
    if not isinstance(value, str) or not value.isdigit() or value.startswith("0"):
        return None
    return int(value)


def same_but_version(a: Any, b: Any) -> bool:
    """Whether two records differ at most in their ``resource_version`` field."""
    if (is_dataclass(a) and is_dataclass(b) and type(a) is type(b) and not isinstance(a, type)
            and any(f.name == "resource_version" for f in fields(a))):
        return bool(replace(a, resource_version="") == replace(b, resource_version=""))  # type: ignore[type-var]
    return bool(a == b)


@dataclass(slots=True)
class _Pod:
    rv: int
    info: PodInfo
    raw: Obj | None  # kept for our own stage pods (their status is read from the raw object)


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


class WatchStore:
    """Nodes and pods as the watch streams and our answers last showed them (module docstring).

    Args:
        namespace: the reconciler's namespace; the raw objects of the stage pods there (labelled
            managed-by node-reconciler) are kept for :meth:`stage_pod`.
        max_tombstones: deleted stage pods remembered as gone (oldest forgotten first).

    Thread-safe. Reads return None when the store cannot answer (ask the API server).
    """

    def __init__(self, namespace: str, *, max_tombstones: int = 4096) -> None:
        self.namespace = namespace
        self.max_tombstones = max_tombstones
        self._nodes: dict[str, tuple[int, NodeInfo]] = {}
        self._pods: dict[tuple[str, str], _Pod] = {}
        self._on_node: dict[str, set[tuple[str, str]]] = {}
        self._gone: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._synced = {NODES: False, PODS: False}
        self._version = {NODES: 0, PODS: 0}  # the last resourceVersion each stream reached
        self._interest: set[str] = set()
        self._written: dict[str, int] = {}  # node → resourceVersion of our last write of it
        self._cond = threading.Condition()
        self.hits = 0
        self.misses = 0

    # ------------------------------------------------------------------ fed by the streams
    def replace(self, kind: str, items: list[Obj], version: int) -> None:
        """A LIST of ``kind`` at ``version`` (the stream starts from there): the store of that kind
        becomes exactly these objects, and is served from now on."""
        with self._cond:
            if kind == NODES:
                self._nodes = {}
                for obj in items:
                    self._put_node(obj)
            else:
                self._pods, self._on_node = {}, {}
                for obj in items:
                    self._put_pod(obj)
            self._version[kind] = version
            self._synced[kind] = True
            self._cond.notify_all()

    def apply(self, kind: str, event: str, obj: Obj) -> set[str]:
        """A watch event (``ADDED``/``MODIFIED``/``DELETED``/``BOOKMARK``) of ``kind``; returns
        the nodes of interest whose reads it changed (module docstring)."""
        rv = parse_resource_version(_meta(obj).get("resourceVersion"))
        with self._cond:
            if rv is not None:
                self._version[kind] = max(self._version[kind], rv)
                self._cond.notify_all()
            if event == "BOOKMARK":
                return set()
            if kind == NODES:
                name = _meta(obj).get("name")
                if not isinstance(name, str):
                    return set()
                old = self._nodes.get(name)
                if event == "DELETED":
                    if old is not None and (rv is None or rv > old[0]):
                        del self._nodes[name]
                        return {name} & self._interest
                    return set()
                new = self._put_node(obj)
                changed = new is not None and (old is None or not same_but_version(old[1], new))
                return {name} & self._interest if changed else set()
            meta = _meta(obj)
            key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            was = self._pods.get(key)
            if event == "DELETED":
                if was is None or (rv is not None and rv <= was.rv):
                    return set()
                self._drop_pod(key, rv or was.rv)
                return {was.info.node_name} & self._interest
            now = self._put_pod(obj)
            if now is None or (was is not None and same_but_version(was.info, now.info) and was.raw == now.raw):
                return set()
            return {n for n in (now.info.node_name, was.info.node_name if was else "") if n} & self._interest

    def unsynced(self, kind: str) -> None:
        """The stream of ``kind`` broke: its reads are requests until it streams again."""
        with self._cond:
            self._synced[kind] = False

    def resynced(self, kind: str) -> None:
        """The stream of ``kind`` re-opened from the last version it reached (nothing was lost)."""
        with self._cond:
            self._synced[kind] = True

    # ------------------------------------------------------------------ fed by our answers
    def put_node(self, obj: Obj, *, written: bool = False) -> NodeInfo:
        """A node the API server returned (a GET, or the answer of our write: ``written``): kept
        when newer; returned as a record either way."""
        with self._cond:
            kept = self._put_node(obj)
            rv = parse_resource_version(_meta(obj).get("resourceVersion"))
            name = _meta(obj).get("name")
            if written and rv is not None and isinstance(name, str):
                self._written[name] = max(rv, self._written.get(name, 0))
        return kept if kept is not None else node_from(obj)

    def put_pod(self, obj: Obj) -> None:
        """A pod the API server returned: kept when newer."""
        with self._cond:
            self._put_pod(obj)

    # ------------------------------------------------------------------ reads
    def node(self, name: str) -> NodeInfo | None:
        """The node, or None when the store cannot say (not in sync, not held: ask)."""
        with self._cond:
            got = self._nodes.get(name) if self._synced[NODES] else None
            self._count(got is not None)
            return got[1] if got is not None else None

    def nodes(self) -> list[NodeInfo] | None:
        """Every node, or None when not in sync."""
        with self._cond:
            self._count(self._synced[NODES])
            return [n for _, n in self._nodes.values()] if self._synced[NODES] else None

    def pods_on(self, node: str, wait: float = CATCH_UP) -> list[PodInfo] | None:
        """The pods bound to ``node``, once the pod stream reached the version of our last write
        of the node (waiting ``wait`` seconds at most); None when it cannot say (ask)."""
        with self._cond:
            need = self._written.get(node, 0)
            ok = self._cond.wait_for(lambda: self._synced[PODS] and self._version[PODS] >= need, timeout=wait)
            self._count(ok)
            if not ok:
                return None
            return sorted((self._pods[k].info for k in self._on_node.get(node, ())),
                          key=lambda p: (p.namespace, p.name))

    def pods_by_node(self) -> dict[str, tuple[PodInfo, ...]] | None:
        """Every bound pod by node, or None when not in sync."""
        with self._cond:
            self._count(self._synced[PODS])
            if not self._synced[PODS]:
                return None
            return {n: tuple(sorted((self._pods[k].info for k in keys), key=lambda p: (p.namespace, p.name)))
                    for n, keys in self._on_node.items() if keys}

    def stage_pod(self, name: str) -> tuple[bool, Obj | None]:
        """``(True, pod)`` for a stage pod held, ``(True, None)`` for one known deleted,
        ``(False, None)`` when the store cannot say (ask)."""
        key = (self.namespace, name)
        with self._cond:
            held = self._pods.get(key) if self._synced[PODS] else None
            if held is not None and held.raw is not None:
                self._count(True)
                return True, held.raw
            if self._synced[PODS] and key in self._gone and held is None:
                self._count(True)
                return True, None
            self._count(False)
            return False, None

    # ------------------------------------------------------------------ interest
    def interest(self, name: str) -> None:
        """Wake the run for changes of ``name`` and of the pods on it (until :meth:`forget_node`)."""
        with self._cond:
            self._interest.add(name)

    def forget_node(self, name: str) -> None:
        """No more wake-ups for ``name``."""
        with self._cond:
            self._interest.discard(name)
            self._written.pop(name, None)

    def __len__(self) -> int:
        with self._cond:
            return len(self._nodes) + len(self._pods)

    # ------------------------------------------------------------------ internals (lock held)
    def _count(self, hit: bool) -> None:
        if hit:
            self.hits += 1
        else:
            self.misses += 1

    def _put_node(self, obj: Obj) -> NodeInfo | None:
        meta = _meta(obj)
        name, rv = meta.get("name"), parse_resource_version(meta.get("resourceVersion"))
        if not isinstance(name, str):
            return None
        old = self._nodes.get(name)
        if rv is None:
            self._nodes.pop(name, None)  # not comparable: never served
            return None
        if old is not None and rv <= old[0]:
            return None
        try:
            info = node_from(obj)
        except _UNUSABLE:  # a hostile field: never served (its reads are requests)
            self._nodes.pop(name, None)
            return None
        self._nodes[name] = (rv, info)
        return info

    def _put_pod(self, obj: Obj) -> _Pod | None:
        meta = _meta(obj)
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        rv = parse_resource_version(meta.get("resourceVersion"))
        old = self._pods.get(key)
        if rv is None:
            if old is not None:
                self._drop_pod(key, old.rv)
                self._gone.pop(key, None)
            return None
        if (old is not None and rv <= old.rv) or rv <= self._gone.get(key, 0):
            return None
        labels = meta.get("labels")
        ours = key[0] == self.namespace and isinstance(labels, dict) and labels.get(MANAGED_BY_LABEL) == COMPONENT
        try:
            pod = _Pod(rv, pod_from(obj), obj if ours else None)
        except _UNUSABLE:  # a hostile field: never served (its reads are requests)
            if old is not None:
                self._drop_pod(key, old.rv)
            self._gone.pop(key, None)
            return None
        if old is not None and old.info.node_name != pod.info.node_name:
            self._unbind(key, old.info.node_name)
        self._pods[key] = pod
        self._gone.pop(key, None)
        if pod.info.node_name:
            self._on_node.setdefault(pod.info.node_name, set()).add(key)
        return pod

    def _drop_pod(self, key: tuple[str, str], rv: int) -> None:
        old = self._pods.pop(key, None)
        if old is not None:
            self._unbind(key, old.info.node_name)
            if old.raw is not None:  # a stage pod: remembered as gone
                self._gone[key] = rv
                while len(self._gone) > self.max_tombstones:
                    self._gone.popitem(last=False)

    def _unbind(self, key: tuple[str, str], node: str) -> None:
        keys = self._on_node.get(node)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._on_node[node]


"""A read cache of the nodes and stage pods the adapter works on, kept current by watch events.

Controllers built on client-go read from informer caches instead of GETting objects again and
again; this is the same idea restricted to the objects we *track*: a node or stage pod enters the
cache when :class:`~reconciler.adapters.kube.cluster.KubeCluster` reads or writes it, and from then on the
watch streams of :class:`~reconciler.adapters.kube.watch.WatchClock` keep it current. A read of a
tracked object costs no request.

Correctness rules:

* **Never backwards.** Every entry keeps the ``metadata.resourceVersion`` of what it holds; an
  event or response older than the entry is ignored. Resource versions of one resource are
  comparable integers since Kubernetes 1.35 (KEP-5504, ``CompareResourceVersion``: longer is
  newer, then lexicographic). An object whose resourceVersion is not such an integer is not
  cached (reads fall back to a request).
* **Track before asking.** :meth:`WatchCache.track` is called *before* the GET/PATCH/POST whose
  answer is stored, so an event processed before tracking describes a change the request already
  sees, and an event processed after it is recorded; the newer of the two wins.
* **Only while in sync.** Lookups miss while the watch of that kind is not streaming; a stream
  error forgets every entry of the kind (events may be lost until the re-list), and an answer
  stored for a key that was forgotten meanwhile is dropped (:meth:`WatchCache.store` updates
  tracked keys only).
* **Only while read.** Streams multiplexed on the rollout's thread are read only while that
  thread waits or runs its node I/O; ``fresh`` (set by the watch clock) says whether they were
  read lately, and lookups miss while it says no (a thread busy elsewhere for long, an idle
  controller between passes): reads are requests then, never an old copy.
* **Bounded.** At most ``max_entries`` keys per kind; the least recently used is forgotten (its
  next read is a request again).

What wakes the rollout: :meth:`WatchCache.observe` answers whether an event changed what a reader
of the entry sees, i.e. it was newer than what the entry held *and* differs from it beyond its
resourceVersion (``same``; e.g. a kwok heartbeat that only moves a condition's timestamps, which
``NodeInfo`` does not carry). The echo of our own write, whose answer was stored first, is not a
change. The watch clock wakes the rollout only for such changes (see kubewatch).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any

Obj = dict[str, Any]

NODES = "nodes"
PODS = "pods"


def parse_resource_version(value: object) -> int | None:
    """``metadata.resourceVersion`` as an integer, or None when it is not a well-formed positive
    integer without leading zeros (KEP-5504's comparable form)."""
    if not isinstance(value, str) or not value.isdigit() or value.startswith("0"):
        return None
    return int(value)


@dataclass(slots=True)
class _Entry:
    rv: int = 0  # 0: tracked, nothing known yet
    value: Any = None
    gone: bool = False


def key_of(kind: str, obj: Obj) -> Hashable | None:
    """The cache key of a watched or returned object: the name for nodes, (namespace, name) for pods."""
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not isinstance(name, str):
        return None
    return name if kind == NODES else (str(meta.get("namespace") or ""), name)


def same_but_version(a: Any, b: Any) -> bool:
    """Whether two stored values differ at most in their resourceVersion (and, for raw objects,
    ``metadata.managedFields``): a dict's ``metadata.resourceVersion``, a dataclass's
    ``resource_version`` field. The default ``same`` of :class:`WatchCache`."""
    if isinstance(a, dict) and isinstance(b, dict):
        ma, mb = a.get("metadata"), b.get("metadata")
        if not (isinstance(ma, dict) and isinstance(mb, dict)):
            return bool(a == b)
        if {k: v for k, v in a.items() if k != "metadata"} != {k: v for k, v in b.items() if k != "metadata"}:
            return False
        skip = ("resourceVersion", "managedFields")
        return {k: v for k, v in ma.items() if k not in skip} == {k: v for k, v in mb.items() if k not in skip}
    if (is_dataclass(a) and is_dataclass(b) and type(a) is type(b) and not isinstance(a, type)
            and any(f.name == "resource_version" for f in fields(a))):
        return bool(replace(a, resource_version="") == replace(b, resource_version=""))  # type: ignore[type-var]
    return bool(a == b)


class WatchCache:
    """Tracked nodes and pods, fed by watch events and by our own requests' answers.

    Args:
        convert: per kind, how a raw object is stored (e.g. nodes parsed to ``NodeInfo``; the
            default keeps the dict).
        same: per kind, whether two stored values look the same to a reader (then an event from
            one to the other is not reported as a change by :meth:`observe`); default
            :func:`same_but_version`.
        max_entries: keys kept per kind (least recently used forgotten first).

    Thread-safe. Lookups return ``(True, value)`` for a cached object, ``(True, None)`` for one
    known deleted, ``(False, None)`` for a miss (ask the API server).
    """

    def __init__(
        self,
        convert: dict[str, Callable[[Obj], Any]] | None = None,
        *,
        same: dict[str, Callable[[Any, Any], bool]] | None = None,
        max_entries: int = 4096,
    ) -> None:
        self._convert = dict(convert or {})
        self._same = dict(same or {})
        self.max_entries = max_entries
        self._entries: dict[str, OrderedDict[Hashable, _Entry]] = {NODES: OrderedDict(), PODS: OrderedDict()}
        self._synced: dict[str, bool] = {NODES: False, PODS: False}
        #: node name → keys of the pods held bound to it (a superset: an entry forgotten since may
        #: still be listed), so :meth:`forget_node` need not scan every pod entry
        self._pods_of: dict[str, set[Hashable]] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        #: None, or whether the watch streams are being read now (multiplexed streams are read
        #: only while their thread waits: see kubewatch); lookups miss while it answers False
        self.fresh: Callable[[], bool] | None = None

    # ------------------------------------------------------------------ fed by the watches
    def set_synced(self, kind: str, synced: bool) -> None:
        """The watch of ``kind`` is streaming (True) or broken (False: every entry is forgotten,
        since events may be lost until the stream is re-established)."""
        with self._lock:
            self._synced[kind] = synced
            if not synced:
                self._entries[kind].clear()
                if kind == PODS:
                    self._pods_of.clear()

    def observe(self, kind: str, event_type: str, obj: Obj) -> bool:
        """A watch event (``ADDED``/``MODIFIED``/``DELETED``) of ``kind``; ignored unless tracked.
        Returns True when it changed what a reader of the entry sees (newer than the entry, and
        not ``same`` as what it held, or deleted/re-created); False for an untracked object, an
        event no newer than the entry (e.g. the echo of our own write) or one that only moved the
        resourceVersion."""
        key = key_of(kind, obj)
        if key is None:
            return False
        with self._lock:
            if key not in self._entries[kind]:
                return False
        return self._merge(kind, key, obj, gone=event_type == "DELETED")[1]

    def tracks_any(self, kind: str, keys: Iterable[Hashable]) -> bool:
        """Whether any of ``keys`` is tracked (a cheap test before decoding an event fully)."""
        with self._lock:
            entries = self._entries[kind]
            return any(k in entries for k in keys)

    # ------------------------------------------------------------------ used by the adapter
    def track(self, kind: str, key: Hashable) -> None:
        """Start recording events of ``key`` (call before the request whose answer is stored)."""
        with self._lock:
            entries = self._entries[kind]
            if key in entries:
                entries.move_to_end(key)
                return
            entries[key] = _Entry()
            while len(entries) > self.max_entries:
                entries.popitem(last=False)

    def store(self, kind: str, obj: Obj, *, gone: bool = False) -> Any:
        """An answer of the API server about a tracked object (a GET, or the object a write
        returned; ``gone``: the object was deleted). Kept if newer than what the entry holds.
        Returns the converted object when it was kept (so the caller need not convert it again),
        else None."""
        key = key_of(kind, obj)
        return None if key is None else self._merge(kind, key, obj, gone=gone)[0]

    def lookup(self, kind: str, key: Hashable) -> tuple[bool, Any]:
        """``(True, value)`` when cached, ``(True, None)`` when known deleted, ``(False, None)``
        on a miss (untracked, nothing known yet, or the watch is not streaming)."""
        with self._lock:
            entry = self._entries[kind].get(key)
            stale = self.fresh is not None and not self.fresh()
            if not self._synced[kind] or entry is None or entry.rv == 0 or stale:
                self.misses += 1
                return False, None
            self._entries[kind].move_to_end(key)
            self.hits += 1
            return True, (None if entry.gone else entry.value)

    def forget(self, kind: str, key: Hashable) -> None:
        """Stop tracking ``key`` (its next read is a request)."""
        with self._lock:
            self._entries[kind].pop(key, None)

    def forget_node(self, name: str) -> None:
        """Stop tracking the node ``name`` and every tracked pod known to be bound to it
        (``spec.nodeName``, for the raw pods this cache holds): when a node's lifecycle has ended,
        the watch events of the node, of its stage pods and of the pods that run on it are
        skipped undecoded from then on (issue 17), and a later read of them is a request again."""
        with self._lock:
            self._entries[NODES].pop(name, None)
            pods = self._entries[PODS]
            for key in self._pods_of.pop(name, ()):
                entry = pods.get(key)
                if entry is not None and _bound_to(entry.value) == name:
                    del pods[key]

    def __len__(self) -> int:
        with self._lock:
            return sum(len(e) for e in self._entries.values())

    # ------------------------------------------------------------------ internals
    def _merge(self, kind: str, key: Hashable, obj: Obj, *, gone: bool) -> tuple[Any, bool]:
        """Keep ``obj`` in the entry of ``key`` if newer; (the converted value kept or None,
        whether a reader sees a change)."""
        rv = parse_resource_version((obj.get("metadata") or {}).get("resourceVersion"))
        if rv is not None:
            with self._lock:  # a first look: an object no newer than the entry (the echo of our own
                # write, whose answer is stored already) is dropped without being converted
                entry = self._entries[kind].get(key)
                if entry is None or rv <= entry.rv:
                    return None, False
        value = None if gone or rv is None else self._convert.get(kind, _identity)(obj)
        with self._lock:
            entries = self._entries[kind]
            entry = entries.get(key)
            if entry is None:
                return None, False  # not tracked (or forgotten after a stream error): not ours to keep
            if rv is None:
                del entries[key]  # not comparable: never served from the cache
                return None, True
            if rv <= entry.rv:
                return None, False  # no newer than what we hold
            old_rv, old_value, old_gone = entry.rv, entry.value, entry.gone
            entry.rv, entry.value, entry.gone = rv, value, gone
            if kind == PODS and (bound := _bound_to(value)) is not None:
                self._pods_of.setdefault(bound, set()).add(key)
        changed = (old_rv == 0 or gone != old_gone
                   or (not gone and not self._same.get(kind, same_but_version)(old_value, value)))
        return value, changed


def _identity(obj: Obj) -> Obj:
    return obj


def _bound_to(value: Any) -> str | None:
    """``spec.nodeName`` of a raw pod held by the cache (None for anything else)."""
    spec = value.get("spec") if isinstance(value, dict) else None
    node = spec.get("nodeName") if isinstance(spec, dict) else None
    return node if isinstance(node, str) else None

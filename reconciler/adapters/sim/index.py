"""Indexes of the simulated fleet (:mod:`reconciler.adapters.sim.fleet`): what its disruption controller,
scheduler and reads look up, kept up to date as objects change, so no operation scans the fleet.

* nodes parsed once per resourceVersion (:meth:`FleetIndex.node`), pods once per change
  (:meth:`FleetIndex.pod`);
* pods by node (``spec.nodeName``);
* per PodDisruptionBudget: its spec parsed once, the pods it selects, how many of them are
  healthy (Ready and not terminating) and the controllers they belong to, so a PDB's status is
  computed in time proportional to its number of controllers, not to the fleet
  (:meth:`FleetIndex.pdb_info`, rules in :func:`reconciler.model.disruption.budget_status`);
* the scheduler's choice (:meth:`FleetIndex.pick_node`): the schedulable node with the fewest
  pods (ties by name) whose taints the pod tolerates, from a heap with lazy deletion.

The fleet calls :meth:`add_pod` / :meth:`remove_pod` / :meth:`pod_changed` / :meth:`node_changed`
after every change it makes; the raw objects stay the fleet's (the index holds keys and counts).
"""

from __future__ import annotations

import heapq
from collections import Counter, OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from reconciler.adapters.kube.objects import node_from, pdb_from, pod_from
from reconciler.model.disruption import budget_status
from reconciler.model.observed import NodeInfo, PdbInfo, PodInfo
from reconciler.model.selector import Toleration

Obj = dict[str, Any]
Key = tuple[str, str]
#: A controller of pods: (namespace, kind, uid or name).
CtrlKey = tuple[str, str, str]


def pod_healthy(pod: Obj) -> bool:
    """Counted healthy by the disruption controller: not terminating and Ready
    (``countHealthyPods``: no deletionTimestamp, ``IsPodReady``)."""
    if pod["metadata"].get("deletionTimestamp"):
        return False
    status = pod.get("status")
    for c in (status.get("conditions") if status else None) or ():
        if c.get("type") == "Ready" and c.get("status") == "True":
            return True
    return False


def pod_finished(pod: Obj) -> bool:
    """Phase Succeeded or Failed."""
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def controller_of(pod: Obj) -> CtrlKey | None:
    """The pod's controller ownerReference as a key, or None."""
    meta = pod["metadata"]
    for o in meta.get("ownerReferences") or ():
        if o.get("controller"):
            return (meta.get("namespace") or "default", str(o.get("kind", "")), str(o.get("uid") or o.get("name", "")))
    return None


def _node_name(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


#: Parsed nodes :meth:`FleetIndex.node` keeps (a NodeInfo is about 1.3 KB): the nodes a rollout
#: works on and the scheduler's candidates, not every node of a large fleet (issue 13).
NODE_CACHE_SIZE = 1024


class _Budget:
    """One PDB's parsed spec and the running counts over the pods it selects."""

    __slots__ = ("ctrls", "healthy", "info", "pods")

    def __init__(self, info: PdbInfo) -> None:
        self.info = info
        self.pods: set[Key] = set()
        self.healthy = 0
        self.ctrls: Counter[CtrlKey] = Counter()

    def selects(self, namespace: str, labels: dict[str, str]) -> bool:
        sel = self.info.selector
        return sel is not None and namespace == self.info.namespace and sel.matches(labels)


class FleetIndex:
    """See the module docstring. ``nodes``/``pods`` are the fleet's own dicts (read, never written).

    ``scale``: replicas per controller, as the disruption controller reads them from the
    ReplicaSet/StatefulSet; the simulated fleet has no controller objects, so it is the number of
    pods (not Succeeded/Failed) each controller had when the fleet was loaded — the simulated
    controllers re-create every pod they lose, so that number holds for the whole run.
    """

    def __init__(self, nodes: dict[str, Obj], pods: dict[Key, Obj], pdbs: dict[Key, Obj]) -> None:
        self._nodes, self._pods = nodes, pods
        # ordered: the oldest entry leaves in O(1) (``popitem(last=False)``; on a plain dict
        # ``next(iter(d))`` walks the slots freed by earlier deletions at the front)
        self._node_cache: OrderedDict[str, tuple[Any, NodeInfo]] = OrderedDict()
        self._pod_cache: dict[Key, PodInfo] = {}
        self.pods_on: dict[str, set[Key]] = {}
        self._healthy: set[Key] = set()
        self.scale: Counter[CtrlKey] = Counter()
        self._budgets: dict[Key, _Budget] = {k: _Budget(pdb_from(pdbs[k])) for k in sorted(pdbs)}
        self._by_ns: dict[str, list[Key]] = {}
        for k in self._budgets:
            self._by_ns.setdefault(k[0], []).append(k)
        self._heap: list[tuple[int, str]] = []
        for key, pod in pods.items():
            ctrl = controller_of(pod)
            if ctrl is not None and not pod_finished(pod):
                self.scale[ctrl] += 1
            self._index_pod(key, pod, False, ctrl, True)
        self._heap = [(len(self.pods_on.get(n, ())), n) for n in nodes]
        heapq.heapify(self._heap)

    # ------------------------------------------------------------------ nodes
    def node(self, name: str) -> NodeInfo:
        """The node's NodeInfo, parsed again only when its resourceVersion changed (or when it
        left the cache: at most :data:`NODE_CACHE_SIZE` nodes are kept, the oldest dropped first).

        Raises:
            KeyError: no such node.
        """
        raw = self._nodes[name]
        rv = raw["metadata"].get("resourceVersion")
        hit = self._node_cache.get(name)
        if hit is not None and hit[0] == rv:
            return hit[1]
        info = node_from(raw)
        cache = self._node_cache
        if hit is None and len(cache) >= NODE_CACHE_SIZE:
            cache.popitem(last=False)  # the oldest entry: the cache holds the nodes in work, not the fleet
        cache[name] = (rv, info)
        return info

    def node_changed(self, name: str) -> None:
        """After any change to node ``name`` (or its removal)."""
        self._node_cache.pop(name, None)
        if name in self._nodes:
            self._push(len(self.pods_on.get(name, ())), name)

    def _push(self, load: int, name: str) -> None:
        """A scheduler heap entry for ``name`` at ``load`` pods. Entries are superseded, not
        removed (:meth:`pick_node` drops stale ones as it meets them), so a node written many
        times between two picks has many; past twice the fleet the heap is rebuilt from the
        current loads (amortised O(1) per push; it grew by every node write of a run before)."""
        heap = self._heap
        heapq.heappush(heap, (load, name))
        if len(heap) > 2 * len(self._nodes) + 1024:
            self._heap = [(len(self.pods_on.get(n, ())), n) for n in self._nodes]
            heapq.heapify(self._heap)

    def _schedulable(self, name: str) -> bool:
        if name not in self._nodes:
            return False
        info = self.node(name)
        return not info.unschedulable and info.ready is not False

    def pick_node(self, tolerations: Iterable[Toleration]) -> str | None:
        """The node the simulated scheduler binds a new pod to: schedulable (not cordoned, Ready
        not False), every taint but PreferNoSchedule tolerated, fewest pods bound, then by name;
        None when no node fits."""
        tols = tuple(tolerations)
        aside: list[tuple[int, str]] = []
        found: str | None = None
        while self._heap:
            load, name = heapq.heappop(self._heap)
            if not self._schedulable(name) or len(self.pods_on.get(name, ())) != load:
                continue  # stale: a newer entry exists for a node that still counts
            info = self.node(name)
            aside.append((load, name))
            if all(t.effect == "PreferNoSchedule" or any(tol.tolerates(t) for tol in tols) for t in info.taints):
                found = name
                break
        for entry in aside:
            heapq.heappush(self._heap, entry)
        return found

    # ------------------------------------------------------------------ pods
    def pod(self, key: Key) -> PodInfo:
        """The pod's PodInfo, parsed again only after :meth:`pod_changed` (or re-adding).

        Raises:
            KeyError: no such pod.
        """
        info = self._pod_cache.get(key)
        if info is None:
            info = self._pod_cache[key] = pod_from(self._pods[key])
        return info

    def add_pod(self, key: Key, pod: Obj, *, schedule: bool = True) -> None:
        """Index a pod just stored in the fleet."""
        self._index_pod(key, pod, schedule, None, False)

    def _index_pod(self, key: Key, pod: Obj, schedule: bool, ctrl: CtrlKey | None, known: bool) -> None:
        """:meth:`add_pod`; ``ctrl`` is the pod's :func:`controller_of` when ``known``."""
        self._pod_cache.pop(key, None)
        node = _node_name(pod)
        if node:
            self.pods_on.setdefault(node, set()).add(key)
            if schedule:
                self._push(len(self.pods_on[node]), node)
        meta = pod["metadata"]
        ns, labels = meta.get("namespace") or "default", meta.get("labels") or {}
        healthy = pod_healthy(pod)
        if healthy:
            self._healthy.add(key)
        budgets = self._by_ns.get(ns)
        if not budgets:
            return
        if not known:
            ctrl = controller_of(pod)
        for bk in budgets:
            b = self._budgets[bk]
            if b.selects(ns, labels):
                b.pods.add(key)
                b.healthy += healthy
                if ctrl is not None:
                    b.ctrls[ctrl] += 1

    def remove_pod(self, key: Key, pod: Obj) -> None:
        """Unindex a pod just removed from the fleet."""
        self._pod_cache.pop(key, None)
        node = _node_name(pod)
        on = self.pods_on.get(node)
        if on is not None:
            on.discard(key)
            if not on:
                del self.pods_on[node]
            self._push(len(on), node)
        healthy = key in self._healthy
        self._healthy.discard(key)
        ctrl = controller_of(pod)
        for bk in self._by_ns.get(pod["metadata"].get("namespace") or "default", ()):
            b = self._budgets[bk]
            if key in b.pods:
                b.pods.discard(key)
                b.healthy -= healthy
                if ctrl is not None:
                    b.ctrls[ctrl] -= 1
                    if b.ctrls[ctrl] <= 0:
                        del b.ctrls[ctrl]

    def pod_changed(self, key: Key, pod: Obj) -> None:
        """After any change of the pod's status, annotations or deletionTimestamp (not its labels
        or node)."""
        self._pod_cache.pop(key, None)
        now = pod_healthy(pod)
        if now == (key in self._healthy):
            return
        if now:
            self._healthy.add(key)
        else:
            self._healthy.discard(key)
        for bk in self._by_ns.get(pod["metadata"].get("namespace") or "default", ()):
            b = self._budgets[bk]
            if key in b.pods:
                b.healthy += 1 if now else -1

    def pods_of_node(self, node: str) -> list[Key]:
        """Keys of the pods bound to ``node``, sorted."""
        return sorted(self.pods_on.get(node, ()))

    # ------------------------------------------------------------------ PDBs
    def pdbs_selecting(self, key: Key) -> list[Key]:
        """Keys of the PDBs selecting the pod ``key`` (sorted)."""
        return [bk for bk in self._by_ns.get(key[0], ()) if key in self._budgets[bk].pods]

    def pdb_added(self, key: Key, pdb: Obj) -> None:
        """After a PDB ``key`` was stored in the fleet: count the pods it selects."""
        b = _Budget(pdb_from(pdb))
        self._budgets[key] = b
        self._by_ns.setdefault(key[0], []).append(key)
        for pk, pod in self._pods.items():
            meta = pod["metadata"]
            if b.selects(meta.get("namespace") or "default", meta.get("labels") or {}):
                b.pods.add(pk)
                b.healthy += pk in self._healthy
                ctrl = controller_of(pod)
                if ctrl is not None:
                    b.ctrls[ctrl] += 1

    def pdb_changed(self, key: Key, pdb: Obj) -> None:
        """After a change to the spec (not the selector) of the PDB ``key``: parse it again."""
        self._budgets[key].info = pdb_from(pdb)

    def pdb_info(self, key: Key) -> PdbInfo:
        """The PDB with its status as the disruption controller computes it now
        (:func:`reconciler.model.disruption.budget_status`)."""
        b = self._budgets[key]
        st = budget_status(b.info.min_available, b.info.max_unavailable, pods=len(b.pods),
                           scale=sum(self.scale.get(c, n) for c, n in b.ctrls.items()), healthy=b.healthy)
        return replace(b.info, disruptions_allowed=st.disruptions_allowed, current_healthy=st.current_healthy,
                       desired_healthy=st.desired_healthy, expected_pods=st.expected_pods)


class NodePods(Mapping[str, tuple[PodInfo, ...]]):
    """``ObservedFleet.pods_by_node`` over a :class:`FleetIndex` whose fleet nothing changes (a
    read-only simulated fleet): node name → its pods sorted by namespace/name, each node's
    converted (:meth:`FleetIndex.pod`) when first read and kept. The same keys and values as
    :func:`reconciler.model.observed.group_pods` of every pod."""

    def __init__(self, index: FleetIndex) -> None:
        self._index = index
        self._read: dict[str, tuple[PodInfo, ...]] = {}

    def __getitem__(self, node: str) -> tuple[PodInfo, ...]:
        got = self._read.get(node)
        if got is None:
            if node not in self._index.pods_on:
                raise KeyError(node)  # no pod is bound to it
            got = self._read[node] = tuple(self._index.pod(k) for k in self._index.pods_of_node(node))
        return got

    def __iter__(self) -> Iterator[str]:
        return iter(self._index.pods_on)

    def __len__(self) -> int:
        return len(self._index.pods_on)

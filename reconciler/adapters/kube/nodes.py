"""The node role (``NodePort``) and node Events (``EventSink``) on a real API server.

Reads come from the :class:`~reconciler.adapters.kube.cache.WatchStore` when it holds the node (no
request), else from the API server; every write's answer is kept in the store, so a read after our
own write never sees the node before it. Writes are JSON merge patches (RFC 7386) with field manager
``node-reconciler``; ``dry_run`` sends them with ``dryRun=All`` (``--dry-run=server``).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from reconciler.adapters.kube.api import KubeApi, q
from reconciler.adapters.kube.cache import WatchStore
from reconciler.adapters.kube.objects import node_from
from reconciler.adapters.kube.stagepod import COMPONENT
from reconciler.errors import ClusterError, ConflictError, NotFoundError
from reconciler.model.observed import NodeInfo
from reconciler.model.selector import Taint

Obj = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"


def rfc3339(epoch: float) -> str:
    """metav1.Time text (RFC 3339, seconds, UTC)."""
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class KubeNodes:
    """``NodePort`` (+ ``NodeInterest``) over ``api``, reading from ``store`` when it can.

    ``dry_run`` is asked before each write (True: ``dryRun=All``). Raises ClusterError subclasses."""

    def __init__(self, api: KubeApi, store: WatchStore | None = None, *,
                 dry_run: Callable[[], bool] = lambda: False) -> None:
        self.api, self.store, self._dry_run = api, store, dry_run

    def list_nodes(self, label_selector: str | None = None, *, unschedulable_only: bool = False) -> list[NodeInfo]:
        """All nodes (from the store when in sync, else one paginated LIST), optionally filtered by a
        label selector string (passed to the server; never served from the store); with
        ``unschedulable_only`` the cordoned ones only (field selector ``spec.unschedulable=true``)."""
        held = self.store.nodes() if self.store is not None and label_selector is None else None
        if held is not None:
            return [n for n in held if n.unschedulable] if unschedulable_only else held
        query = [("labelSelector", label_selector)] if label_selector else []
        if unschedulable_only:
            query.append(("fieldSelector", "spec.unschedulable=true"))
        return self.api.list_all("/api/v1/nodes", "list unschedulable nodes" if unschedulable_only else "list nodes",
                             node_from, query=query)

    def get_node(self, name: str) -> NodeInfo:
        """One node as the watch stream or our last write last showed it (from the store when it
        holds it, else one GET); the run takes an interest in it. Raises NotFoundError."""
        if self.store is not None:
            self.store.interest(name)
            held = self.store.node(name)
            if held is not None:
                return held
        return self._answer(self.api.json("GET", f"/api/v1/nodes/{q(name)}", f"get node {name}"))

    def forget_node(self, name: str) -> None:
        """``NodeInterest``: no more wake-ups for the node; no request."""
        if self.store is not None:
            self.store.forget_node(name)

    def _answer(self, obj: Obj, *, written: bool = False) -> NodeInfo:
        if not obj:
            raise NotFoundError("node answer was empty", 404, "NotFound")
        return self.store.put_node(obj, written=written) if self.store is not None else node_from(obj)

    def patch_node(self, name: str, *, annotations: Mapping[str, str | None] | None = None,
                   labels: Mapping[str, str | None] | None = None, unschedulable: bool | None = None,
                   taints: tuple[Taint, ...] | None = None, resource_version: str | None = None,
                   uid: str | None = None) -> NodeInfo:
        """One JSON merge patch of the node: annotations/labels merged (None deletes the key),
        ``spec.unschedulable`` set, ``spec.taints`` replaced as a whole (pass every taint the node
        should keep; written without ``timeAdded``). With ``resource_version`` the body carries
        ``metadata.resourceVersion``, which the API server enforces (409 → ConflictError). With
        ``uid`` the body carries ``metadata.uid``: the API server refuses a patch that would change
        an object's UID (422 "field is immutable"), so the write never lands on another machine
        registered under the same name; that refusal is raised as ConflictError (reason
        ``UIDPrecondition``). Returns the node as written; with nothing to change it only reads
        the node."""
        meta: Obj = {}
        if annotations:
            meta["annotations"] = dict(annotations)
        if labels:
            meta["labels"] = dict(labels)
        spec: Obj = {}
        if unschedulable is not None:
            spec["unschedulable"] = unschedulable
        if taints is not None:
            spec["taints"] = [{"key": t.key, "effect": t.effect, **({"value": t.value} if t.value else {})}
                              for t in taints]
        if not meta and not spec:
            return self.get_node(name)
        if resource_version:
            meta["resourceVersion"] = resource_version
        if uid:
            meta["uid"] = uid
        body = {k: v for k, v in (("metadata", meta), ("spec", spec)) if v}
        if self.store is not None:
            self.store.interest(name)
        query: list[tuple[str, Any]] = [("fieldManager", COMPONENT), *((("dryRun", "All"),) if self._dry_run() else ())]
        try:
            answer = self.api.json("PATCH", f"/api/v1/nodes/{q(name)}", f"patch node {name}", query=query, body=body,
                                   content_type=MERGE_PATCH)
        except ClusterError as e:
            if uid and e.status == 422 and "metadata.uid" in str(e):
                raise ConflictError(f"node {name} is another object now (UID precondition {uid} failed)", 409,
                                    reason="UIDPrecondition") from None
            raise
        return self._answer(answer, written=not self._dry_run())

    def set_node_condition(self, name: str, type_: str, status: str, reason: str, message: str) -> None:
        """Add or replace (by type) one ``status.conditions`` entry with a strategic-merge patch of
        ``nodes/status``: one read (to keep ``lastTransitionTime`` when the status is unchanged)
        and one write. Raises NotFoundError when the node is gone."""
        path = f"/api/v1/nodes/{q(name)}/status"
        node = self.api.json("GET", path, f"get node {name}")
        now = rfc3339(time.time())
        transition = now
        for c in (node.get("status") or {}).get("conditions") or ():
            if c.get("type") == type_ and c.get("status") == status and c.get("lastTransitionTime"):
                transition = c["lastTransitionTime"]
        cond = {"type": type_, "status": status, "reason": reason, "message": message[:1024],
                "lastHeartbeatTime": now, "lastTransitionTime": transition}
        self._answer(self.api.json("PATCH", path, f"set condition {type_} on node {name}",
                                   query=[("fieldManager", COMPONENT)], body={"status": {"conditions": [cond]}},
                                   content_type=STRATEGIC_PATCH))

    def remove_node_conditions(self, name: str, types: Sequence[str]) -> None:
        """Remove the ``status.conditions`` entries of ``types``: one strategic-merge patch of
        ``nodes/status`` with a ``$patch: delete`` per type (conditions merge by ``type``; an absent
        one is no error). Raises NotFoundError when the node is gone."""
        body = {"status": {"conditions": [{"type": t, "$patch": "delete"} for t in types]}}
        self._answer(self.api.json("PATCH", f"/api/v1/nodes/{q(name)}/status",
                                   f"remove conditions {', '.join(types)} of node {name}",
                                   query=[("fieldManager", COMPONENT)], body=body, content_type=STRATEGIC_PATCH))


class KubeEvents:
    """``EventSink``: core/v1 Events about nodes in namespace ``default`` with involvedObject
    ``{kind: Node, name, uid: <name>}`` (the kubelet's and ``kubectl describe node``'s convention),
    ``source.component`` and ``reportingComponent`` ``node-reconciler``."""

    def __init__(self, api: KubeApi) -> None:
        self.api = api
        self.instance = f"{socket.gethostname()}-{os.getpid()}"

    def emit_event(self, node: str, reason: str, message: str, type_: str = "Normal") -> None:
        """One write: the Event. Raises ClusterError."""
        now = rfc3339(time.time())
        event = {
            # kubelet-style unique name <node>.<hex nanoseconds>, plus 4 random hex (parallel threads)
            "metadata": {"name": f"{node[:200]}.{time.time_ns():x}{os.urandom(2).hex()}", "namespace": "default"},
            "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node},
            "reason": reason, "message": message[:1024], "type": type_, "count": 1,
            "firstTimestamp": now, "lastTimestamp": now, "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT, "reportingInstance": self.instance[:128],
        }
        self.api.send("POST", "/api/v1/namespaces/default/events", f"create event {reason} on node {node}",
                      body=event, content_type="application/json")

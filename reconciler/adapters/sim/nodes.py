"""The simulated fleet's nodes (:mod:`reconciler.adapters.sim.fleet`): reads, patches with
resourceVersion preconditions, conditions, events, and the test helpers that change a node
directly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.adapters.kube.objects import format_time
from reconciler.adapters.sim.core import SimCore
from reconciler.errors import ConflictError, NotFoundError
from reconciler.model.nodestate import validate_key
from reconciler.model.observed import NodeInfo
from reconciler.model.selector import Taint

#: The prefix of a readiness gate's request annotation (``validate_<recipe>``).
GATE_REQUEST = validate_key("")


class SimNodes(SimCore):
    """Nodes and events of the simulated fleet (part of ``SimFleet``)."""

    def list_nodes(self, *, unschedulable_only: bool = False) -> list[NodeInfo]:
        """All nodes (by name); with ``unschedulable_only`` the cordoned ones only."""
        nodes = [self._index.node(k) for k in sorted(self.nodes)]
        return [n for n in nodes if n.unschedulable] if unschedulable_only else nodes

    def get_node(self, name: str) -> NodeInfo:
        """One node. Raises NotFoundError."""
        if name not in self.nodes:
            raise NotFoundError(f"node {name} not found", 404)
        return self._index.node(name)

    def patch_node(
        self,
        name: str,
        *,
        annotations: Mapping[str, str | None] | None = None,
        labels: Mapping[str, str | None] | None = None,
        unschedulable: bool | None = None,
        taints: tuple[Taint, ...] | None = None,
        resource_version: str | None = None,
        uid: str | None = None,
    ) -> NodeInfo:
        """One write: merge annotations/labels (None removes), set unschedulable and/or taints;
        ``resource_version`` and ``uid`` are preconditions (ConflictError)."""
        if name not in self.nodes:
            raise NotFoundError(f"node {name} not found", 404)
        node = self.nodes[name]
        meta = node["metadata"]
        if uid is not None and meta.get("uid") != uid:
            raise ConflictError(f"node {name} is another object now (UID precondition {uid} failed; it is "
                                f"{meta.get('uid')})", 409, reason="UIDPrecondition")
        if resource_version is not None and str(meta.get("resourceVersion", "")) != resource_version:
            raise ConflictError(f"node {name} was modified (resourceVersion {resource_version} is stale)", 409)
        self._write("patch", f"node/{name}")
        for field, patch in (("annotations", annotations), ("labels", labels)):
            if patch:
                cur = meta.setdefault(field, {}) or {}
                meta[field] = cur
                for k, v in patch.items():
                    if v is None:
                        cur.pop(k, None)
                    else:
                        cur[k] = v
        spec = node.setdefault("spec", {})
        if unschedulable is not None:
            if unschedulable:
                spec["unschedulable"] = True
            else:
                spec.pop("unschedulable", None)
        if taints is not None:
            spec["taints"] = [
                {k: v for k, v in (("key", t.key), ("value", t.value), ("effect", t.effect)) if v} for t in taints
            ]
            if not spec["taints"]:
                del spec["taints"]
        self._bump(node)
        self._index.node_changed(name)
        info = self._index.node(name)
        if annotations and any(v is not None and k.startswith(GATE_REQUEST) for k, v in annotations.items()):
            self._at(self._now, lambda: self._answer_gate_requests(name))  # the validator reads it (async)
        self._after_write()
        return info

    def remove_node_conditions(self, name: str, types: Sequence[str]) -> None:
        """One write: remove the node conditions of ``types``."""
        if name not in self.nodes:
            raise NotFoundError(f"node {name} not found", 404)
        self._write("patch-status", f"node/{name}")
        status = self.nodes[name].setdefault("status", {})
        status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") not in set(types)]
        self._bump(self.nodes[name])
        self._index.node_changed(name)
        self._after_write()

    def set_node_condition(self, name: str, type_: str, status: str, reason: str, message: str) -> None:
        """One write: add or replace a node condition by type."""
        if name not in self.nodes:
            raise NotFoundError(f"node {name} not found", 404)
        self._write("patch-status", f"node/{name}")
        conds = self.nodes[name].setdefault("status", {}).setdefault("conditions", [])
        ts = format_time(self.wall())
        new = {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": ts,
            "lastHeartbeatTime": ts,
        }
        for i, c in enumerate(conds):
            if c.get("type") == type_:
                if c.get("status") == status:
                    new["lastTransitionTime"] = c.get("lastTransitionTime", ts)
                conds[i] = new
                break
        else:
            conds.append(new)
        self._bump(self.nodes[name])
        self._index.node_changed(name)
        self._after_write()

    def emit_event(self, node: str, reason: str, message: str, type_: str = "Normal") -> None:
        """One write: record an Event on the node."""
        self._write("create-event", f"node/{node}")
        self.events.append({"node": node, "reason": reason, "message": message, "type": type_, "t": self._now})
        self._after_write()

    def set_node(self, name: str, **changes: Any) -> None:
        """Test helper (not a write): change a node directly, e.g. ``labels={...}``, ``ready=False``,
        ``taints=[{"key": ..., "value": ..., "effect": ...}]`` (replaces the list) or
        ``conditions={"example.com/Validated": "True"}`` (sets each condition's status by type, as an
        external validator would; ``None`` removes it)."""
        n = self.nodes[name]
        if "labels" in changes:
            n["metadata"]["labels"] = dict(changes["labels"])
        if "unschedulable" in changes:
            n.setdefault("spec", {})["unschedulable"] = bool(changes["unschedulable"])
        if "ready" in changes:
            self._set_ready(n, bool(changes["ready"]), "Test", "set by test")
        if "taints" in changes:
            n.setdefault("spec", {})["taints"] = [dict(t) for t in changes["taints"]]
        for type_, status in dict(changes.get("conditions") or {}).items():
            self._set_condition(n, type_, status, "Validator", "set by test")
        self._bump(n)
        self._index.node_changed(name)

    def delete_node(self, name: str) -> None:
        """Test helper (not a write): the node disappears (scale-in)."""
        self.nodes.pop(name, None)
        self._index.node_changed(name)

"""Changes as data: what an operations verb will write, shown exactly by ``--dry-run``, then written
one request per object.

A :class:`NodePatch` is the JSON merge patch ``Cluster.patch_node`` sends (``metadata.annotations``
/ ``metadata.labels`` with ``null`` removing a key, ``spec.unschedulable``, and
``metadata.resourceVersion`` making the write conditional). :func:`write_node_patches` writes
them; when a node changed between the read and the write (409) it re-reads the node, recomputes
the patch with the same function and retries, so a concurrent change is never overwritten.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.errors import ConflictError, InputError, NotFoundError, shown
from reconciler.model.observed import NodeInfo
from reconciler.ports import ConfigMapStore, NodePort

#: Conditional writes retried after a 409 before giving up.
CONFLICT_ATTEMPTS = 4


@dataclass(frozen=True)
class NodePatch:
    """One write to one node. ``summary`` says in words what it does; ``warnings`` what the
    operator should know before confirming (e.g. a lifecycle still in flight)."""

    node: str
    annotations: Mapping[str, str | None] = field(default_factory=dict)
    labels: Mapping[str, str | None] = field(default_factory=dict)
    unschedulable: bool | None = None
    resource_version: str = ""
    summary: str = ""
    warnings: tuple[str, ...] = ()
    #: node status conditions removed after the patch (``reset``: the recipe's own conditions)
    remove_conditions: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        """True when the patch changes nothing."""
        return (not self.annotations and not self.labels and self.unschedulable is None
                and not self.remove_conditions)

    def body(self) -> dict[str, Any]:
        """The JSON merge patch body (as the kube adapter sends it)."""
        meta: dict[str, Any] = {}
        if self.annotations:
            meta["annotations"] = {k: self.annotations[k] for k in sorted(self.annotations)}
        if self.labels:
            meta["labels"] = {k: self.labels[k] for k in sorted(self.labels)}
        if self.resource_version:
            meta["resourceVersion"] = self.resource_version
        out: dict[str, Any] = {}
        if meta:
            out["metadata"] = meta
        if self.unschedulable is not None:
            out["spec"] = {"unschedulable": self.unschedulable}
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{kind, name, summary, patch, warnings}``."""
        out = {"kind": "Node", "name": self.node, "summary": self.summary, "patch": self.body(),
               "warnings": list(self.warnings)}
        if self.remove_conditions:
            out["removeConditions"] = list(self.remove_conditions)
        return out

    def describe(self) -> str:
        """One line: ``PATCH node/<name> <compact JSON body>`` (and the conditions removed)."""
        line = f"PATCH node/{self.node} {json.dumps(self.body(), sort_keys=True, separators=(',', ':'))}"
        if self.remove_conditions:
            line += f"; PATCH node/{self.node}/status remove conditions {', '.join(self.remove_conditions)}"
        return line


@dataclass(frozen=True)
class ConfigMapPatch:
    """One merge patch of a ConfigMap's ``data`` (None removes a key; created when absent)."""

    namespace: str
    name: str
    data: Mapping[str, str | None]
    summary: str = ""

    def body(self) -> dict[str, Any]:
        """The JSON merge patch body."""
        return {"data": {k: self.data[k] for k in sorted(self.data)}}

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{kind, namespace, name, summary, patch}``."""
        return {"kind": "ConfigMap", "namespace": self.namespace, "name": self.name, "summary": self.summary,
                "patch": self.body()}

    def describe(self) -> str:
        """One line: ``PATCH configmap/<ns>/<name> <compact JSON body>``."""
        return (f"PATCH configmap/{self.namespace}/{self.name} "
                f"{json.dumps(self.body(), sort_keys=True, separators=(',', ':'))}")

    def write(self, store: ConfigMapStore) -> None:
        """One write through ``store``."""
        store.patch_config_map(self.namespace, self.name, self.data)


NodeOp = Callable[[NodeInfo], NodePatch | None]
"""Node → its patch (None: nothing to do on this node). Must be pure: it is re-run after a conflict.
Raises :class:`NodeRefused` for a node it must leave alone (the others go on)."""


class NodeRefused(InputError):
    """An operation refuses one node (``reset`` of a node that still owes an interrupt): that node is
    left alone and named, the others go on (:func:`plan_node_patches` with ``refused``)."""

    def __init__(self, node: str, message: str) -> None:
        self.node = node
        super().__init__(message)


def plan_node_patches(nodes: Iterable[NodeInfo], op: NodeOp,
                      refused: list[NodeRefused] | None = None) -> list[NodePatch]:
    """``op`` on every node, keeping the non-empty patches (in node order). With ``refused``, a node
    ``op`` refuses (:class:`NodeRefused`) is added there and the others are planned; without it,
    the first refusal is raised (an operation on one node)."""
    out = []
    for n in nodes:
        try:
            p = op(n)
        except NodeRefused as e:
            if refused is None:
                raise
            refused.append(e)
            continue
        if p is not None and not p.empty:
            out.append(p)
    return out


@dataclass
class WriteResult:
    """What :func:`write_node_patches` did: patches written (as finally sent), nodes skipped
    because a re-read showed nothing left to do, nodes gone, nodes the re-read made ``op`` refuse
    (their lifecycle moved on meanwhile)."""

    written: list[NodePatch] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    refused: list[NodeRefused] = field(default_factory=list)


def write_node_patches(cluster: NodePort, patches: Sequence[NodePatch], op: NodeOp) -> WriteResult:
    """Write each patch conditionally (its ``resource_version``); after a 409 re-read the node,
    recompute with ``op`` and retry (at most :data:`CONFLICT_ATTEMPTS` times).

    Raises:
        ConflictError: the node kept changing under us.
        ClusterError: any other API failure (the patches before it are written).
    """
    res = WriteResult()
    for patch in patches:
        cur: NodePatch | None = patch
        for attempt in range(CONFLICT_ATTEMPTS):
            if cur is None or cur.empty:
                res.unchanged.append(patch.node)
                break
            try:
                if cur.annotations or cur.labels or cur.unschedulable is not None:
                    cluster.patch_node(
                        cur.node,
                        annotations=dict(cur.annotations) or None,
                        labels=dict(cur.labels) or None,
                        unschedulable=cur.unschedulable,
                        resource_version=cur.resource_version or None,
                    )
                if cur.remove_conditions:
                    cluster.remove_node_conditions(cur.node, cur.remove_conditions)
                res.written.append(cur)
                break
            except NotFoundError:
                res.missing.append(patch.node)
                break
            except ConflictError:
                if attempt == CONFLICT_ATTEMPTS - 1:
                    raise
                try:
                    cur = op(cluster.get_node(patch.node))
                except NotFoundError:
                    res.missing.append(patch.node)
                    break
                except NodeRefused as e:
                    res.refused.append(e)
                    break
    return res


def select_nodes(nodes: Sequence[NodeInfo], patterns: Sequence[str], *, scope: str = "") -> list[NodeInfo]:
    """Nodes named by ``patterns``: an exact node name, else a regular expression that must match
    the whole name (as ``kubectl skyhook`` node arguments). Order: as in ``nodes``. ``scope`` says
    how ``nodes`` were narrowed before (``-l zone=b selects``), so a name outside it is said to be
    outside it, not missing.

    Raises:
        InputError: a pattern that matches no node, or an invalid regular expression (the message
            lists the nodes that exist, at most 20).
    """
    names = {n.name for n in nodes}
    first = sorted(names)[:20]
    existing = (f"nodes: {', '.join(first)}" + (f", … and {len(names) - len(first)} more" if len(names) > len(first)
                                                 else "")) if names else "the cluster has no nodes"
    chosen: set[str] = set()
    for pat in patterns:
        if pat in names:
            chosen.add(pat)
            continue
        try:
            rx = re.compile(pat)
        except re.error as e:
            raise InputError(f"node {shown(pat)} not found, and not a valid regular expression ({e}); "
                             f"{existing}") from None
        hits = {n for n in names if rx.fullmatch(n)}
        if not hits and scope:
            raise InputError(f"node {shown(pat)} is not among the {len(names)} node(s) {scope}; {existing}")
        if not hits:
            raise InputError(f"node {shown(pat)} not found: no node has this name or matches it as a regular "
                             f"expression; {existing}")
        chosen |= hits
    return [n for n in nodes if n.name in chosen]

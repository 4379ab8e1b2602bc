"""``reconciler import``: take over the node state of a NodeWright/Skyhook resource, so a fleet moves
to node-reconciler without re-running packages (decision (h)).

For every node carrying ``<old prefix>/nodeState_<NAME>`` (semantics-nodewright.md §2.7) one
patch writes, for recipe ``RECIPE`` (default ``NAME``):

* ``state_key(RECIPE)``: the same package-state map (our canonical JSON), validated as a recipe's
  packages are (:func:`entry_problem`: a node with one entry no recipe could hold is not imported
  at all, and says which). Entries keep their stage and state, so the planner continues each
  package where NodeWright left it: complete packages are not re-run, an erroring or in-progress
  stage runs again from that stage, an interrupt recorded in progress runs again (it may or may
  not have happened);
* ``status_key(RECIPE)`` (label and annotation): the node status from ``<old>/status_<NAME>``
  (annotation, else label) when it is one of ours;
* ``cordon_key(RECIPE)``: a :class:`CordonRecord` (run id ``import-<source>-<NAME>``) when the
  old operator holds the node's cordon (``<old>/cordon_<NAME>`` true and the node is cordoned),
  so node-reconciler releases that cordon when the node is done. A node cordoned without the old
  operator's record is someone else's cordon and stays (decision (c));
* the ignore label when the node has ``<old>/ignore=true``.

Everything a :class:`NodeImport` holds is masked (:func:`reconciler.model.redact.redact`), so
no view of it, ``--dry-run`` and ``-o json`` included, prints a credential found on a node.

Nodes that already have our state for the recipe are left alone (``overwrite`` replaces it). The
old annotations stay unless ``remove_legacy`` is set (then ``nodeState_``, ``status_`` annotation
and label, ``cordon_`` and ``version_`` of NAME are removed in the same write). Stop or pause the
old operator first: both would otherwise act on the same nodes.

Sources: ``skyhook`` reads ``skyhook.nvidia.com/``; ``nodewright`` reads
``nodewright.nvidia.com/`` and falls back to ``skyhook.nvidia.com/`` per node (NodeWright ≤ 0.15
still writes the Skyhook prefix, §0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from reconciler.model.nodestate import (
    IGNORE_LABEL,
    CordonRecord,
    NodeStateError,
    PackageState,
    cordon_key,
    dump_model,
    dump_state,
    parse_state,
    state_key,
    status_key,
)
from reconciler.model.observed import NodeInfo
from reconciler.model.recipe import SHA256, check_image, check_package_name
from reconciler.model.redact import redact
from reconciler.model.utctime import to_rfc3339
from reconciler.model.versions import parse_version
from reconciler.model.vocab import NodeStatus
from reconciler.ops.patches import NodePatch

Source = Literal["skyhook", "nodewright"]
PREFIXES: dict[str, tuple[str, ...]] = {
    "skyhook": ("skyhook.nvidia.com",),
    "nodewright": ("nodewright.nvidia.com", "skyhook.nvidia.com"),
}
_TRUE = ("true", "True", "TRUE", "1", "yes")


@dataclass
class NodeImport:
    """The import of one node: the prefix read, what is taken over, the patch (None when nothing
    is written), notes for the operator and an error that kept the node from being imported."""

    node: str
    prefix: str = ""
    packages: dict[str, str] = field(default_factory=dict)  # "name|version" -> "stage/state"
    status: str = ""
    cordon: bool = False
    ignore: bool = False
    patch: NodePatch | None = None
    notes: list[str] = field(default_factory=list)
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"node": self.node, "source": self.prefix, "packages": self.packages, "status": self.status,
                "cordonOwned": self.cordon, "ignore": self.ignore, "notes": self.notes, "error": self.error,
                "patch": self.patch.body() if self.patch else None}


def entry_problem(entry: PackageState) -> str:
    """Why a package entry of the old operator's state cannot become ours, or ``""``: its name,
    version, image and digest are checked as a recipe's are (:func:`check_package_name`,
    :func:`parse_version`, :func:`check_image`, :data:`SHA256`), so no record of ours holds a
    package no recipe could name (the next plan would uninstall it). Secrets are masked."""
    checks = (("name", lambda: check_package_name(entry.name)), ("version", lambda: parse_version(entry.version)),
              ("image", lambda: check_image(entry.image) if entry.image else ""))
    for field_, check in checks:
        try:
            check()
        except ValueError as e:
            return redact(f"{field_}: {e}")
    if entry.containerSHA is not None and not SHA256.fullmatch(entry.containerSHA):
        return redact(f"containerSHA: {entry.containerSHA[:80]!r} is not sha256:<64 lower-case hex digits>")
    return ""


def state_problem(state: dict[str, PackageState]) -> str:
    """The first :func:`entry_problem` of a state map, named by its entry, or ``""``."""
    for key, entry in sorted(state.items()):
        problem = entry_problem(entry)
        if problem:
            return redact(f"entry {key[:80]!r}: {problem}")
    return ""


def legacy_prefix(node: NodeInfo, name: str, source: Source) -> str:
    """The first prefix of ``source`` with ``nodeState_<name>`` on the node, or ``""``."""
    for p in PREFIXES[source]:
        if f"{p}/nodeState_{name}" in node.annotations:
            return p
    return ""


def import_node(
    node: NodeInfo,
    name: str,
    source: Source,
    *,
    recipe: str | None = None,
    at: float = 0.0,
    overwrite: bool = False,
    remove_legacy: bool = False,
) -> NodeImport | None:
    """What importing ``node`` means (pure): None when the node has no old state for ``name``."""
    prefix = legacy_prefix(node, name, source)
    if not prefix:
        return None
    recipe = recipe or name
    out = NodeImport(node.name, prefix)
    old_key = f"{prefix}/nodeState_{name}"
    try:
        state = parse_state(node.annotations[old_key], node=node.name, key=old_key)
    except NodeStateError as e:
        out.error = redact(e)
        return out
    problem = state_problem(state)
    if problem:
        out.error = f"{old_key}: {problem}; nothing of this node is imported"
        return out
    out.packages = {k: f"{e.stage}/{e.state}" for k, e in sorted(state.items())}
    if state_key(recipe) in node.annotations and not overwrite:
        out.notes.append(f"already has {state_key(recipe)}; left as is (use --overwrite to replace it)")
        return out
    ann: dict[str, str | None] = {state_key(recipe): dump_state(state)}
    labels: dict[str, str | None] = {}
    old_status = node.annotations.get(f"{prefix}/status_{name}") or node.labels.get(f"{prefix}/status_{name}", "")
    if old_status in set(NodeStatus):
        out.status = old_status
        ann[status_key(recipe)] = old_status
        labels[status_key(recipe)] = old_status
    elif old_status:
        out.notes.append(redact(f"status {old_status[:80]!r} is not a node status of ours; not imported"))
    old_cordon = node.annotations.get(f"{prefix}/cordon_{name}", "") in _TRUE
    if old_cordon and node.unschedulable:
        out.cordon = True
        claim = CordonRecord(runId=f"import-{source}-{name}", at=to_rfc3339(at) if at else "")
        ann[cordon_key(recipe)] = dump_model(claim)
    elif old_cordon:
        out.notes.append("the old operator's cordon record is set but the node is schedulable: no cordon to take over")
    elif node.unschedulable:
        out.notes.append("cordoned by someone else (no cordon record of the old operator): it stays cordoned")
    if node.labels.get(f"{prefix}/ignore") == "true" and node.labels.get(IGNORE_LABEL) != "true":
        out.ignore = True
        labels[IGNORE_LABEL] = "true"
    unfinished = [f"{k} at {v}" for k, v in out.packages.items() if not v.endswith("/complete")]
    if unfinished:
        out.notes.append("continues from the recorded stage: " + ", ".join(unfinished))
    if any(v == "interrupt/in_progress" for v in out.packages.values()):
        out.notes.append("an interrupt recorded in progress runs again (it may not have happened)")
    if remove_legacy:
        for k in (old_key, f"{prefix}/status_{name}", f"{prefix}/cordon_{name}", f"{prefix}/version_{name}"):
            if k in node.annotations:
                ann[k] = None
        if f"{prefix}/status_{name}" in node.labels:
            labels[f"{prefix}/status_{name}"] = None
    summary = f"import {len(state)} package entries from {old_key} as recipe {recipe}"
    if out.cordon:
        summary += "; take over the old operator's cordon"
    out.patch = NodePatch(node.name, annotations=ann, labels=labels, resource_version=node.resource_version,
                          summary=summary)
    return out


def plan_import(
    nodes: Sequence[NodeInfo],
    name: str,
    source: Source,
    *,
    recipe: str | None = None,
    at: float = 0.0,
    overwrite: bool = False,
    remove_legacy: bool = False,
) -> list[NodeImport]:
    """:func:`import_node` for every node with old state for ``name``, in node order."""
    out = []
    for n in nodes:
        imp = import_node(n, name, source, recipe=recipe, at=at, overwrite=overwrite, remove_legacy=remove_legacy)
        if imp is not None:
            out.append(imp)
    return out

"""Which watch events need a reconcile pass (pure; table-tested in tests/unit/controller).

A pass applies every recipe of the desired state, so these rules only decide *whether* one is
needed. Our own writes (cordon, node records, stage pods) must not cause passes, or the
controller would chase its own tail; so a node update counts only when it changes what a pass
would decide:

* a node **added** (it joins): NodeWright gives a joining node its packages at once;
* the set of recipes **selecting** the node changed (labels), or its **ignore** label changed
  (``reconciler node ignore|unignore``);
* the **runtime-required taint** appeared (a node provisioned with it, or tainted by hand);
* the node became **Ready** (a node that joined NotReady can be worked on now);
* an operations verb asked for a pass (``reset``, ``package rerun``, ``reset --package`` change
  node records and :data:`~reconciler.model.nodestate.RECONCILE_REQUEST_KEY` in the same write).

Some of these are **our own echoes**: a node that comes back Ready after the reboot we asked for,
or the runtime-required taint our own pass put on a joining node (:func:`own_echo`). They still
queue a pass, but they never preempt the running one, which waits for exactly that change;
otherwise every reboot of a rollout would restart its pass.

A node deleted needs no pass (its records go with it). A PodDisruptionBudget counts when it is
added or deleted, its spec changed (``metadata.generation``), or its ``status.disruptionsAllowed``
went from 0 to more (a drain it refused may go on now); its other status updates (every pod
change rewrites them) do not. A recipe object counts when its
``metadata.generation`` changed (spec) or its release annotation changed; a status-only update
(our own status writes) does not. A control switch counts whenever the controls ConfigMap
changed (pause, resume, disable, enable).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.load.recipes import VERSION_ANNOTATION as _VERSION_ANNOTATION
from reconciler.model.nodestate import (
    AUTO_TAINT_KEY,
    IGNORE_LABEL,
    PREFIX,
    RECONCILE_REQUEST_KEY,
    inflight_key,
    is_ignored,
    state_key,
)
from reconciler.model.observed import NodeInfo
from reconciler.model.recipe import DEFAULT_RUNTIME_REQUIRED_TAINTS
from reconciler.model.selector import LabelSelector

INFLIGHT_PREFIX = inflight_key("")


def _foreign_labels(node: NodeInfo) -> dict[str, str]:
    return {k: v for k, v in node.labels.items() if not k.startswith(f"{PREFIX}/") or k == IGNORE_LABEL}


def _selecting(labels: Mapping[str, str], selectors: Sequence[LabelSelector]) -> tuple[int, ...]:
    return tuple(i for i, s in enumerate(selectors) if s.matches(labels))


def _tainted(node: NodeInfo) -> bool:
    """A runtime-required taint of the defaults (ours, NodeWright's) is on the node."""
    return any(m.tolerates(t) for t in node.taints for m in DEFAULT_RUNTIME_REQUIRED_TAINTS)


def node_trigger(event: str, old: NodeInfo | None, new: NodeInfo | None,
                 selectors: Sequence[LabelSelector]) -> str:
    """Why a node watch event needs a pass (``""``: it does not).

    ``event``: ``ADDED``/``MODIFIED``/``DELETED``; ``old``: the node as last seen (None when not
    seen before; a re-list after a watch error repeats ``ADDED`` for known nodes); ``new``: the
    node now; ``selectors``: the node selectors of the current recipes.
    """
    if event == "DELETED" or new is None:
        return ""
    if old is None:
        return f"node {new.name} joined" if event == "ADDED" else f"node {new.name} seen"
    if reconcile_requested(old, new):
        return f"node {new.name}: a pass was requested (reconciler reset / package rerun)"
    removed = records_removed(old, new)
    if removed:
        return f"node {new.name}: the records of {', '.join(removed)} were removed (reconciler reset)"
    if _selecting(old.labels, selectors) != _selecting(new.labels, selectors):
        return f"node {new.name}: the recipes selecting it changed"
    if is_ignored(old.labels) != is_ignored(new.labels):
        return f"node {new.name}: {'ignored' if is_ignored(new.labels) else 'no longer ignored'}"
    if _tainted(new) and not _tainted(old):
        return f"node {new.name}: runtime-required taint appeared"
    if new.ready is True and old.ready is not True:
        return f"node {new.name} became Ready"
    return ""


def own_echo(old: NodeInfo | None, new: NodeInfo | None) -> bool:
    """Whether a node update is the echo of our own rollout rather than new work: the node
    carries one of our in-flight records (a lifecycle of ours is running on it, e.g. it comes back
    from our reboot or our cordon), or this very update added our ``autoTaint`` mark with the
    runtime-required taint. A join, a change of labels other than our own, or an operator's
    request is never an echo."""
    if old is None or new is None or reconcile_requested(old, new):
        return False
    if _foreign_labels(old) != _foreign_labels(new):
        return False
    if any(k.startswith(INFLIGHT_PREFIX) for k in new.annotations):
        return True
    return AUTO_TAINT_KEY in new.annotations and AUTO_TAINT_KEY not in old.annotations


def records_removed(old: NodeInfo, new: NodeInfo) -> list[str]:
    """Recipes whose package state record (``state_<recipe>``) the update removed: only
    ``reconciler reset`` does that (a lifecycle rewrites the record, never removes it), so the
    removal is the operator's request for a pass (the next plan installs every package again)."""
    head = state_key("")
    return sorted(k[len(head):] for k in old.annotations
                  if k.startswith(head) and k not in new.annotations)


def reconcile_requested(old: NodeInfo, new: NodeInfo) -> bool:
    """An operations verb changed the node's records and asked for a pass
    (:data:`~reconciler.model.nodestate.RECONCILE_REQUEST_KEY` changed)."""
    return old.annotations.get(RECONCILE_REQUEST_KEY) != new.annotations.get(RECONCILE_REQUEST_KEY)


def _meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    meta = (obj or {}).get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _release(obj: Mapping[str, Any] | None) -> object:
    ann = _meta(obj).get("annotations")
    return ann.get(_VERSION_ANNOTATION) if isinstance(ann, Mapping) else None


def recipe_trigger(event: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> str:
    """Why a NodeRecipe watch event needs a pass (``""``: it does not): added, deleted, a new
    ``metadata.generation`` (spec changed) or a changed release annotation; not a status write."""
    name = _meta(new or old).get("name", "?")
    if event == "DELETED":
        return f"recipe {name} deleted"
    if old is None:
        return f"recipe {name} added"
    if _meta(old).get("generation") != _meta(new).get("generation"):
        return f"recipe {name} changed (generation {_meta(new).get('generation')})"
    if _release(old) != _release(new):
        return f"recipe {name}: release changed"
    return ""


def controls_trigger(old: Mapping[str, str] | None, new: Mapping[str, str] | None) -> str:
    """Why a change of the controls ConfigMap's data needs a pass (``""``: same data)."""
    if dict(old or {}) == dict(new or {}):
        return ""
    changed = sorted(k for k in set(old or {}) | set(new or {}) if (old or {}).get(k) != (new or {}).get(k))
    return f"controls changed for {', '.join(changed)}"


def _allowed(obj: Mapping[str, Any] | None) -> int:
    status = (obj or {}).get("status")
    value = status.get("disruptionsAllowed") if isinstance(status, Mapping) else None
    return value if isinstance(value, int) else 0


def pdb_trigger(event: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> str:
    """Why a PodDisruptionBudget watch event needs a pass (``""``: it does not); see the module docstring."""
    meta = _meta(new or old)
    name = f"{meta.get('namespace', '')}/{meta.get('name', '?')}"
    if event == "DELETED":
        return f"PodDisruptionBudget {name} deleted"
    if old is None:
        return f"PodDisruptionBudget {name} added"
    if _meta(old).get("generation") != _meta(new).get("generation"):
        return f"PodDisruptionBudget {name} changed"
    if _allowed(old) == 0 and _allowed(new) > 0:
        return f"PodDisruptionBudget {name} allows disruptions again"
    return ""

"""Per-recipe control switches: ``pause``/``resume`` and ``disable``/``enable``.

There is no custom resource to annotate (NodeWright sets ``skyhook.nvidia.com/pause`` /
``disable`` on the Skyhook), so the switches live in one ConfigMap, :data:`CONTROLS_CONFIGMAP` in
the reconciler's namespace (the kube adapter's ``namespace``, default ``node-reconciler``): one
data key per recipe name, its value a JSON :class:`Control` record. A recipe with no key is
neither paused nor disabled; resuming and enabling a recipe removes its key.

Meaning (semantics-nodewright.md §2.8), honoured by ``apply`` before it plans a recipe:

* **paused**: nothing new is started for the recipe; ``apply`` skips it and says so. (NodeWright
  also makes later-priority recipes wait on the paused recipe's nodes — the multi-recipe ordering
  of the core decides that.)
* **disabled**: the recipe is skipped and does not hold back later priorities.

An unreadable record counts as paused (fail safe), with the reason saying so.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import ValidationError, field_validator

from reconciler.errors import ReconcilerError
from reconciler.model.base import Frozen
from reconciler.model.redact import redact
from reconciler.ops.patches import ConfigMapPatch
from reconciler.ports import ClusterPorts, ConfigMapStore

CONTROLS_CONFIGMAP = "node-reconciler-controls"
DEFAULT_NAMESPACE = "node-reconciler"
Action = Literal["pause", "resume", "disable", "enable"]
ACTIONS: tuple[Action, ...] = ("pause", "resume", "disable", "enable")


class ControlsUnsupported(ReconcilerError):
    """The cluster adapter offers no ConfigMap store, so switches can be neither set nor read."""


class Control(Frozen):
    """The switches of one recipe: ``paused``/``disabled`` with who set them, when (RFC 3339) and why."""

    paused: bool = False
    disabled: bool = False
    reason: str = ""
    by: str = ""
    at: str = ""

    @field_validator("reason", "by", mode="after")
    @classmethod
    def _masked(cls, v: str) -> str:
        """Free text a person typed (``--reason``, who set it): a secret pasted into it is masked
        (:func:`reconciler.model.redact.redact`) before it is stored in the controls ConfigMap and
        wherever it is shown (pause --list, plan warnings, the apply's skip line); a record
        written by someone else is masked when it is read."""
        return redact(v)

    @property
    def active(self) -> bool:
        """True when the recipe is paused or disabled."""
        return self.paused or self.disabled

    def describe(self) -> str:
        """``paused``/``disabled``/``paused, disabled`` plus by/at/reason; ``""`` when neither."""
        flags = [w for w, on in (("paused", self.paused), ("disabled", self.disabled)) if on]
        if not flags:
            return ""
        extra = [x for x in (f"by {self.by}" if self.by else "", f"at {self.at}" if self.at else "",
                             f"reason: {self.reason}" if self.reason else "") if x]
        return ", ".join(flags) + (f" ({'; '.join(extra)})" if extra else "")


def store_for(cluster: object) -> ConfigMapStore | None:
    """The ConfigMap store of ``cluster``: the adapter itself when it implements
    ``ConfigMapStore`` (simulated fleet), a role bundle's ``controls``, else None."""
    if isinstance(cluster, ConfigMapStore):
        return cluster
    if isinstance(cluster, ClusterPorts):
        return cluster.controls
    return None


def namespace_for(cluster: object) -> str:
    """The reconciler's namespace on ``cluster`` (its ``namespace`` attribute, else the default)."""
    ns = getattr(cluster, "namespace", None)
    return ns if isinstance(ns, str) and ns else DEFAULT_NAMESPACE


def parse_controls(data: dict[str, str] | None) -> dict[str, Control]:
    """Records by recipe from the ConfigMap data; an unreadable record becomes ``paused``."""
    out: dict[str, Control] = {}
    for recipe, text in (data or {}).items():
        try:
            out[recipe] = Control.model_validate_json(text)
        except ValidationError:
            out[recipe] = Control(paused=True, reason=f"unreadable control record {text[:60]!r} (treated as paused)")
    return out


def read_controls(cluster: object) -> dict[str, Control]:
    """Every recipe's switches; empty when the adapter has no ConfigMap store (nothing can have
    been switched through it) or the ConfigMap does not exist."""
    store = store_for(cluster)
    if store is None:
        return {}
    return parse_controls(store.get_config_map(namespace_for(cluster), CONTROLS_CONFIGMAP))


def held_reason(cluster: object, recipe: str) -> str:
    """``""`` when ``apply`` may run ``recipe``; otherwise why not (``paused (by …)``)."""
    c = read_controls(cluster).get(recipe)
    return c.describe() if c is not None and c.active else ""


def switch(current: Control | None, action: Action, *, reason: str = "", by: str = "", at: str = "") -> Control:
    """The record after ``action`` (pure). Setting a switch records ``reason``/``by``/``at``;
    clearing the last one clears them."""
    c = current or Control()
    paused = {"pause": True, "resume": False}.get(action, c.paused)
    disabled = {"disable": True, "enable": False}.get(action, c.disabled)
    if not paused and not disabled:
        return Control()
    setting = action in ("pause", "disable")
    return Control(paused=paused, disabled=disabled,
                   reason=reason if setting else c.reason, by=by if setting else c.by, at=at if setting else c.at)


def control_patch(
    cluster: object, recipe: str, action: Action, *, reason: str = "", by: str = "", at: str = ""
) -> tuple[ConfigMapPatch | None, Control, Control]:
    """``(patch, before, after)`` for ``action`` on ``recipe``; the patch is None when nothing changes.

    Raises:
        ControlsUnsupported: the adapter has no ConfigMap store.
    """
    store = store_for(cluster)
    if store is None:
        raise ControlsUnsupported(
            f"{type(cluster).__name__} cannot store recipe controls (no ConfigMap store; "
            "see reconciler.ports.ConfigMapStore)"
        )
    ns = namespace_for(cluster)
    before = parse_controls(store.get_config_map(ns, CONTROLS_CONFIGMAP)).get(recipe, Control())
    after = switch(before, action, reason=reason, by=by, at=at)
    if (before.paused, before.disabled) == (after.paused, after.disabled):
        return None, before, after
    value = None if not after.active else json.dumps(after.model_dump(exclude_defaults=True), sort_keys=True,
                                                     separators=(",", ":"))
    return ConfigMapPatch(ns, CONTROLS_CONFIGMAP, {recipe: value}, summary=f"{action} recipe {recipe}"), before, after

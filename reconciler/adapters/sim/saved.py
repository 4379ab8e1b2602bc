"""What a saved simulated fleet (``--sim-save``) adds to plain Kubernetes objects, and its checks.

A saved fleet carries the simulation's pending timers in the annotation :data:`SIM_ANN` (a JSON
string): on a Node ``{"rebootUpAt": epoch, "validateAt": epoch}``, on a Pod ``{"removeAt": epoch, "scheduleAt": epoch,
"startAt": epoch}``,
on a stage pod (namespace :data:`STAGE_NS`) the whole stage record (:class:`StageRecord`); and the
ConfigMap :data:`CLOCK_NAME` holds the simulated clock (``data.now``: epoch seconds, ``data.uids``:
the uid counter). :func:`check_saved_state` validates all of them when a fleet file is loaded, so
a hand-edited or truncated saved fleet is an input error naming the object and field, never a
crash in the middle of a run.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reconciler.errors import InputError, InputErrors
from reconciler.jsonsafe import json_positions, parse_json
from reconciler.load.snapshot import MAX_REPORTED, Snapshot, loc_path, pydantic_message

SIM_ANN = "sim.reconciler.nodewright.dev/state"
CLOCK_NAME = ("kube-system", "reconciler-sim-clock")
STAGE_NS = "node-reconciler"

Epoch = Annotated[float, Field(ge=0, le=1e11)]
"""Epoch seconds (up to the year 5138)."""


class _Saved(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)


class NodeTimers(_Saved):
    """:data:`SIM_ANN` of a Node: when a node rebooting comes back; when the simulated validator
    (``SimConfig.validator``) passes it."""

    rebootUpAt: Epoch | None = None
    validateAt: Epoch | None = None


class PodTimers(_Saved):
    """:data:`SIM_ANN` of a Pod: when a terminating pod is gone, when a controller's replacement
    pod is bound to a node, when it is Ready."""

    removeAt: Epoch | None = None
    scheduleAt: Epoch | None = None
    startAt: Epoch | None = None


class StageRecord(_Saved):
    """:data:`SIM_ANN` of a stage pod: the stage, its outcome so far and when it ends."""

    recipe: Annotated[str, Field(min_length=1)]
    package: Annotated[str, Field(min_length=1)]
    version: str
    stage: Literal["apply", "config", "interrupt", "post-interrupt", "upgrade", "uninstall", "uninstall-interrupt"]
    runId: str
    attempt: Annotated[int, Field(ge=1, le=1_000_000)]
    rerun: Annotated[int, Field(ge=0, le=1_000_000)] = 0
    pullRef: str = ""
    interrupt: Literal["reboot", "service", "restartAllServices", "noop"] | None = None
    interruptServices: list[str] = Field(default_factory=list)
    phase: Literal["running", "pending", "succeeded", "failed"]
    exit: Annotated[int, Field(ge=0, le=255)] | None = None
    reason: str = ""
    log: str = ""
    started: Epoch
    doneAt: Epoch | None = None
    pendingExit: Annotated[int, Field(ge=0, le=255)] = 0
    pendingReason: str = ""
    pendingLog: str = ""


def parse_clock(data: Any) -> tuple[float, int]:
    """``(now, uids)`` of the clock ConfigMap's ``data``.

    Raises:
        ValueError: a field missing or not a finite epoch / a non-negative integer (message names it).
    """
    if not isinstance(data, dict):
        raise ValueError("data: must be a mapping with now and uids")
    try:
        now = float(str(data.get("now")))
    except ValueError:
        raise ValueError(f"data.now: {str(data.get('now'))[:40]!r} is not a number of epoch seconds") from None
    if not math.isfinite(now) or not 0 <= now <= 1e11:
        raise ValueError(f"data.now: {now!r} is not a time in epoch seconds")
    uids = str(data.get("uids", "0"))
    if not uids.isdigit() or len(uids) > 18:
        raise ValueError(f"data.uids: {uids[:40]!r} is not a non-negative integer")
    return now, int(uids)


def _model_for(obj: dict[str, Any]) -> type[_Saved] | None:
    kind = obj["kind"]
    if kind == "Node":
        return NodeTimers
    if kind == "Pod":
        return StageRecord if obj["metadata"].get("namespace") == STAGE_NS else PodTimers
    return None


def _key_at(text: str, at: tuple[int, int] | None) -> str:
    """``"a.b: "``: the key of JSON ``text`` last met at or before ``(line, column)``, "" for none."""
    if at is None:
        return ""
    keys = [(pos, path) for path, pos in json_positions(text).items() if path and pos <= at]
    if not keys:
        return ""
    return ".".join(str(k) for k in max(keys, key=lambda k: k[0])[1]) + ": "


def check_saved_state(snap: Snapshot) -> None:
    """Validate every :data:`SIM_ANN` annotation and the clock ConfigMap of a loaded snapshot.

    Raises:
        InputError: (``InputErrors`` when several) naming the object, the annotation and the field.
    """
    errors: list[InputError] = []
    field = ("metadata", "annotations", SIM_ANN)
    for i, obj in enumerate(snap.objects):
        if len(errors) >= MAX_REPORTED:
            break
        meta = obj["metadata"]
        if obj["kind"] == "ConfigMap" and (meta.get("namespace"), meta.get("name")) == CLOCK_NAME:
            try:
                parse_clock(obj.get("data"))
            except ValueError as e:
                errors.append(snap.error(i, ("data",), str(e)))
            continue
        raw = (meta.get("annotations") or {}).get(SIM_ANN)
        model = _model_for(obj)
        if raw is None or model is None:
            continue
        try:  # the guarded reader: no duplicate key, NaN, 65-bit integer or deep nesting passes
            value = parse_json(raw, "annotation", what="saved simulation state")
        except InputError as e:
            at = (e.pos.line, e.pos.column) if e.pos and e.pos.line else None
            where = f" at line {at[0]} column {at[1]}" if at else ""
            errors.append(snap.error(i, field, "saved simulation state is not JSON the reconciler reads: "
                                               f"{_key_at(raw, at)}{e.message}{where}"))
            continue
        if model is StageRecord and not (obj.get("spec") or {}).get("nodeName"):
            errors.append(snap.error(i, ("spec", "nodeName"), "a saved stage pod needs the node it runs on"))
            continue
        try:
            model.model_validate(value)
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            sub = ".".join(str(x) for x in loc_path(tuple(err["loc"])))
            errors.append(snap.error(i, field, f"saved simulation state{' ' + sub if sub else ''}: "
                                               f"{pydantic_message(err)}"))
    if errors:
        raise errors[0] if len(errors) == 1 else InputErrors(errors)

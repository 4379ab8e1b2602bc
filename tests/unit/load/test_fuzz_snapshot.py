"""Property-based fuzzing of the fleet snapshot loader and the sim-config loader (issue #14).

Documents are generated structurally valid (a small kubectl fleet) and then broken: any field
replaced by an arbitrary JSON value, deleted, or the whole text cut, spliced or replaced by random
bytes; written as JSON or YAML. Property: loading either succeeds — and then observing and planning
the fleet works too — or raises :class:`~reconciler.errors.InputError` with a ``file:line:column``.
No other exception may escape. Fixed example budget, derandomized (the same examples every run).
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.adapters.sim.write import dumps_list
from reconciler.errors import InputError
from reconciler.testing.fleetgen import make_node, make_pdb, make_pod

pytestmark = pytest.mark.slow  # fuzz sweeps with a fixed example budget: CI runs them, the fast tier not

FUZZ = settings(max_examples=200, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def _fleet() -> list[dict[str, Any]]:
    return [
        make_node("n1", {"pool": "gpu"}, annotations={"reconciler.nodewright.dev/nodeState_r": "{}"},
                  taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
        make_node("n2", {"pool": "gpu"}),
        make_pod("ml", "train", "n1", labels={"app": "train"}, owner=("Job", "train"), active_deadline=60,
                 tolerations=[{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]),
        make_pod("web", "web-1", "n2", labels={"app": "web"}, owner=("ReplicaSet", "web-7"), emptydir=True),
        make_pdb("web", "web", {"app": "web"}, max_unavailable="50%"),
    ]


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for key, v in obj.items():
            out += _paths(v, (*prefix, key))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def snapshots(draw: st.DrawFn) -> tuple[bytes, str]:
    """(file bytes, suffix): a fleet with a few mutations, then maybe damaged as text."""
    objs = _fleet()
    paths = _paths(objs)
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        path = draw(st.sampled_from(paths))
        parent: Any = objs
        try:
            for key in path[:-1]:
                parent = parent[key]
            action = draw(st.sampled_from(["replace", "delete", "duplicate"]))
            if action == "replace":
                parent[path[-1]] = draw(json_values)
            elif action == "delete" and isinstance(parent, dict):
                del parent[path[-1]]
            elif action == "duplicate" and isinstance(parent, list):
                parent.append(copy.deepcopy(parent[path[-1]]))
        except (KeyError, IndexError, TypeError):
            pass  # an earlier mutation removed or replaced the path
    fmt = draw(st.sampled_from(["json", "yaml"]))
    try:
        text = dumps_list(objs, fmt) if fmt == "yaml" else json.dumps(
            {"apiVersion": "v1", "kind": "List", "items": objs}, indent=2)
    except (ValueError, TypeError, OverflowError):
        text = json.dumps({"items": str(objs)})
    raw = text.encode("utf-8", "surrogatepass")
    damage = draw(st.sampled_from(["none", "none", "cut", "splice", "bytes"]))
    if damage == "cut":
        raw = raw[: draw(st.integers(min_value=0, max_value=len(raw)))]
    elif damage == "splice":
        at = draw(st.integers(min_value=0, max_value=len(raw)))
        raw = raw[:at] + draw(st.binary(max_size=8)) + raw[at:]
    elif damage == "bytes":
        raw = draw(st.binary(max_size=200))
    return raw, "." + fmt


def _write(raw: bytes, suffix: str) -> str:
    fd, path = tempfile.mkstemp(suffix=suffix)
    with os.fdopen(fd, "wb") as fh:
        fh.write(raw)
    return path


def _assert_positioned(e: InputError, path: str) -> None:
    assert e.pos is not None and e.pos.file == path, str(e)
    assert e.pos.line >= 1 and e.pos.column >= 1, str(e)


@FUZZ
@given(snapshots())
def test_snapshot_loader_only_raises_positioned_input_errors(doc: tuple[bytes, str]) -> None:
    from reconciler.adapters.sim.fleet import SimFleet
    from reconciler.model.policy import Budget, DefaultCompartment, DeploymentPolicy, FixedParams, Strategy
    from reconciler.model.recipe import Package, Recipe
    from reconciler.model.selector import LabelSelector
    from reconciler.observe.snapshot import observe
    from reconciler.plan.planner import compute_plan

    path = _write(*doc)
    try:
        try:
            fleet = SimFleet.from_file(path)
        except InputError as e:
            _assert_positioned(e, path)
            return
        # accepted: everything downstream reads it without surprises
        observed = observe(fleet)
        recipe = Recipe(name="r", version="1", nodeSelector=LabelSelector(), packages={
            "base": Package(name="base", version="1.0.0", image="ghcr.io/x/base", containerSHA="sha256:" + "a" * 64)})
        policy = DeploymentPolicy(name="p", default=DefaultCompartment(
            budget=Budget(percent=50), strategy=Strategy(fixed=FixedParams(initialBatch=1))))
        compute_plan(recipe, policy, observed)
        fleet.to_objects()
    finally:
        os.unlink(path)


sim_values = st.one_of(json_values, st.floats(min_value=-10, max_value=1e12), st.sampled_from(
    ["*", "apply", "gpu-a-001", "ImagePullBackOff", "2026-11-30T12:00:00Z", "", "30"]))
SIM_KEYS = ["stageSeconds", "rebootSeconds", "interruptSeconds", "podStartSeconds", "rescheduleSeconds",
            "maxTerminationSeconds", "failures", "neverReturns", "startTime", "stageSecond"]
FAILURE_KEYS = ["node", "package", "stage", "exitCode", "times", "reason", "logTail", "exitcode"]


@st.composite
def sim_configs(draw: st.DrawFn) -> bytes:
    """A --sim-config document: known and unknown keys with arbitrary values, maybe damaged."""
    doc: dict[str, Any] = {}
    for key in draw(st.lists(st.sampled_from(SIM_KEYS), max_size=5)):
        if key == "failures" and draw(st.booleans()):
            doc[key] = [{k: draw(sim_values) for k in draw(st.lists(st.sampled_from(FAILURE_KEYS), max_size=4))}]
        elif key == "stageSeconds" and draw(st.booleans()):
            doc[key] = {draw(st.sampled_from(["apply", "config", "default", "aply"])): draw(sim_values)}
        else:
            doc[key] = draw(sim_values)
    text = json.dumps(doc) if draw(st.booleans()) else "\n".join(f"{k}: {json.dumps(v)}" for k, v in doc.items())
    raw = text.encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        at = draw(st.integers(min_value=0, max_value=len(raw)))
        raw = raw[:at] + draw(st.binary(max_size=6)) + raw[at:]
    return raw


@FUZZ
@given(sim_configs())
def test_sim_config_loader_only_raises_positioned_input_errors(raw: bytes) -> None:
    from reconciler.cli.clusters import load_sim_config

    path = _write(raw, ".yaml")
    try:
        try:
            cfg = load_sim_config(path)
        except InputError as e:
            _assert_positioned(e, path)
            return
        for stage in ("apply", "config", "interrupt"):
            assert 0 <= cfg.stage_duration(stage) <= 1e9
    finally:
        os.unlink(path)

"""Which watch events need a pass (reconciler.controller.triggers): table tests. Our own writes
(records, cordons) must not trigger passes; joins, selection changes, the taint and Ready must."""

from __future__ import annotations

import pytest

from reconciler.controller.triggers import controls_trigger, node_trigger, own_echo, pdb_trigger, recipe_trigger
from reconciler.model.nodestate import (
    AUTO_TAINT_KEY,
    IGNORE_LABEL,
    RECONCILE_REQUEST_KEY,
    RUNTIME_REQUIRED_TAINT_KEY,
    inflight_key,
)
from reconciler.model.observed import NodeInfo
from reconciler.model.selector import Taint
from reconciler.testing import as_selector, builders
from reconciler.testing.fleetgen import make_pdb

GPU = [as_selector({"pool": "gpu"})]
TAINT = Taint(key=RUNTIME_REQUIRED_TAINT_KEY, value="true", effect="NoSchedule")


def n(labels: dict[str, str] | None = None, *, taints: tuple[Taint, ...] = (), ready: bool | None = True,
      annotations: dict[str, str] | None = None, unschedulable: bool = False) -> NodeInfo:
    return builders.node("n1", labels={"pool": "gpu", **(labels or {})}, annotations=annotations, taints=taints,
                         ready=ready, unschedulable=unschedulable)


@pytest.mark.parametrize(("event", "old", "new", "expected"), [
    ("ADDED", None, n(), "node n1 joined"),
    ("ADDED", None, n(taints=(TAINT,)), "node n1 joined"),
    ("MODIFIED", n(), n({"pool": "cpu"}), "node n1: the recipes selecting it changed"),
    ("MODIFIED", n(), n({"zone": "a"}), ""),  # a label no recipe selects on
    ("MODIFIED", n(), n({IGNORE_LABEL: "true"}), "node n1: ignored"),
    ("MODIFIED", n({IGNORE_LABEL: "true"}), n(), "node n1: no longer ignored"),
    ("MODIFIED", n(), n(taints=(TAINT,)), "node n1: runtime-required taint appeared"),
    ("MODIFIED", n(taints=(TAINT,)), n(), ""),  # our own untaint
    ("MODIFIED", n(), n(taints=(Taint(key="skyhook.nvidia.com", value="runtime-required", effect="NoSchedule"),)),
     "node n1: runtime-required taint appeared"),  # NodeWright's
    ("MODIFIED", n(ready=False), n(), "node n1 became Ready"),
    ("MODIFIED", n(ready=None), n(), "node n1 became Ready"),
    ("MODIFIED", n(), n(ready=False), ""),
    ("MODIFIED", n(), n(annotations={"reconciler.nodewright.dev/x": "y"}), ""),  # our node records
    ("MODIFIED", n(), n(unschedulable=True), ""),  # our cordon
    # `reconciler reset` / `package rerun` on a running controller: a pass
    ("MODIFIED", n(), n(annotations={RECONCILE_REQUEST_KEY: "7"}), "node n1: a pass was requested (reconciler "
                                                                   "reset / package rerun)"),
    ("MODIFIED", n(annotations={RECONCILE_REQUEST_KEY: "7"}), n(annotations={RECONCILE_REQUEST_KEY: "9"}),
     "node n1: a pass was requested (reconciler reset / package rerun)"),
    ("MODIFIED", n(annotations={RECONCILE_REQUEST_KEY: "7"}),
     n(annotations={RECONCILE_REQUEST_KEY: "7", "reconciler.nodewright.dev/x": "y"}), ""),  # unchanged request
    ("DELETED", n(), None, ""),
])
def test_node_trigger(event: str, old: NodeInfo | None, new: NodeInfo | None, expected: str) -> None:
    assert node_trigger(event, old, new, GPU) == expected


def obj(gen: int, version: str | None = None, status: dict[str, object] | None = None) -> dict[str, object]:
    meta: dict[str, object] = {"name": "r", "generation": gen}
    if version is not None:
        meta["annotations"] = {"reconciler.nodewright.dev/version": version}
    return {"metadata": meta, "spec": {}, "status": status or {}}


@pytest.mark.parametrize(("event", "old", "new", "expected"), [
    ("ADDED", None, obj(1), "recipe r added"),
    ("MODIFIED", obj(1), obj(2), "recipe r changed (generation 2)"),
    ("MODIFIED", obj(1), obj(1, status={"phase": "Complete"}), ""),  # our status write
    ("MODIFIED", obj(1, "1"), obj(1, "2"), "recipe r: release changed"),
    ("DELETED", obj(1), None, "recipe r deleted"),
])
def test_recipe_trigger(event: str, old: dict[str, object] | None, new: dict[str, object] | None,
                        expected: str) -> None:
    assert recipe_trigger(event, old, new) == expected


@pytest.mark.parametrize(("old", "new", "expected"), [
    (None, None, ""),
    ({"a": "x"}, {"a": "x"}, ""),
    (None, {"a": "{\"paused\":true}"}, "controls changed for a"),
    ({"a": "x", "b": "y"}, {"b": "z"}, "controls changed for a, b"),
])
def test_controls_trigger(old: dict[str, str] | None, new: dict[str, str] | None, expected: str) -> None:
    assert controls_trigger(old, new) == expected


def pdb(gen: int, allowed: int) -> dict[str, object]:
    return make_pdb("ml", "inference", {"app": "inference"}, generation=gen, disruptions_allowed=allowed,
                    current_healthy=5)


@pytest.mark.parametrize(("event", "old", "new", "expected"), [
    ("ADDED", None, pdb(1, 0), "PodDisruptionBudget ml/inference added"),
    ("MODIFIED", pdb(1, 0), pdb(2, 0), "PodDisruptionBudget ml/inference changed"),
    ("MODIFIED", pdb(1, 0), pdb(1, 1), "PodDisruptionBudget ml/inference allows disruptions again"),
    ("MODIFIED", pdb(1, 1), pdb(1, 0), ""),  # one disruption in use: nothing to retry
    ("MODIFIED", pdb(1, 1), pdb(1, 2), ""),  # status churn of every pod change
    ("DELETED", pdb(1, 0), None, "PodDisruptionBudget ml/inference deleted"),
])
def test_pdb_trigger(event: str, old: dict[str, object] | None, new: dict[str, object] | None,
                     expected: str) -> None:
    assert pdb_trigger(event, old, new) == expected


INFLIGHT = {inflight_key("tuning"): '{"phase": "interrupt"}'}


@pytest.mark.parametrize(("old", "new", "echo"), [
    (n(ready=False, annotations=INFLIGHT), n(annotations=INFLIGHT), True),  # back from our reboot
    (n(annotations=INFLIGHT), n(taints=(TAINT,), annotations=INFLIGHT), True),
    (n(), n(taints=(TAINT,), annotations={AUTO_TAINT_KEY: "true"}), True),  # our autoTaint at join
    (n(ready=False), n(), False),  # Ready, no lifecycle of ours on it: new work
    (n(), n(taints=(TAINT,)), False),  # tainted by someone else
    (n(annotations={AUTO_TAINT_KEY: "true"}), n(taints=(TAINT,), annotations={AUTO_TAINT_KEY: "true"}), False),
    (n(annotations=INFLIGHT), n({"pool": "cpu"}, annotations=INFLIGHT), False),  # relabelled: new work
    (n(ready=False, annotations=INFLIGHT), n({"reconciler.nodewright.dev/status_tuning": "in_progress"},
                                            annotations=INFLIGHT), True),  # with our own status label
    (n(annotations=INFLIGHT), n(annotations={**INFLIGHT, RECONCILE_REQUEST_KEY: "3"}), False),  # reset asked
    (None, n(annotations=INFLIGHT), False),  # a join (or a re-list) is never an echo
])
def test_own_echo(old: NodeInfo | None, new: NodeInfo | None, echo: bool) -> None:
    assert own_echo(old, new) is echo

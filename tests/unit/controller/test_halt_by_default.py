"""Safe by default through the controller (issue 34, item 7): a NodeRecipe without a
DeploymentPolicy whose package fails on every node halts at its first failed node and stays
halted across passes — before, a failing package with no interrupt reached every node."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from reconciler.adapters.sim.config import SimConfig, StageFailure
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.controller.loop import Controller, ControllerSettings
from reconciler.controller.source import ObjectSource
from reconciler.ports import ClusterPorts
from reconciler.session import Session
from tests.unit.controller.conftest import POLICIES, Writer, conditions, make, recipe_object

NAME = "cve-ksmbd-blacklist"
PACKAGE = "ksmbd-blacklist"
FAILING = SimConfig(failures=(StageFailure(package=PACKAGE, stage="apply", exitCode=3, times=99),))


def _no_interrupt(**spec: Any) -> dict[str, Any]:
    """recipes/cve-ksmbd-blacklist.yaml (no deploymentPolicy) with its package's reboot taken out
    and the legacy budget of one node at a time."""
    obj = recipe_object(f"{NAME}.yaml", interruptionBudget={"count": 1}, **spec)
    pkgs = copy.deepcopy(obj["spec"]["packages"])
    del pkgs[PACKAGE]["interrupt"]
    obj["spec"]["packages"] = pkgs
    return obj


def _touched(sim: SimFleet) -> set[str]:
    return {n.name for n in sim.list_nodes() if any(NAME in k for k in n.annotations)}


def test_a_recipe_without_a_policy_halts_at_its_first_failed_node_and_stays_halted() -> None:
    ctl, sim, writer = make([_no_interrupt()], FAILING)
    assert ctl.reconcile(["startup"]) == "failed"
    assert _touched(sim) == {"gpu-a-001"}  # the other 23 selected nodes were not tried
    status = writer.last(NAME)
    assert status["phase"] == "Halted" and conditions(status)["Stalled"] == "True"
    assert NAME in ctl.stalled
    for why in ("node gpu-b-003 changed", "resync"):  # later passes do not try another node
        assert ctl.reconcile([why]) == "idle"
    assert _touched(sim) == {"gpu-a-001"}


POLICY = """\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: DeploymentPolicy
metadata:
  name: keep-going
spec:
  default:
    budget: {count: 4}
    strategy: {fixed: {initialBatch: 4, failureThreshold: never}}
"""


def test_failure_threshold_never_through_the_controller_tries_every_node(tmp_path: Path) -> None:
    """The explicit opt-out (NodeWright's default written out) through a DeploymentPolicy."""
    obj = _no_interrupt()
    del obj["spec"]["interruptionBudget"]
    obj["spec"]["deploymentPolicy"] = "keep-going"
    (tmp_path / "keep-going.yaml").write_text(POLICY)
    ctl, sim, writer = make([obj], FAILING, policies=(str(tmp_path),))
    assert ctl.reconcile(["startup"]) == "failed"
    assert len(_touched(sim)) == 24
    assert writer.last(NAME)["phase"] == "Failed"


def _controller_on(sim: SimFleet, obj: dict[str, Any]) -> tuple[Controller, Writer]:
    """A new controller process on the same (simulated) cluster: it remembers nothing."""
    source = ObjectSource([POLICIES])
    source.replace([obj])
    writer = Writer(source)
    ctl = Controller(source, Session(ClusterPorts.of(sim), sim, sim=sim),
                     ControllerSettings(holder="test/2", workers=1, wait_for_lock=0.0), status=(writer, source))
    return ctl, writer


def test_a_halt_holds_across_a_controller_restart_and_for_a_runtime_required_recipe() -> None:
    """What the controller remembers of a halt (``stalled``) is lost on a restart, and a
    runtime-required recipe is applied on every pass anyway (the taint rule needs it): the halt is
    found again in the node left failed, so neither tries another node (before, each pass tried
    one more)."""
    ctl, sim, _ = make([_no_interrupt(runtimeRequired=True)], FAILING)
    assert ctl.reconcile(["startup"]) == "failed"
    assert _touched(sim) == {"gpu-a-001"}
    assert ctl.reconcile(["node gpu-b-003 changed"]) == "failed"  # applied again, halted again
    assert _touched(sim) == {"gpu-a-001"}
    restarted, writer = _controller_on(sim, _no_interrupt())
    assert restarted.reconcile(["startup"]) == "failed"
    assert _touched(sim) == {"gpu-a-001"}
    status = writer.last(NAME)
    assert status["phase"] == "Halted" and conditions(status)["Stalled"] == "True"

"""The fleet view of ``reconciler status`` (issue 38): where a recipe stands on each node, counted
per recipe, a failed node counted failed whatever its package entries say (a node that failed at
its reboot keeps ``interrupt/in_progress``: it used to read as in progress)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.ops.status import FailureStatus, GateStatus, NodeStatus, PackageStatus, RecipeState, summarize

ROOT = Path(__file__).resolve().parents[3]


def _st(name: str = "n", *, entries: tuple[tuple[str, str], ...] = (), failed: bool = False, gate: bool = False,
        inflight: bool = False, claim: bool = False, unschedulable: bool = False) -> NodeStatus:
    pkgs = tuple(PackageStatus("r", f"p{i}", "1.0", stage, state, 0) for i, (stage, state) in enumerate(entries))
    return NodeStatus(name, unschedulable, claim, ("r",), pkgs,
                      (FailureStatus("r", "RebootTimeout", "did not come back"),) if failed else (),
                      (GateStatus("r", None),) if gate else (), ("r",) if inflight else (), ("r",) if claim else ())


@pytest.mark.parametrize(("status", "state"), [
    (_st(entries=(("post-interrupt", "complete"),)), RecipeState.COMPLETE),
    (_st(entries=(("post-interrupt", "complete"), ("apply", "in_progress"))), RecipeState.IN_PROGRESS),
    (_st(entries=(("interrupt", "in_progress"),), failed=True, inflight=True), RecipeState.FAILED),
    (_st(entries=(("config", "complete"),), failed=True), RecipeState.FAILED),
    (_st(entries=(("post-interrupt", "complete"),), gate=True, inflight=True), RecipeState.WAITING),
    (_st(entries=(("post-interrupt", "complete"),), inflight=True), RecipeState.IN_PROGRESS),  # uncordon owed
    (_st(entries=(("apply", "erroring"),)), RecipeState.IN_PROGRESS),  # retried: not failed yet
    (_st(), RecipeState.IN_PROGRESS),  # a record with no entry yet (a cordon claim only)
], ids=["complete", "one-entry-left", "failed-at-reboot", "failed-after-config", "at-gate", "in-flight",
        "erroring-retried", "no-entry"])
def test_where_a_recipe_stands_on_a_node(status: NodeStatus, state: RecipeState) -> None:
    assert status.state_of("r") is state


def test_the_summary_counts_nodes_per_recipe_and_the_cordons_it_holds() -> None:
    nodes = [_st("a", entries=(("config", "complete"),)),
             _st("b", entries=(("interrupt", "in_progress"),), failed=True, claim=True, unschedulable=True),
             _st("c", entries=(("apply", "in_progress"),), claim=True, unschedulable=False)]  # claim, not cordoned yet
    [s] = summarize(nodes)
    assert (s.recipe, s.nodes, s.cordoned_by_us) == ("r", 3, 1)
    assert {st: s.count(st) for st in RecipeState} == {RecipeState.COMPLETE: 1, RecipeState.IN_PROGRESS: 1,
                                                        RecipeState.WAITING: 0, RecipeState.FAILED: 1}


def test_status_shows_a_node_that_failed_at_its_reboot_as_failed(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    shutil.copy(ROOT / "examples/fleets/gpu-24.yaml", fleet)

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "reconciler", *argv], cwd=ROOT, capture_output=True, text=True,
                              timeout=300)

    r = cli("apply", "recipes/", "--cluster", f"sim:{fleet}", "--sim-config", "examples/fleets/what-if.yaml",
            "--sim-save", str(fleet))
    assert r.returncode == 1, r.stderr[-2000:]
    out = cli("status", "--cluster", f"sim:{fleet}", "--no-headers").stdout
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()}
    nodes, complete, progress, gate, failed, cordoned = map(int, rows["cve-ksmbd-blacklist"])
    assert (failed, cordoned, progress, gate) == (1, 1, 0, 0) and nodes == complete + 1  # RebootTimeout: failed
    wide = cli("status", "--cluster", f"sim:{fleet}", "-o", "wide", "--no-headers").stdout
    cells = [re.split(r"\s{2,}", line) for line in wide.splitlines()]
    [row] = [c for c in cells if c[0] == "gpu-b-007" and c[3] == "ksmbd-blacklist"]
    assert row[1:3] == ["by us", "cve-ksmbd-blacklist"] and row[5:7] == ["interrupt", "failed"]  # entry: in_progress
    shown = cli("status", "--cluster", f"sim:{fleet}").stdout
    assert "RebootTimeout" in shown and "gpu-b-007" in shown

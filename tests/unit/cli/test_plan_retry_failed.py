"""``plan`` says what ``apply`` will do with nodes that failed in an earlier run with the same inputs:
left failed (not retried, not changing, in no batch) unless ``--retry-failed``, which ``plan``,
``simulate`` and ``apply`` take with one meaning; the plan hash makes ``apply --plan`` hold to it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from reconciler.cli.main import main
from tests.unit.ops.conftest import RunCli

ROOT = Path(__file__).resolve().parents[3]
FLEET = ROOT / "examples" / "fleets" / "gpu-24.yaml"
WHAT_IF = ROOT / "examples" / "fleets" / "what-if.yaml"
RECIPE = str(ROOT / "recipes" / "gpu-training-tuning.yaml")
FAILED = {"gpu-a-004", "gpu-b-007"}


@pytest.fixture(scope="module")
def failed_fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example fleet after the what-if apply: gpu-a-004 and gpu-b-007 failed, the rest complete."""
    out = tmp_path_factory.mktemp("failed") / "fleet.yaml"
    rc = main(["apply", RECIPE, "--cluster", f"sim:{FLEET}", "--sim-config", str(WHAT_IF), "--sim-save", str(out),
               "-o", "json"])
    assert rc == 1 and out.exists()
    return out


def copy(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "fleet.yaml"
    shutil.copy(src, dst)
    return dst


def test_plan_shows_the_failed_nodes_as_apply_leaves_them(cli: RunCli, failed_fleet: Path) -> None:
    rc, out, err = cli("plan", RECIPE, "--cluster", f"sim:{failed_fleet}", "--detailed-exitcode")
    assert rc == 0, err  # apply would change nothing: a plan -> apply pipeline is not "pending" forever
    assert ("Nodes: 0 of 24 selected change; 2 failed with the same inputs before: not retried "
            "(use --retry-failed)") in out
    assert "gpu-a-004" in out and "failed, not retried" in out and "Batches: 0" in out
    rc, out, _ = cli("plan", RECIPE, "--cluster", f"sim:{failed_fleet}", "-o", "json")
    doc = json.loads(out)
    assert doc["summary"]["nodesChanging"] == 0 and doc["summary"]["notRetried"] == 2
    assert {n["name"] for n in doc["nodes"] if n["notRetried"]} == FAILED
    assert all(not c["batches"] for c in doc["compartments"])


def test_plan_retry_failed_plans_them_as_apply_retry_failed_runs_them(cli: RunCli, failed_fleet: Path,
                                                                      tmp_path: Path) -> None:
    rc, out, err = cli("plan", RECIPE, "--cluster", f"sim:{failed_fleet}", "--retry-failed", "--detailed-exitcode",
                       "-o", "json")
    assert rc == 3, err
    doc = json.loads(out)
    assert doc["summary"]["nodesChanging"] == 2 and doc["summary"]["notRetried"] == 0
    assert {n for c in doc["compartments"] for b in c["batches"] for n in b} == FAILED
    plan = tmp_path / "plan.json"
    plan.write_text(out)
    fleet = copy(failed_fleet, tmp_path)
    # the plan-hash gate: a plan made with --retry-failed does not let an apply without it run
    rc, _, err = cli("apply", RECIPE, "--cluster", f"sim:{fleet}", "--plan", str(plan))
    assert rc == 2 and "was made with --retry-failed and this apply runs without it" in err, err
    rc, out, err = cli("apply", RECIPE, "--cluster", f"sim:{fleet}", "--plan", str(plan), "--retry-failed",
                       "-o", "json")
    result = json.loads(out)
    assert result["planHash"] == doc["planHash"]
    retried = {n["name"] for n in result["nodes"] if n["state"] in ("complete", "failed") and
               "not retried" not in n.get("message", "")}
    assert retried == FAILED  # both were started again


def test_apply_without_the_flag_agrees_with_the_plan(cli: RunCli, failed_fleet: Path, tmp_path: Path) -> None:
    rc, out, _ = cli("plan", RECIPE, "--cluster", f"sim:{failed_fleet}", "-o", "json")
    plan = tmp_path / "plan.json"
    plan.write_text(out)
    fleet = copy(failed_fleet, tmp_path)
    rc, _, err = cli("apply", RECIPE, "--cluster", f"sim:{fleet}", "--plan", str(plan), "--retry-failed")
    assert rc == 2 and "was made without --retry-failed and this apply runs with it" in err, err
    rc, out, err = cli("apply", RECIPE, "--cluster", f"sim:{fleet}", "--plan", str(plan), "-o", "json")
    assert rc == 1, err
    result = json.loads(out)
    failed = {n["name"]: n for n in result["nodes"] if n["state"] == "failed"}
    assert set(failed) == FAILED
    assert all("(not retried; use --retry-failed" in n["message"] for n in failed.values())


def test_simulate_takes_retry_failed(cli: RunCli, failed_fleet: Path) -> None:
    rc, out, err = cli("simulate", RECIPE, "--cluster", f"sim:{failed_fleet}", "-o", "json")
    assert rc == 1, err
    assert all("not retried" in n["message"] for n in json.loads(out)["nodes"] if n["state"] == "failed")
    rc, out, err = cli("simulate", RECIPE, "--cluster", f"sim:{failed_fleet}", "--retry-failed", "-o", "json")
    doc = json.loads(out)
    assert "unrecognized" not in err
    assert not any("not retried" in n["message"] for n in doc["nodes"])
    assert "gpu-a-004" in {n["name"] for n in doc["nodes"] if n["state"] == "complete"}  # no failure injected now


def test_plan_repo_refuses_retry_failed(cli: RunCli) -> None:
    rc, _, err = cli("plan", "--repo", str(ROOT), "--base", "HEAD", "--head", "HEAD", "--retry-failed",
                     "--cluster", f"sim:{FLEET}")
    assert rc == 2 and "--retry-failed is not supported in revision mode" in err, err

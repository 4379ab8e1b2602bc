"""Bad ``apply --plan`` files (issue #14): every ``tests/data/bad/plans/NAME.json`` (its
``NAME.expect`` holds ``expect:`` and optionally ``at: LINE:COL``), plus an empty file and one nested
100,000 deep made here, makes ``apply`` exit 2 with one ``error: FILE:line:column: …`` line, no
traceback, and no write: the fleet file is unchanged, ``--sim-save`` is not written and the status
repository gets no commit. A plan file ``plan -o json`` wrote is still accepted."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from reconciler.cli.main import main
from reconciler.testing.fleetgen import make_node, write_fleet
from tests.unit.reliability.test_bad_inputs import SECRET, _git_state

PLANS = Path(__file__).resolve().parents[2] / "data" / "bad" / "plans"
CASES = sorted(PLANS.glob("*.json"))
RECIPE = Path(__file__).resolve().parents[2] / "data" / "bad" / "newline-sha.yaml"


@pytest.fixture(scope="module")
def cluster_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    """A two-node simulated fleet file (and its digest) and an empty bare git repository."""
    d = tmp_path_factory.mktemp("plans")
    fleet = Path(write_fleet(d / "fleet.yaml", [make_node(f"n{i}", {"pool": "gpu"}) for i in (1, 2)]))
    repo = d / "status.git"
    subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True)
    return fleet, hashlib.sha256(fleet.read_bytes()).hexdigest(), repo


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    """A valid recipe (the newline-sha corpus case with its digest repaired)."""
    good = RECIPE.read_text().replace('"sha256:' + "a" * 64 + '\\n"', "sha256:" + "a" * 64)
    p = tmp_path / "recipe.yaml"
    p.write_text(good)
    return p


def _header(case: Path, key: str) -> str:
    for line in case.with_suffix(".expect").read_text().splitlines():
        if line.startswith(f"{key}: "):
            return line[len(key) + 2:]
    return ""


def check_plan_rejected(plan: Path, expect: str, at: str, recipe: Path, cluster_files: tuple[Path, str, Path],
                        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fleet, digest, repo = cluster_files
    git_before = _git_state(repo)
    saved = tmp_path / "saved.yaml"
    rc = main(["apply", str(recipe), "--plan", str(plan), "--cluster", f"sim:{fleet}", "--sim-save", str(saved),
               "--status-repo", str(repo), "--cluster-name", "corpus"])
    out = capsys.readouterr()
    assert rc == 2, f"{plan.name}: exit {rc}\n{out.out}{out.err}"
    err = [x for x in out.err.splitlines() if x.strip()]
    assert len(err) == 1 and err[0].startswith(f"error: {plan}:"), err
    assert expect.lower() in err[0].lower(), err
    if at:
        assert err[0].startswith(f"error: {plan}:{at}: "), (at, err)
    else:
        assert err[0][len(f"error: {plan}:"):].split(":")[0].isdigit(), err
    assert "Traceback" not in out.err + out.out and not out.out.strip() and SECRET not in out.err
    assert hashlib.sha256(fleet.read_bytes()).hexdigest() == digest
    assert not saved.exists() and _git_state(repo) == git_before


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_bad_plan_file_is_rejected_before_anything_runs(
        case: Path, recipe: Path, cluster_files: tuple[Path, str, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    check_plan_rejected(case, _header(case, "expect"), _header(case, "at"), recipe, cluster_files, tmp_path, capsys)


def test_plan_nested_100000_deep_and_empty_plan_are_input_errors(
        recipe: Path, cluster_files: tuple[Path, str, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    check_plan_rejected(deep, "deeper than 64", "1:65", recipe, cluster_files, tmp_path, capsys)
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    check_plan_rejected(empty, "syntax error", "1:1", recipe, cluster_files, tmp_path, capsys)


def test_corpus_is_big_enough() -> None:
    assert len(CASES) >= 20
    assert all(c.with_suffix(".expect").is_file() for c in CASES)


def test_a_plan_written_by_plan_is_accepted(recipe: Path, cluster_files: tuple[Path, str, Path], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    fleet, _, _ = cluster_files
    plan = tmp_path / "plan.json"
    assert main(["plan", str(recipe), "--cluster", f"sim:{fleet}", "-o", "json"]) == 0
    plan.write_text(capsys.readouterr().out)
    saved = tmp_path / "after.yaml"
    rc = main(["apply", str(recipe), "--plan", str(plan), "--cluster", f"sim:{fleet}", "--sim-save", str(saved)])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert saved.exists()

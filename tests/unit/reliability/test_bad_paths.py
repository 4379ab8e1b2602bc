"""A path that cannot be used says why (reconciler.load.pathwords): a symlink loop given directly as
a recipe, policy, fleet, simulation config, plan file, kubeconfig, package or output path is named
as a symlink loop (ELOOP), not "no such file"; a broken symlink names its target; every verb exits 2
with one error line naming the path, no traceback, and nothing is written."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from reconciler.cli.main import main
from reconciler.load.pathwords import SYMLINK_LOOP, os_reason, path_problem

ROOT = Path(__file__).resolve().parents[3]
RECIPE = str(ROOT / "recipes" / "cve-ksmbd-blacklist.yaml")


@pytest.fixture
def loop(tmp_path: Path) -> Path:
    """``loop.yaml`` → ``other.yaml`` → ``loop.yaml``."""
    os.symlink("other.yaml", tmp_path / "loop.yaml")
    os.symlink("loop.yaml", tmp_path / "other.yaml")
    return tmp_path / "loop.yaml"


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    """A copy of the example fleet (a simulated apply writes it back)."""
    path = tmp_path / "fleet.yaml"
    shutil.copy(ROOT / "examples" / "fleets" / "gpu-24.yaml", path)
    return path


def _argvs(loop: str, fleet: str) -> dict[str, list[str]]:
    sim = ["--cluster", f"sim:{fleet}"]
    return {
        "recipe": ["validate", loop],
        "recipe-dir": ["validate", f"{loop}-dir"],
        "policy": ["plan", RECIPE, "--policy", loop, *sim],
        "fleet": ["plan", RECIPE, "--cluster", f"sim:{loop}"],
        "sim-config": ["simulate", RECIPE, *sim, "--sim-config", loop],
        "plan-file": ["apply", RECIPE, *sim, "--plan", loop],
        "kubeconfig": ["plan", RECIPE, "--kubeconfig", loop],
        "package": ["package", "validate", loop],
        "sim-save": ["apply", RECIPE, *sim, "--sim-save", loop],
        "events-file": ["apply", RECIPE, *sim, "--events-file", loop],
        "draw": ["draw", loop, "--report", f"{fleet}.html"],
    }


CASES = list(_argvs("L", "F"))


@pytest.mark.parametrize("case", CASES)
def test_a_symlink_loop_is_named_as_one(case: str, loop: Path, fleet: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    os.symlink(f"{loop}-dir", f"{loop}-dir")  # a directory path that loops onto itself
    before = hashlib.sha256(fleet.read_bytes()).hexdigest()
    argv = _argvs(str(loop), str(fleet))[case]
    rc = main(argv)
    out = capsys.readouterr()
    assert rc == 2, (argv, out.err)
    lines = [x for x in out.err.splitlines() if x.strip()]
    assert len(lines) == 1, lines
    assert SYMLINK_LOOP in lines[0] and str(loop) in lines[0], lines[0]
    assert "no such file" not in lines[0].lower() and "Traceback" not in out.err and "Errno" not in out.err
    assert hashlib.sha256(fleet.read_bytes()).hexdigest() == before
    assert os.path.islink(loop)  # an output path was not replaced


def test_a_loop_in_a_parent_directory_and_a_broken_symlink(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    os.symlink("d", tmp_path / "d")
    os.symlink("nothere.yaml", tmp_path / "dangling.yaml")
    assert main(["validate", str(tmp_path / "d" / "x.yaml"), str(tmp_path / "dangling.yaml"),
                 str(tmp_path / "missing.yaml")]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'd' / 'x.yaml'}: {SYMLINK_LOOP}" in err
    assert f"{tmp_path / 'dangling.yaml'}: broken symlink: its target 'nothere.yaml' does not exist" in err
    assert f"{tmp_path / 'missing.yaml'}: no such file or directory" in err


def test_path_problem_words(tmp_path: Path, loop: Path) -> None:
    (tmp_path / "f.yaml").write_text("a: 1\n")
    assert path_problem(str(tmp_path / "f.yaml")) is None and path_problem(str(tmp_path)) is None
    assert path_problem(str(tmp_path), want_file=True) == "is a directory, not a file"
    assert path_problem(str(loop)) == SYMLINK_LOOP
    assert path_problem(str(tmp_path / "nope")) == "no such file or directory"
    assert path_problem("a" * 5000) == "File name too long"  # the words only: the caller names the path
    try:
        os.stat(loop)
    except OSError as e:
        assert os_reason(e) == SYMLINK_LOOP

"""A value the user gives (a recipe, node or package name, a selector, a namespace, a path, an
option value) is quoted in an error cut to a sensible length (reconciler.errors.clip / shown, and
error_line's backstop for what argparse echoes): a 100,000-character argument gives one short line
that says how long it was, exit 2, nothing written; ``pause --new`` refuses a name that cannot be
a recipe's instead of writing it into the controls ConfigMap."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from reconciler.cli.main import main
from reconciler.cli.safeio import error_line
from reconciler.errors import PATH_LIMIT, SourcePos, clip, shown

ROOT = Path(__file__).resolve().parents[3]
RECIPES = str(ROOT / "recipes")
RECIPE = str(ROOT / "recipes" / "cve-ksmbd-blacklist.yaml")  # no DeploymentPolicy to find
LONG = "a" * 100_000


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    """A copy of the example fleet (the operations verbs write to it)."""
    path = tmp_path / "fleet.yaml"
    shutil.copy(ROOT / "examples" / "fleets" / "gpu-24.yaml", path)
    return path


CASES = {
    "pause": ["pause", LONG, "-y"],
    "pause-new": ["pause", "--new", LONG, "-y"],
    "resume": ["resume", LONG, "-y"],
    "disable-new": ["disable", "--new", LONG, "-y"],
    "reset": ["reset", LONG, "-y"],
    "reset-package": ["reset", "gpu-node-stack", "--package", LONG, "-y"],
    "node-ignore": ["node", "ignore", LONG, "-y"],
    "node-regex": ["node", "ignore", "(" + LONG, "-y"],
    "node-status": ["node", "status", LONG],
    "package-status": ["package", "status", LONG],
    "selector-key": ["plan", RECIPES, "-l", LONG],
    "selector-value": ["plan", RECIPES, "-l", "a=" + LONG],
    "namespace": ["plan", RECIPES, "-n", LONG],
    "output": ["plan", RECIPES, "-o", LONG],
    "request-timeout": ["plan", RECIPES, "--request-timeout", LONG],
    "stray-argument": ["status", LONG],
    "verb": [LONG],
    "recipe-path": ["validate", LONG],
    "policy-path": ["plan", RECIPE, "--policy", LONG],
    "plan-file": ["apply", RECIPES, "--plan", LONG],
    "sim-save": ["apply", RECIPES, "--sim-save", "/nonexistent/" + LONG],
    "events-file": ["apply", RECIPES, "--events-file", "/nonexistent/" + LONG],
    "import-name": ["import", "--from", "skyhook", "--name", LONG, "-y"],
}
NO_CLUSTER = {"verb", "recipe-path"}


@pytest.mark.parametrize("case", list(CASES))
def test_a_huge_argument_is_echoed_cut(case: str, fleet: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if case == "reset-package":  # the recipe must be known for its package to be looked up
        assert main(["pause", "--new", "gpu-node-stack", "-y", "--cluster", f"sim:{fleet}"]) == 0
        capsys.readouterr()
    before = hashlib.sha256(fleet.read_bytes()).hexdigest()
    argv = CASES[case] + ([] if case in NO_CLUSTER else ["--cluster", f"sim:{fleet}"])
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse
        rc = int(e.code or 0)
    out = capsys.readouterr()
    assert rc == 2, (case, out.err[:500])
    assert "Traceback" not in out.err
    assert len(out.err) < 1500, (case, len(out.err), out.err[:600])
    assert "a" * (PATH_LIMIT + 8) not in out.err + out.out
    assert "characters)" in out.err, out.err[:600]  # says how long the value was
    assert hashlib.sha256(fleet.read_bytes()).hexdigest() == before


@pytest.mark.parametrize("name", ["Bad_Name!", "a" * 54, "x.", ""])
def test_pause_new_refuses_a_name_no_recipe_can_have(name: str, fleet: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # it wrote the key into the controls ConfigMap, after which the simulated fleet no longer loaded
    # (a real API server refuses such a ConfigMap key)
    before = fleet.read_bytes()
    argv = ["pause", "--new", name, "-y", "--cluster", f"sim:{fleet}"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "pause --new: recipe name" in err or "name the recipe" in err, err
    assert fleet.read_bytes() == before
    assert main(["pause", "--new", "not-yet-applied", "-y", "--cluster", f"sim:{fleet}"]) == 0
    assert main(["status", "--cluster", f"sim:{fleet}"]) == 0


def test_clip_and_shown() -> None:
    assert clip("short") == "short" and shown("short") == "'short'"
    assert clip("a" * 81) == "a" * 80 + "… (81 characters)"
    assert shown("a" * 81) == repr("a" * 80) + "… (81 characters)"
    assert shown("x" * 10, limit=4) == "'xxxx'… (10 characters)"
    assert str(SourcePos("p" * 5000, 3, 4)) == "p" * PATH_LIMIT + "… (5000 characters):3:4"
    assert str(SourcePos("recipes/a.yaml", 3, 4)) == "recipes/a.yaml:3:4"


def test_error_line_cuts_a_long_word_only_after_redacting_it() -> None:
    token = "ghp_" + "A" * 36
    line = error_line("error", f"unrecognized arguments: https://user:{'s' * 400}@host/x {token} " + "b" * 1000)
    assert "s" * 10 not in line and token not in line  # masked whole before anything is cut
    assert "b" * 300 + "… (1000 characters)" in line and "b" * 301 not in line
    assert error_line("error", "a normal message") == "error: a normal message"

"""Unknown names are errors (issue 16): every verb that names a recipe, package or node exits 2
naming what was not found and what exists, and writes nothing; ``pause/disable --new`` is the
documented exception, ``reset --ignore-not-found`` the kubectl-style opt-out."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.model.nodestate import PackageState, dump_state, state_key
from reconciler.testing.fleetgen import make_node
from tests.unit.ops.conftest import RunCli, write_fleet

R = "kernel-fix"


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    state = dump_state({"fix|2.1.0": PackageState(name="fix", version="2.1.0", image="ghcr.io/example/fix",
                                                  stage="config", state="complete")})  # type: ignore[arg-type]
    return write_fleet(tmp_path / "fleet.yaml", [make_node("n1", {"pool": "gpu"}, annotations={state_key(R): state}),
                                                 make_node("n2", {"pool": "gpu"})])


UNKNOWN = [
    (["pause", "no-such-recipe", "-y"], "recipe 'no-such-recipe' not found", f"known recipes: {R}"),
    (["resume", "no-such-recipe", "-y"], "recipe 'no-such-recipe' not found", f"known recipes: {R}"),
    (["disable", "no-such-recipe", "-y"], "recipe 'no-such-recipe' not found", "--new"),
    (["enable", "no-such-recipe", "-y"], "recipe 'no-such-recipe' not found", f"known recipes: {R}"),
    (["reset", "no-such-recipe", "-y"], "recipe 'no-such-recipe' not found", f"known recipes: {R}"),
    (["node", "ignore", "n9", "-y"], "node 'n9' not found", "nodes: n1, n2"),
    (["node", "unignore", "gpu-.*", "-y"], "node 'gpu-.*' not found", "nodes: n1, n2"),
    (["node", "reset", "n1", "--recipe", "nope", "-y"], "recipe 'nope' not found", f"known recipes: {R}"),
    (["node", "reset", "n9", "--recipe", R, "-y"], "node 'n9' not found", "nodes: n1, n2"),
    (["node", "status", "n9"], "node 'n9' not found", "nodes: n1, n2"),
    (["node", "status", "--recipe", "nope"], "recipe 'nope' not found", f"known recipes: {R}"),
    (["package", "status", "nope"], "package 'nope' not found", "known packages: fix"),
    (["package", "status", "fix", "--recipe", "nope"], "recipe 'nope' not found", f"known recipes: {R}"),
    (["package", "status", "fix", "--node", "n9"], "node 'n9' not found", "nodes: n1, n2"),
    (["package", "rerun", "nope", "--recipe", R, "--node", "n1", "-y"], "package 'nope' not found", "fix"),
    (["package", "rerun", "fix", "--recipe", "nope", "--node", "n1", "-y"], "recipe 'nope' not found", R),
    (["package", "rerun", "fix", "--recipe", R, "--node", "n9", "-y"], "node 'n9' not found", "nodes: n1, n2"),
    (["package", "logs", "nope", "--recipe", R], "package 'nope' not found", "known packages: fix"),
    (["package", "logs", "fix", "--recipe", "nope"], "recipe 'nope' not found", R),
    (["status", "--recipe", "nope"], "recipe 'nope' not found", f"known recipes: {R}"),
]


@pytest.mark.parametrize(("argv", "missing", "existing"), UNKNOWN, ids=[" ".join(a[:3]) for a, _, _ in UNKNOWN])
def test_unknown_name_is_exit_2_naming_what_exists(argv: list[str], missing: str, existing: str, fleet: Path,
                                                    cli: RunCli) -> None:
    before = fleet.read_bytes()
    rc, out, err = cli(*argv, "--cluster", f"sim:{fleet}")
    assert rc == 2, (out, err)
    assert missing in err and existing in err and "Traceback" not in err
    assert not out  # nothing shown as if it would be done
    assert fleet.read_bytes() == before


def test_pause_new_switches_a_recipe_before_its_first_run(fleet: Path, cli: RunCli) -> None:
    rc, _, err = cli("pause", "later", "--new", "-y", "--cluster", f"sim:{fleet}")
    assert rc == 0, err
    # now known through its control switch: resume needs no --new
    rc, out, err = cli("resume", "later", "-y", "--cluster", f"sim:{fleet}")
    assert rc == 0 and "written: 1" in out, err


def test_known_names_still_work(fleet: Path, cli: RunCli) -> None:
    assert cli("pause", R, "-y", "--cluster", f"sim:{fleet}")[0] == 0
    assert cli("package", "status", "fix", "--cluster", f"sim:{fleet}")[0] == 0
    assert cli("node", "status", "n[12]", "--recipe", R, "--cluster", f"sim:{fleet}")[0] == 0


def test_reset_ignore_not_found(fleet: Path, cli: RunCli) -> None:
    rc, out, _ = cli("reset", "gone", "--ignore-not-found", "-y", "--cluster", f"sim:{fleet}")
    assert rc == 0 and "nothing to change" in out

"""NodeWright habits and the rest of issue 16's conventions: ``completion bash|zsh|fish``, ``node
list``, ``reset --package``, a bare ``--dry-run`` that takes no word, help text without module names."""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.cli.main import build_parser
from reconciler.model.nodestate import (
    FailureRecord,
    PackageState,
    dump_model,
    dump_state,
    failure_key,
    parse_state,
    state_key,
)
from reconciler.testing.fleetgen import make_node, write_fleet
from tests.unit.ops.conftest import RunCli, load_fleet

R = "kernel-fix"


def _script(shell: str) -> str:
    return subprocess.run([sys.executable, "-m", "reconciler", "completion", shell], check=True,
                          capture_output=True, text=True).stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
@pytest.mark.parametrize(("line", "expect"), [
    ("reconciler pa", {"package", "pause"}),
    ("reconciler node i", {"ignore"}),
    ("reconciler node ignore --dr", {"--dry-run"}),
    ("reconciler -v sta", {"status"}),
    ("reconciler status --no-h", {"--no-headers"}),
    ("reconciler completion ", {"bash", "zsh", "fish", "-h", "--help", "-v", "--verbose"}),
    ("reconciler validate ./", set()),
])
def test_bash_completion_completes_verbs_and_flags(line: str, expect: set[str], tmp_path: Path) -> None:
    script = tmp_path / "c.bash"
    script.write_text(_script("bash"))
    words = line.split() + ([""] if line.endswith(" ") else [])
    cmd = (f"source {script}; COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}; "
           "_reconciler; printf '%s\\n' \"${COMPREPLY[@]}\"")
    got = set(subprocess.run(["bash", "-c", cmd], check=True, capture_output=True, text=True, cwd=tmp_path)
              .stdout.split())
    if expect:
        assert got == expect
    else:  # a file argument: the shell's file completion
        assert got == {"./c.bash"}


def test_zsh_and_fish_scripts() -> None:
    zsh = _script("zsh")
    assert "bashcompinit" in zsh and "complete -F _reconciler reconciler" in zsh
    fish = _script("fish")
    assert "complete -c reconciler -n '__fish_use_subcommand' -a 'apply'" in fish
    assert re.search(r"__fish_seen_subcommand_from node.*-a 'ignore'", fish)
    assert "-l no-headers" in fish and "-s l" in fish
    if shutil.which("fish"):
        subprocess.run(["fish", "--no-execute", "-c", fish], check=True)


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    state = dump_state({
        "fix|2.1.0": PackageState(name="fix", version="2.1.0", image="i", stage="apply", state="erroring"),  # type: ignore[arg-type]
        "base|1.0.0": PackageState(name="base", version="1.0.0", image="i", stage="config", state="complete"),  # type: ignore[arg-type]
    })
    failure = dump_model(FailureRecord(runId="run-1", reason="StageFailed", stage="apply", package="fix", exitCode=3))
    return Path(write_fleet(tmp_path / "fleet.yaml", [
        make_node("n1", {"pool": "gpu"}, annotations={state_key(R): state, failure_key(R): failure}),
        make_node("n2", {"pool": "gpu"})]))


def test_node_list_is_node_status(fleet: Path, cli: RunCli) -> None:
    listed = cli("node", "list", "--cluster", f"sim:{fleet}")
    status = cli("node", "status", "--cluster", f"sim:{fleet}")
    assert listed[0] == 0 and listed == status and "n1" in listed[1] and "n2" in listed[1]


def test_reset_package_forgets_only_that_package(fleet: Path, cli: RunCli) -> None:
    rc, out, err = cli("reset", R, "--package", "fix", "-y", "--cluster", f"sim:{fleet}")
    assert rc == 0 and "written: 1" in out, err
    ann = load_fleet(fleet)["n1"]["metadata"]["annotations"]
    assert [e.name for e in parse_state(ann[state_key(R)], node="n1").values()] == ["base"]
    assert failure_key(R) not in ann  # the failure was about fix
    rc, _, err = cli("reset", R, "--package", "nope", "-y", "--cluster", f"sim:{fleet}")
    assert rc == 2 and "package 'nope' not found" in err


def test_bare_dry_run_takes_no_word(fleet: Path, cli: RunCli) -> None:
    before = fleet.read_bytes()
    rc, out, err = cli("reset", "--dry-run", R, "--cluster", f"sim:{fleet}")
    assert rc == 0 and "dry run: nothing was written" in out, err
    rc, _, _ = cli("node", "ignore", "--dry-run=client", "n1", "--cluster", f"sim:{fleet}")
    assert rc == 0 and fleet.read_bytes() == before
    with pytest.raises(SystemExit):
        cli("reset", "--dry-run=maybe", R, "--cluster", f"sim:{fleet}")


_CODE = re.compile(r"\breconciler\.(?:cli|ops|model|report|adapters|execute|plan|load|observe|packages|service|"
                   r"errors|ports|testing)\b|:(?:mod|func|class|meth):|``")


def test_help_text_names_no_module() -> None:
    def walk(p: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
        out = [p]
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for child in a.choices.values():
                    out += walk(child)
        return out

    parsers = walk(build_parser())
    assert len(parsers) > 25
    for p in parsers:
        text = p.format_help()
        assert not _CODE.search(text), (p.prog, _CODE.findall(text))

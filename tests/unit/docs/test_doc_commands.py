"""Every ``reconciler`` command the README and the docs pages show in a ``bash`` block parses with
the CLI's own parser (as ``reconciler`` runs it: ``--dry-run=VALUE`` spelled as the CLI spells it),
so a renamed verb or flag fails here instead of in a reader's terminal. The simulated-fleet
commands of the tutorial run for real (tests/unit/docs/test_readme.py runs the README's)."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.cli.main import build_parser
from reconciler.cli.opsargs import dry_run_argv

ROOT = Path(__file__).resolve().parents[3]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def commands(path: Path) -> list[str]:
    """The ``reconciler …`` commands of a page's bash blocks: continuation lines joined, comments,
    pipes and ``&&`` chains split off."""
    out = []
    for block in re.findall(r"```(?:bash|sh)\n(.*?)```", path.read_text(), re.S):
        for line in block.replace("\\\n", " ").splitlines():
            for part in re.split(r"&&|\|\||;|\|", line.split(" #")[0]):
                part = part.strip().removeprefix("kubectl ")
                if part.startswith("reconciler "):
                    out.append(part)
    return out


ALL = [(str(p.relative_to(ROOT)), c) for p in PAGES for c in commands(p)]


def test_the_pages_show_commands() -> None:
    assert len(ALL) > 40
    assert {page for page, _ in ALL} >= {"README.md", "docs/tutorial/first-rollout.md", "docs/how-to/rollback.md",
                                         "docs/how-to/recover-failed-node.md", "docs/how-to/pause.md"}


@pytest.mark.parametrize(("page", "command"), ALL, ids=[f"{p}:{c[:60]}" for p, c in ALL])
def test_every_documented_command_parses(page: str, command: str) -> None:
    parser = build_parser()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parser.parse_args(dry_run_argv(shlex.split(command)[1:]))
    except SystemExit as e:
        assert not e.code, f"{page}: `{command}` does not parse: {err.getvalue().strip()}"


@pytest.mark.slow  # whole rollouts through the CLI; scripts/test (CI) runs them
def test_the_tutorial_runs_on_the_simulated_fleet(tmp_path: Path) -> None:
    """Steps 2 to 5 of docs/tutorial/first-rollout.md, in a copy of the checkout's inputs."""
    for name in ("recipes", "policies", "examples"):
        shutil.copytree(ROOT / name, tmp_path / name)
    fleet = tmp_path / "fleet.yaml"

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "reconciler", *argv], cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)

    r = run("apply", "recipes/", "--cluster", "sim:examples/fleets/gpu-24.yaml", "--sim-save", str(fleet))
    assert r.returncode == 0 and "4/4 recipe(s) succeeded" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    assert "gpu-a-002" in run("node", "status", "gpu-a-002", "--cluster", f"sim:{fleet}").stdout
    tuned = tmp_path / "recipes" / "gpu-training-tuning.yaml"
    tuned.write_text(tuned.read_text().replace("vm.max_map_count=262144", "vm.max_map_count=524288"))
    r = run("plan", "recipes/gpu-training-tuning.yaml", "--cluster", f"sim:{fleet}")
    assert r.returncode == 0 and "Actions: 24 reconfigure" in r.stdout, r.stdout
    assert "Interrupts: 24 restartAllServices" in r.stdout
    r = run("simulate", "recipes/gpu-training-tuning.yaml", "--cluster", "sim:examples/fleets/gpu-24.yaml",
            "--sim-config", "examples/fleets/what-if.yaml")
    assert "gpu-a-004 failed: nvidia-tuned 0.3.2 apply failed after 3 attempt(s): exit code 2" in r.stdout, r.stdout
    assert "gpu-b-007 failed: node did not come back from the reboot" in r.stdout


MARK = "<!-- runs on the simulated fleet: tests/unit/docs/test_doc_commands.py -->\n```bash\n"
RUNNABLE = [(str(p.relative_to(ROOT)), block) for p in PAGES
            for block in re.findall(re.escape(MARK) + r"(.*?)```", p.read_text(), re.S)]


def test_the_marked_rehearsals_exist() -> None:
    assert {page for page, _ in RUNNABLE} >= {"docs/how-to/pause.md", "docs/how-to/rollback.md",
                                              "docs/how-to/recover-failed-node.md"}


@pytest.mark.slow
@pytest.mark.parametrize(("page", "block"), RUNNABLE, ids=[p for p, _ in RUNNABLE])
def test_a_marked_rehearsal_runs_on_the_simulated_fleet(tmp_path: Path, page: str, block: str) -> None:
    """The block runs in a copy of the checkout's inputs, its /tmp/ paths moved into the test's
    directory; every command exits 0, or 1 where the rehearsal shows a failed node (never 2 or more:
    no bad input, no unknown option, no cluster error)."""
    for name in ("recipes", "policies", "examples"):
        shutil.copytree(ROOT / name, tmp_path / name)
    work = tmp_path / "tmp"
    work.mkdir()
    lines = [line for line in block.replace("\\\n", " ").replace("/tmp/", f"{work}/").splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    script = "set -u -o pipefail\n" + "".join(
        f"{line} || {{ rc=$?; [ $rc -eq 1 ] || {{ echo 'exit '$rc': {line[:80]}' >&2; exit $rc; }}; }}\n"
        for line in lines)
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path), "NO_COLOR": "1"}
    r = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, f"{page}: {r.stderr[-3000:]}"

"""``NO_COLOR`` (any non-empty value) and ``TERM=dumb`` (issue 16): on a real pseudo-terminal the
verbs that make output print no ANSI escape under either, while the same command without them does
style its output (so the check can fail)."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.cli.console import styles_allowed
from reconciler.testing.fleetgen import make_node, write_fleet
from tests.unit.cli.test_apply_cli import RECIPE

ESC = b"\x1b"


def _on_pty(argv: list[str], env: dict[str, str]) -> bytes:
    """Run ``python -m reconciler argv`` with stdout and stderr on a pseudo-terminal; all it wrote."""
    main_fd, sub_fd = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "reconciler", *argv], stdin=subprocess.DEVNULL,
                            stdout=sub_fd, stderr=sub_fd, env=env, close_fds=True)
    os.close(sub_fd)
    out = b""
    while True:
        ready, _, _ = select.select([main_fd], [], [], 60)
        if not ready:
            proc.kill()
            break
        try:
            chunk = os.read(main_fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(main_fd)
    assert proc.wait(60) == 0, out.decode(errors="replace")
    return out


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    fleet = write_fleet(tmp_path / "fleet.yaml", [make_node(f"n{i}", {"pool": "gpu"}) for i in (1, 2)])
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE)
    return Path(fleet), recipe


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM", "FORCE_COLOR", "COLUMNS")}
    env.update({"TERM": "xterm-256color", "COLUMNS": "120"}, **extra)
    return env


@pytest.mark.parametrize("verb", ["plan", "status"])
def test_no_escape_under_no_color_or_dumb_terminal(verb: str, files: tuple[Path, Path]) -> None:
    fleet, recipe = files
    argv = ["plan", str(recipe), "--cluster", f"sim:{fleet}"] if verb == "plan" else [
        "status", "-o", "wide", "--cluster", f"sim:{fleet}"]
    assert ESC in _on_pty(argv, _env())  # styled on a terminal by default
    for env in (_env(NO_COLOR="1"), _env(NO_COLOR="false"), _env(TERM="dumb")):
        out = _on_pty(argv, env)
        assert ESC not in out, out[:400]
        assert b"n1" in out  # the output itself is still there


def test_styles_allowed_table() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty, pipe = Tty(), io.StringIO()
    assert styles_allowed(tty, {"TERM": "xterm"})
    assert styles_allowed(tty, {"NO_COLOR": ""})  # empty: not set (no-color.org)
    assert not styles_allowed(tty, {"NO_COLOR": "0"})
    assert not styles_allowed(tty, {"TERM": "dumb"})
    assert not styles_allowed(pipe, {})

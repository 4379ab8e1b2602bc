"""``reconciler controller`` as a command: bad options are exit 2 before any work; ``--once`` runs
one pass of a directory source on the simulated fleet; SIGTERM stops a serving controller with
exit 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from reconciler.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
FLEET = str(ROOT / "examples" / "fleets" / "gpu-24.yaml")
OFF = ["--metrics-bind-address", "0", "--health-probe-bind-address", "0"]


@pytest.mark.parametrize(("argv", "message"), [
    (["--source", "git"], "--source git needs --git-url"),
    (["--source", "crd", "--git-url", "https://x"], "--git-url is for --source git"),
    (["--source", "directory"], "--source directory needs --recipes"),
    (["--source", "crd", "--recipes", "recipes"], "--recipes is for --source directory"),
    (["--source", "crd", "--cluster", f"sim:{FLEET}"], "--source crd needs a real cluster"),
    (["--source", "directory", "--recipes", "recipes", "--leader-elect", "--leader-elect-renew-deadline", "20s"],
     "--leader-elect-retry-period < --leader-elect-renew-deadline"),
    (["--source", "directory", "--recipes", "recipes", "--metrics-bind-address", "8080"], "--metrics-bind-address"),
    (["--source", "directory", "--recipes", "recipes", "--status-repo", "https://x"],
     "--status-repo needs --cluster-name"),
    (["--source", "directory", "--recipes", "recipes", "--cluster", f"sim:{FLEET}", "--cluster-name", "c1",
      "--status-repo", "/nonexistent/status.git"], "--status-repo"),
    (["--source", "directory", "--recipes", "recipes", "--cluster", f"sim:{FLEET}", "--cluster-name", "c1",
      "--status-repo", "/nonexistent/status.git", "--status-author", "nobody"], "--status-author"),
])
def test_bad_options_are_exit_2_naming_the_option(argv: list[str], message: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["controller", *OFF, *argv]) == 2
    assert message in capsys.readouterr().err


def test_once_runs_one_pass_of_a_directory_on_the_simulated_fleet(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["controller", "--source", "directory", "--recipes", str(ROOT / "recipes" / "gpu-training-tuning.yaml"),
               "--policy", str(ROOT / "policies"), "--cluster", f"sim:{FLEET}", "--once", *OFF])
    assert rc == 0, capsys.readouterr().err


def test_once_with_a_bad_recipe_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "r.yaml"
    bad.write_text("apiVersion: reconciler.nodewright.dev/v1alpha1\nkind: NodeRecipe\nmetadata: {name: x}\n"
                   "spec: {nodeSelector: {}, packages: {p: {version: nope, image: a/b}}}\n")
    assert main(["controller", "--source", "directory", "--recipes", str(bad), "--no-locked",
                 "--cluster", f"sim:{FLEET}", "--once", *OFF]) == 2


def test_sigterm_stops_a_serving_controller_with_exit_0(tmp_path: Path) -> None:
    """SIGTERM once the controller serves (its first pass logged: the handlers are installed by
    then, however slow the machine) stops it with exit 0."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "reconciler", "-v", "controller", "--source", "directory", "--recipes",
                          str(ROOT / "recipes" / "gpu-training-tuning.yaml"), "--policy", str(ROOT / "policies"),
                          "--cluster", f"sim:{FLEET}", *OFF], env=env, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    serving = threading.Event()

    def read() -> None:
        assert p.stderr is not None
        for line in p.stderr:
            lines.append(line)
            if "pass 1:" in line:
                serving.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert serving.wait(120), "".join(lines)
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
        reader.join(10)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
        reader.join(10)
        if p.stderr is not None:
            p.stderr.close()
    err = "".join(lines)
    assert p.returncode == 0, err
    assert "received SIGTERM" in err and "controller stopped after" in err

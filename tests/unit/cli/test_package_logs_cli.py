"""``package logs --tail N`` and ``-f`` (issue 16, NodeWright's ``package logs -f --tail``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from reconciler.cli.package import _follow
from reconciler.ops.logs import StageLog
from reconciler.testing.fleetgen import make_node, write_fleet
from tests.unit.ops.conftest import RunCli
from tests.unit.ops.test_ops_cli import RECIPE, R


@pytest.fixture
def saved(tmp_path: Path, cli: RunCli) -> Path:
    fleet = write_fleet(tmp_path / "f.yaml", [make_node("n1", {"pool": "gpu"})])
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE)
    cfg = tmp_path / "sim.yaml"
    cfg.write_text("failures:\n- {node: n1, package: fix, stage: apply, exitCode: 7, times: 99, "
                   "logTail: \"first line\\nsecond line\\nthird line\"}\n")
    out = tmp_path / "saved.yaml"
    rc, _, _ = cli("apply", str(recipe), "--cluster", f"sim:{fleet}", "--sim-config", str(cfg), "--sim-save", str(out),
                   "-o", "json")
    assert rc == 1
    return out


def test_tail_keeps_the_last_lines(saved: Path, cli: RunCli) -> None:
    rc, out, _ = cli("package", "logs", "fix", "--recipe", R, "--cluster", f"sim:{saved}")
    assert rc == 0 and "first line" in out and "third line" in out
    rc, out, _ = cli("package", "logs", "fix", "--recipe", R, "--cluster", f"sim:{saved}", "--tail", "1")
    assert rc == 0 and "third line" in out and "first line" not in out and "second line" not in out
    rc, out, _ = cli("package", "logs", "fix", "--recipe", R, "--cluster", f"sim:{saved}", "--tail", "0",
                     "-o", "json")
    assert rc == 0 and all(x["log"] == "" for x in json.loads(out)["logs"])


def test_follow_on_finished_pods_prints_once_and_returns(saved: Path, cli: RunCli) -> None:
    rc, out, _ = cli("package", "logs", "fix", "--recipe", R, "--cluster", f"sim:{saved}", "-f", "-o", "json")
    lines = [json.loads(line) for line in out.splitlines()]  # JSON lines
    assert rc == 0 and lines and all(x["phase"] == "failed" for x in lines)


class _Clock:
    def __init__(self) -> None:
        self.waits: list[float] = []

    def wait(self, seconds: float) -> None:
        self.waits.append(seconds)


class _Cluster:
    def get_node(self, name: str) -> Any:
        return argparse.Namespace(name=name)


def test_follow_prints_changes_and_new_lines_until_no_pod_runs(capsys: pytest.CaptureFixture[str]) -> None:
    pod = StageLog("n1", "fix", "2.1.0", "apply", "pod", "fix-pod", 1, "running", log="a")
    script = [[pod],
              [pod],  # nothing new: nothing printed
              [StageLog("n1", "fix", "2.1.0", "apply", "pod", "fix-pod", 1, "running", log="a\nb")],
              [StageLog("n1", "fix", "2.1.0", "apply", "pod", "fix-pod", 1, "failed", 3, log="a\nb\nc")]]
    clock = _Clock()
    opened = argparse.Namespace(clock=clock, cluster=argparse.Namespace(nodes=_Cluster()))
    args = argparse.Namespace(output="table", interval=2.0, package="fix", recipe=R)
    rest = iter(script[1:])
    assert _follow(args, opened, [argparse.Namespace(name="n1")], script[0], lambda nodes: next(rest)) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["== n1 fix 2.1.0 apply pod fix-pod (attempt 1): running", "a", "b",
                   "== n1 fix 2.1.0 apply pod fix-pod (attempt 1): failed, exit 3", "c"]
    assert clock.waits == [2.0, 2.0, 2.0]  # stopped once no pod was pending or running

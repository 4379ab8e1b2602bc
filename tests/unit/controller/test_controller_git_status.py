"""``reconciler controller --status-repo``: every recipe run of a pass is committed to git as
``apply`` commits it (the same file, :mod:`reconciler.report.gitstatus`), a pass that changes
nothing commits nothing, an error status is committed for a refused recipe run but not for a
pass that is only preempted, and a push that fails never stops the controller."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from reconciler.cli.main import main
from reconciler.cli.statusgit import GitStatusObserver
from reconciler.controller.stopping import PassStopped
from reconciler.errors import ClusterError, InputError
from reconciler.execute.lock import LeaseLostError

ROOT = Path(__file__).resolve().parents[3]
FLEET = ROOT / "examples" / "fleets" / "gpu-24.yaml"
RECIPE = str(ROOT / "recipes" / "gpu-training-tuning.yaml")
OFF = ["--metrics-bind-address", "0", "--health-probe-bind-address", "0"]


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def bare(tmp_path: Path) -> Path:
    b = tmp_path / "status.git"
    git("init", "-q", "--bare", str(b))
    return b


def commits(bare: Path) -> list[str]:
    try:
        return git("--git-dir", str(bare), "log", "--format=%s", "reconciler-status").splitlines()
    except subprocess.CalledProcessError:
        return []


def status_file(bare: Path, cluster: str, recipe: str) -> dict[str, Any]:
    return json.loads(git("--git-dir", str(bare), "show", f"reconciler-status:status/{cluster}/{recipe}.json"))


def test_once_commits_the_status_file(bare: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["controller", "--source", "directory", "--recipes", RECIPE, "--policy", str(ROOT / "policies"),
               "--cluster", f"sim:{FLEET}", "--cluster-name", "lab-1", "--status-repo", str(bare), "--once", *OFF])
    assert rc == 0, capsys.readouterr().err
    first = commits(bare)
    assert len(first) == 1 and "gpu-training-tuning" in first[0] and "[skip ci]" in first[0]
    doc = status_file(bare, "lab-1", "gpu-training-tuning")
    assert doc["result"] == "succeeded" and doc["cluster"] == "lab-1"
    assert doc["counts"]["total"] > 0 and doc["counts"]["complete"] == doc["counts"]["total"]
    assert doc["sourceRevision"].startswith("directory ")


def test_passes_of_a_running_controller_commit_only_what_changed(bare: Path) -> None:
    from reconciler.cli.clusters import open_cluster
    from reconciler.cli.main import build_parser
    from reconciler.cli.wiring import build, git_status

    args = build_parser().parse_args(
        ["controller", "--source", "directory", "--recipes", RECIPE, "--policy", str(ROOT / "policies"),
         "--cluster", f"sim:{FLEET}", "--cluster-name", "lab-1", "--status-repo", str(bare), *OFF])
    from reconciler.cli.controller import _check

    _check(args)
    wired = build(args, open_cluster(args), "test/1", git_status(args))
    try:
        assert wired.controller.reconcile(["startup"]) == "succeeded"
        doc = status_file(bare, "lab-1", "gpu-training-tuning")
        assert doc["result"] == "succeeded" and doc["nodes"], doc  # the rollout's nodes are listed
        assert wired.controller.reconcile(["a node changed"]) == "succeeded"  # converged: nothing to do
        after = status_file(bare, "lab-1", "gpu-training-tuning")
        assert after["counts"] == doc["counts"] and after["result"] == "succeeded"
        n = len(commits(bare))
        assert wired.controller.reconcile(["again"]) == "succeeded"
        assert len(commits(bare)) == n  # identical content: no commit
    finally:
        wired.close()


def test_the_status_prefix_may_not_overlap_the_watched_recipes(bare: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["controller", "--source", "directory", "--recipes", "recipes", "--cluster", f"sim:{FLEET}",
               "--cluster-name", "c1", "--status-repo", str(bare), "--status-prefix", "recipes/status", "--once",
               *OFF])
    assert rc == 2
    err = capsys.readouterr().err
    assert "--status-prefix" in err and "overlaps" in err and "Traceback" not in err
    assert commits(bare) == []


class _Git:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.calls: list[tuple[str, ...]] = []

    def finished(self, plan: Any, result: Any, revision: str) -> None:
        self.calls.append(("finished", plan.recipe.name, revision))
        if self.fail:
            raise ClusterError("push refused by https://token@git.example/x.git")

    def failed(self, recipe: str, version: str, plan: Any, error: BaseException, run_id: str, revision: str) -> None:
        self.calls.append(("failed", recipe, type(error).__name__, revision))


class _Recipe:
    name, version = "r1", "1.0.0"


class _Plan:
    recipe = _Recipe()


@pytest.mark.parametrize(("error", "committed"), [
    (InputError("locked mode refuses it"), True),
    (ClusterError("the API server is gone"), True),
    (PassStopped("preempted: a node joined"), False),
    (LeaseLostError("lost"), False),
])
def test_an_error_status_is_committed_except_for_a_pass_that_is_only_retried(error: Exception,
                                                                             committed: bool) -> None:
    g = _Git()
    obs = GitStatusObserver(g, lambda: "git abc", lambda _: None, transient=(LeaseLostError,))  # type: ignore[arg-type]
    obs.started(_Recipe(), _Plan(), "run1")  # type: ignore[arg-type]
    obs.failed(_Recipe(), error, "run1")  # type: ignore[arg-type]
    assert g.calls == ([("failed", "r1", type(error).__name__, "git abc")] if committed else [])


def test_a_failed_push_is_a_warning_and_never_raises() -> None:
    g = _Git(fail=True)
    warnings: list[str] = []
    obs = GitStatusObserver(g, lambda: "rev", warnings.append)  # type: ignore[arg-type]
    obs.finished(_Recipe(), _Plan(), object())  # type: ignore[arg-type]
    assert g.calls == [("finished", "r1", "rev")]
    assert len(warnings) == 1 and "r1" in warnings[0] and "token" not in warnings[0]

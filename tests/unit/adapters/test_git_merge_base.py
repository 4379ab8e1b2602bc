"""``plan --base main --head feature`` compares from the merge base, as GitHub compares a pull
request (issue #14): when main moved on after the feature branched off, main's own later changes
are not shown as the PR's. Every output says so; a warning says when base is not an ancestor of
head. A real temporary repository."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from reconciler.adapters.git.repo import GitRepo
from reconciler.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
FLEET = ROOT / "examples" / "fleets" / "gpu-24.yaml"
TUNING = "recipes/gpu-training-tuning.yaml"
LIMITS = "recipes/containerd-limits.yaml"


def git(repo: Path, *args: str) -> str:
    env_args = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    return subprocess.run(["git", *env_args, *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


def bump(repo: Path, path: str, old: str, new: str) -> None:
    f = repo / path
    text = f.read_text()
    assert old in text, (path, old)
    f.write_text(text.replace(old, new, 1))


@pytest.fixture
def diverged(tmp_path: Path) -> dict[str, str | Path]:
    """main: base commit M0, then M1 (main moves on: containerd-limits changes);
    feature: branched at M0, changes gpu-training-tuning only."""
    r = tmp_path / "repo"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    shutil.copytree(ROOT / "recipes", r / "recipes")
    shutil.copytree(ROOT / "policies", r / "policies")
    git(r, "add", "-A")
    git(r, "commit", "-qm", "M0")
    m0 = git(r, "rev-parse", "HEAD")
    git(r, "checkout", "-q", "-b", "feature")
    bump(r, TUNING, "version: 0.3.2", "version: 0.3.3")
    git(r, "commit", "-qam", "feature: bump nvidia-tuned")
    git(r, "checkout", "-q", "main")
    bump(r, LIMITS, "version: 2026.10.4", "version: 2026.10.5")
    git(r, "commit", "-qam", "M1: main moves on")
    return {"repo": r, "m0": m0, "main": git(r, "rev-parse", "main"), "feature": git(r, "rev-parse", "feature")}


def plan(repo: Path, base: str, head: str, output: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(["plan", "--repo", str(repo), "--base", base, "--head", head, "--cluster", f"sim:{FLEET}",
               "-o", output])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_git_repo_merge_base_and_ancestry(diverged: dict[str, str | Path]) -> None:
    g = GitRepo(str(diverged["repo"]))
    assert g.merge_base("main", "feature") == diverged["m0"]
    assert g.merge_base("feature", "main") == diverged["m0"]
    assert g.merge_base("main", "main") == diverged["main"]
    assert g.is_ancestor(str(diverged["m0"]), "feature") and g.is_ancestor("main", "main")
    assert not g.is_ancestor("main", "feature")


def test_json_compares_from_the_merge_base_and_says_so(diverged: dict[str, str | Path],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = plan(Path(diverged["repo"]), "main", "feature", "json", capsys)
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["baseRevision"] == diverged["m0"] and doc["requestedBaseRevision"] == diverged["main"]
    assert doc["comparedFrom"] == "merge-base" and doc["headRevision"] == diverged["feature"]
    assert doc["changedFiles"] == [TUNING]  # main's own later change is not the PR's
    assert [r["recipe"] for r in doc["recipes"]] == ["gpu-training-tuning"]
    assert any("not an ancestor" in w for w in doc["warnings"])
    assert "warning: --base main" in err and "not an ancestor" in err and str(diverged["m0"])[:12] in err


def test_text_and_markdown_say_merge_base(diverged: dict[str, str | Path], capsys: pytest.CaptureFixture[str]) -> None:
    repo = Path(diverged["repo"])
    m0 = str(diverged["m0"])[:12]
    rc, out, _ = plan(repo, "main", "feature", "text", capsys)
    assert rc == 0
    assert f"compared from the merge base {m0}" in out and "not an ancestor" in out
    assert "containerd-limits" not in out
    rc, out, _ = plan(repo, "main", "feature", "markdown", capsys)
    assert rc == 0
    assert f"compared from the merge base {m0}" in out and "not an ancestor" in out
    assert "containerd" not in out


def test_base_that_is_an_ancestor_gives_no_warning(diverged: dict[str, str | Path],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = plan(Path(diverged["repo"]), str(diverged["m0"]), "feature", "json", capsys)
    assert rc == 0 and "warning" not in err
    doc = json.loads(out)
    assert doc["baseRevision"] == doc["requestedBaseRevision"] == diverged["m0"]
    assert doc["comparedFrom"] == "merge-base" and "warnings" not in doc
    assert doc["changedFiles"] == [TUNING]


def test_the_old_two_dot_comparison_would_have_blamed_the_pr(diverged: dict[str, str | Path]) -> None:
    """What the bug looked like: main's tree against feature's tree shows both files."""
    g = GitRepo(str(diverged["repo"]))
    two_dot = sorted({p for c in g.changed_paths("main", "feature") for p in c.paths})
    assert two_dot == [LIMITS, TUNING]


def test_unrelated_histories_warn_and_compare_as_given(diverged: dict[str, str | Path],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    repo = Path(diverged["repo"])
    git(repo, "checkout", "-q", "--orphan", "other")
    git(repo, "commit", "-qm", "unrelated root")
    rc, out, err = plan(repo, "other", "feature", "json", capsys)
    assert rc == 0, err
    doc = json.loads(out)
    assert "share no history" in err and "comparedFrom" not in doc
    assert doc["baseRevision"] == git(repo, "rev-parse", "other")

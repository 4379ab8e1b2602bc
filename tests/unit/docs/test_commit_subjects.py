"""scripts/check-commit-subjects, the commit-style check of .ci/run: it fails on a subject over 72
characters after the start commit (and only after it), counts characters rather than bytes, and
passes a shallow clone that cannot reach the start, saying so."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "check-commit-subjects"
ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=ENV, check=True, capture_output=True, text=True).stdout.strip()


def commit(repo: Path, message: str) -> str:
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def check(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=repo, env=ENV, capture_output=True, text=True,
                          timeout=60)


def make_repo(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "An old subject " + "x" * 100)  # before the start: never checked
    return repo, commit(repo, "The start commit, before the rule " + "y" * 60)


def test_short_subjects_after_the_start_pass(tmp_path: Path) -> None:
    repo, start = make_repo(tmp_path)
    commit(repo, "Record the node UID in the in-flight record\n\nBecause a long body is fine " + "z" * 200)
    commit(repo, "é" * 72)  # 72 characters, 144 bytes
    r = check(repo, "--since", start)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 commit(s)" in r.stdout


def test_a_long_subject_after_the_start_fails_naming_it(tmp_path: Path) -> None:
    repo, start = make_repo(tmp_path)
    commit(repo, "A fine subject")
    bad = commit(repo, "w" * 73)
    commit(repo, "Another fine one")
    r = check(repo, "--since", start)
    assert r.returncode == 1
    assert f"{bad[:12]} subject is 73 characters" in r.stdout
    assert "1 of 3 commit(s)" in r.stderr


def test_a_first_paragraph_without_a_blank_line_is_the_subject(tmp_path: Path) -> None:
    # git joins the lines of the first paragraph into the subject (git log --oneline shows it so)
    repo, start = make_repo(tmp_path)
    commit(repo, "Short first line\nbut no blank line after it, so git reads all of this as the subject")
    assert check(repo, "--since", start).returncode == 1


def test_an_unknown_start_is_an_error(tmp_path: Path) -> None:
    repo, _ = make_repo(tmp_path)
    r = check(repo, "--since", "0" * 40)
    assert r.returncode == 2
    assert "is not in this repository" in r.stderr


def test_a_shallow_clone_that_cannot_reach_the_start_passes_and_says_so(tmp_path: Path) -> None:
    repo, start = make_repo(tmp_path)
    commit(repo, "v" * 80)
    commit(repo, "Latest")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(clone))
    r = check(clone, "--since", start)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "shallow clone" in r.stdout
    # the full history of the same commits fails
    assert check(repo, "--since", start).returncode == 1


def test_the_recorded_start_is_the_commit_the_style_began_after() -> None:
    text = SCRIPT.read_text()
    assert 'START = "4291c35839f136349cb214f617b1cc1cfa70bfe1"' in text
    assert "scripts/check-commit-subjects" in (ROOT / ".ci" / "run").read_text()

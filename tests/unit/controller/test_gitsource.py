"""``--source git`` (reconciler.adapters.git.source.GitMirror + reconciler.controller.source.GitSource)
on a local repository: a new commit is one pass's reason, an unchanged ref is none, the loaded
recipes are the commit's, a failed fetch is a GitError naming the URL without the token."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from reconciler.adapters.git.repo import GitError
from reconciler.adapters.git.source import GitMirror
from reconciler.controller.source import GitSource

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git command")


def _git(repo: Path, *args: str) -> str:
    cp = subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@example.org", "-c", "user.name=t", *args],
                        capture_output=True, text=True, check=True)
    return cp.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "fleet"
    (r / "recipes").mkdir(parents=True)
    (r / "policies").mkdir()
    shutil.copy(ROOT / "recipes" / "gpu-training-tuning.yaml", r / "recipes")
    for p in (ROOT / "policies").glob("*.yaml"):
        shutil.copy(p, r / "policies")
    (r / "README.md").write_text("not a recipe\n")
    _git(r, "init", "-q", "-b", "main")
    _git(r, "add", "-A")
    _git(r, "commit", "-qm", "one")
    return r


def test_a_new_commit_is_a_reason_for_a_pass_and_its_files_are_loaded(repo: Path, tmp_path: Path) -> None:
    src = GitSource(GitMirror(str(repo), "main", str(tmp_path / "work")), "recipes", "policies")
    first = _git(repo, "rev-parse", "HEAD")
    assert src.refresh() == f"git: new commit {first[:12]}"
    assert src.refresh() == ""  # same commit: no pass
    d = src.current()
    assert [r.name for r in d.inputs.recipes] == ["gpu-training-tuning"] and first[:12] in d.revision
    shutil.copy(ROOT / "recipes" / "containerd-limits.yaml", repo / "recipes")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "two")
    second = _git(repo, "rev-parse", "HEAD")
    assert src.refresh() == f"git: new commit {second[:12]}"
    assert sorted(r.name for r in src.current().inputs.recipes) == ["containerd-limits", "gpu-training-tuning"]
    trees = sorted(p.name for p in (tmp_path / "work").iterdir() if p.name.startswith("tree-"))
    assert trees == [f"tree-{second[:16]}"]  # the previous tree is removed


def test_a_tag_is_fetched_too(repo: Path, tmp_path: Path) -> None:
    _git(repo, "tag", "v2026.11")
    src = GitSource(GitMirror(str(repo), "v2026.11", str(tmp_path / "work")), "recipes", "policies")
    assert [r.name for r in src.current().inputs.recipes] == ["gpu-training-tuning"]


def test_a_failed_fetch_names_the_url_and_never_the_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECONCILER_GIT_TOKEN", "ghp_" + "s3cr3t" * 6)
    mirror = GitMirror(str(tmp_path / "missing"), "main", str(tmp_path / "work"))
    with pytest.raises(GitError) as e:
        mirror.fetch()
    assert str(tmp_path / "missing") in str(e.value) and "s3cr3t" not in str(e.value)


class _Laid:
    """A fetcher whose commit is a directory laid out by the test (the mirror writes no symlink;
    the source refuses one leading out whatever laid the tree out)."""

    def __init__(self, tree: Path) -> None:
        self.tree = tree

    def fetch(self) -> str:
        return "c" * 40

    def checkout(self, commit: str, prefixes: object) -> str:
        return str(self.tree)


def test_a_symlink_in_the_commit_leading_out_is_refused(tmp_path: Path) -> None:
    from reconciler.errors import InputError

    tree = tmp_path / "tree"
    (tree / "recipes").mkdir(parents=True)
    shutil.copy(ROOT / "recipes" / "gpu-training-tuning.yaml", tree / "recipes")
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(ROOT / "recipes" / "containerd-limits.yaml", outside)
    (tree / "escape").symlink_to(outside)
    (tree / "pol").symlink_to("/etc")
    for path, policies, option in (("escape", "", "--git-path"), ("recipes", "pol", "--git-policy-path")):
        with pytest.raises(InputError, match=f"{option} '[a-z]+': leads outside the fetched commit"):
            GitSource(_Laid(tree), path, policies).current()
    assert [r.name for r in GitSource(_Laid(tree), "recipes").current().inputs.recipes] == ["gpu-training-tuning"]


def test_a_file_in_the_commit_leading_out_is_refused_and_not_read(tmp_path: Path) -> None:
    """Each recipe and policy file is confined, not only the directory named: a symlinked file
    inside ``recipes/`` leading out of the commit was loaded and rolled out."""
    from reconciler.errors import InputError

    tree = tmp_path / "tree"
    (tree / "recipes").mkdir(parents=True)
    (tree / "policies").mkdir()
    shutil.copy(ROOT / "recipes" / "gpu-training-tuning.yaml", tree / "recipes")
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(ROOT / "recipes" / "containerd-limits.yaml", outside)
    shutil.copy(ROOT / "policies" / "gpu-rollout.yaml", outside)
    (tree / "recipes" / "evil.yaml").symlink_to(outside / "containerd-limits.yaml")
    (tree / "policies" / "evil.yaml").symlink_to(outside / "gpu-rollout.yaml")
    for policies in ("", "policies"):
        with pytest.raises(InputError) as e:
            GitSource(_Laid(tree), "recipes", policies).current()
        errors = getattr(e.value, "errors", [e.value])
        assert {str(x.pos) for x in errors} >= {str(tree / "recipes" / "evil.yaml")}
        assert all("a symlink leading outside the fetched commit" in x.message for x in errors
                   if str(x.pos).endswith("evil.yaml"))
    (tree / "recipes" / "evil.yaml").unlink()
    (tree / "policies" / "evil.yaml").unlink()
    shutil.copy(ROOT / "policies" / "gpu-rollout.yaml", tree / "policies")
    d = GitSource(_Laid(tree), "recipes", "policies").current()
    assert [r.name for r in d.inputs.recipes] == ["gpu-training-tuning"] and list(d.inputs.policies) == ["gpu-rollout"]


def test_policies_next_to_the_commit_are_not_read(tmp_path: Path) -> None:
    """With the recipes at the commit's root, the ``policies/`` directory next to them is outside
    the commit (beside the laid-out tree): not looked for there."""
    work = tmp_path / "work"
    tree = work / "tree"
    tree.mkdir(parents=True)
    shutil.copy(ROOT / "recipes" / "gpu-training-tuning.yaml", tree / "r.yaml")
    (work / "policies").mkdir()
    (work / "policies" / "p.yaml").write_text("this is not yaml: [\n")
    d = GitSource(_Laid(tree), "").current()
    assert [r.name for r in d.inputs.recipes] == ["gpu-training-tuning"]


def test_a_relative_url_is_the_working_directory_s(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo.parent)
    src = GitSource(GitMirror(repo.name, "main", str(tmp_path / "work")), "recipes", "policies")
    assert [r.name for r in src.current().inputs.recipes] == ["gpu-training-tuning"]


@pytest.mark.parametrize(("url", "local"), [
    ("fleet", True), ("./fleet", True), ("../a/fleet", True), ("/srv/fleet.git", False),
    ("https://github.com/o/r.git", False), ("ssh://git@h/r.git", False), ("git@github.com:o/r.git", False),
    ("file:///srv/r.git", False), ("host:r.git", False),
])
def test_local_url(url: str, local: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from reconciler.adapters.git.source import local_url

    monkeypatch.chdir(tmp_path)
    assert local_url(url) == (os.path.normpath(os.path.join(str(tmp_path), url)) if local else url)


def test_a_failed_fetch_keeps_the_cause_not_only_the_advice(tmp_path: Path) -> None:
    from reconciler.adapters.git.source import cause

    stderr = ("remote: Repository not found.\nfatal: repository 'https://github.com/o/r.git/' not found\n"
              "hint: Using 'master' as the name for the initial branch.\nhint: see git help\n")
    assert cause(stderr) == ("remote: Repository not found.; fatal: repository 'https://github.com/o/r.git/' "
                             "not found")
    assert cause("warning: x\nerror: src refspec nope does not match any\nerror: failed to push\n") == (
        "warning: x; error: src refspec nope does not match any; error: failed to push")
    assert cause("") == "(no message)" and cause("just one line\n") == "just one line"
    assert len(cause("fatal: " + "x" * 5000)) == 600
    with pytest.raises(GitError, match="does not appear to be a git repository; fatal: Could not read from"):
        GitMirror(str(tmp_path / "nowhere"), "nope", str(tmp_path / "w")).fetch()

"""GitRepo (pygit2) and ``reconciler plan --repo --base --head`` against a real repository."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from reconciler.adapters.git.repo import GitRepo, redact
from reconciler.cli.main import main
from reconciler.errors import InputError

ROOT = Path(__file__).resolve().parents[3]
FLEET = ROOT / "examples" / "fleets" / "gpu-24.yaml"


def git(repo: Path, *args: str) -> str:
    env_args = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    return subprocess.run(["git", *env_args, *args], cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with the example recipes/policies (base) and a head commit that bumps
    nvidia-tuned and deletes the ksmbd recipe."""
    r = tmp_path / "repo"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    shutil.copytree(ROOT / "recipes", r / "recipes")
    shutil.copytree(ROOT / "policies", r / "policies")
    (r / "README.md").write_text("fleet\n")
    git(r, "add", "-A")
    git(r, "commit", "-qm", "base")
    tuning = r / "recipes" / "gpu-training-tuning.yaml"
    tuning.write_text(tuning.read_text().replace("version: 0.3.2", "version: 0.3.3"))
    git(r, "rm", "-q", "recipes/cve-ksmbd-blacklist.yaml")
    git(r, "commit", "-qam", "head")
    return r


def test_resolve_changed_paths_and_files_come_from_objects_not_the_work_tree(repo: Path) -> None:
    g = GitRepo(str(repo / "recipes"))  # discovered from a subdirectory
    head = g.resolve("HEAD")
    assert len(head) == 40 and g.resolve("main") == head
    changes = {c.new_path or c.old_path: c.status for c in g.changed_paths("HEAD~1", "HEAD")}
    assert changes == {"recipes/cve-ksmbd-blacklist.yaml": "deleted", "recipes/gpu-training-tuning.yaml": "modified"}
    (repo / "recipes" / "gpu-training-tuning.yaml").write_text("garbage in the work tree\n")
    files = g.files("HEAD", ["recipes"])
    assert b"version: 0.3.3" in files["recipes/gpu-training-tuning.yaml"]
    assert "README.md" not in files and "recipes/cve-ksmbd-blacklist.yaml" not in files
    assert "recipes/cve-ksmbd-blacklist.yaml" in g.files("HEAD~1", ["recipes/"])
    ksmbd = "recipes/cve-ksmbd-blacklist.yaml"
    assert g.exists("HEAD~1", ksmbd) and not g.exists("HEAD", ksmbd)


def test_renames_are_detected(repo: Path) -> None:
    git(repo, "mv", "recipes/containerd-limits.yaml", "recipes/containerd.yaml")
    git(repo, "commit", "-qm", "rename")
    (c,) = GitRepo(str(repo)).changed_paths("HEAD~1", "HEAD")
    assert (c.status, c.old_path, c.new_path) == (
        "renamed",
        "recipes/containerd-limits.yaml",
        "recipes/containerd.yaml",
    )


def test_bad_repository_and_unknown_revision_are_one_line_input_errors(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a git repository"):
        GitRepo(str(tmp_path / "nowhere"))
    with pytest.raises(InputError, match=r"unknown revision 'no-such-branch'"):
        GitRepo(str(repo)).resolve("no-such-branch")


def test_redact_hides_url_credentials() -> None:
    assert redact("fatal: https://x-access-token:ghs_secret@github.com/o/r.git") == (
        "fatal: https://***@github.com/o/r.git"
    )


def test_plan_between_revisions_json(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "recipes" / "gpu-training-tuning.yaml").write_text("not yaml: [\n")  # work tree is ignored
    rc = main(["plan", "--repo", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--cluster", f"sim:{FLEET}",
               "-o", "json"])
    out = capsys.readouterr().out
    assert rc == 0, out
    doc = json.loads(out)
    assert doc["changedFiles"] == ["recipes/cve-ksmbd-blacklist.yaml", "recipes/gpu-training-tuning.yaml"]
    by = {r["recipe"]: r for r in doc["recipes"]}
    assert set(by) == {"cve-ksmbd-blacklist", "gpu-training-tuning"}  # untouched recipes are not planned
    assert by["cve-ksmbd-blacklist"]["change"] == "removed"
    assert by["cve-ksmbd-blacklist"]["headPlan"]["recipe"]["name"] == "cve-ksmbd-blacklist"
    tuning = by["gpu-training-tuning"]
    assert tuning["change"] == "modified"
    assert tuning["packages"] == [
        {"name": "nvidia-tuned", "change": "version", "from": "0.3.2", "to": "0.3.3", "detail": "",
         "fields": ["version"], "digestFrom": None, "digestTo": None}
    ]
    assert tuning["headPlan"]["revision"] == GitRepo(str(repo)).resolve("HEAD")
    assert tuning["basePlan"]["revision"] == GitRepo(str(repo)).resolve("HEAD~1")
    assert tuning["head"]["nodes"] == 24


def test_plan_between_revisions_bad_input(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["plan", "--repo", str(repo), "--base", "nope", "--head", "HEAD", "--cluster", f"sim:{FLEET}"])
    err = capsys.readouterr().err
    assert rc == 2 and err.strip() == f"error: unknown revision 'nope' in repository {repo}"
    rc = main(["plan", "--repo", str(repo), "--base", "HEAD~1", "--cluster", f"sim:{FLEET}"])
    assert rc == 2 and "missing --head" in capsys.readouterr().err
    rc = main(["plan", "--cluster", f"sim:{FLEET}"])
    assert rc == 2 and "needs RECIPE" in capsys.readouterr().err


def test_invalid_recipe_at_a_revision_names_the_revision_and_path(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "recipes" / "broken.yaml").write_text("apiVersion: v1\nkind: Nope\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "broken")
    head = GitRepo(str(repo)).resolve("HEAD")
    rc = main(["plan", "--repo", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--cluster", f"sim:{FLEET}"])
    err = capsys.readouterr().err
    assert rc == 2 and f"{head[:12]}:recipes/broken.yaml:" in err and "/tmp" not in err

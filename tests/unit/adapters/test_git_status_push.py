"""Status commits to a real bare repository: fetch/re-apply/retry on lost races, two concurrent
writer processes lose nothing, identical content makes no commit, signing, and ``apply
--status-repo`` end to end on the simulated fleet."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from reconciler.adapters.git.push import Identity, StatusPusher, read_branch_file
from reconciler.adapters.git.repo import GitError
from reconciler.cli.main import main
from reconciler.errors import InputError

ROOT = Path(__file__).resolve().parents[3]


def git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def bare(tmp_path: Path) -> Path:
    b = tmp_path / "status.git"
    git("init", "-q", "--bare", str(b))
    return b


def tree(bare: Path, branch: str = "reconciler-status") -> dict[str, str]:
    out = git("--git-dir", str(bare), "ls-tree", "-r", "--name-only", branch)
    return {p: git("--git-dir", str(bare), "show", f"{branch}:{p}") for p in out.split()}


def log(bare: Path, branch: str = "reconciler-status") -> list[str]:
    return git("--git-dir", str(bare), "log", "--format=%s", branch).splitlines()


def test_first_write_creates_the_branch_and_identical_content_commits_nothing(bare: Path) -> None:
    p = StatusPusher(str(bare), "reconciler-status", author=Identity("bot", "bot@example.com"))
    r1 = p.write({"status/c1/a.json": b"{}\n"}, "first [skip ci]\n")
    assert r1.changed and r1.attempts == 1
    r2 = p.write({"status/c1/a.json": b"{}\n"}, "again\n")
    assert not r2.changed and r2.commit == r1.commit
    assert log(bare) == ["first [skip ci]"]
    author = git("--git-dir", str(bare), "log", "-1", "--format=%an <%ae>|%cn <%ce>", "reconciler-status").strip()
    assert author == "bot <bot@example.com>|bot <bot@example.com>"
    assert read_branch_file(str(bare), "reconciler-status", "status/c1/a.json") == b"{}\n"
    assert read_branch_file(str(bare), "reconciler-status", "status/c1/missing.json") is None
    assert read_branch_file(str(bare), "no-such-branch", "x") is None


def test_lost_race_refetches_reapplies_and_keeps_the_other_commit(bare: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    StatusPusher(str(bare), "reconciler-status").write({"status/c1/seed.json": b"0\n"}, "seed\n")
    rival = StatusPusher(str(bare), "reconciler-status")
    me = StatusPusher(str(bare), "reconciler-status", sleep=lambda s: None)
    real_fetch = StatusPusher._fetch
    calls = {"n": 0}

    def fetch_then_lose_the_race(self: StatusPusher, gitdir: str):  # type: ignore[no-untyped-def]
        tip = real_fetch(self, gitdir)
        if self is me and calls["n"] == 0:
            calls["n"] += 1
            rival.write({"status/c2/other.json": b"rival\n"}, "rival\n")  # moves the branch under us
        return tip

    monkeypatch.setattr(StatusPusher, "_fetch", fetch_then_lose_the_race)
    res = me.write({"status/c1/mine.json": b"mine\n"}, "mine\n")
    assert res.changed and res.attempts == 2
    assert tree(bare) == {
        "status/c1/seed.json": "0\n",
        "status/c2/other.json": "rival\n",
        "status/c1/mine.json": "mine\n",
    }
    assert log(bare) == ["mine", "rival", "seed"]


WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from reconciler.adapters.git.push import StatusPusher
    remote, who, start, n = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
    while not start.exists():
        time.sleep(0.005)
    p = StatusPusher(remote, "reconciler-status", max_attempts=40, backoff=(0.01, 0.2))
    attempts = 0
    for i in range(n):
        attempts += p.write({f"status/{who}/r{i}.json": f"{who} {i}\\n".encode()}, f"{who} {i}\\n").attempts
    print(attempts)
    """
)


@pytest.mark.slow  # two writer processes racing their pushes
def test_two_concurrent_writer_processes_lose_nothing(bare: Path, tmp_path: Path) -> None:
    StatusPusher(str(bare), "reconciler-status").write({"README": b"status\n"}, "init\n")
    start = tmp_path / "go"
    n = 6
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(bare), who, str(start), str(n)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for who in ("cluster-a", "cluster-b")
    ]
    start.touch()
    outs = [p.communicate(timeout=240) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    files = tree(bare)
    for who in ("cluster-a", "cluster-b"):
        for i in range(n):
            assert files[f"status/{who}/r{i}.json"] == f"{who} {i}\n"
    subjects = log(bare)
    assert len(subjects) == 2 * n + 1 and sorted(subjects[:-1]) == sorted(
        f"{w} {i}" for w in ("cluster-a", "cluster-b") for i in range(n)
    )
    # history is linear: no commit was dropped or force-pushed over
    assert git("--git-dir", str(bare), "rev-list", "--count", "--merges", "reconciler-status").strip() == "0"


def test_bad_remote_and_bad_branch_fail_clearly(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a valid branch name"):
        StatusPusher(str(tmp_path), "bad..branch")
    p = StatusPusher("https://user:s3cret@127.0.0.1:9/nothing.git", "reconciler-status", max_attempts=1)
    with pytest.raises(GitError) as e:
        p.write({"status/a.json": b"x"}, "m\n")
    assert "s3cret" not in str(e.value) and "***@127.0.0.1" in str(e.value)
    with pytest.raises(InputError, match="must be relative"):
        StatusPusher(str(tmp_path), "b").write({"../escape": b"x"}, "m\n")


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen not installed")
def test_ssh_signed_status_commit_verifies_with_git(bare: Path, tmp_path: Path) -> None:
    key = tmp_path / "signing_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "bot@example.com", "-f", str(key)], check=True)
    p = StatusPusher(
        str(bare),
        "reconciler-status",
        author=Identity("bot", "bot@example.com"),
        sign_command=["ssh-keygen", "-Y", "sign", "-n", "git", "-f", str(key)],
    )
    res = p.write({"status/c/a.json": b"{}\n"}, "signed\n")
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"bot@example.com {(tmp_path / 'signing_key.pub').read_text()}")
    cp = subprocess.run(
        [
            "git",
            "--git-dir",
            str(bare),
            "-c",
            "gpg.format=ssh",
            "-c",
            f"gpg.ssh.allowedSignersFile={allowed}",
            "verify-commit",
            res.commit,
        ],
        capture_output=True,
        text=True,
    )
    assert cp.returncode == 0, cp.stderr
    assert 'Good "git" signature for bot@example.com' in cp.stderr


def test_failing_sign_command_pushes_nothing(bare: Path) -> None:
    p = StatusPusher(str(bare), "reconciler-status", sign_command=["false"])
    with pytest.raises(GitError, match="signing command 'false' failed"):
        p.write({"status/c/a.json": b"{}\n"}, "m\n")
    assert git("--git-dir", str(bare), "branch", "--list").strip() == ""


FLEET = ROOT / "examples" / "fleets" / "gpu-24.yaml"


def test_apply_writes_a_status_commit_per_recipe(bare: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recipe = str(ROOT / "recipes" / "containerd-limits.yaml")
    argv = [
        "apply",
        recipe,
        "--policy",
        str(ROOT / "policies"),
        "--cluster",
        f"sim:{FLEET}",
        "-o",
        "json",
        "--cluster-name",
        "prod-a",
        "--status-repo",
        str(bare),
        "--source-revision",
        "abc123",
        "--status-author",
        "Fleet Bot <fleet@example.com>",
        "--run-id",
        "run-test",
    ]
    rc = main(argv)
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert rc in (0, 1)
    files = tree(bare)
    (path,) = files
    doc = json.loads(files[path])
    assert path == f"status/prod-a/{result['recipe']}.json"
    assert doc["cluster"] == "prod-a" and doc["sourceRevision"] == "abc123"
    assert doc["planHash"] == result["planHash"] and doc["result"] == result["result"]
    assert sorted(n["name"] for n in doc["nodes"]) == sorted(n["name"] for n in result["nodes"])
    assert doc["summary"].startswith(f"{doc['counts']['complete']}/{doc['counts']['total']} nodes complete")
    msg = git("--git-dir", str(bare), "log", "-1", "--format=%B", "reconciler-status")
    assert "[skip ci]" in msg.splitlines()[0] and "Reconciler-Run: run-test" in msg and "Cluster: prod-a" in msg
    assert f"status {path}: committed" in captured.err


def test_apply_status_options_are_checked_before_anything_runs(bare: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recipes = str(ROOT / "recipes")
    base = ["apply", recipes, "--cluster", f"sim:{FLEET}", "--status-repo", str(bare)]
    assert main(base) == 2 and "needs --cluster-name" in capsys.readouterr().err
    assert main([*base, "--cluster-name", "c", "--status-message", "{nope}"]) == 2
    assert "unknown placeholder {nope}" in capsys.readouterr().err
    assert main([*base, "--cluster-name", "c", "--status-author", "nobody"]) == 2
    assert "expected 'Name <email@host>'" in capsys.readouterr().err
    rel = [
        "apply",
        "recipes",
        "--cluster",
        f"sim:{FLEET}",
        "--status-repo",
        str(bare),
        "--cluster-name",
        "c",
        "--status-prefix",
        "recipes/status",
    ]
    assert main(rel) == 2 and "overlaps the watched path 'recipes'" in capsys.readouterr().err
    assert git("--git-dir", str(bare), "branch", "--list").strip() == ""


@pytest.mark.parametrize(("token", "password"), [("s3cr3t-t0ken", "s3cr3t-t0ken"), ("", None)])
def test_the_status_token_reaches_git_through_a_credential_helper_only(token: str, password: str | None,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from reconciler.adapters.git.push import STATUS_TOKEN_ENV, token_helper

    helper = token_helper(STATUS_TOKEN_ENV)
    assert token == "" or token not in helper  # the helper reads the variable; the token is in no argv
    env = {**os.environ, STATUS_TOKEN_ENV: token, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true"}
    cp = subprocess.run(["git", "-c", "credential.helper=", "-c", f"credential.helper={helper}", "credential", "fill"],
                        input="protocol=https\nhost=git.example\n\n", capture_output=True, text=True, env=env,
                        check=False)
    lines = dict(line.split("=", 1) for line in cp.stdout.splitlines() if "=" in line)
    if password is None:  # no token: the helper says nothing (git falls back, here to no password)
        assert lines.get("password", "") == ""
    else:
        assert cp.returncode == 0 and lines["password"] == password and lines["username"] == "x-access-token"

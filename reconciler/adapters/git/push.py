"""Status commits (gitops-conventions.md §5.4): :class:`StatusPusher` commits files
(``status/<cluster>/<recipe>.json``) onto a branch of a remote repository and pushes, with fetch →
re-apply on the new tip → retry on a rejected (non-fast-forward or lost-race) push, jittered
exponential backoff and a cap. The commit is built with pygit2 in a private bare scratch
repository; fetch and push go through the ``git`` CLI because ``git push`` → ``receive-pack``
updates the branch under a lock and only if it still points where the push expects (an atomic
compare-and-swap, also for a local bare repository, where libgit2's local transport is not), and
because the CLI uses the credential helpers CI already configured (``actions/checkout``).

Errors: a fetch/push/sign failure → :class:`~reconciler.adapters.git.repo.GitError`. Remote URLs
are redacted (``https://***@host/...``) in every message, so a token in a URL is never printed.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import pygit2

from reconciler.adapters.git.repo import GitError, redact
from reconciler.errors import InputError

#: stderr/stdout fragments of ``git push`` that mean "someone else moved the branch": retry.
_RACE = re.compile(
    r"non-fast-forward|fetch first|\[rejected\]|failed to update ref|cannot lock ref|failed to lock|"
    r"stale info|reference already exists|incorrect old value",
    re.IGNORECASE,
)
_MISSING_REF = re.compile(r"couldn't find remote ref|no such ref", re.IGNORECASE)


@dataclass(frozen=True)
class Identity:
    """Author/committer of status commits (default: ``node-reconciler <reconciler@nodewright.dev>``)."""

    name: str = "node-reconciler"
    email: str = "reconciler@nodewright.dev"


@dataclass(frozen=True)
class PushResult:
    """Outcome of :meth:`StatusPusher.write`: ``commit`` is the new commit's SHA (or the
    unchanged tip when ``changed`` is False), ``attempts`` how many push attempts it took."""

    commit: str
    changed: bool
    attempts: int


#: Environment variable holding an HTTPS token for pushing status commits (the chart fills it
#: from ``statusRepo.secretName``); given to git by :func:`token_helper`, never on a command line.
STATUS_TOKEN_ENV = "RECONCILER_STATUS_TOKEN"


def token_helper(var: str) -> str:
    """A git credential helper (``-c credential.helper=…``) answering with the token in the
    environment variable ``var`` as the password (user ``x-access-token``, as GitHub and GitLab
    accept), and nothing when it is empty, so the next helper or an SSH key is used. The token
    is read by the helper's shell from the environment: it never appears in an argument list."""
    return (f'!f() {{ test -n "${var}" && echo username=x-access-token && echo "password=${var}"; }}; f')


class StatusPusher:
    """Commit files onto ``branch`` of ``remote`` and push, retrying lost races.

    Args:
        remote: URL or path of the repository (``git push`` syntax; a local bare repository
            path works, as does ``https://…`` with a credential helper).
        branch: branch to write (created as a root commit when missing; never force-pushed).
        author: commit author and committer.
        sign_command: optional command (argv) that reads the commit payload on stdin and prints
            an ASCII-armoured signature on stdout, e.g. ``["gpg", "--detach-sign", "--armor",
            "-u", KEYID]`` or ``["ssh-keygen", "-Y", "sign", "-n", "git", "-f", KEYFILE]``; the
            signature is stored in the commit's ``gpgsig`` header (as ``git commit -S`` does).
        max_attempts: push attempts before giving up (each attempt re-fetches the tip).
        backoff: (base, cap) seconds of the jittered exponential backoff between attempts.
        sleep / rand: injected for tests.
    """

    def __init__(
        self,
        remote: str,
        branch: str,
        *,
        author: Identity = Identity(),
        sign_command: Sequence[str] | None = None,
        max_attempts: int = 8,
        backoff: tuple[float, float] = (0.2, 5.0),
        sleep: Callable[[float], None] = time.sleep,
        rand: Callable[[], float] = random.random,
        git: str = "git",
    ) -> None:
        if not branch or branch.startswith("-") or not _valid_branch(branch):
            raise InputError(f"status branch {branch!r} is not a valid branch name")
        if not remote or remote.startswith("-") or any(c in remote for c in "\0\n\r"):
            raise InputError(f"status repository {redact(remote)!r}: not a repository URL or path")
        self.remote = remote
        self.branch = branch
        self.author = author
        self.sign_command = list(sign_command) if sign_command else None
        self.max_attempts = max(1, max_attempts)
        self.backoff = backoff
        self.sleep = sleep
        self.rand = rand
        self.git = git

    # -------------------------------------------------------------- git CLI
    def _run(self, gitdir: str, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": os.environ.get("GIT_ASKPASS", "true")}
        try:
            return subprocess.run(
                [self.git, "-c", f"credential.helper={token_helper(STATUS_TOKEN_ENV)}", f"--git-dir={gitdir}", *args],
                capture_output=True,
                text=True,
                env=env,
                timeout=300,
                check=False,
            )
        except FileNotFoundError:
            raise GitError(f"the git command ({self.git}) is not installed") from None
        except subprocess.TimeoutExpired:
            raise GitError(f"git {args[0]} timed out after 300 s") from None

    def check_reachable(self, *, timeout: float = 30.0) -> None:
        """Cheap check that the remote answers (``git ls-remote`` of the branch; nothing is
        fetched or written), done before a run so a bad ``--status-repo`` fails first.

        Raises:
            GitError: the repository does not exist, is not a repository, refuses the
                credentials or does not answer within ``timeout`` seconds (message redacted).
        """
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": os.environ.get("GIT_ASKPASS", "true")}
        try:
            cp = subprocess.run(
                [self.git, "-c", f"credential.helper={token_helper(STATUS_TOKEN_ENV)}", "ls-remote", "--heads", "--",
                 self.remote, f"refs/heads/{self.branch}"],
                capture_output=True, text=True, env=env, timeout=timeout, check=False, stdin=subprocess.DEVNULL,
            )
        except FileNotFoundError:
            raise GitError(f"the git command ({self.git}) is not installed") from None
        except subprocess.TimeoutExpired:
            raise GitError(f"{redact(self.remote)}: no answer within {timeout:.0f} s") from None
        if cp.returncode != 0:
            why = _first_fatal(cp.stderr) or "git ls-remote failed"
            raise GitError(f"{redact(self.remote)}: not reachable: {redact(why)}")

    def _fetch(self, gitdir: str) -> pygit2.Commit | None:
        ref = f"refs/remotes/status/{self.branch}"
        cp = self._run(gitdir, "fetch", "--quiet", "--no-tags", self.remote, f"+refs/heads/{self.branch}:{ref}")
        if cp.returncode != 0:
            if _MISSING_REF.search(cp.stderr):
                return None
            raise GitError(f"git fetch {redact(self.remote)} failed: {redact(_last_line(cp.stderr))}")
        repo = pygit2.Repository(gitdir)
        commit = repo.revparse_single(ref).peel(pygit2.Commit)
        assert isinstance(commit, pygit2.Commit)
        return commit

    def _sign(self, payload: str) -> str:
        assert self.sign_command is not None
        try:
            cp = subprocess.run(
                self.sign_command, input=payload, capture_output=True, text=True, timeout=120, check=False
            )
        except (FileNotFoundError, subprocess.TimeoutExpired) as e:
            raise GitError(redact(f"signing command {self.sign_command[0]!r} failed: {e}")) from None
        if cp.returncode != 0 or "-----BEGIN" not in cp.stdout:
            raise GitError(redact(
                f"signing command {self.sign_command[0]!r} failed (exit {cp.returncode}): "
                f"{_last_line(cp.stderr) or 'no signature on stdout'}"
            ))
        return cp.stdout.strip() + "\n"

    def _commit(
        self, repo: pygit2.Repository, parent: pygit2.Commit | None, files: Mapping[str, bytes | None], message: str
    ) -> tuple[pygit2.Oid, bool]:
        index = pygit2.Index()
        if parent is not None:
            index.read_tree(parent.tree)
        for path, data in sorted(files.items()):
            if data is None:
                if path in index:
                    index.remove(path)
                continue
            blob = repo.create_blob(data)
            index.add(pygit2.IndexEntry(path, blob, pygit2.enums.FileMode.BLOB))
        tree = index.write_tree(repo)
        if parent is not None and tree == parent.tree_id:
            return parent.id, False
        sig = pygit2.Signature(self.author.name, self.author.email)
        parents: list[str | pygit2.Oid] = [parent.id] if parent is not None else []
        if self.sign_command:
            payload = str(repo.create_commit_string(sig, sig, message, tree, parents))
            oid = repo.create_commit_with_signature(payload, self._sign(payload))
        else:
            oid = repo.create_commit(None, sig, sig, message, tree, parents)
        return oid, True

    def write(self, files: Mapping[str, bytes | None], message: str) -> PushResult:
        """Commit ``files`` (path → content; None deletes) on top of the branch tip and push.

        Each attempt fetches the current tip and re-applies the files onto it, so a commit
        pushed by another writer in between is kept (never force-pushed). When the files are
        already exactly so on the tip, nothing is committed (``changed`` False).

        Raises:
            GitError: fetch failed (unreachable, no such repository, auth), signing failed, a
                push was rejected for another reason than a lost race, or every attempt lost.
        """
        for path in files:
            if path.startswith("/") or ".." in path.split("/") or not path:
                raise InputError(f"status file path {path!r} must be relative and stay inside the repository")
        scratch = tempfile.mkdtemp(prefix="reconciler-status-")
        try:
            pygit2.init_repository(scratch, bare=True)
            last = ""
            for attempt in range(1, self.max_attempts + 1):
                parent = self._fetch(scratch)
                repo = pygit2.Repository(scratch)
                oid, changed = self._commit(repo, parent, files, message)
                if not changed:
                    return PushResult(str(oid), False, attempt)
                cp = self._run(scratch, "push", "--porcelain", self.remote, f"{oid}:refs/heads/{self.branch}")
                if cp.returncode == 0:
                    return PushResult(str(oid), True, attempt)
                out = cp.stderr + "\n" + cp.stdout
                if not _RACE.search(out):
                    raise GitError(f"git push to {redact(self.remote)} failed: {redact(_last_line(cp.stderr))}")
                last = _last_line(out)
                if attempt < self.max_attempts:
                    base, cap = self.backoff
                    self.sleep(min(cap, base * 2 ** (attempt - 1)) * (0.5 + self.rand()))
            raise GitError(
                f"push to {redact(self.remote)} branch {self.branch} lost {self.max_attempts} races in a row "
                f"(last: {redact(last)}); try again later"
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def _valid_branch(name: str) -> bool:
    bad = ("..", "~", "^", ":", "?", "*", "[", "\\", " ", "@{")
    return not any(b in name for b in bad) and not name.endswith((".lock", "/", ".")) and "//" not in name


def _first_fatal(text: str) -> str:
    """The first ``fatal:``/``error:`` line of git's stderr without its prefix (else the last line)."""
    for ln in text.splitlines():
        ln = ln.strip()
        for prefix in ("fatal: ", "error: "):
            if ln.startswith(prefix):
                return ln[len(prefix):]
    return _last_line(text)


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def read_branch_file(remote: str, branch: str, path: str, *, git: str = "git") -> bytes | None:
    """Content of ``path`` on ``branch`` of ``remote`` (None when the branch or file is absent).

    Raises:
        GitError: the fetch failed for another reason than a missing branch.
    """
    pusher = StatusPusher(remote, branch, git=git)
    scratch = tempfile.mkdtemp(prefix="reconciler-status-")
    try:
        pygit2.init_repository(scratch, bare=True)
        tip = pusher._fetch(scratch)
        if tip is None:
            return None
        try:
            entry = tip.tree[path]
        except KeyError:
            return None
        blob = pygit2.Repository(scratch)[entry.id]
        return blob.data if isinstance(blob, pygit2.Blob) else None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def paths_overlap(a: str, b: Iterable[str]) -> str | None:
    """The first of ``b`` that contains ``a`` or is contained in it (repository-relative), else None."""
    a = a.strip("/")
    for p in b:
        p = p.strip("/")
        if not p or p == "." or a == p or a.startswith(p + "/") or p.startswith(a + "/"):
            return p or "."
    return None

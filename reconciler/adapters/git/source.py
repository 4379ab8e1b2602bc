"""The controller's git source (``reconciler controller --source git``): fetch one branch or tag of
a repository at an interval, like Flux's source-controller, and lay out the files of a new commit
in a directory the loader reads.

The fetch is the ``git`` command (``git fetch --depth 1 <url> <ref>`` into a bare repository under
``workdir``); a token in ``$RECONCILER_GIT_TOKEN`` goes through a credential helper, never into the
URL, the command line or a log (the chart's pipeline Job clones the same way). The commit's files
under the wanted paths are written by :meth:`reconciler.adapters.git.repo.GitRepo.extract` into
``workdir/tree-<sha>``; the previous tree is removed once a new one is complete.

Errors: :class:`~reconciler.adapters.git.repo.GitError` (exit 4) with the message redacted.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence

from reconciler.adapters.git.push import token_helper
from reconciler.adapters.git.repo import GitError, GitRepo, redact

_HELPER = token_helper("RECONCILER_GIT_TOKEN")


#: A URL git reads as remote: ``scheme://`` or scp-like ``[user@]host:path`` (a colon before any slash).
_REMOTE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://|^[^/]+:")


def local_url(url: str) -> str:
    """``url`` as git should fetch it from ``-C <mirror>``: a local path made absolute against the
    working directory (a relative one would be resolved inside the mirror), anything else as is."""
    return url if _REMOTE.match(url) else os.path.abspath(url)  # prefix match


def cause(stderr: str, limit: int = 600) -> str:
    """What git said went wrong: its ``fatal:``/``error:`` lines and the line before the first of
    them (the cause, such as ``remote: Repository not found.``), without ``hint:`` advice, joined
    with ``; `` and cut to ``limit`` characters; the last line when nothing is marked."""
    lines = [x.strip() for x in stderr.splitlines() if x.strip() and not x.lstrip().startswith("hint:")]
    if not lines:
        return "(no message)"
    marked = [i for i, x in enumerate(lines) if x.startswith(("fatal:", "error:"))]
    if not marked:
        text = lines[-1]
    else:
        first = max(0, marked[0] - 1)
        text = "; ".join(lines[first:marked[-1] + 1])
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _verb(args: Sequence[str]) -> str:
    """The git subcommand of ``args`` (after ``-C DIR``): what a message names."""
    rest = list(args)
    while len(rest) >= 2 and rest[0] == "-C":
        rest = rest[2:]
    return rest[0] if rest else "?"


class GitMirror:
    """One branch or tag of ``url`` fetched into ``workdir`` (module docstring).

    Args:
        url: repository URL (https, ssh or a local path). ref: branch or tag name.
        workdir: a writable directory (the chart mounts an emptyDir at ``/source``).
        timeout: seconds for one fetch.
    """

    def __init__(self, url: str, ref: str, workdir: str, *, git: str = "git", timeout: float = 300.0) -> None:
        self.url, self.ref, self.workdir, self.git, self.timeout = local_url(url), ref, workdir, git, timeout
        self.gitdir = os.path.join(workdir, "mirror.git")
        self.commit = ""
        self.tree = ""

    def _run(self, *args: str) -> str:
        cmd = [self.git, "-c", f"credential.helper={_HELPER}", "-c", "protocol.file.allow=always", *args]
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
        try:
            cp = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout, env=env, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise GitError(redact(f"git {_verb(args)} of {self.url} ({self.ref}): {e}")) from None
        if cp.returncode != 0:
            raise GitError(redact(f"git {_verb(args)} of {self.url} ({self.ref}): {cause(cp.stderr)}"))
        return cp.stdout.strip()

    def fetch(self) -> str:
        """Fetch ``ref``; returns its commit SHA. Raises GitError."""
        os.makedirs(self.workdir, exist_ok=True)
        if not os.path.isdir(self.gitdir):
            self._run("init", "--quiet", "--bare", self.gitdir)
        self._run("-C", self.gitdir, "fetch", "--quiet", "--depth", "1", "--no-tags", "--force", "--", self.url,
                  self.ref)
        return self._run("-C", self.gitdir, "rev-parse", "FETCH_HEAD^{commit}")

    def checkout(self, commit: str, prefixes: Sequence[str]) -> str:
        """The files of ``commit`` under ``prefixes`` in a fresh directory; returns its path."""
        dest = os.path.join(self.workdir, f"tree-{commit[:16]}")
        if self.tree != dest:
            tmp = dest + ".tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            os.makedirs(tmp)
            GitRepo(self.gitdir).extract(commit, [p.strip("/") for p in prefixes if p] or [""], tmp)
            shutil.rmtree(dest, ignore_errors=True)
            os.replace(tmp, dest)
            if self.tree and self.tree != dest:
                shutil.rmtree(self.tree, ignore_errors=True)
        self.commit, self.tree = commit, dest
        return dest

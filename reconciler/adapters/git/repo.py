"""Git adapter, read side (pygit2): :class:`GitRepo` reads a local repository *from git objects*
(never the work tree): resolve a revision, list the paths changed between two revisions, extract
the files under some directories at a revision into a scratch directory for the loader. Status
commits are written by :mod:`reconciler.adapters.git.push`.

Errors: a path that is not a repository or an unknown revision → :class:`~reconciler.errors.InputError`
(one line, nothing changed); :class:`GitError` (exit 4) for the git operations of this room, their
messages redacted (``https://***@host/...``), so a token in a URL is never printed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import pygit2

from reconciler.errors import EXIT_CLUSTER, InputError, ReconcilerError
from reconciler.report.redact import redact as _redact

ChangeStatus = Literal["added", "deleted", "modified", "renamed"]

_STATUS = {
    pygit2.enums.DeltaStatus.ADDED: "added",
    pygit2.enums.DeltaStatus.DELETED: "deleted",
    pygit2.enums.DeltaStatus.MODIFIED: "modified",
    pygit2.enums.DeltaStatus.RENAMED: "renamed",
    pygit2.enums.DeltaStatus.COPIED: "added",
    pygit2.enums.DeltaStatus.TYPECHANGE: "modified",
}



class GitError(ReconcilerError):
    """A git operation with a remote (fetch, push) or a signing command failed (exit code 4)."""

    exit_code = EXIT_CLUSTER


def redact(text: str) -> str:
    """``text`` with credentials masked: :func:`reconciler.report.redact.redact` (user-info of
    URLs up to the last ``@``, query values, fragments, auth headers, token shapes)."""
    return _redact(text)


def _under(path: str, prefixes: Sequence[str]) -> bool:
    for p in prefixes:
        p = p.strip("/")
        if not p or p == "." or path == p or path.startswith(p + "/"):
            return True
    return False


@dataclass(frozen=True)
class ChangedPath:
    """One path changed between two revisions: ``status`` added/deleted/modified/renamed;
    ``old_path`` is None for an added file, ``new_path`` None for a deleted one."""

    status: ChangeStatus
    old_path: str | None
    new_path: str | None

    @property
    def paths(self) -> tuple[str, ...]:
        """Both paths (one when they are the same or one is absent)."""
        return tuple(dict.fromkeys(p for p in (self.old_path, self.new_path) if p))


class GitRepo:
    """A local git repository read at revisions (pygit2; the work tree is never read).

    Raises:
        InputError: ``path`` is not inside a git repository.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            root = pygit2.discover_repository(path)
            if root is None:
                raise KeyError(path)
            self.repo = pygit2.Repository(root)
        except (pygit2.GitError, KeyError, OSError):
            raise InputError(f"{path}: not a git repository (--repo)") from None

    def commit(self, rev: str) -> pygit2.Commit:
        """The commit ``rev`` names (a SHA, branch, tag, ``HEAD~2``…).

        Raises:
            InputError: unknown revision, or it does not name a commit.
        """
        try:
            obj = self.repo.revparse_single(rev)
            commit = obj.peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
            raise InputError(f"unknown revision {rev!r} in repository {self.path}") from None
        assert isinstance(commit, pygit2.Commit)
        return commit

    def resolve(self, rev: str) -> str:
        """Full hex SHA of the commit ``rev`` names (raises InputError when unknown)."""
        return str(self.commit(rev).id)

    def merge_base(self, base: str, head: str) -> str | None:
        """Full SHA of the best common ancestor of ``base`` and ``head`` (``git merge-base``),
        None when the histories are unrelated. This is the commit a pull request is compared
        from on GitHub ("three-dot" comparison) and GitLab (merge request diffs).

        Raises:
            InputError: unknown revision.
        """
        a, b = self.commit(base).id, self.commit(head).id
        try:
            mb = self.repo.merge_base(a, b)
        except pygit2.GitError:
            return None
        return str(mb) if mb is not None else None

    def is_ancestor(self, ancestor: str, rev: str) -> bool:
        """Whether ``ancestor`` is ``rev`` or one of its ancestors (``git merge-base --is-ancestor``)."""
        a, b = self.commit(ancestor).id, self.commit(rev).id
        return a == b or bool(self.repo.descendant_of(b, a))

    def changed_paths(self, base: str, head: str) -> list[ChangedPath]:
        """Paths that differ between the trees of ``base`` and ``head`` (renames detected),
        sorted by path."""
        a, b = self.commit(base).tree, self.commit(head).tree
        diff = a.diff_to_tree(b)
        diff.find_similar()
        out = []
        for d in diff.deltas:
            status = _STATUS.get(d.status, "modified")
            old = d.old_file.path if status != "added" else None
            new = d.new_file.path if status != "deleted" else None
            out.append(ChangedPath(status, old, new))  # type: ignore[arg-type]
        return sorted(out, key=lambda c: c.new_path or c.old_path or "")

    def files(self, rev: str, prefixes: Sequence[str] = ("",)) -> dict[str, bytes]:
        """Regular files (path → content) of ``rev`` under any of ``prefixes`` (directories or
        file paths, repository-relative; ``""`` = everything). Symlinks and submodules are
        skipped."""
        out: dict[str, bytes] = {}

        def walk(tree: pygit2.Tree, base: str) -> None:
            for entry in tree:
                path = f"{base}{entry.name}"
                if entry.filemode == pygit2.enums.FileMode.TREE:
                    if any(_under(path, [p]) or p.strip("/").startswith(path + "/") for p in prefixes):
                        sub = self.repo[entry.id]
                        assert isinstance(sub, pygit2.Tree)
                        walk(sub, path + "/")
                elif _is_file(entry.filemode) and _under(path, prefixes):
                    blob = self.repo[entry.id]
                    assert isinstance(blob, pygit2.Blob)
                    out[path] = blob.data

        walk(self.commit(rev).tree, "")
        return out

    def exists(self, rev: str, path: str) -> bool:
        """Whether ``path`` (file or directory) exists in ``rev``."""
        path = path.strip("/")
        if path in ("", "."):
            return True
        try:
            self.commit(rev).tree[path]
        except KeyError:
            return False
        return True

    def extract(self, rev: str, prefixes: Sequence[str], dest: str) -> list[str]:
        """Write the files of :meth:`files` into directory ``dest`` (same relative layout) and
        return the written paths (relative, sorted)."""
        written = []
        real_dest = os.path.realpath(dest)
        for rel, data in sorted(self.files(rev, prefixes).items()):
            target = os.path.realpath(os.path.join(dest, rel))
            if os.path.commonpath([real_dest, target]) != real_dest:  # pragma: no cover - git forbids ..
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(data)
            written.append(rel)
        return written


def _is_file(mode: int) -> bool:
    return mode in (pygit2.enums.FileMode.BLOB, pygit2.enums.FileMode.BLOB_EXECUTABLE)

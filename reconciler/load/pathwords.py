"""Why a path given as input (or output) cannot be used, in one wording for every verb.

``os.path.exists`` and ``Path.is_file`` answer False for a symlink loop, a broken symlink and a
missing file alike, so every such input used to read "no such file or directory". Here the
reason is asked of the operating system (``os.stat``) and worded:

* a symlink loop (``ELOOP``): ``symlink loop: too many levels of symbolic links (ELOOP)``;
* a symlink whose target is missing: ``broken symlink: its target ... does not exist``;
* nothing there: ``no such file or directory``;
* a directory where a file is wanted: ``is a directory, not a file``;
* any other error: the system's own words (``Permission denied``, ``File name too long``).

The messages never quote the path: the caller's position (``SourcePos(path)``) or option names it.
"""

from __future__ import annotations

import errno
import os
import stat

from reconciler.fileio.reading import MISSING, SYMLINK_LOOP, os_reason

__all__ = ["MISSING", "SYMLINK_LOOP", "confined", "inside", "os_reason", "path_problem", "relative_path"]


def path_problem(path: str, *, want_file: bool = False) -> str | None:
    """Why ``path`` cannot be read as an input: None when it exists (and, with ``want_file``,
    is not a directory), else the reason in words (module docstring)."""
    try:
        st = os.stat(path)
    except OSError as e:
        if e.errno == errno.ENOENT and os.path.islink(path):
            try:
                target = os.readlink(path)
            except OSError:
                target = "?"
            return f"broken symlink: its target {target[:120]!r} does not exist"
        return os_reason(e)
    except ValueError:  # an embedded NUL
        return "not a file path"
    if want_file and stat.S_ISDIR(st.st_mode):
        return "is a directory, not a file"
    return None


def relative_path(value: str) -> str | None:
    """``value`` as a path inside a root (a repository's ``--git-path``): normalised, ``""`` for
    the root itself; None when it is absolute, climbs out with ``..``, or holds a NUL. Pure (the
    link check is :func:`inside`, once the root exists)."""
    import posixpath

    if "\0" in value or value.startswith("/"):
        return None
    norm = posixpath.normpath(value.strip() or ".")
    if norm == ".":
        return ""
    if norm == ".." or norm.startswith("../"):
        return None
    return norm


def inside(root: str, path: str) -> bool:
    """Whether ``path`` resolves (symlinks followed) to ``root`` or below it."""
    top = os.path.realpath(root)
    real = os.path.realpath(path)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def confined(root: str, relative: str, option: str) -> str:
    """``root/relative`` when it resolves inside ``root`` (symlinks followed).

    Raises:
        InputError: it leads outside (a symlink in the tree pointing elsewhere), naming ``option``.
    """
    from reconciler.errors import InputError, shown

    path = os.path.join(root, relative) if relative else root
    if not inside(root, path):
        raise InputError(f"{option} {shown(relative)}: leads outside the fetched commit (a symlink to "
                         f"{shown(os.path.realpath(path), 120)}); refused")
    return path

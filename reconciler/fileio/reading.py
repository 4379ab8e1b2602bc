"""The one input opener (:func:`read_input`) and the words for a file that is not a regular one.

A path is opened with ``O_NONBLOCK`` after ``stat`` said it is a regular file, and checked again
on the open descriptor (``fstat``: a file swapped for a FIFO in between is caught), so:

* a FIFO never blocks the command (``open`` of a FIFO without a writer waits forever otherwise);
* a character device (``/dev/zero``, ``/dev/urandom``, a terminal) is never read: its size says
  nothing and it never ends;
* the size is checked before reading, and at most ``limit + 1`` bytes are read whatever the file
  claims (a file growing while it is read).

Errors are :class:`~reconciler.errors.InputError` (exit 2). With ``option`` the message names the
option and the path (``--plan 'p.json': cannot read plan file: is a FIFO (named pipe), not a regular
file``); without, the position is the file (``recipes/x.yaml: cannot read file: is a FIFO ...``),
as every other error in a file reads.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from typing import BinaryIO

from reconciler.errors import PATH_LIMIT, InputError, SourcePos, shown

#: The words for ``ELOOP`` (also :data:`reconciler.load.pathwords.SYMLINK_LOOP`).
SYMLINK_LOOP = "symlink loop: too many levels of symbolic links (ELOOP)"
#: The words for a path with nothing at it.
MISSING = "no such file or directory"


def kind_of(mode: int) -> str:
    """What a file of ``stat`` mode ``mode`` is, in words: ``"a regular file"``, ``"a directory"``,
    ``"a FIFO (named pipe)"``, ``"a character device"``, ``"a block device"``, ``"a socket"``."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def not_regular(mode: int) -> str | None:
    """None for a regular file, else why it cannot be read as one (``"is a FIFO (named pipe), not
    a regular file"``; a directory: ``"is a directory, not a file"``)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    return f"is {kind_of(mode)}, not a regular file"


def os_reason(e: OSError) -> str:
    """The reason of ``e`` in words, without the file name the exception carries
    (:data:`SYMLINK_LOOP` for ``ELOOP``, :data:`MISSING` for ``ENOENT``/``ENOTDIR``, else the
    system's ``strerror``)."""
    if e.errno == errno.ELOOP:
        return SYMLINK_LOOP
    if e.errno in (errno.ENOENT, errno.ENOTDIR):
        return MISSING
    return e.strerror or type(e).__name__


def regular_file_problem(path: str) -> str | None:
    """None when ``path`` is (or leads by symlinks to) a regular file, else why not, in words
    (:func:`not_regular`, :func:`os_reason`, ``"not a file path"`` for an embedded NUL). Only
    ``stat``: nothing is opened, so it is safe on a FIFO or a device."""
    try:
        st = os.stat(path)
    except OSError as e:
        return os_reason(e)
    except ValueError:
        return "not a file path"
    return not_regular(st.st_mode)


def _refuse(path: str, option: str | None, reason: str, *, whole: bool = False) -> InputError:
    if option:
        return InputError(f"{option} {shown(path, PATH_LIMIT)}: {reason}")
    return InputError(reason, SourcePos(path, 1, 1) if whole else SourcePos(path))


def _open_checked(path: str, limit: int, option: str | None, what: str) -> int:
    """A blocking read-only descriptor of the regular file ``path`` of at most ``limit`` bytes."""
    def refuse(reason: str, *, whole: bool = False) -> InputError:
        return _refuse(path, option, reason if whole else f"cannot read {what}: {reason}", whole=whole)

    problem = regular_file_problem(path)
    if problem is not None:
        raise refuse(problem)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as e:
        raise refuse(os_reason(e)) from None
    st = os.fstat(fd)
    error = None
    problem = not_regular(st.st_mode)  # swapped since the stat above
    if problem is not None:
        error = refuse(problem)
    elif st.st_size > limit:
        error = refuse(f"{what} is {st.st_size} bytes, larger than the {limit} byte limit", whole=True)
    if error is not None:
        os.close(fd)
        raise error
    os.set_blocking(fd, True)
    return fd


def read_input(path: str, limit: int, *, option: str | None = None, what: str = "file",
               stdin: bool = False) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them.

    ``option``: the option the path came from (named in every error); ``what``: what the file is,
    for the messages (``"fleet snapshot"``); ``stdin``: ``-`` means standard input (read up to the
    same limit; only where the verb documents it).

    Raises:
        InputError: missing, unreadable, a symlink loop, not a regular file (FIFO, device, socket,
            directory) or larger than ``limit``: ``<option> <path>: cannot read <what>: <reason>``
            with ``option``, else ``<path>: cannot read <what>: <reason>``.
    """
    if stdin and path == "-":
        raw = sys.stdin.buffer.read(limit + 1)
        if len(raw) > limit:
            raise _refuse("-", option or "stdin", f"{what} is larger than the {limit} byte limit")
        return raw
    fd = _open_checked(path, limit, option, what)
    chunks: list[bytes] = []
    got = 0
    try:
        while got <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError as e:
        raise _refuse(path, option, f"cannot read {what}: {os_reason(e)}") from None
    finally:
        os.close(fd)
    if got > limit:
        raise _refuse(path, option, f"{what} is larger than the {limit} byte limit", whole=True)
    return b"".join(chunks)


def open_input(path: str, limit: int, *, option: str | None = None, what: str = "file") -> BinaryIO:
    """The regular file ``path`` (no larger than ``limit`` bytes) open for reading, for readers
    that stream (:mod:`reconciler.load.snapshotfast`); the caller closes it and reads at most
    ``limit + 1`` bytes.

    Raises:
        InputError: as :func:`read_input`.
    """
    return os.fdopen(_open_checked(path, limit, option, what), "rb")

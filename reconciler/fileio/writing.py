"""The one output writer: every file the tool writes (``--report``, ``--sim-save`` and the fleet
file a simulated write saves back, ``--metrics-file``, ``--events-file``).

:func:`prepare_output` runs before any work and decides how the path will be written:

=====================================  =========================================================
what the path is                        what happens
=====================================  =========================================================
missing, or a regular file              :attr:`Mode.REPLACE`: written to a temporary file in the
                                        same directory, ``fsync``-ed, given the old file's mode
                                        (a new one ``0666 & ~umask``) and renamed over it: a
                                        reader sees the old file or the new one, never a part
                                        (``--events-file``: :attr:`Mode.APPEND`, created at
                                        its first line)
a symlink to one of those               the same, on the file it points to (the link is kept)
a character device or a FIFO            :attr:`Mode.IN_PLACE`: opened now and written in place,
(or a symlink to one: ``/dev/stdout``)  as a shell's ``>`` would (``/dev/null``, a terminal, a
                                        pipe); a FIFO without a reader is refused (it would
                                        block the command)
a directory, a block device, a socket,  refused (exit 2, the option named)
a symlink loop or a broken symlink
one of the command's inputs             refused: ``plan r.yaml --report r.yaml`` would replace
                                        the recipe with HTML
=====================================  =========================================================

Checked now, so a run never ends with an output it cannot write: the name's length against the
directory's ``NAME_MAX``, the directory (exists, is one, writable) and room for a first byte (a
temporary file is created there, one byte allocated, and removed). What still fails at the end (a
full disk, ``/dev/full``, a reader gone) raises :class:`OutputError` naming the option; the file
written over is left as it was.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import BinaryIO

from reconciler.errors import EXIT_OUTPUT, PATH_LIMIT, InputError, ReconcilerError, shown
from reconciler.fileio.reading import MISSING, SYMLINK_LOOP, kind_of, os_reason

#: Suffixes a recipe directory is read for: an output there would be read as an input next time.
_READ_IN_DIRECTORIES = (".yaml", ".yml")


class Mode(enum.Enum):
    """How an output is written (module docstring)."""

    REPLACE = "replace"
    IN_PLACE = "in place"
    APPEND = "append"


class OutputError(ReconcilerError):
    """An output could not be written after the work was done (exit 5: the run's own result is
    reported, this file is not). The message names the option and the path."""

    exit_code = EXIT_OUTPUT


def _say(option: str, path: str, reason: str) -> str:
    return f"{option} {shown(path, PATH_LIMIT)}: {reason}"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@dataclass
class Output:
    """An output path checked by :func:`prepare_output`. ``path`` is as given (for messages),
    ``target`` the file replaced (symlinks resolved), ``fd`` the descriptor opened at the check
    for :attr:`Mode.IN_PLACE` (for :attr:`Mode.APPEND`: at the first line, so a command refused
    later as bad input creates nothing)."""

    option: str
    path: str
    target: str
    mode: Mode
    fd: int | None = None
    closed: bool = False

    def error(self, reason: str) -> OutputError:
        """An :class:`OutputError` for this output (``<option> <path>: <reason>``)."""
        return OutputError(_say(self.option, self.path, reason))

    def write(self, data: bytes | str) -> None:
        """Write the whole output (``str`` as UTF-8). Raises :class:`OutputError`."""
        raw = data.encode("utf-8") if isinstance(data, str) else data
        self.write_with(lambda fh: fh.write(raw))

    def write_with(self, fill: Callable[[BinaryIO], object]) -> None:
        """Write the output by calling ``fill`` with a binary file (streamed writers).

        Raises:
            OutputError: the write, ``fsync`` or rename failed (a replaced file is left as it was).
        """
        if self.mode is not Mode.REPLACE:
            fd = self._descriptor()
            try:
                with os.fdopen(os.dup(fd), "wb") as fh:
                    fill(fh)
            except OSError as e:
                raise self.error(os_reason(e)) from None
            return
        folder = os.path.dirname(self.target)
        tmp = ""
        try:
            tfd, tmp = tempfile.mkstemp(prefix=".reconciler-", suffix=".tmp", dir=folder)
            with os.fdopen(tfd, "wb") as fh:
                fill(fh)
                fh.flush()
                try:
                    mode = stat.S_IMODE(os.stat(self.target).st_mode)
                except FileNotFoundError:
                    mode = 0o666 & ~_umask()
                os.fchmod(fh.fileno(), mode)
                os.fsync(fh.fileno())
            os.replace(tmp, self.target)
            tmp = ""
        except OSError as e:
            raise self.error(os_reason(e)) from None
        finally:
            if tmp:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)

    def _descriptor(self) -> int:
        if self.fd is None and self.mode is Mode.APPEND and not self.closed:
            try:  # opened at the first line, so a run refused as bad input creates nothing
                self.fd = os.open(self.target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOCTTY | os.O_CLOEXEC,
                                  0o666)
            except OSError as e:
                raise self.error(os_reason(e)) from None
        if self.fd is None:
            raise self.error("closed")
        return self.fd

    def append(self, text: str) -> None:
        """Append ``text`` (UTF-8) to an :attr:`Mode.APPEND` or :attr:`Mode.IN_PLACE` output.

        Raises:
            OutputError: the write failed (the caller decides whether the run goes on).
        """
        raw = text.encode("utf-8")
        fd = self._descriptor()
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view):]
        except OSError as e:
            raise self.error(os_reason(e)) from None

    def close(self) -> None:
        """Close the descriptor (idempotent; nothing is written after)."""
        self.closed = True
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def _input_clash(target: str, inputs: Iterable[tuple[str, str]]) -> str | None:
    """The label of the input ``target`` is (or would be read as: a ``*.yaml`` inside an input
    directory), else None."""
    mine = _identity(target)
    real = os.path.realpath(target)
    for label, path in inputs:
        if not path or path == "-":
            continue
        if (mine is not None and _identity(path) == mine) or os.path.realpath(path) == real:
            return label
        if os.path.isdir(path) and real.endswith(_READ_IN_DIRECTORIES):
            top = os.path.realpath(path)
            if os.path.commonpath([top, real]) == top:
                return label
    return None


def _check_directory(option: str, path: str, target: str) -> None:
    """The directory of ``target`` exists, is writable, takes the name, and has room for a byte."""
    folder = os.path.dirname(target)
    try:
        st = os.stat(folder)
    except OSError as e:
        reason = os_reason(e)
        if reason == MISSING:
            raise InputError(_say(option, path, f"directory {shown(folder, PATH_LIMIT)} does not exist")) from None
        raise InputError(_say(option, path, f"directory {shown(folder, PATH_LIMIT)}: {reason}")) from None
    if not stat.S_ISDIR(st.st_mode):
        raise InputError(_say(option, path, f"{shown(folder, PATH_LIMIT)} is not a directory"))
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(_say(option, path, f"directory {shown(folder, PATH_LIMIT)} is not writable"))
    name = os.fsencode(os.path.basename(target))
    try:
        name_max = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    if len(name) > name_max:
        raise InputError(_say(option, path, f"file name too long ({len(name)} bytes; at most {name_max} here)"))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".reconciler-", suffix=".tmp", dir=folder)
    except OSError as e:
        raise InputError(_say(option, path, f"cannot create a file in {shown(folder, PATH_LIMIT)}: "
                                            f"{os_reason(e)}")) from None
    try:
        try:
            os.posix_fallocate(fd, 0, 1)
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                raise
            os.write(fd, b"\0")
            os.fsync(fd)
    except OSError as e:
        raise InputError(_say(option, path, f"no room for the file: {os_reason(e)}")) from None
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _open_special(option: str, path: str, mode: int, append: bool) -> int:
    """Open a character device or FIFO for writing without blocking (a FIFO without a reader is
    ``ENXIO``: refused), then make the descriptor blocking."""
    flags = os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | (os.O_APPEND if append else 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno == errno.ENXIO and stat.S_ISFIFO(mode):
            raise InputError(_say(option, path, "is a FIFO (named pipe) with no reader: start the reader "
                                                "first")) from None
        raise InputError(_say(option, path, os_reason(e))) from None
    os.set_blocking(fd, True)
    return fd


def prepare_output(option: str, path: str, *, inputs: Iterable[tuple[str, str]] = (),
                   append: bool = False) -> Output:
    """Check the output ``path`` of ``option`` before any work and decide how it is written
    (module docstring). ``inputs``: the paths it may not be, as ``(label, path)`` (the command's
    input files, directories whose ``*.yaml`` files are read, its other outputs; ``label`` as the
    message says it: ``"a recipe input"``); ``append``: ``--events-file`` (opened now,
    created if missing, appended to).

    Raises:
        InputError: naming ``option`` and the path: empty, a directory, a block device, a socket,
            a symlink loop or a broken symlink, a FIFO with no reader, one of ``inputs``, a name
            too long for its directory, a directory that is missing or not writable, no room
            for a first byte, an existing file that is not writable.
    """
    if not path or "\0" in path:
        raise InputError(f"{option} {shown(path, PATH_LIMIT)}: not a file path")
    try:
        st: os.stat_result | None = os.stat(path)
    except OSError as e:
        st = None
        if e.errno == errno.ELOOP:
            raise InputError(_say(option, path, SYMLINK_LOOP)) from None
        if os.path.islink(path):
            raise InputError(_say(option, path, f"broken symlink: its target {os.readlink(path)[:120]!r} does "
                                                "not exist")) from None
        if e.errno not in (errno.ENOENT,):
            if e.errno == errno.ENOTDIR:
                raise InputError(_say(option, path, f"{shown(os.path.dirname(path), PATH_LIMIT)} is not a "
                                                    "directory")) from None
            raise InputError(_say(option, path, os_reason(e))) from None
    clash = _input_clash(path, inputs)
    if clash is not None:
        raise InputError(_say(option, path, f"is also {clash} of this command; write it elsewhere"))
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISDIR(st.st_mode):
            raise InputError(_say(option, path, "is a directory (expected a file path)"))
        if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
            fd = _open_special(option, path, st.st_mode, append)
            return Output(option, path, path, Mode.IN_PLACE, fd)
        raise InputError(_say(option, path, f"is {kind_of(st.st_mode)}: {option} writes a regular file, a "
                                            "character device or a FIFO"))
    target = os.path.realpath(path)
    if st is not None and not os.access(target, os.W_OK):
        raise InputError(_say(option, path, "file is not writable"))
    _check_directory(option, path, target)
    return Output(option, path, target, Mode.APPEND if append else Mode.REPLACE)

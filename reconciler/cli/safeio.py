"""The CLI's process-level output safety: error lines, log records and a closed stdout.

* :func:`error_line` — how every error and warning line is written: secrets masked
  (:func:`reconciler.report.redact.redact`), control characters made visible
  (:func:`reconciler.report.safetext.visible`), one line, and no word of it longer than
  :data:`~reconciler.errors.PATH_LIMIT` characters (:func:`~reconciler.errors.clip`: a value
  argparse echoes, ``unrecognized arguments: <100,000 characters>``, is cut after redaction);
* :func:`install_log_redaction` — every log record's message is formatted and redacted when it is
  created, so no handler (ours, pytest's, a user's) ever holds a secret;
* :class:`StdoutGuard` — ``sys.stdout`` for the run: when the reader goes away (``apply | head``,
  a closed pipe: ``BrokenPipeError``/``EPIPE``), further output is dropped instead of raising, so a
  rollout never stops half-way because a line could not be printed; :func:`main` says so once on
  stderr at the end and the exit code stays the run's own;
* :class:`CiSafeStream` — under a CI runner that executes commands found in a job's output
  (:func:`ci_log`: GitHub Actions, GitLab CI, Azure Pipelines) ``sys.stdout`` and ``sys.stderr``
  pass every line through :func:`reconciler.report.safetext.ci_safe`, so no text from the cluster
  or an input (a stage log tail, a node name, a message) runs as ``::add-mask::`` or
  ``::stop-commands::``, whichever view prints it; only the tool's own annotations
  (:meth:`CiSafeStream.command`) go out as commands.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from reconciler.errors import PATH_LIMIT, clip
from reconciler.report.redact import redact
from reconciler.report.safetext import ci_safe, visible

#: a word longer than a path :func:`clip` (or a value :func:`~reconciler.errors.shown`) has left
_LONG_WORD = re.compile(rf"\S{{{PATH_LIMIT + 8},}}")


def error_line(prefix: str, message: object) -> str:
    """``"<prefix>: <message>"`` redacted, made visible (one line) and with every word longer than
    :data:`~reconciler.errors.PATH_LIMIT` characters cut (:func:`~reconciler.errors.clip`)."""
    text = visible(redact(message))
    if len(text) > PATH_LIMIT + 8:
        text = _LONG_WORD.sub(lambda m: clip(m[0], PATH_LIMIT), text)
    return f"{prefix}: {text}"


def warn(message: object) -> None:
    """Print ``warning: message`` on stderr (redacted, visible)."""
    print(error_line("warning", message), file=sys.stderr)


_installed = False


def install_log_redaction() -> None:
    """Make every :class:`logging.LogRecord` carry its message already formatted and redacted
    (``record.msg`` the safe text, ``record.args`` empty). Idempotent."""
    global _installed
    if _installed:
        return
    base = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = base(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: keep the record as logging would show it
            return record
        record.msg = visible(redact(message), multiline=True)
        if ci_log():
            record.msg = ci_safe(record.msg)
        record.args = ()
        return record

    logging.setLogRecordFactory(factory)
    _installed = True


def _is_epipe(e: BaseException) -> bool:
    return isinstance(e, BrokenPipeError) or (isinstance(e, OSError) and e.errno == errno.EPIPE)


class StdoutGuard:
    """A stand-in for ``sys.stdout`` that stops writing, silently, once the reader has gone.

    ``broken`` tells whether that happened. On the first ``EPIPE`` the real file descriptor is
    pointed at ``/dev/null`` (the Python documentation's recipe for SIGPIPE), so buffered output
    flushed at interpreter exit cannot raise either.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.broken = False

    def _drop(self) -> None:
        self.broken = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass

    def write(self, s: str) -> int:
        """Write ``s`` (or drop it when the reader is gone); returns ``len(s)`` either way."""
        if self.broken:
            return len(s)
        try:
            return self._stream.write(s)
        except OSError as e:
            if not _is_epipe(e):
                raise
            self._drop()
            return len(s)

    def flush(self) -> None:
        """Flush (a no-op once the reader is gone)."""
        if self.broken:
            return
        try:
            self._stream.flush()
        except OSError as e:
            if not _is_epipe(e):
                raise
            self._drop()

    def isatty(self) -> bool:
        """Whether the real stream is a terminal (False once broken)."""
        return not self.broken and self._stream.isatty()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def ci_log(env: Mapping[str, str] | None = None) -> bool:
    """True when the output is read by a CI runner that executes commands written in it: GitHub
    Actions (``GITHUB_ACTIONS=true``), GitLab CI (``GITLAB_CI=true``), Azure Pipelines
    (``TF_BUILD=True``)."""
    e = os.environ if env is None else env
    return e.get("GITHUB_ACTIONS") == "true" or e.get("GITLAB_CI") == "true" or e.get("TF_BUILD") == "True"


#: What a line may start with and still become a command once the rest of it is written.
_COMMAND_PREFIXES = ("::", "##[", "##vso[")


def _could_start_command(partial: str) -> bool:
    head = partial.lstrip()
    return any(p.startswith(head) for p in _COMMAND_PREFIXES)


class CiSafeStream:
    """A stand-in for ``sys.stdout``/``sys.stderr`` under CI (:func:`ci_log`): every line written
    goes out through :func:`~reconciler.report.safetext.ci_safe`.

    A line is neutralised once it is whole (or at a flush, unless what there is of it could still
    turn into a command: ``"  :"`` is held until more arrives); the rest of a line flushed early is
    not at a line start and is written as it is. :meth:`command` writes one of the tool's own
    workflow commands (``::error file=…``) unchanged.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._pending = ""
        self._mid_line = False

    def _emit(self, text: str) -> None:
        if self._mid_line:  # the start of this text is not the start of a line
            text = ci_safe("x" + text)[1:]
        else:
            text = ci_safe(text)
        self._stream.write(text)
        self._mid_line = not text.endswith("\n")

    def write(self, s: str) -> int:
        """Write ``s``, complete lines neutralised now, the last partial one held."""
        text = self._pending + s
        head, sep, tail = text.rpartition("\n")
        if sep:
            self._emit(head + sep)
        self._pending = tail
        return len(s)

    def flush(self) -> None:
        """Write a held partial line (unless it could still start a command), then flush."""
        if self._pending and (self._mid_line or not _could_start_command(self._pending)):
            self._emit(self._pending)
            self._pending = ""
        self._stream.flush()

    def command(self, line: str) -> None:
        """Write ``line`` (one of the tool's own workflow commands) as it is, on a line of its own."""
        if self._pending or self._mid_line:
            self._emit(self._pending + "\n")
            self._pending = ""
        self._stream.write(line + "\n")
        self._stream.flush()

    def close_line(self) -> None:
        """Write what is held (neutralised as a whole line)."""
        if self._pending:
            self._emit(self._pending)
            self._pending = ""

    def isatty(self) -> bool:
        """Whether the real stream is a terminal."""
        return bool(self._stream.isatty())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

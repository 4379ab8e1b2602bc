"""GitHub Actions workflow commands for input errors: ``::error file=F,line=L,col=C::message``.

When ``GITHUB_ACTIONS=true`` every positioned input error is also printed as an annotation, so
the Actions UI marks the line in the pull request's diff. Escaping is the runner's
(https://docs.github.com/actions/reference/workflow-commands-for-github-actions): in the message
``%``, CR and LF become ``%25``, ``%0D``, ``%0A``; in property values also ``:`` and ``,``
(``%3A``, ``%2C``). A revision-mode position ``<sha12>:path`` names the repository path.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from reconciler.errors import InputError, InputErrors
from reconciler.report.prcomment import LoadProblem
from reconciler.report.redact import redact
from reconciler.report.safetext import visible

_REV_LABEL = re.compile(r"[0-9a-f]{12}:(.+)")


def enabled(env: Mapping[str, str] | None = None) -> bool:
    """True when running as a GitHub Actions step (``GITHUB_ACTIONS=true``)."""
    return (os.environ if env is None else env).get("GITHUB_ACTIONS") == "true"


def problems(err: InputError) -> list[LoadProblem]:
    """Each error of ``err`` (one, or every one of an :class:`InputErrors`) as a
    :class:`LoadProblem` with the repository path (revision label removed), redacted."""
    out: list[LoadProblem] = []
    for e in err.errors if isinstance(err, InputErrors) else [err]:
        file = ""
        line = col = 0
        if e.pos is not None:
            m = _REV_LABEL.fullmatch(e.pos.file)
            file = m.group(1) if m else e.pos.file
            line, col = e.pos.line or 0, e.pos.column or 0
        out.append(LoadProblem(visible(redact(file)), line, col, visible(redact(e.field)), visible(redact(e.message))))
    return out


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def commands(items: Iterable[LoadProblem], title: str = "reconciler") -> list[str]:
    """One ``::error …::`` line per problem (``file``/``line``/``col`` only when known)."""
    out = []
    for p in items:
        props = []
        if p.file:
            props.append(f"file={_prop(p.file)}")
            if p.line:
                props.append(f"line={p.line}")
            if p.column:
                props.append(f"col={p.column}")
        props.append(f"title={_prop(title)}")
        msg = f"{p.field}: {p.message}" if p.field else p.message
        out.append(f"::error {','.join(props)}::{_data(msg)}")
    return out


def emit(lines: Iterable[str]) -> None:
    """Write the tool's own workflow commands on stderr as they are: through
    :meth:`reconciler.cli.safeio.CiSafeStream.command` under CI (which makes every other line
    inert), else printed."""
    import sys

    command = getattr(sys.stderr, "command", None)
    for line in lines:
        if command is not None:
            command(line)
        else:
            print(line, file=sys.stderr)

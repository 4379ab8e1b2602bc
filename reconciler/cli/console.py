"""The terminal output of the CLI: one place decides colours and width.

Colours and styles (any ANSI escape) are used only when the stream is a terminal, ``NO_COLOR`` is
unset or empty (https://no-color.org: "when present and not an empty string … prevents the
addition of ANSI color") and ``TERM`` is not ``dumb`` (a terminal that interprets no escape
sequences, as GNU tools and kubectl's colour libraries treat it).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TextIO

from rich.console import Console

#: Width used when the output is not a terminal (CI logs, pipes): wide enough that tables of node,
#: package and stage names are not cut.
PIPE_WIDTH = 160


def styles_allowed(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """True when ANSI styles may be written to ``stream`` (see the module doc); ``environ``
    defaults to ``os.environ``."""
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR") or env.get("TERM") == "dumb":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def make_console(*, stderr: bool = False) -> Console:
    """A rich Console: the terminal's width on a TTY, :data:`PIPE_WIDTH` columns otherwise; no
    styles at all unless :func:`styles_allowed`.

    No emoji codes and no highlighting: text from inputs is never reinterpreted. Strings from inputs
    or the cluster still go through :mod:`reconciler.report.safetext` (``markup``/``text``) before
    they reach it.
    """
    stream = sys.stderr if stderr else sys.stdout
    styled = styles_allowed(stream)
    return Console(stderr=stderr, highlight=False, emoji=False, color_system="auto" if styled else None,
                   no_color=not styled, width=None if stream.isatty() else PIPE_WIDTH)

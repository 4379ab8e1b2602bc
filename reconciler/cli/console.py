"""The terminal output of the CLI: one place decides colours and width."""

from __future__ import annotations

import sys

from rich.console import Console

#: Width used when the output is not a terminal (CI logs, pipes): wide enough that tables of node,
#: package and stage names are not cut.
PIPE_WIDTH = 160


def make_console(*, stderr: bool = False) -> Console:
    """A rich Console: the terminal's width on a TTY, :data:`PIPE_WIDTH` columns otherwise.

    No emoji codes and no highlighting: text from inputs is never reinterpreted. Strings from inputs
    or the cluster still go through :mod:`reconciler.report.safetext` (``markup``/``text``) before
    they reach it.
    """
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, highlight=False, emoji=False,
                   width=None if stream.isatty() else PIPE_WIDTH)

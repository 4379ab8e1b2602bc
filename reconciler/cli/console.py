"""The terminal output of the CLI: one place decides colours and width.

Colours and styles (any ANSI escape) are used only when the stream is a terminal, ``NO_COLOR`` is
unset or empty (https://no-color.org: "when present and not an empty string … prevents the
addition of ANSI color") and ``TERM`` is not ``dumb`` (a terminal that interprets no escape
sequences, as GNU tools and kubectl's colour libraries treat it).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

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


def whole_lines(console: Console) -> bool:
    """The ``soft_wrap`` for a line of prose (a warning, a summary): True (printed whole) unless
    ``console`` writes to a terminal, which wraps at words to its width. Piped into a file, ``grep``
    or a CI log, a sentence broken at :data:`PIPE_WIDTH` columns would be split mid-sentence."""
    return not console.is_terminal


#: A cell with no value in ``--no-headers`` output (kubectl's word), so every row has as many
#: whitespace-separated fields as columns.
NONE_CELL = "<none>"


class PlainListing:
    """The rows of a listing without headers or borders (``--no-headers``, as ``kubectl get
    --no-headers``): columns three spaces apart, never wrapped or cut, an empty cell shown as
    :data:`NONE_CELL`, so each row is one line of whitespace-separated fields for ``awk``/``cut``.
    Cells are strings or rich ``Text`` (their plain text is used: no styles)."""

    def __init__(self, columns: int) -> None:
        self.columns = columns
        self.rows: list[list[str]] = []

    def add_row(self, *cells: object) -> None:
        """One row of ``columns`` cells (``str`` or ``rich.text.Text``)."""
        plain = [c.plain if isinstance(c, Text) else str(c) for c in cells]
        self.rows.append([c if c.strip() else NONE_CELL for c in plain])

    def lines(self) -> list[str]:
        """The rows as text lines (no trailing spaces)."""
        widths = [max((len(r[i]) for r in self.rows if i < len(r)), default=0) for i in range(self.columns)]
        return ["   ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in self.rows]


def listing_table(columns: Sequence[str], *, headers: bool = True) -> Table | PlainListing:
    """A table of a listing (``status``, ``node status``, ``package status``) with ``columns``;
    without ``headers``, a :class:`PlainListing`. Print it with :func:`print_listing`."""
    if not headers:
        return PlainListing(len(columns))
    t = Table(show_header=True, header_style="bold")
    for c in columns:
        t.add_column(c)
    return t


def print_listing(console: Console, table: Table | PlainListing) -> None:
    """Print a :func:`listing_table` on ``console`` (a plain listing is never wrapped to its width)."""
    if isinstance(table, PlainListing):
        for line in table.lines():
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    else:
        console.print(table)

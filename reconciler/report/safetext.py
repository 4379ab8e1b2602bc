"""Text from inputs or the cluster, made safe to print: the one helper every output path uses.

Strings the reconciler prints come from places it does not control — node and pod names, labels,
annotations, stage log tails, package paths, error messages of remote services. Printed as they
are they can

* be read as rich markup (``[/etc/x]`` crashes rich with a ``MarkupError``, ``[error]`` silently
  disappears, ``:warning:`` turns into an emoji), and
* drive the terminal: ANSI escape sequences (ESC, CSI), other C0/C1 controls, DEL, and Unicode
  bidirectional overrides that reorder what is shown (CVE-2021-42574, "Trojan Source").

:func:`visible` shows every such character as a printable escape (``\\x1b``, ``\\x9b``,
``\\u202e``), so it is seen, not interpreted; :func:`markup` additionally escapes rich markup
(``rich.markup.escape``) for strings embedded in a markup template; :func:`text` builds a
``rich.text.Text`` (never parsed as markup) for table cells. Our own templates keep their markup.

:func:`md_escape` is the one Markdown escaper (plan, PR comment and run summary views; mentions
broken). :func:`ci_safe` makes a CI runner's command lines inert (GitHub Actions' ``::set-output``,
``::add-mask::``, ``::stop-commands::``; ``##[...]``, ``##vso[...]``; GitLab's section markers):
the CLI passes every line it prints under CI through it (:class:`reconciler.cli.safeio.CiSafeStream`).
"""

from __future__ import annotations

import re

from rich.markup import escape as _rich_escape
from rich.text import Text

#: Characters that are never printed as they are: C0 controls (tab and newline only where
#: allowed), DEL, C1 controls (0x80-0x9f, which include the 8-bit CSI 0x9b), the Unicode
#: bidirectional marks, embeddings, overrides and isolates, line/paragraph separators, zero-width
#: characters and the BOM.
_CONTROL_RANGES = ((0x00, 0x08), (0x0B, 0x1F), (0x7F, 0x9F), (0x061C, 0x061C), (0x200B, 0x200F),
                   (0x2028, 0x202E), (0x2060, 0x2069), (0xFEFF, 0xFEFF))
_CONTROL = "".join(f"{chr(a)}-{chr(b)}" for a, b in _CONTROL_RANGES)
_UNSAFE_LINE = re.compile(f"[\t\n{_CONTROL}]")
_UNSAFE_BLOCK = re.compile(f"[{_CONTROL}]")


def _escape(o: int) -> str:
    return {9: "\\t", 10: "\\n", 13: "\\r"}.get(o) or (f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}")


# str.translate tables: C speed on hostile text of any length
_BLOCK_TABLE = {o: _escape(o) for a, b in _CONTROL_RANGES for o in range(a, b + 1)}
_LINE_TABLE = {**_BLOCK_TABLE, 9: "\\t", 10: "\\n"}


def visible(value: object, *, multiline: bool = False) -> str:
    """``str(value)`` with every control, bidi and zero-width character written as an escape.

    Args:
        value: anything; ``None`` becomes ``"None"`` as ``str`` does.
        multiline: keep newlines and tabs (log tails, multi-line messages); otherwise they are
            escaped too, so a one-line field (a node name) stays one line.

    Returns: printable text, unchanged when it held nothing unsafe (the common case is one
    regex search).
    """
    s = value if isinstance(value, str) else str(value)
    pattern = _UNSAFE_BLOCK if multiline else _UNSAFE_LINE
    if not pattern.search(s):
        return s
    return s.translate(_BLOCK_TABLE if multiline else _LINE_TABLE)


def markup(value: object, *, multiline: bool = False) -> str:
    """:func:`visible` text escaped for a rich markup template (``[`` no longer opens a tag).

    Use for every input or cluster string inside ``console.print(f"...[bold]{markup(x)}[/bold]")``
    and for table cells given as strings.
    """
    return _rich_escape(visible(value, multiline=multiline))


def text(value: object, style: str = "", *, multiline: bool = False) -> Text:
    """A ``rich.text.Text`` of :func:`visible` text: rich renders it literally (no markup, no emoji)."""
    return Text(visible(value, multiline=multiline), style=style)


#: A line start a CI runner reads as a command: GitHub Actions' workflow commands (``::name ...``;
#: the runner trims leading whitespace first, actions/runner ``ActionCommand.TryParseV2``) and its
#: older ``##[name ...]`` form, Azure Pipelines' ``##vso[...]`` logging commands.
_CI_COMMAND = re.compile(r"(?m)^([^\S\n]*)(::|##\[|##vso\[)")  # every line
#: GitLab's collapsible-section markers (``section_start:<unix time>:<name>``), matched anywhere.
_CI_SECTION = re.compile(r"section_(start|end):(?=\d)")


def ci_safe(text: str) -> str:
    """``text`` with every line that a CI runner would execute made inert: a backslash before a
    leading ``::``, ``##[`` or ``##vso[`` (``\\::set-output …``), and ``section_start:``/
    ``section_end:`` followed by a digit written ``section_start\\:`` (GitLab). Unchanged when
    nothing matches (one regex search each)."""
    if _CI_COMMAND.search(text):
        text = _CI_COMMAND.sub(r"\1\\\2", text)
    if _CI_SECTION.search(text):
        text = _CI_SECTION.sub(r"section_\1\\:", text)
    return text


#: Inline Markdown metacharacters: emphasis, code, links/images, tables, strikethrough, headings.
_MD_INLINE = re.compile(r"([\\`*_\[\]|~!#])")
#: Block markers that only matter where the text starts a line or a list item's content.
_MD_BLOCK_START = re.compile(r"^(\d{1,9})([.)])(?=\s|\Z)|^([-+])(?=\s|\Z)")


def md_escape(text: object) -> str:
    """Escape untrusted text for GitHub-flavoured Markdown, safe inside table cells and list items.

    HTML metacharacters become entities (no tag, comment or ``<details>`` can be opened or
    closed); emphasis, code, link/image, table, strikethrough and heading characters are
    backslash-escaped; a leading list/quote marker (``-``, ``+``, ``1.``) is escaped; line breaks
    and C0 control characters become spaces, DEL, C1, bidi and zero-width characters visible escapes
    (:func:`reconciler.report.safetext.visible`); ``@`` is followed by a zero-width space so a name
    cannot mention (notify) a user or team.
    """
    s = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    s = visible("".join(ch if ch >= " " else " " for ch in s))  # DEL, C1, bidi, zero-width: shown as escapes
    s = _MD_INLINE.sub(r"\\\1", s)
    s = _MD_BLOCK_START.sub(lambda m: f"{m[1]}\\{m[2]}" if m[1] else f"\\{m[3]}", s, count=1)
    return s.replace("@", "@&#8203;")

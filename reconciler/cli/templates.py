"""kubectl's template outputs: ``-o jsonpath=TEMPLATE`` and ``-o custom-columns=SPEC``, on the JSON
document a verb prints with ``-o json`` (``status``: ``{"nodes": [...]}``; ``plan``: the plan
document).

* ``jsonpath=``: text with ``{expression}`` parts, as kubectl's JSONPath template
  (https://kubernetes.io/docs/reference/kubectl/jsonpath/): ``{.nodes[*].name}``; several values of
  one expression are joined by a space; ``{"\\n"}`` and ``{"\\t"}`` are literal text. The expression
  is evaluated by ``jsonpath-ng`` (a well-kept JSONPath library; filters ``[?(@.x=="y")]`` with
  its extension syntax). kubectl's ``{range}``/``{end}`` loops are not supported: refused with the
  option named.
* ``custom-columns=NAME:EXPR,...``: one row per item of the document's list (``status``: the
  nodes; ``plan``: its nodes), a column per expression (several values joined by ``,``; none:
  ``<none>``), headed by the names unless ``--no-headers``.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.errors import shown

_PART = re.compile(r"\{([^{}]*)\}")
_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')


def _compile(expr: str, option: str) -> Any:
    """A JSONPath expression of kubectl's form (``.a.b[*]``; ``$`` optional) compiled."""
    from jsonpath_ng.exceptions import JsonPathParserError  # imported by a template only: plan and status start
    from jsonpath_ng.ext.parser import parse  # without it

    text = expr.strip()
    if not text:
        raise argparse.ArgumentTypeError(f"{option}: an empty expression")
    if text.split()[0] in ("range", "end"):
        raise argparse.ArgumentTypeError(f"{option}: {{range}}/{{end}} loops are not supported; print the list "
                                         "with {.nodes[*].name} or use -o custom-columns=")
    try:
        return parse(text if text.startswith("$") else "$" + (text if text.startswith((".", "[")) else "." + text))
    except (JsonPathParserError, Exception) as e:  # the library raises plain Exceptions for lexer errors
        raise argparse.ArgumentTypeError(f"{option}: {shown(expr)} is not a JSONPath expression: {e}") from None


def _values(path: Any, doc: Any) -> list[str]:
    out = []
    for m in path.find(doc):
        v = m.value
        if v is None:  # kubectl shows a null as nothing (<none> in a column)
            continue
        out.append(v if isinstance(v, str) else json.dumps(v, sort_keys=True))
    return out


@dataclass(frozen=True)
class JsonPath:
    """A parsed ``-o jsonpath=`` template: literal text and compiled expressions, in order."""

    parts: tuple[str | Any, ...]

    def render(self, doc: Any, items: Sequence[Any], *, headers: bool = True) -> str:
        """The template filled from ``doc`` (``items``, ``headers``: unused, as kubectl)."""
        return "".join(p if isinstance(p, str) else " ".join(_values(p, doc)) for p in self.parts)


@dataclass(frozen=True)
class CustomColumns:
    """A parsed ``-o custom-columns=`` spec: (header, compiled expression) per column."""

    columns: tuple[tuple[str, Any], ...]

    def render(self, doc: Any, items: Sequence[Any], *, headers: bool = True) -> str:
        """One row per item, columns padded to their widest cell (kubectl's layout), a header row."""
        rows = [[",".join(_values(p, item)) or "<none>" for _, p in self.columns] for item in items]
        if headers:
            rows.insert(0, [name for name, _ in self.columns])
        if not rows:
            return ""
        widths = [max(len(r[i]) for r in rows) for i in range(len(self.columns))]
        return "".join("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n" for r in rows)


Template = JsonPath | CustomColumns


def parse_template(value: str) -> Template | None:
    """``value`` of ``-o`` as a template (None when it is not ``jsonpath=`` or ``custom-columns=``).

    Raises:
        argparse.ArgumentTypeError: a malformed template (the option and the problem named).
    """
    kind, sep, spec = value.partition("=")
    if not sep or kind not in ("jsonpath", "custom-columns"):
        return None
    option = f"-o {kind}"
    if kind == "jsonpath":
        parts: list[str | Any] = []
        at = 0
        for m in _PART.finditer(spec):
            parts.append(spec[at:m.start()])
            lit = _LITERAL.fullmatch(m.group(1).strip())
            parts.append(json.loads(f'"{lit.group(1)}"') if lit else _compile(m.group(1), option))
            at = m.end()
        if "{" in spec[at:] or "}" in spec[at:]:
            raise argparse.ArgumentTypeError(f"{option}: unbalanced braces in {shown(spec)}")
        parts.append(spec[at:])
        if not any(not isinstance(p, str) for p in parts):
            raise argparse.ArgumentTypeError(f"{option}: no {{expression}} in {shown(spec)} (e.g. {{.nodes[*].name}})")
        return JsonPath(tuple(p for p in parts if p != ""))
    columns = []
    for col in spec.split(","):
        name, colon, expr = col.partition(":")
        if not colon or not name.strip():
            raise argparse.ArgumentTypeError(f"{option}: {shown(col)} is not NAME:EXPRESSION (e.g. NODE:.name)")
        columns.append((name.strip(), _compile(expr, option)))
    return CustomColumns(tuple(columns))

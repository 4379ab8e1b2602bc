"""Guarded JSON reading: text → plain Python value, or an :class:`~reconciler.errors.InputError` with a position.

The one JSON parser for input the reconciler did not write itself in this process: package
``config.json`` files, ``apply --plan`` files and the JSON annotations recorded on nodes. It is
the standard library's C parser with these guards:

* nesting deeper than :data:`MAX_DEPTH` is refused (a 100,000-deep document never reaches the
  ``RecursionError`` the C parser would raise, nor the recursive code that walks the value later);
* ``NaN``, ``Infinity`` and ``-Infinity`` (which Python's parser accepts, JSON does not) and
  numbers that overflow to infinity (``1e400``) are refused;
* integers outside the signed 64-bit range (what Kubernetes and Go read JSON integers into) are
  refused before they are converted, so a 20,000-digit number costs nothing and never meets
  Python's int/str conversion limit later;
* duplicate object keys are refused (Python silently keeps the last one);
* strings holding a lone UTF-16 surrogate (``"\\ud800"``) are refused: they cannot be encoded as
  UTF-8, so they would break the first write or print.

Every error names ``line:column`` (1-based) in the text. Positions of refused values are found by
re-scanning the text, which happens only on the error path; :func:`json_positions` gives the
position of every key and item for callers that report errors of a valid document (the same
shape as ``YamlDoc.positions``, so ``YamlDoc(file, 0, value, json_positions(text))`` works).

It sits beside :mod:`reconciler.errors`, below every layer, because both the loaders and the
node-record models (:mod:`reconciler.model.nodestate`) read JSON through it. It also holds the one
canonical JSON writer, :func:`dumps_sorted` (the plan document and the plan hash).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from itertools import accumulate
from typing import Any

import orjson

from reconciler.errors import InputError, SourcePos

PathKey = tuple[str | int, ...]
"""A path into a document: object keys (str) and array indices (int), as ``yamlsafe.PathKey``."""

#: Deepest nesting of objects/arrays accepted; equal to the YAML limit (inputs need about 8).
MAX_DEPTH = 64

#: Integers outside ``[INT_MIN, INT_MAX]`` are refused: Kubernetes and Go read JSON integers as int64.
INT_MAX = 2**63 - 1
INT_MIN = -(2**63)
_INT_DIGITS = 19  # len(str(INT_MAX)); longer digit strings are refused without converting them


class _Refused(ValueError):
    """Raised inside the parser's hooks; located afterwards by :func:`_locate`."""


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > _INT_DIGITS:
        raise _Refused(text)
    value = int(text)
    if not INT_MIN <= value <= INT_MAX:
        raise _Refused(text)
    return value


def _parse_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _Refused(text)
    return value


def _parse_constant(text: str) -> Any:
    raise _Refused(text)


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Refused("duplicate")
    return out


_LONE_SURROGATE = re.compile(
    r"(?<!\\)(?:\\\\)*(?:\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2})"
)


def parse_json(
    text: str, file: str, *, max_depth: int = MAX_DEPTH, what: str = "JSON", allow_duplicates: bool = False
) -> Any:
    """Parse ``text`` (the content of ``file``) as one JSON value, with the guards of the module docstring.

    ``file`` names the source in errors (a path, or e.g. ``node n1 annotation A``); ``what`` names
    the format in syntax errors (``"plan file"``). ``allow_duplicates=True`` lets duplicate keys pass
    (the last one wins, as in Go): for JSON this program or NodeWright wrote, read on every node,
    where the check would triple the parse time.

    Returns:
        The value: ``dict[str, Any]``, ``list``, ``str``, ``int``, ``float``, ``bool`` or ``None``.

    Raises:
        InputError: syntax error, a refused value or too deep, positioned at ``file:line:column``.
    """
    try:
        value = json.loads(
            text,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_parse_constant,
            object_pairs_hook=None if allow_duplicates else _pairs,
        )
    except json.JSONDecodeError as e:
        raise InputError(f"{what} syntax error: {e.msg}", SourcePos(file, e.lineno, e.colno)) from None
    except (_Refused, RecursionError, ValueError):
        raise _locate(text, file, max_depth, allow_duplicates) from None
    if _too_deep(text, max_depth) or ("\\u" in text and _LONE_SURROGATE.search(text)):
        raise _locate(text, file, max_depth, allow_duplicates)
    return value


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_STRING_OR_BRACKET = re.compile(r'"(?:[^"\\]|\\.)*+"|[\[\]{}]')


def deeper_than(text: str, max_depth: int) -> int | None:
    """Offset in JSON ``text`` of the first ``[`` or ``{`` that opens a level deeper than
    ``max_depth`` (the outermost container is level 1; brackets inside strings do not count), or
    None when the nesting stays within it. Stops at that bracket: for positioning a refusal
    (the decoder's ``RecursionError`` says nothing of where)."""
    depth = 0
    for m in _STRING_OR_BRACKET.finditer(text):
        c = m[0]
        if c == "[" or c == "{":
            depth += 1
            if depth > max_depth:
                return m.start()
        elif c == "]" or c == "}":
            depth -= 1
    return None


_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def _too_deep(text: str, max_depth: int) -> bool:
    """Whether the (valid) JSON ``text`` nests deeper than ``max_depth``: counted over its
    brackets with the strings taken out, at C speed; free when there are few brackets at all."""
    if text.count("[") + text.count("{") <= max_depth:
        return False
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text) if '"' in text else text)
    return max(accumulate(1 if c in "[{" else -1 for c in brackets), default=0) > max_depth


# ---------------------------------------------------------------------------------------------
# Scanning (positions; only on the error path, or for small documents)

_TOKEN = re.compile(
    r"""(?P<ws>[ \t\n\r]+)
    |(?P<str>"(?:[^"\\]|\\.)*")
    |(?P<num>-?(?:0|[1-9][0-9]*)(?P<frac>\.[0-9]+)?(?P<exp>[eE][+-]?[0-9]+)?)
    |(?P<lit>true|false|null|NaN|-?Infinity)
    |(?P<punct>[{}\[\]:,])""",
    re.X | re.S,
)


def _tokens(text: str) -> Iterator[tuple[str, str, int]]:
    """``(kind, text, offset)`` of each token; stops at the first character no token matches."""
    pos, end = 0, len(text)
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None:
            return
        kind = m.lastgroup or ""
        if kind in ("frac", "exp"):
            kind = "num"
        if kind != "ws":
            yield kind, m.group(0), pos
        pos = m.end()


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _decode_key(token: str) -> str:
    try:
        value = json.loads(token)
    except ValueError:
        return token.strip('"')
    return value if isinstance(value, str) else token


def json_positions(text: str) -> dict[PathKey, tuple[int, int]]:
    """Map every path of a JSON document to the ``(line, column)`` of its key (object entries) or
    its first character (array items); ``()`` is the root value. Same shape as
    :attr:`YamlDoc.positions`. Stops quietly at text it cannot tokenise."""
    positions: dict[PathKey, tuple[int, int]] = {}
    for event, path, offset, _tok in _events(text):
        if event in ("key", "item", "root"):
            positions.setdefault(path, _line_col(text, offset))
    return positions


def _events(text: str) -> Iterator[tuple[str, PathKey, int, str]]:
    """Structural events ``(event, path, offset, token)``: ``root``/``item``/``key`` when a value
    starts at ``path`` (``key`` at its key), ``open`` for a container at ``path`` (its depth in
    ``token``), ``scalar`` for each scalar value."""
    stack: list[list[Any]] = []  # [kind "obj"/"arr", current key or index, expecting a key, path]
    for kind, tok, off in _tokens(text):
        top = stack[-1] if stack else None
        if kind == "punct":
            if tok in "{[":
                if top is None:
                    here: PathKey = ()
                    yield "root", here, off, tok
                else:
                    here = (*top[3], top[1])
                    if top[0] == "arr":
                        yield "item", here, off, tok
                stack.append(["obj" if tok == "{" else "arr", 0, tok == "{", here])
                yield "open", here, off, str(len(stack))
            elif tok in "}]":
                if stack:
                    stack.pop()
            elif tok == "," and top is not None:
                if top[0] == "arr":
                    top[1] += 1
                else:
                    top[2] = True
            continue
        if top is None:
            yield "root", (), off, tok
            yield "scalar", (), off, tok
        elif top[0] == "obj" and top[2]:
            if kind == "str":
                top[1] = _decode_key(tok)
                top[2] = False
                yield "key", (*top[3], top[1]), off, tok
        elif top[0] == "arr":
            yield "item", (*top[3], top[1]), off, tok
            yield "scalar", (*top[3], top[1]), off, tok
        else:
            yield "scalar", (*top[3], top[1]), off, tok


def _locate(text: str, file: str, max_depth: int, allow_duplicates: bool = False) -> InputError:
    """The first refused value of ``text`` as a positioned :class:`InputError`."""
    seen: dict[PathKey, dict[str, int]] = {}
    for event, path, off, tok in _events(text):
        if event == "open":
            if int(tok) > max_depth:
                return InputError(
                    f"JSON nesting is deeper than {max_depth} levels", SourcePos(file, *_line_col(text, off))
                )
        elif event == "key" and not allow_duplicates:
            keys = seen.setdefault(path[:-1], {})
            key = str(path[-1])
            if key in keys:
                first = _line_col(text, keys[key])[0]
                return InputError(
                    f"duplicate key {key[:80]!r} (first defined at line {first})",
                    SourcePos(file, *_line_col(text, off)),
                )
            keys[key] = off
        elif event == "scalar":
            problem = _scalar_problem(tok)
            if problem:
                return InputError(problem, SourcePos(file, *_line_col(text, off)))
    m = _LONE_SURROGATE.search(text)
    if m:
        return InputError(
            "a string holds a lone UTF-16 surrogate escape (not encodable as UTF-8)",
            SourcePos(file, *_line_col(text, m.start())),
        )
    return InputError("JSON value refused (too deep, a duplicate key or an unusable number)", SourcePos(file, 1, 1))


def _scalar_problem(tok: str) -> str:
    if tok in ("NaN", "Infinity", "-Infinity"):
        return f"{tok} is not a JSON number (use a finite number)"
    if tok[:1] in "-0123456789" and tok[:2] not in ("-I",):
        if re.fullmatch(r"-?[0-9]+", tok):
            if len(tok.lstrip("-")) > _INT_DIGITS or not INT_MIN <= int(tok) <= INT_MAX:
                digits = len(tok.lstrip("-"))
                return f"integer with {digits} digits is out of range (at most 64-bit: ±{INT_MAX})"
        else:
            try:
                if float(tok) in (float("inf"), float("-inf")):
                    return f"number {tok[:40]} is too large (overflows to infinity)"
            except ValueError:
                return ""
    return ""


def path_pos(text: str, file: str, path: Sequence[str | int]) -> SourcePos:
    """Position of ``path`` in the JSON ``text`` (or of its nearest ancestor); for error messages."""
    positions = json_positions(text)
    p = tuple(path)
    while p not in positions and p:
        p = p[:-1]
    hit = positions.get(p)
    return SourcePos(file, *hit) if hit else SourcePos(file, 1, 1)


# ---------------------------------------------------------------------------------------------
# Writing

_ORJSON_OPTIONS = (orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATACLASS
                   | orjson.OPT_PASSTHROUGH_DATETIME)
_NOT_ASCII = re.compile(r"[^\x00-\x7e]+")
_encode_ascii: Any = json.encoder.encode_basestring_ascii


def _escaped(match: re.Match[str]) -> str:
    return str(_encode_ascii(match.group(0)))[1:-1]


def dumps_sorted(doc: Any, *, indent: bool = False) -> str:
    """``json.dumps(doc, sort_keys=True, default=str)`` with ``indent=2``, or compact
    (``separators=(",", ":")``): the same text, through orjson's C encoder (the standard library
    has none for indented output, and is 3 to 10 times slower on large escaped strings).

    orjson's output is made the standard library's: non-ASCII characters and DEL (which orjson
    writes raw) are escaped as ``\\uXXXX`` (surrogate pairs beyond the BMP) by the standard
    library's own C escaper; a value orjson does not encode itself (a ``str`` or ``int``
    subclass, a dataclass, a datetime, an integer beyond 64 bits, a lone surrogate, a non-string
    key) sends the whole document through ``json.dumps``. What remains different: a float that
    ``repr`` writes with an exponent (``1e+16``; orjson ``1e16``, the same number), and NaN or
    infinity (orjson ``null``; not JSON, ``json.dumps`` writes ``NaN``). Callers that hash the text
    keep such floats out (:func:`reconciler.plan.planner.plan_hash`). An :class:`enum.Enum` that is
    not a ``str`` is written as its value (``json.dumps`` would call ``default``): none is passed.
    """
    return dumps_sorted_bytes(doc, indent=indent).decode("ascii")


def dumps_sorted_bytes(doc: Any, *, indent: bool = False) -> bytes:
    """:func:`dumps_sorted` encoded (ASCII): orjson's bytes as they are when they need no escape."""
    try:
        blob = orjson.dumps(doc, option=_ORJSON_OPTIONS | orjson.OPT_INDENT_2 if indent else _ORJSON_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError included
        if indent:
            return json.dumps(doc, sort_keys=True, indent=2, default=str).encode("ascii")
        return json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str).encode("ascii")
    if blob.isascii() and b"\x7f" not in blob:
        return blob
    return _NOT_ASCII.sub(_escaped, blob.decode("utf-8")).encode("ascii")


def json_type(value: Any) -> str:
    """The JSON Schema type name of a decoded JSON value (``boolean``, ``integer``, ``number``,
    ``string``, ``array``, ``object`` or ``null``), for messages about a document's shape."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"

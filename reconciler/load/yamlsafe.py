"""Guarded YAML reading: bytes → plain Python documents with a position for every key and item.

Parsing uses ruamel.yaml's round-trip pipeline up to the *composed node graph* (scanner, parser,
composer; every node carries its start mark). We then build plain ``dict``/``list``/scalar data
ourselves instead of running ruamel's constructor, because that is where the guards belong:

* the file is ``stat``-ed first and rejected above :data:`MAX_FILE_BYTES` without being read;
* bytes must be UTF-8 (an optional BOM is dropped); the first bad byte is reported with its line;
* CRLF and lone CR line breaks are normalised to LF (YAML does the same inside scalars);
* syntax errors keep ruamel's line/column;
* before anything is built, the node graph is measured *as if aliases were expanded* (memoised, so
  the measuring itself is linear) and a document over :data:`MAX_NODES` nodes, a recursive alias or
  nesting deeper than :data:`MAX_DEPTH` is rejected: a "billion laughs" file never gets expanded;
* only the standard tags are accepted (str, int, float, bool, null, map, seq, timestamp and the
  ``<<`` merge key); ``!!python/object``, ``!!binary``, ``!custom`` … are errors;
* duplicate mapping keys are errors naming both lines; keys must be scalars and become strings
  (their source text, as Kubernetes' YAML→JSON conversion does);
* timestamps are kept as their source text (``2026-11-30`` stays a string);
* integers outside the signed 64-bit range (:data:`INT_MAX`) are refused at their position, long
  ones before they are converted.

Every ``(line, column)`` is 1-based. :meth:`YamlDoc.pos` finds the position of a path (or of the
nearest existing ancestor), and :func:`validation_errors` turns a pydantic ``ValidationError`` into
:class:`~reconciler.errors.InputError` objects positioned that way.
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent, ScalarEvent
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.reader import ReaderError

from reconciler.errors import InputError, SourcePos

#: Largest input file accepted (bytes). Recipes are a few KiB; 8 MiB leaves room for big
#: generated configMaps while keeping parse time (pure-Python composer) to seconds.
MAX_FILE_BYTES = 8 * 1024 * 1024

#: Largest document accepted, counted in YAML nodes *after* alias expansion. A realistic recipe
#: has a few hundred; a billion-laughs document has ~10⁹ and is rejected before it is expanded.
MAX_NODES = 100_000

#: Deepest nesting of mappings/sequences accepted (recipes need about 8).
MAX_DEPTH = 64

#: Integers outside the signed 64-bit range are refused where they are read, with their position:
#: Kubernetes (and Go, NodeWright) read YAML/JSON integers as int64, and a 20,000-digit number must
#: not reach code that prints it (Python's int/str conversion limit) or computes with it.
INT_MAX = 2**63 - 1

PathKey = tuple[str | int, ...]
"""A path into a document: mapping keys (str) and sequence indices (int)."""

_STD = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL = (_STD + t for t in ("str", "int", "float", "bool", "null"))
_MAP, _SEQ, _TIMESTAMP, _MERGE = (_STD + t for t in ("map", "seq", "timestamp", "merge"))
_SCALAR_TAGS = frozenset({_STR, _INT, _FLOAT, _BOOL, _NULL, _TIMESTAMP})
_SIMPLE_KEY = re.compile(r"[A-Za-z0-9_/-]+")
_TRUE = frozenset({"true", "yes", "on", "y"})  # YAML 1.1 spellings appear only with %YAML 1.1
_FALSE = frozenset({"false", "no", "off", "n"})


@dataclass(frozen=True)
class YamlDoc:
    """One YAML document of a file, as plain data plus positions.

    ``data`` holds only ``dict[str, Any]``, ``list``, ``str``, ``int``, ``float``, ``bool`` and
    ``None``. ``positions`` maps a path to the 1-based ``(line, column)`` of the mapping *key* (for
    a mapping entry) or of the item (for a sequence entry); ``()`` is the document's root node.
    ``index`` is the 0-based number of the document in its file.
    """

    file: str
    index: int
    data: Any
    positions: Mapping[PathKey, tuple[int, int]] = field(repr=False)

    def pos(self, path: str | Sequence[str | int] = ()) -> SourcePos:
        """Position of ``path`` (a tuple, or a dotted string as :func:`format_path` writes it), or
        of its nearest ancestor that exists in the document."""
        p = parse_path(path) if isinstance(path, str) else tuple(path)
        while True:
            hit = self.positions.get(p)
            if hit is not None:
                return SourcePos(self.file, hit[0], hit[1])
            if not p:
                return SourcePos(self.file)
            p = p[:-1]

    def get(self, path: Sequence[str | int], default: Any = None) -> Any:
        """The data at ``path`` (``default`` when any step is missing or of the wrong kind)."""
        cur = self.data
        for k in path:
            in_map = isinstance(cur, dict) and isinstance(k, str) and k in cur
            in_list = isinstance(cur, list) and isinstance(k, int) and 0 <= k < len(cur)
            if not (in_map or in_list):
                return default
            cur = cur[k]
        return cur

    def has(self, path: Sequence[str | int]) -> bool:
        """Whether ``path`` exists in the document."""
        return tuple(path) in self.positions

    def sub(self, path: Sequence[str | int]) -> YamlDoc:
        """The part of the document at ``path`` as a document of its own (positions kept, re-rooted).

        Used for objects embedded in another document (inline manifests of an AICR RecipeResult).
        """
        p = tuple(path)
        n = len(p)
        positions = {k[n:]: v for k, v in self.positions.items() if k[:n] == p}
        return YamlDoc(self.file, self.index, self.get(p), MappingProxyType(positions))

    def error(self, path: Sequence[str | int], message: str) -> InputError:
        """An :class:`InputError` at ``path`` (nearest existing position) naming the dotted field."""
        return InputError(message, self.pos(path), format_path(path))


_PATH_TOKEN = re.compile(r'\.?([A-Za-z0-9_/-]+)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')


def parse_path(text: str) -> PathKey:
    """Inverse of :func:`format_path`: ``spec.compartments[0]["a.b"]`` → ``("spec", "compartments", 0, "a.b")``.

    Raises:
        ValueError: text that :func:`format_path` cannot have written.
    """
    out: list[str | int] = []
    i = 0
    while i < len(text):
        m = _PATH_TOKEN.match(text, i)
        if m is None or (m.group(0).startswith(".") and not out):
            raise ValueError(f"{text!r} is not a field path")
        name, index, quoted = m.groups()
        out.append(int(index) if index is not None else name if name is not None else json.loads(quoted))
        i = m.end()
    return tuple(out)


def format_path(path: Sequence[str | int], simple: re.Pattern[str] = _SIMPLE_KEY) -> str:
    """Dotted field path: ``spec.packages.tuning.version``; indices as ``[0]``; keys with dots or
    other punctuation quoted as JSON strings, so a newline or quote in a key stays visible and on
    one line: ``configMap["intent.conf"]``, ``configMap["a\\n"]``. ``simple``: the keys written
    bare (the default also takes ``/``)."""
    out = ""
    for k in path:
        if isinstance(k, int):
            out += f"[{k}]"
        elif simple.fullmatch(k):
            out += f".{k}" if out else k
        else:
            out += f"[{json.dumps(k)}]"
    return out


# ---------------------------------------------------------------------------------------------
# Reading bytes


def read_text(path: str, *, max_bytes: int = MAX_FILE_BYTES, option: str | None = None, what: str = "file") -> str:
    """Read ``path`` as UTF-8 text with LF line breaks, through the one input opener
    (:func:`reconciler.fileio.reading.read_input`: a regular file only, so a FIFO or a device
    never blocks or floods the command; the size checked before reading, at most ``max_bytes + 1``
    bytes ever read). ``option``: the option that named the file, ``what`` what it is, for the
    read errors.

    Raises:
        InputError: missing/unreadable file, not a regular file, too large, or not UTF-8 (with the
            line of the first bad byte).
    """
    from reconciler.fileio.reading import read_input

    return decode_text(read_input(path, max_bytes, option=option, what=what), path)


def decode_text(raw: bytes, file: str) -> str:
    """Decode UTF-8 bytes (BOM dropped) and normalise CRLF / CR to LF.

    Raises:
        InputError: a byte sequence that is not UTF-8, positioned at its line and column.
    """
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise InputError(
            f"byte 0x{raw[e.start]:02x} is not valid UTF-8 (input files must be UTF-8 text)",
            SourcePos(file, line, col),
        ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _offset_pos(text: str, offset: int, file: str) -> SourcePos:
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return SourcePos(file, line, col)


# ---------------------------------------------------------------------------------------------
# Parsing


def load_file(path: str, *, option: str | None = None) -> list[YamlDoc]:
    """Read and parse every YAML document of ``path`` (empty documents are skipped); ``option``:
    the option that named the file, for the read errors (:func:`read_text`).

    Raises:
        InputError: see :func:`read_text` and :func:`parse_documents`.
    """
    return parse_documents(read_text(path, option=option), path)


def parse_documents(text: str, file: str) -> list[YamlDoc]:
    """Parse ``text`` (already decoded) into :class:`YamlDoc` objects, one per non-empty document.

    Raises:
        InputError: YAML syntax error, undefined alias, forbidden character or tag, duplicate
            key, non-scalar key, recursive alias, too deep, or more than :data:`MAX_NODES` nodes
            after alias expansion. The first problem of the file is reported (a broken file is
            not parsed further).
    """
    yaml = YAML(typ="rt", pure=True)
    try:
        nodes = list(yaml.compose_all(io.StringIO(text)))
    except MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        pos = SourcePos(file, mark.line + 1, mark.column + 1) if mark is not None else SourcePos(file)
        what = " ".join(x for x in (e.context, e.problem) if x)
        raise InputError(f"YAML syntax error: {what or e}", pos) from None
    except ReaderError as e:
        raise InputError(
            f"character #x{e.character:04x} is not allowed in YAML (control characters are forbidden)",
            _offset_pos(text, e.position, file),
        ) from None
    except RecursionError:  # the composer recurses: nesting thousands deep ends here, unpositioned
        raise _too_deep(text, file) from None
    except YAMLError as e:
        raise InputError(f"YAML error: {e}", SourcePos(file)) from None
    docs: list[YamlDoc] = []
    for i, node in enumerate(nodes):
        if isinstance(node, ScalarNode) and node.tag == _NULL:
            continue  # an empty document (e.g. a trailing '---')
        _measure(node, file)
        b = _Builder(file)
        b.positions[()] = _mark(node)
        data = b.build(node, (), 0)
        docs.append(YamlDoc(file, i, data, MappingProxyType(b.positions)))
    return docs


def _too_deep(text: str, file: str) -> InputError:
    """The "nesting is deeper than :data:`MAX_DEPTH`" error of ``text``, at the first node that is
    too deep (as :func:`_measure` counts: the document's root at depth 0), found from the parser's
    events, which (unlike the composer) do not recurse."""
    depth = 0
    try:
        for ev in YAML(typ="rt", pure=True).parse(io.StringIO(text)):
            if isinstance(ev, CollectionStartEvent | ScalarEvent | AliasEvent) and depth > MAX_DEPTH:
                mark = ev.start_mark
                return InputError(f"YAML nesting is deeper than {MAX_DEPTH} levels",
                                  SourcePos(file, mark.line + 1, mark.column + 1))
            if isinstance(ev, CollectionStartEvent):
                depth += 1
            elif isinstance(ev, CollectionEndEvent):
                depth -= 1
    except (YAMLError, RecursionError):
        pass
    return InputError(f"YAML nesting is deeper than {MAX_DEPTH} levels", SourcePos(file))


def _mark(node: Node) -> tuple[int, int]:
    m = node.start_mark
    return (m.line + 1, m.column + 1)


def _children(node: Node) -> Iterator[Node]:
    if isinstance(node, MappingNode):
        for k, v in node.value:
            yield k
            yield v
    elif isinstance(node, SequenceNode):
        yield from node.value


def _measure(root: Node, file: str) -> None:
    """Count the nodes of ``root`` as if every alias were expanded, without expanding anything.

    Raises:
        InputError: over :data:`MAX_NODES`, a recursive alias, or deeper than :data:`MAX_DEPTH`.
    """
    sizes: dict[int, int] = {}
    active: set[int] = set()
    shared = False

    def size(node: Node, depth: int) -> int:
        nonlocal shared
        key = id(node)
        if key in sizes:
            shared = True
            return sizes[key]
        if key in active:
            raise InputError(
                "recursive YAML alias: an anchor refers to itself (the document would be infinite)",
                SourcePos(file, *_mark(node)),
            )
        if depth > MAX_DEPTH:
            raise InputError(
                f"YAML nesting is deeper than {MAX_DEPTH} levels", SourcePos(file, *_mark(node))
            )
        active.add(key)
        total = 1
        for child in _children(node):
            total += size(child, depth + 1)
            if total > MAX_NODES:
                break
        active.discard(key)
        sizes[key] = total
        return total

    n = size(root, 0)
    if n > MAX_NODES:
        why = (
            "through aliases (a YAML alias expansion bomb?)"
            if shared
            else "(split it into several files)"
        )
        raise InputError(
            f"document expands to more than {MAX_NODES} YAML nodes {why}", SourcePos(file, *_mark(root))
        )


class _Builder:
    """Builds plain data from a measured node graph and records positions."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.positions: dict[PathKey, tuple[int, int]] = {}

    def _err(self, node: Node, message: str, path: PathKey = ()) -> InputError:
        return InputError(message, SourcePos(self.file, *_mark(node)), format_path(path))

    def build(self, node: Node, path: PathKey, depth: int) -> Any:
        tag = node.tag
        if isinstance(node, ScalarNode):
            if tag not in _SCALAR_TAGS:
                raise self._err(node, _tag_problem(tag, "a scalar"))
            return self._scalar(node, path)
        if isinstance(node, SequenceNode):
            if tag != _SEQ:
                raise self._err(node, _tag_problem(tag, "a sequence"))
            out: list[Any] = []
            for i, item in enumerate(node.value):
                self.positions[(*path, i)] = _mark(item)
                out.append(self.build(item, (*path, i), depth + 1))
            return out
        if isinstance(node, MappingNode):
            if tag != _MAP:
                raise self._err(node, _tag_problem(tag, "a mapping"))
            return self._mapping(node, path, depth)
        raise self._err(node, "unsupported YAML node")  # pragma: no cover - composer yields only these

    def _mapping(self, node: MappingNode, path: PathKey, depth: int) -> dict[str, Any]:
        result: dict[str, Any] = {}
        merges: list[Node] = []
        explicit: dict[str, tuple[int, int]] = {}
        for knode, vnode in node.value:
            if isinstance(knode, ScalarNode) and knode.tag == _MERGE:
                merges.append(vnode)
                continue
            if not isinstance(knode, ScalarNode):
                raise self._err(knode, "mapping keys must be plain scalars, not mappings or sequences")
            if knode.tag not in _SCALAR_TAGS:
                raise self._err(knode, _tag_problem(knode.tag, "a scalar"))
            key = self._text(knode, str(knode.value), path)
            if key in explicit:
                first = explicit[key]
                raise self._err(knode, f"duplicate key {key!r} (first defined at line {first[0]})")
            explicit[key] = _mark(knode)
        # Merge keys (<<): earlier sources win over later ones, explicit keys win over all.
        sources: list[MappingNode] = []
        for m in merges:
            if isinstance(m, MappingNode):
                sources.append(m)
            elif isinstance(m, SequenceNode) and all(isinstance(x, MappingNode) for x in m.value):
                sources.extend(x for x in m.value if isinstance(x, MappingNode))
            else:
                raise self._err(m, "a merge key (<<) needs a mapping or a list of mappings")
        for src in reversed(sources):
            merged = self._mapping(src, path, depth + 1)
            for k, v in merged.items():
                if k not in explicit:
                    result[k] = v
        for knode, vnode in node.value:
            if isinstance(knode, ScalarNode) and knode.tag == _MERGE:
                continue
            key = str(knode.value)
            sub = (*path, key)
            if key in result:  # overrides a merged value: drop the merged positions below it
                for stale in [p for p in self.positions if p[: len(sub)] == sub]:
                    del self.positions[stale]
            self.positions[sub] = _mark(knode)
            result[key] = self.build(vnode, sub, depth + 1)
        return result

    def _scalar(self, node: ScalarNode, path: PathKey = ()) -> Any:
        tag, text = node.tag, str(node.value)
        if tag in (_STR, _TIMESTAMP):
            return self._text(node, text, path)
        if tag == _NULL:
            if text not in ("", "~", "null", "Null", "NULL"):
                raise self._err(node, f"{text[:40]!r} is not null")
            return None
        if tag == _BOOL:
            low = text.lower()
            if low not in _TRUE and low not in _FALSE:
                raise self._err(node, f"{text[:40]!r} is not a boolean (true or false)")
            return low in _TRUE
        if tag == _INT:
            return self._int(node, text, path)
        return self._float(node, text)

    def _text(self, node: Node, text: str, path: PathKey) -> str:
        """``text``, unless it holds a lone UTF-16 surrogate (``"\\ud800"``), which no UTF-8
        output (terminal, annotation, file) can carry."""
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise self._err(node, "a string holds a lone UTF-16 surrogate (\\ud800-\\udfff), "
                                      "which cannot be written as UTF-8", path) from None
        return text

    def _int(self, node: ScalarNode, text: str, path: PathKey = ()) -> int:
        s = text.replace("_", "")
        sign = -1 if s.startswith("-") else 1
        s = s.lstrip("+-")
        if len(s) > 70:  # longer than any int64 in any base (64 binary digits + prefix): refuse unconverted
            raise self._err(node, f"an integer with {len(s)} digits is too large (at most 64-bit: ±{INT_MAX})", path)
        try:
            if s[:2].lower() in ("0x", "0o", "0b"):
                return self._bounded(node, sign * int(s, 0), path)
            if ":" in s:  # YAML 1.1 sexagesimal, e.g. 1:30
                n = 0
                for part in s.split(":"):
                    n = n * 60 + int(part, 10)
                return self._bounded(node, sign * n, path)
            value = sign * int(s, 10)
        except ValueError:
            raise self._err(node, f"{text[:40]!r} is not an integer") from None
        return self._bounded(node, value, path)

    def _bounded(self, node: ScalarNode, value: int, path: PathKey) -> int:
        if not -INT_MAX - 1 <= value <= INT_MAX:
            raise self._err(node, f"integer {str(value)[:30]}… is too large (at most 64-bit: ±{INT_MAX})", path)
        return value

    def _float(self, node: ScalarNode, text: str) -> float:
        s = text.replace("_", "").lower()
        if s in (".inf", "+.inf"):
            return math.inf
        if s == "-.inf":
            return -math.inf
        if s == ".nan":
            return math.nan
        try:
            return float(s)
        except ValueError:
            raise self._err(node, f"{text[:40]!r} is not a usable number") from None


def _tag_problem(tag: str | None, on: str) -> str:
    if tag in _SCALAR_TAGS or tag in (_MAP, _SEQ):
        return f"YAML tag {_show_tag(tag)} does not fit {on}"
    return f"YAML tag {_show_tag(tag)} is not allowed (plain YAML only)"


def _show_tag(tag: str | None) -> str:
    if tag is None:
        return "(none)"
    return "!!" + tag[len(_STD):] if tag.startswith(_STD) else tag


# ---------------------------------------------------------------------------------------------
# pydantic errors → positioned InputErrors


def validation_errors(
    exc: ValidationError,
    doc: YamlDoc,
    to_path: Callable[[tuple[str | int, ...]], PathKey],
    *,
    root: Sequence[str | int] = (),
) -> list[InputError]:
    """Translate a pydantic ``ValidationError`` into positioned :class:`InputError` objects.

    ``to_path`` maps a pydantic ``loc`` (field names, dict keys, list indices of the *model*) to a
    path in ``doc`` (the loader renames some fields, e.g. NodeWright ``nodeSelectors``); errors of
    the whole model (empty ``loc``) are placed at ``root``. When the model's message names exactly
    one key of the offending mapping (``budget.count 0 must be …``), the path is narrowed to that
    key. The position is the path's, or its nearest existing ancestor's. Messages lose pydantic's
    ``Value error,`` prefix; ``extra_forbidden`` becomes ``unknown field``; a number given where a
    string is needed gets a hint to quote it.
    """
    out: list[InputError] = []
    for e in exc.errors(include_url=False):
        loc = tuple(x for x in e["loc"] if isinstance(x, int | str))
        path = to_path(loc) if loc else tuple(root)
        inp = e.get("input")
        typ = e["type"]
        msg = str(e["msg"])
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        if typ == "extra_forbidden":
            msg = f"unknown field {path[-1]!r}" if path else "unknown field"
        elif typ == "missing":
            msg = f"missing required field {path[-1]!r}" if path else "missing required field"
        elif typ == "string_type" and isinstance(inp, int | float) and not isinstance(inp, bool):
            msg = f"{msg}; YAML read {inp!r} as a number: quote it (\"{inp}\")"
        elif isinstance(inp, dict) and typ == "value_error":
            named = [k for k in inp if isinstance(k, str) and re.search(rf"\b{re.escape(k)}\b", msg)]
            if len(named) == 1:
                path = (*path, named[0])
            else:
                path = (*path, *_quoted_in(inp, msg))
        elif isinstance(inp, list | tuple) and typ == "value_error":
            path = (*path, *_quoted_in(inp, msg))
        out.append(doc.error(path, msg))
    return out


def _quoted_in(value: Any, msg: str, depth: int = 0) -> PathKey:
    """The path (inside ``value``) of the first key or string value whose ``repr`` the message
    quotes (``'pool\\n' is not a valid label key``), so the error points at it; ``()`` if none."""
    if depth > 8:
        return ()
    items: list[tuple[str | int, Any]] = []
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list | tuple):
        items = list(enumerate(value))
    for k, v in items:
        if isinstance(k, str) and (repr(k[:100])[:-1] in msg if k else "'' " in msg):
            return (k,)
        if isinstance(v, str) and v and repr(v[:80])[:-1] in msg:
            return (k,)
        if isinstance(v, dict | list | tuple):
            sub = _quoted_in(v, msg, depth + 1)
            if sub:
                return (k, *sub)
    return ()

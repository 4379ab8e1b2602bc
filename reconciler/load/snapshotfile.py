"""Fleet snapshot files (``--cluster sim:FILE``): bytes → plain documents, fast and bounded.

A snapshot is what ``kubectl get nodes,pods,pdb -A -o json|yaml`` prints (one ``List``), several
YAML documents, or a fleet saved by ``--sim-save``. Files reach hundreds of MB (100,000 nodes with
their recorded package state), so parsing must not go through a pure-Python parser:

* **JSON** (the first non-blank character is ``{`` or ``[``) is parsed by the standard library's C
  decoder. ``NaN``/``Infinity`` literals, numbers that overflow a float (``1e400``) and integers
  outside int64 are errors (Kubernetes' JSON has none of them); nesting is bounded by
  :data:`MAX_DEPTH` (through the interpreter's recursion guard, which the C decoder honours).
  Lone UTF-16 surrogate escapes (``"\\ud800"``) are refused: they cannot be written back as UTF-8.
* **YAML** is scanned and parsed by libyaml through PyYAML's ``CSafeLoader`` (C), and its event
  stream built into plain data here with an explicit stack (libyaml's composer recurses in C: a
  file nested 200,000 deep crashed it), resolved with the YAML 1.2 core schema like our recipes
  (``yes``/``on`` stay strings; timestamps stay text): only the standard tags, no duplicate keys,
  keys are scalars, nesting at most :data:`MAX_DEPTH`, and aliases counted as they expand (a
  "billion laughs" file is refused once expansion adds :data:`MAX_ALIAS_NODES` nodes).
  Without libyaml the loader refuses YAML with a message saying to install it or convert the
  snapshot to JSON (``kubectl ... -o json``) rather than silently taking minutes.

Before parsing, the file is opened through the one input opener (a regular file only, at most
:data:`MAX_SNAPSHOT_BYTES`; :mod:`reconciler.fileio.reading`), gzip and other
binary content, UTF-16/32 and non-UTF-8 bytes are refused with their position, a UTF-8 BOM is
dropped. No position table is kept while parsing (it would double the memory of a large fleet):
:meth:`SnapshotText.locate` finds the ``line:column`` of a path only when an error needs it.

A JSON snapshot of at least :data:`STREAM_BYTES` in a regular file is read window by window
(:mod:`reconciler.load.jsonstream`: the same result, or a hand-over to the whole-file reader when
it might differ) and its text is not kept: the error path reads it again. Equal long annotation
values (the recorded package state of nodes in the same state) are shared as items are parsed.
"""

from __future__ import annotations

import copy
import gc
import json
import math
import os
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO

import yaml

from reconciler.errors import InputError, SourcePos
from reconciler.jsonsafe import deeper_than
from reconciler.load.pathwords import os_reason
from reconciler.load.yamlsafe import format_path as yamlsafe_format_path

#: Largest snapshot accepted (bytes): a 100,000-node dump with 25 packages of recorded state per
#: node and 3 pods per node is about 1.9 GB of kubectl JSON (and needs about 2.8 GB of memory to plan).
MAX_SNAPSHOT_BYTES = 4 * 1024 * 1024 * 1024

#: Deepest nesting of mappings/sequences accepted. Kubernetes objects nest about 15 deep
#: (``metadata.managedFields[].fieldsV1``); the bound keeps saving a fleet back safe.
MAX_DEPTH = 100

#: How many YAML nodes aliases may add when expanded (kubectl never writes aliases).
MAX_ALIAS_NODES = 1_000_000

#: JSON snapshots in regular files at least this large (bytes) are read window by window.
STREAM_BYTES = 16 * 1024 * 1024

#: Annotation values at least this long are shared between the objects that hold equal ones.
SHARED_VALUE_CHARS = 128

INT64 = (-(2**63), 2**63 - 1)

Path = tuple[str | int, ...]
"""A path into a document: mapping keys (str) and sequence indices (int)."""

_SIMPLE_KEY = re.compile(r"[A-Za-z0-9_-]+")  # a "/" is quoted too: a label key reads as one key


def format_path(path: Sequence[str | int]) -> str:
    """``items[3].metadata.labels["a.b/c"]``: indices as ``[i]``, keys with punctuation quoted
    (:func:`reconciler.load.yamlsafe.format_path` with ``/`` quoted)."""
    return yamlsafe_format_path(path, _SIMPLE_KEY)


#: Kinds whose objects live in a namespace (``default`` when it is absent).
NAMESPACED = frozenset({"Pod", "PodDisruptionBudget", "DaemonSet", "ConfigMap"})


def object_ref(obj: Any) -> str:
    """``Kind/namespace/name`` (``Kind/name`` for cluster-scoped kinds and for a namespace that is
    not a string) of a snapshot object, shown visibly; "" when ``obj`` is not a mapping."""
    if not isinstance(obj, dict):
        return ""
    kind = obj.get("kind") if isinstance(obj.get("kind"), str) else "object"
    meta: dict[str, Any] = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
    name, ns = meta.get("name"), meta.get("namespace")
    if not isinstance(name, str) or not name:
        return _visible(str(kind))
    if kind in NAMESPACED:
        if ns is not None and not isinstance(ns, str):  # a bad namespace: not named as if it were the default
            return _visible(f"{kind}/{name}")
        return _visible(f"{kind}/{ns or 'default'}/{name}")
    return _visible(f"{kind}/{name}")


def _visible(text: str) -> str:
    """``text`` shortened, with control and non-ASCII characters escaped (names come from the input)."""
    short = text[:120] + ("..." if len(text) > 120 else "")
    return short if short.isprintable() and short.isascii() else short.encode("unicode_escape").decode("ascii")


def object_label(where: str, obj: Any, field: Sequence[str | int]) -> str:
    """How an error names a field: ``where`` the object is (``items[3]``, ``document 2``), its
    :func:`object_ref` in parentheses, then the field's path: ``items[3] (Node/a) spec.taints[0]``."""
    ref = object_ref(obj)
    where = where + (f" ({ref})" if ref else "")
    return f"{where} {format_path(field)}" if field else where


def object_depth(path: Sequence[str | int], top_is_list: bool) -> int:
    """How many steps of ``path`` (from a document's top) lead to the Kubernetes object holding
    it: 2 in a List (``items[i]``), 1 in a top-level array, 0 when the document is the object."""
    if path[:1] == ["items"] and len(path) > 1:
        return 2
    return 1 if top_is_list and path else 0


@dataclass
class SnapshotText:
    """A snapshot file's decoded text and its parsed documents.

    ``fmt`` is ``"json"`` or ``"yaml"``; ``docs`` the non-empty documents as plain ``dict``/
    ``list``/``str``/``int``/``float``/``bool``/``None`` data (a JSON file is one document);
    ``doc_index[i]`` the 0-based number of ``docs[i]`` in the file. ``text`` is None for a
    snapshot read window by window: :meth:`source_text` reads it again when an error needs it.
    """

    file: str
    text: str | None
    fmt: str
    docs: list[Any]
    doc_index: list[int]

    def source_text(self) -> str:
        """The decoded text (read again from :attr:`file` when it was not kept).

        Raises:
            OSError, InputError: the file cannot be read or decoded any more.
        """
        if self.text is None:
            from reconciler.fileio.reading import read_input

            self.text = decode_snapshot(read_input(self.file, MAX_SNAPSHOT_BYTES, what="fleet file"), self.file)
        return self.text

    def locate(self, doc: int, path: Sequence[str | int]) -> SourcePos:
        """``file:line:column`` of ``path`` in document ``doc`` (of a mapping entry: its key; of a
        sequence item: the item), or of the nearest ancestor found; only the file when the text
        cannot be walked. Called on the error path only: it re-reads the text."""
        try:
            text = self.source_text()
            if self.fmt == "json":
                offset = _json_offset(text, path)
                return _offset_pos(text, offset, self.file)
            return _yaml_locate(text, self.file, self.doc_index[doc], path)
        except (ValueError, IndexError, RecursionError, TypeError, KeyError, InputError, OSError):
            return SourcePos(self.file, 1, 1)


@contextmanager
def paused_gc() -> Iterator[None]:
    """Run the block with the cyclic garbage collector paused (restored after, even on error).

    Parsing a snapshot allocates millions of dicts, lists and strings and frees none of them; each
    allocation burst would trigger collections that scan the whole growing heap for cycles the
    parsed data cannot have. Pausing it halves parse and validation time of large snapshots.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


# ---------------------------------------------------------------------------------------------
# Reading bytes


def read_snapshot(path: str, *, max_bytes: int | None = None, prune: bool = False) -> SnapshotText:
    """Read and parse the snapshot at ``path`` (see the module docstring); at most ``max_bytes``
    (default :data:`MAX_SNAPSHOT_BYTES`, read when called).

    ``prune``: a kubectl JSON dump in a regular file is read by :mod:`reconciler.load.snapshotfast`:
    its items hold only the fields the reconciler validates and reads (for read-only verbs: the
    objects are never saved back); anything that reader cannot promise is read as without it.

    Raises:
        InputError: unreadable, too large, compressed or binary, not UTF-8, empty, or a JSON/YAML
            syntax or limit error, each with ``file:line:column`` where one exists.
    """
    from reconciler.fileio.reading import open_input, read_input

    if max_bytes is None:
        max_bytes = MAX_SNAPSHOT_BYTES
    what = "fleet file"
    with open_input(path, max_bytes, what=what) as fh:  # a regular file: no FIFO or device is read
        size = os.fstat(fh.fileno()).st_size
        try:
            if prune:
                pruned = _read_pruned(fh, path, max_bytes)
                if pruned is not None:
                    return pruned
                fh.seek(0)
            if size >= STREAM_BYTES:
                streamed = _read_streamed(fh, path, max_bytes)
                if streamed is not None:
                    return streamed
                fh.seek(0)
        except OSError as e:
            raise InputError(f"cannot read {what}: {os_reason(e)}", SourcePos(path)) from None
    raw = read_input(path, max_bytes, what=what)
    text = decode_snapshot(raw, path)
    del raw  # the text only from here: the bytes and the parsed data are never alive together
    return parse_snapshot(text, path)


def _read_pruned(fh: BinaryIO, path: str, max_bytes: int) -> SnapshotText | None:
    """A kubectl JSON snapshot read pruned (:mod:`reconciler.load.snapshotfast`) from ``fh``, or
    None when the strict reader must decide (it then reads the file again)."""
    from reconciler.load.snapshotfast import Fallback, read_pruned

    try:
        doc = read_pruned(fh, max_bytes)
    except Fallback:
        return None
    return SnapshotText(path, None, "json", [doc], [0])


def _read_streamed(fh: BinaryIO, path: str, max_bytes: int) -> SnapshotText | None:
    """A JSON snapshot read window by window (:mod:`reconciler.load.jsonstream`) from ``fh``, or
    None when it is not JSON or the whole-file reader must decide (it then reads the file again)."""
    from reconciler.load.jsonstream import Fallback, read_stream

    shared: dict[str, str] = {}
    head = fh.read(4096).lstrip(b"\xef\xbb\xbf").lstrip(b" \t\r\n")
    if head[:1] not in (b"{", b"["):
        return None
    fh.seek(0)
    try:
        doc = read_stream(fh, max_bytes, lambda item: share_long_values(item, shared), max_depth=MAX_DEPTH)
    except Fallback:
        doc = _FALLBACK
    if doc is _FALLBACK:
        return None
    return SnapshotText(path, None, "json", [doc], [0])


_FALLBACK = object()


def share_long_values(obj: Any, shared: dict[str, str]) -> None:
    """Make equal annotation values of at least :data:`SHARED_VALUE_CHARS` characters in
    ``obj`` (any parsed item; only a mapping's ``metadata.annotations`` mapping is touched) one
    string object, through ``shared`` (value → the first such string). Nodes in the same state
    carry the same recorded state, kilobytes per node: this keeps one copy of each."""
    if type(obj) is not dict:
        return
    meta = obj.get("metadata")
    if type(meta) is not dict:
        return
    ann = meta.get("annotations")
    if type(ann) is not dict:
        return
    for k, v in ann.items():  # values replaced by equal ones: the mapping's size never changes
        if type(v) is str and len(v) >= SHARED_VALUE_CHARS:
            ann[k] = shared.setdefault(v, v)


_MAGIC = ((b"\x1f\x8b", "gzip-compressed (decompress it first: gunzip)"),
          (b"BZh", "bzip2-compressed (decompress it first: bunzip2)"),
          (b"\xfd7zXZ\x00", "xz-compressed (decompress it first: unxz)"),
          (b"\x28\xb5\x2f\xfd", "zstd-compressed (decompress it first: unzstd)"),
          (b"PK\x03\x04", "a zip archive (extract the snapshot first)"),
          (b"\xff\xfe\x00\x00", "UTF-32 text (save it as UTF-8)"),
          (b"\x00\x00\xfe\xff", "UTF-32 text (save it as UTF-8)"),
          (b"\xff\xfe", "UTF-16 text (save it as UTF-8)"),
          (b"\xfe\xff", "UTF-16 text (save it as UTF-8)"))


def decode_snapshot(raw: bytes, file: str) -> str:
    """Decode a snapshot's bytes: UTF-8 (a BOM is dropped), no NUL byte.

    Raises:
        InputError: compressed or archive content, UTF-16/32, a NUL byte or invalid UTF-8 (with
            the line and column of the first bad byte), or an empty file.
    """
    for magic, what in _MAGIC:
        if raw.startswith(magic):
            raise InputError(f"fleet snapshot is {what}, not JSON or YAML text", SourcePos(file, 1, 1))
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise InputError("NUL byte: a fleet snapshot must be JSON or YAML text", _byte_pos(raw, nul, file))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"byte 0x{raw[e.start]:02x} is not valid UTF-8 (a fleet snapshot must be UTF-8 text)",
                         _byte_pos(raw, e.start, file)) from None
    if not text.strip():
        raise InputError("fleet snapshot is empty (expected kubectl get nodes,pods,pdb -A -o json|yaml output)",
                         SourcePos(file, 1, 1))
    return text


def _byte_pos(raw: bytes, offset: int, file: str) -> SourcePos:
    line = raw.count(b"\n", 0, offset) + 1
    return SourcePos(file, line, offset - (raw.rfind(b"\n", 0, offset) + 1) + 1)


def _offset_pos(text: str, offset: int, file: str) -> SourcePos:
    line = text.count("\n", 0, offset) + 1
    return SourcePos(file, line, offset - (text.rfind("\n", 0, offset) + 1) + 1)


def parse_snapshot(text: str, file: str) -> SnapshotText:
    """Parse decoded snapshot text as JSON (first non-blank character ``{``/``[``) or YAML.

    Raises:
        InputError: see :func:`read_snapshot`.
    """
    lead = _WS.match(text)  # prefix match
    head = text[lead.end() if lead else 0:][:1] if text[:1] in " \t\r\n" else text[:1]
    if head in ("{", "["):
        return SnapshotText(file, text, "json", [parse_json(text, file)], [0])
    docs, index = parse_yaml(text, file)
    return SnapshotText(file, text, "yaml", docs, index)


# ---------------------------------------------------------------------------------------------
# JSON


class _BadNumber(Exception):
    def __init__(self, literal: str, why: str) -> None:
        super().__init__(literal)
        self.literal = literal
        self.why = why


def _parse_float(s: str) -> float:
    v = float(s)
    if not math.isfinite(v):
        raise _BadNumber(s, "overflows a 64-bit float")
    return v


def _parse_int(s: str) -> int:
    if len(s) > 20:
        raise _BadNumber(s[:30] + ("..." if len(s) > 30 else ""), f"has {len(s)} digits, outside int64")
    v = int(s)
    if not INT64[0] <= v <= INT64[1]:
        raise _BadNumber(s, "is outside int64")
    return v


def _parse_constant(s: str) -> float:
    raise _BadNumber(s, "is not a JSON number (NaN and Infinity are not JSON)")


def _stack_depth() -> int:
    f = sys._getframe()
    n = 0
    while f is not None:
        n += 1
        f = f.f_back  # type: ignore[assignment]
    return n


_SURROGATE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})|"
                        r"(?<![0-9a-fA-F]{4})\\u[dD][c-fC-F][0-9a-fA-F]{2}")



_SURROGATE_HINT = re.compile(r"\\u[dD]")


def parse_json(text: str, file: str) -> Any:
    """Parse JSON text strictly (see the module docstring).

    Raises:
        InputError: syntax error (line:column), a bad number (line:column of its first
            occurrence), nesting deeper than :data:`MAX_DEPTH`, or a lone surrogate escape.
    """
    old = sys.getrecursionlimit()
    # the C decoder guards its recursion with the interpreter's limit: this bounds the nesting
    sys.setrecursionlimit(_stack_depth() + MAX_DEPTH + 5)
    try:
        data = json.loads(text, parse_float=_parse_float, parse_int=_parse_int, parse_constant=_parse_constant)
    except json.JSONDecodeError as e:
        raise InputError(f"JSON syntax error: {e.msg}", _offset_pos(text, e.pos, file)) from None
    except RecursionError:
        at = deeper_than(text, MAX_DEPTH)
        pos = _offset_pos(text, at, file) if at is not None else SourcePos(file, 1, 1)
        raise InputError(f"JSON nesting is deeper than {MAX_DEPTH} levels", pos) from None
    except _BadNumber as e:
        at = _number_offset(text, e.literal.rstrip("."))
        pos = _offset_pos(text, at, file) if at >= 0 else SourcePos(file, 1, 1)
        raise InputError(f"number {e.literal} {e.why}", pos, _number_field(text, at) if at >= 0 else "") from None
    finally:
        sys.setrecursionlimit(old)
    if _SURROGATE_HINT.search(text):  # one scan; the exact pattern only when there is a candidate
        m = _SURROGATE.search(text)
        if m:
            raise InputError(f"{m.group(0)} is a lone UTF-16 surrogate escape, not a character",
                             _offset_pos(text, m.start(), file))
    return data


def _number_field(text: str, at: int) -> str:
    """The object and field holding the value at offset ``at`` of JSON ``text``, as the
    validation's errors name them (``items[3] (Node/gpu-a-001) status.capacity.cpu``), or "" when
    it cannot be found (the text is decoded again up to there, numbers not converted)."""
    if len(text) > NUMBER_FIELD_MAX_CHARS:
        return ""
    try:
        path, starts = _json_path_at(text, at)
        n = object_depth(path, text[_skip_ws(text, 0):][:1] == "[")
        obj, _ = _LENIENT.raw_decode(text, starts[n - 1] if n else _skip_ws(text, 0))
    except (ValueError, IndexError, RecursionError):
        return ""
    return object_label(format_path(path[:n]) or "document", obj, path[n:])


#: Texts longer than this get no object and field for a bad number, only its line:column: finding
#: them decodes the containers around it again (the whole ``items`` array of a List).
NUMBER_FIELD_MAX_CHARS = 64 * 1024 * 1024

#: Decodes JSON without converting numbers (a bad one is what is being looked for).
_LENIENT = json.JSONDecoder(parse_float=lambda _: 0.0, parse_int=lambda _: 0, parse_constant=lambda _: 0.0)


def _skip_ws(text: str, j: int) -> int:
    """The offset of the first character at or after ``j`` that is not JSON whitespace."""
    m = _WS.match(text, j)
    return m.end() if m else j


def _json_path_at(text: str, at: int) -> tuple[list[str | int], list[int]]:
    """The keys and indexes from the top of JSON ``text`` down to the innermost value that starts
    at or contains offset ``at``, and the offset where each of those values starts (each
    container's members before it are decoded to find their ends)."""
    scan = json.decoder.scanstring  # type: ignore[attr-defined]
    path: list[str | int] = []
    starts: list[int] = []
    i = _skip_ws(text, 0)
    while i < len(text) and text[i] in "{[":
        obj, j, n = text[i] == "{", _skip_ws(text, i + 1), 0
        key: str | int = 0
        while j < len(text) and text[j] not in "}]":
            if obj:
                key, j = scan(text, j + 1)
                j = _skip_ws(text, _skip_ws(text, j) + 1)  # past ':'
            else:
                key = n
            _, end = _LENIENT.raw_decode(text, j)
            if j <= at < end:
                break
            j, n = _skip_ws(text, end), n + 1
            if text[j:j + 1] == ",":
                j = _skip_ws(text, j + 1)
        else:
            return path, starts
        path.append(key)
        starts.append(j)
        i = j
    return path, starts


def _number_offset(text: str, literal: str) -> int:
    m = re.search(r"(?<![\w.\"-])" + re.escape(literal), text)
    return m.start() if m else -1


_WS = re.compile(r"[ \t\n\r]*")


def _json_offset(text: str, path: Sequence[str | int]) -> int:
    """Offset of ``path`` in JSON ``text`` (a key's opening quote, an item's first character), or
    of the deepest ancestor found; walks with the C decoder (siblings before the path are decoded
    and dropped)."""
    dec = json.JSONDecoder()
    scan = json.decoder.scanstring  # type: ignore[attr-defined]

    def ws(j: int) -> int:
        return _skip_ws(text, j)

    i = ws(0)
    for depth, key in enumerate(path):
        last = depth == len(path) - 1
        c = text[i]
        if c == "{" and isinstance(key, str):
            j = ws(i + 1)
            while text[j] == '"':
                start = j
                k, j = scan(text, j + 1)
                j = ws(ws(j) + 1)  # past ':'
                if k == key:
                    break
                _, j = dec.raw_decode(text, j)
                j = ws(j)
                if text[j] == ",":
                    j = ws(j + 1)
            else:
                return i
            if last:
                return start
            i = j
        elif c == "[" and isinstance(key, int):
            j = ws(i + 1)
            for _ in range(key):
                if text[j] == "]":
                    return i
                _, j = dec.raw_decode(text, j)
                j = ws(j)
                if text[j] == ",":
                    j = ws(j + 1)
            if text[j] == "]":
                return i
            i = j
        else:
            return i
    return i


# ---------------------------------------------------------------------------------------------
# YAML

_STD = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL = (_STD + t for t in ("str", "int", "float", "bool", "null"))
_MAP, _SEQ, _TIMESTAMP, _MERGE = (_STD + t for t in ("map", "seq", "timestamp", "merge"))
_SCALAR_TAGS = frozenset({_STR, _INT, _FLOAT, _BOOL, _NULL, _TIMESTAMP})
_TRUE = frozenset({"true", "True", "TRUE"})
_FALSE = frozenset({"false", "False", "FALSE"})


def _loader_class() -> Any:
    """PyYAML's ``CSafeLoader`` with YAML 1.2 core-schema resolution, or None without libyaml."""
    base = getattr(yaml, "CSafeLoader", None)
    if base is None:  # PyYAML built without libyaml
        return None

    class CoreLoader(base):  # type: ignore[misc, valid-type]
        """libyaml composer; YAML 1.2 core schema for plain scalars."""

    CoreLoader.yaml_implicit_resolvers = {}
    add = CoreLoader.add_implicit_resolver
    add(_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)\Z"), list("tTfF"))
    add(_NULL, re.compile(r"^(?:~|null|Null|NULL|)\Z"), ["~", "n", "N", ""])
    add(_INT, re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)\Z"), list("-+0123456789"))
    add(_FLOAT, re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                           r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))\Z"), list("-+.0123456789"))
    add(_MERGE, re.compile(r"^<<\Z"), ["<"])
    return CoreLoader


_LOADER: Any = None


def _loader() -> Any:
    global _LOADER
    if _LOADER is None:
        _LOADER = _loader_class() or False
    return _LOADER


def _new_loader(text: str, file: str) -> Any:
    loader_cls = _loader()
    if not loader_cls:
        raise InputError("reading a YAML fleet snapshot needs PyYAML built with libyaml (pip install "
                         "--force-reinstall pyyaml); or give the snapshot as JSON (kubectl get ... -o json)",
                         SourcePos(file, 1, 1))
    return loader_cls(text)


def _yaml_error(e: Exception, file: str) -> InputError:
    if isinstance(e, yaml.MarkedYAMLError):
        mark = e.problem_mark or e.context_mark
        pos = SourcePos(file, mark.line + 1, mark.column + 1) if mark is not None else SourcePos(file, 1, 1)
        what = " ".join(x for x in (e.context, e.problem) if x)
        if "maximum nesting depth" in (e.problem or ""):  # libyaml >= 0.2.6 (PyYAML 6.0.4) has its own bound
            return InputError(f"YAML nesting is deeper than {MAX_DEPTH} levels", pos)
        return InputError(f"YAML syntax error: {what or e}", pos)
    return InputError(f"YAML error: {' '.join(str(e).split())}", SourcePos(file, 1, 1))


def _compose_all(text: str, file: str) -> Iterator[Any]:
    """libyaml's node graphs, one per document. Its composer recurses in C: only for text
    :func:`parse_yaml` has accepted (nesting bounded), as :meth:`SnapshotText.locate` does."""
    loader = _new_loader(text, file)
    try:
        while loader.check_node():
            yield loader.get_node()
    except yaml.YAMLError as e:
        raise _yaml_error(e, file) from None
    finally:
        loader.dispose()


def _pos(file: str, node: Any) -> SourcePos:
    m = node.start_mark
    return SourcePos(file, m.line + 1, m.column + 1)


_MERGE_KEY = object()
#: First characters of plain scalars the core schema may read as something other than a string.
_MAY_NOT_BE_STR = frozenset("-+.0123456789~nNtTfF<")


class _Frame:
    """A mapping or sequence being built from parser events."""

    __slots__ = ("anchor", "event", "key", "key_event", "merges", "seen", "size", "value")

    def __init__(self, value: Any, event: Any) -> None:
        self.value = value
        self.event = event
        self.anchor = event.anchor
        self.size = 1
        self.key: Any = None  # the pending key of a mapping (None: the next value is a key)
        self.key_event: Any = None
        self.seen: dict[str, int] = {}
        self.merges: list[tuple[Any, Any]] = []


def parse_yaml(text: str, file: str) -> tuple[list[Any], list[int]]:
    """Parse every YAML document of ``text`` into plain data; empty documents are skipped.

    Built straight from libyaml's event stream with an explicit stack (libyaml's own composer
    recurses in C and would overflow the C stack on a file nested 100,000 deep). Returns
    ``(documents, index of each in the file)``.

    Raises:
        InputError: syntax error, a tag other than the standard ones, a duplicate or non-scalar
            key, an undefined or recursive alias, an alias expansion over :data:`MAX_ALIAS_NODES`,
            nesting over :data:`MAX_DEPTH`, a non-finite float or an integer outside int64; with
            line:column.
    """
    loader = _new_loader(text, file)
    try:
        return _events_to_data(loader, file)
    except yaml.YAMLError as e:
        raise _yaml_error(e, file) from None
    finally:
        loader.dispose()


def _err(file: str, event: Any, message: str) -> InputError:
    return InputError(message, _pos(file, event))


def _yaml_field(stack: list[_Frame], doc_no: int) -> str:
    """The object and field of the scalar being read under the open ``stack`` of mappings and
    sequences, as the validation's errors name them (``items[3] (Node/gpu-a-001) status.x``; the
    object's kind and name when they came before the field, as kubectl writes them)."""
    path: list[str | int] = []
    for fr in stack:
        if type(fr.value) is dict:
            path.append(fr.key if isinstance(fr.key, str | int) and not isinstance(fr.key, bool) else str(fr.key))
        else:
            path.append(len(fr.value))
    if not path or (type(stack[-1].value) is dict and stack[-1].key is None):
        return ""  # a mapping key, not a value
    n = object_depth(path, type(stack[0].value) is list)
    head = " ".join(x for x in (f"document {doc_no + 1}" if doc_no > 0 else "", format_path(path[:n])) if x)
    return object_label(head or "document", stack[n].value if len(stack) > n else None, path[n:])


def _events_to_data(loader: Any, file: str) -> tuple[list[Any], list[int]]:
    scalar_ev, alias_ev = yaml.ScalarEvent, yaml.AliasEvent
    seq_start, map_start = yaml.SequenceStartEvent, yaml.MappingStartEvent
    seq_end, map_end = yaml.SequenceEndEvent, yaml.MappingEndEvent
    doc_start = yaml.DocumentStartEvent
    docs: list[Any] = []
    index: list[int] = []
    doc_no = -1
    stack: list[_Frame] = []
    anchors: dict[str, tuple[Any, int]] = {}
    open_anchors: set[str] = set()
    extra = 0
    resolve = loader.resolve
    while loader.check_event():
        ev = loader.get_event()
        cls = type(ev)
        size = 1
        if cls is scalar_ev:
            tag = ev.tag
            if tag is None or tag == "!":
                if ev.style or not ev.implicit[0]:
                    tag = _STR  # quoted or block scalar: a string
                elif not ev.value or ev.value[0] in _MAY_NOT_BE_STR:
                    tag = resolve(yaml.ScalarNode, ev.value, ev.implicit)
                else:
                    tag = _STR
            if tag not in _SCALAR_TAGS and tag != _MERGE:
                raise _err(file, ev, _tag_problem(tag, "a scalar"))
            if tag == _MERGE and stack and type(stack[-1].value) is dict and stack[-1].key is None:
                value: Any = _MERGE_KEY
            else:
                try:
                    value = _scalar(file, ev, tag)
                except InputError as e:
                    e.field = _yaml_field(stack, doc_no)
                    raise
            if ev.anchor is not None:
                anchors[ev.anchor] = (value, 1)
        elif cls is alias_ev:
            name = ev.anchor
            if name in open_anchors:
                raise _err(file, ev, "recursive YAML alias: an anchor refers to itself (the document would be "
                                     "infinite)")
            if name not in anchors:
                raise _err(file, ev, f"undefined YAML alias *{name[:40]}")
            value, size = anchors[name]
            extra += size
            if extra > MAX_ALIAS_NODES:
                raise _err(file, ev, f"YAML aliases expand to more than {MAX_ALIAS_NODES} nodes (an alias "
                                     "expansion bomb?)")
            if isinstance(value, dict | list):
                value = copy.deepcopy(value)
        elif cls is seq_start or cls is map_start:
            tag = ev.tag
            want = _SEQ if cls is seq_start else _MAP
            if tag is not None and tag != "!" and tag != want:
                raise _err(file, ev, _tag_problem(tag, "a sequence" if cls is seq_start else "a mapping"))
            if stack and type(stack[-1].value) is dict and stack[-1].key is None:
                raise _err(file, ev, "mapping keys must be plain scalars, not mappings or sequences")
            if len(stack) >= MAX_DEPTH:
                raise _err(file, ev, f"YAML nesting is deeper than {MAX_DEPTH} levels")
            stack.append(_Frame([] if cls is seq_start else {}, ev))
            if ev.anchor is not None:
                open_anchors.add(ev.anchor)
            continue
        elif cls is seq_end or cls is map_end:
            frame = stack.pop()
            value, size = frame.value, frame.size
            if frame.merges:
                value, size = _merge(file, frame, size)
            if frame.anchor is not None:
                open_anchors.discard(frame.anchor)
                anchors[frame.anchor] = (value, size)
            ev = frame.event
        elif cls is doc_start:
            doc_no += 1
            anchors = {}
            continue
        else:
            continue
        # place the value in its parent (or as the document root)
        if not stack:
            if not (cls is scalar_ev and value is None):
                docs.append(value)
                index.append(doc_no)
            continue
        top = stack[-1]
        top.size += size
        if type(top.value) is list:
            top.value.append(value)
        elif top.key is None:
            if cls is not scalar_ev and value is not _MERGE_KEY:
                raise _err(file, ev, "mapping keys must be plain scalars, not aliases of mappings or sequences"
                           if isinstance(value, dict | list) else "mapping keys must be plain scalars")
            if value is _MERGE_KEY:
                top.key = _MERGE_KEY
            else:
                key = ev.value if cls is scalar_ev else str(value)
                if key in top.seen:
                    raise _err(file, ev, f"duplicate key {key[:60]!r} (first defined at line {top.seen[key]})")
                top.seen[key] = ev.start_mark.line + 1
                top.key = key
        else:
            if top.key is _MERGE_KEY:
                top.merges.append((value, ev))
            else:
                top.value[top.key] = value
            top.key = None
    return docs, index


def _merge(file: str, frame: _Frame, size: int) -> tuple[Any, int]:
    """Apply a mapping's merge keys (``<<``): explicit keys win, earlier sources over later ones."""
    result: dict[str, Any] = frame.value
    for value, ev in frame.merges:
        sources = value if isinstance(value, list) else [value]
        for src in sources:
            if not isinstance(src, dict):
                raise _err(file, ev, "a merge key (<<) needs a mapping or a list of mappings")
            for k, v in src.items():
                if k not in result:
                    result[k] = v
                    size += 1
    return result, size


def _scalar(file: str, ev: Any, tag: str) -> Any:
    text = ev.value
    if tag in (_STR, _TIMESTAMP):
        return text
    if tag == _NULL:
        if text not in ("", "~", "null", "Null", "NULL"):
            raise _err(file, ev, f"{text[:40]!r} is not null")
        return None
    if tag == _BOOL:
        if text not in _TRUE and text not in _FALSE:
            raise _err(file, ev, f"{text[:40]!r} is not a boolean (true or false)")
        return text in _TRUE
    if tag == _INT:
        s = text.replace("_", "")
        if len(s.lstrip("+-")) > 20:
            raise _err(file, ev, f"an integer with {len(s)} digits is outside int64")
        try:
            v = int(s, 0) if s.lstrip("+-")[:2].lower() in ("0x", "0o") else int(s, 10)
        except ValueError:
            raise _err(file, ev, f"{text[:40]!r} is not an integer") from None
        if not INT64[0] <= v <= INT64[1]:
            raise _err(file, ev, f"integer {text[:40]} is outside int64")
        return v
    try:
        f = float(text.replace("_", "").replace(".inf", "inf").replace(".Inf", "inf").replace(".INF", "inf")
                  .replace(".nan", "nan").replace(".NaN", "nan").replace(".NAN", "nan"))
    except ValueError:
        raise _err(file, ev, f"{text[:40]!r} is not a number") from None
    if not math.isfinite(f):
        raise _err(file, ev, f"{text[:40]} is not a finite number (Kubernetes objects hold no NaN or infinity)")
    return f


def _tag_problem(tag: str | None, on: str) -> str:
    shown = "(none)" if tag is None else "!!" + tag[len(_STD):] if tag.startswith(_STD) else tag
    if tag in _SCALAR_TAGS or tag in (_MAP, _SEQ):
        return f"YAML tag {shown} does not fit {on}"
    return f"YAML tag {shown} is not allowed (plain YAML only)"


def _yaml_locate(text: str, file: str, doc: int, path: Sequence[str | int]) -> SourcePos:
    for i, node in enumerate(_compose_all(text, file)):
        if i != doc:
            continue
        best = node
        cur = node
        for key in path:
            nxt = None
            if isinstance(cur, yaml.MappingNode) and isinstance(key, str):
                for knode, vnode in cur.value:
                    if isinstance(knode, yaml.ScalarNode) and str(knode.value) == key:
                        best, nxt = knode, vnode
                        break
            elif isinstance(cur, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(cur.value):
                nxt = cur.value[key]
                best = nxt
            if nxt is None:
                break
            cur = nxt
        return _pos(file, best)
    return SourcePos(file)

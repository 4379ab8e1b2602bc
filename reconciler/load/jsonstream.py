"""Large JSON fleet snapshots read item by item, in bounded memory, with exactly the result of the
whole-file reader (:func:`reconciler.load.snapshotfile.parse_json`) or a hand-over to it.

A 100,000-node ``kubectl get nodes,pods,pdb -A -o json`` dump is 1.9 GB. Read whole, its bytes,
its decoded text and the parsed objects are all alive at once (6.6 GB). Here the file is read in
chunks (from :data:`CHUNK` bytes, growing with the largest value met), decoded incrementally, and
each value of the top-level object (each object of its ``items`` array, or of a top-level array)
is parsed from the window by the standard library's C scanner with the same number hooks as the
whole-file reader; the consumed text is dropped as the window moves on. ``shrink`` sees every
item once parsed (the loader shares equal long annotation values there, while the text of the
next chunk is not yet read).

Nothing is decided differently from the whole-file reader: anything it might refuse sends the
read to it (:class:`Fallback`, then the caller reads the whole file, which raises the positioned
error or, when the doubt was unfounded, returns the same data): a file that is not UTF-8, holds
a NUL byte or a compression magic number, a syntax error, a number a hook refuses, a ``\\ud``
escape (a possible lone surrogate), nesting deeper than :data:`MAX_DEPTH` minus the two levels
above an item (the scanner's recursion guard stops it earlier than the whole-file reader would),
or trailing data. The error path reads the file again; the happy path never keeps its text.
"""

from __future__ import annotations

import codecs
import json
import re
import sys
from collections.abc import Callable
from typing import Any, BinaryIO

#: First read (bytes); later reads are at least as large as the window already held.
CHUNK = 4 * 1024 * 1024

_WS = re.compile(r"[ \t\n\r]*")
_SURROGATE_HINT = re.compile(r"\\u[dD]")
_MAGIC = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"\x28\xb5\x2f\xfd", b"PK\x03\x04", b"\xff\xfe", b"\xfe\xff",
          b"\x00\x00\xfe\xff")


class Fallback(Exception):
    """The streamed read cannot promise the whole-file reader's result: read the whole file."""


class _Window:
    """The decoded text not yet consumed: ``text[pos:]``, refilled from ``fh``."""

    def __init__(self, fh: BinaryIO, max_bytes: int, chunk: int) -> None:
        self.fh = fh
        self.max_bytes = max_bytes
        self.chunk = chunk
        self.text = ""
        self.pos = 0
        self.eof = False
        self.read = 0
        self.tail = ""  # the last characters of the previous chunk (an escape split by a chunk end)
        self.decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self.first = True

    def more(self) -> bool:
        """Read the next chunk (as large as the window held, at least ``chunk``); False at EOF."""
        if self.eof:
            return False
        raw = self.fh.read(max(self.chunk, len(self.text) - self.pos))
        self.read += len(raw)
        if self.read > self.max_bytes:
            raise Fallback  # the whole-file reader reports the size limit
        if self.first:
            self.first = False
            if raw.startswith(_MAGIC):
                raise Fallback
            if raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
        if b"\x00" in raw:
            raise Fallback
        try:
            new = self.decoder.decode(raw, final=not raw)
        except UnicodeDecodeError:
            raise Fallback from None
        if not raw:
            self.eof = True
        if _SURROGATE_HINT.search(new) or _SURROGATE_HINT.search(self.tail + new[:2]):
            raise Fallback  # a lone surrogate escape is refused by the whole-file reader
        self.tail = new[-2:] if len(new) >= 2 else (self.tail + new)[-2:]
        self.text = self.text[self.pos:] + new
        self.pos = 0
        return bool(raw)

    def skip_ws(self) -> str:
        """Skip whitespace (reading on as needed); the next character, "" at the end of the file."""
        while True:
            m = _WS.match(self.text, self.pos)
            self.pos = m.end() if m else self.pos
            if self.pos < len(self.text):
                return self.text[self.pos]
            if not self.more():
                return ""


def read_stream(fh: BinaryIO, max_bytes: int, shrink: Callable[[Any], None] | None = None, *,
                max_depth: int, chunk: int | None = None) -> Any:
    """Parse the JSON document in ``fh`` (at most ``max_bytes``) window by window (module docstring).

    ``shrink(item)`` is called on each object of the top-level ``items`` array (or of a
    top-level array) once parsed.

    Raises:
        Fallback: anything the whole-file reader might decide differently; nothing else.
    """
    from reconciler.load.snapshotfile import _BadNumber, _parse_constant, _parse_float, _parse_int, _stack_depth

    dec = json.JSONDecoder(parse_float=_parse_float, parse_int=_parse_int, parse_constant=_parse_constant)
    scan = json.decoder.scanstring  # type: ignore[attr-defined]
    w = _Window(fh, max_bytes, chunk or CHUNK)
    old = sys.getrecursionlimit()
    # an item sits two levels below the root: its own nesting may be at most max_depth - 2; the
    # scanner (one Python frame below this one) raises RecursionError past that
    sys.setrecursionlimit(_stack_depth() + 1 + max_depth - 2)
    try:
        return _document(w, dec, scan, shrink)
    except (RecursionError, ValueError, IndexError, _BadNumber):  # JSONDecodeError is a ValueError
        raise Fallback from None
    finally:
        sys.setrecursionlimit(old)


def _value(w: _Window, dec: json.JSONDecoder) -> Any:
    """The JSON value at the window's position (reading on until it is whole)."""
    while True:
        try:
            value, end = dec.raw_decode(w.text, w.pos)
        except json.JSONDecodeError:
            if w.more():
                continue
            raise
        if end == len(w.text) and w.more():
            continue  # a number cut by the window's end reads as a shorter number: read it again
        w.pos = end
        return value


def _array(w: _Window, dec: json.JSONDecoder, shrink: Callable[[Any], None] | None) -> list[Any]:
    w.pos += 1  # "["
    out: list[Any] = []
    if w.skip_ws() == "]":
        w.pos += 1
        return out
    while True:
        batch = _batch(w, dec)
        while batch is _MORE and w.more():  # no item ends in the window yet: read on
            batch = _batch(w, dec)
        items: list[Any] = batch if isinstance(batch, list) else [_value(w, dec)]
        if shrink is not None:
            for item in items:
                shrink(item)
        out += items
        c = w.skip_ws()
        w.pos += 1
        if c == "]":
            return out
        if c != ",":
            raise Fallback
        w.skip_ws()


_MORE = object()  # no item's end is in the window


def _batch(w: _Window, dec: json.JSONDecoder) -> list[Any] | object | None:
    """The items from the window's position to the last whole one in the window, parsed in one
    call (the scanner then shares the key strings of all of them); :data:`_MORE` when the window
    holds no item's end; None when the items are not laid out as below.

    Items printed as kubectl and ``--sim-save`` print them end in a line ``<indent>},`` at the
    indentation of their opening line; a raw newline is never inside a JSON string, so that
    ``}`` is structural. The text up to the last such line is parsed as ``[`` text ``]``: if
    every cut is an item's end this is those items, else (a nested object closed at that
    indentation) it is not valid JSON, and None lets the caller read one item alone."""
    start = w.pos
    line = w.text.rfind("\n", 0, start) + 1
    indent = w.text[line:start]
    if start == line or indent.strip(" ") or w.text[start:start + 1] != "{":
        return None
    cut = w.text.rfind("\n" + indent + "},", start)
    if cut < 0:
        return _MORE
    cut += len(indent) + 2  # just past the "}"
    text = "[" + w.text[start:cut] + "]"
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit + 1)  # the items one level deeper than alone
    try:
        items, end = dec.raw_decode(text, 0)
    except json.JSONDecodeError:
        return None
    finally:
        sys.setrecursionlimit(limit)
    if end != len(text):
        return None
    w.pos = cut
    return list(items)


def _document(w: _Window, dec: json.JSONDecoder, scan: Any, shrink: Callable[[Any], None] | None) -> Any:
    c = w.skip_ws()
    if c == "[":
        doc: Any = _array(w, dec, shrink)
    elif c == "{":
        doc = {}
        w.pos += 1
        c = w.skip_ws()
        if c == "}":
            w.pos += 1
        while c != "}":
            if c != '"':
                raise Fallback
            while True:  # the key (reading on if the window cuts it)
                try:
                    key, end = scan(w.text, w.pos + 1, True)
                    break
                except json.JSONDecodeError:
                    if not w.more():
                        raise
            w.pos = end
            if w.skip_ws() != ":":
                raise Fallback
            w.pos += 1
            if w.skip_ws() == "[" and key == "items":
                doc[key] = _array(w, dec, shrink)
            else:
                doc[key] = _value(w, dec)
            c = w.skip_ws()
            w.pos += 1
            if c == ",":
                c = w.skip_ws()
                if c == "}":
                    raise Fallback  # a trailing comma: a syntax error
            elif c != "}":
                raise Fallback
    else:
        raise Fallback
    if w.skip_ws() != "":
        raise Fallback  # trailing data
    return doc

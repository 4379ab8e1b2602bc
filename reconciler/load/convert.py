"""Rewrite recipe files into today's NodeRecipe form: the release moved from a deprecated place
(:data:`~reconciler.load.recipes.DEPRECATED_FORMS`: ``metadata.version``, the annotation
``reconciler.nodewright.dev/version``) to ``spec.version``, the rest of the file byte for byte.

The file is edited as text at the positions the YAML composer gives, not dumped again: comments,
quoting, indentation, key order and line breaks (CRLF too) stay as they were, so a review of the
change shows two lines. The deprecated entry is removed (an ``annotations`` mapping left empty
goes with it); ``version: <value>`` is inserted as the first line of ``spec``, indented as its
first key (or first in a flow mapping ``spec: {...}``), the value written as it was when that is
safe there, else as a JSON string. Every NodeRecipe document is converted, also the ``items``
of a ``v1`` ``List``; other documents are left alone.

Each converted document is loaded before and after (:func:`~reconciler.load.recipes.load_node_recipe`)
and must give the same recipe, so the rewrite can change nothing but where the release is
written: a document where it would is refused (:class:`~reconciler.errors.InputError`), and so is
one whose release is given twice with different values.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass

from ruamel.yaml import YAML
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from reconciler.errors import InputError, SourcePos
from reconciler.load import recipes
from reconciler.load.yamlsafe import YamlDoc, parse_documents

_FLOW_UNSAFE = set(",[]{}#")


@dataclass(frozen=True)
class Converted:
    """The result of :func:`convert_text`: the new text (the same object when nothing changed)
    and one line per change (``file:line:col: metadata.version moved to spec.version``)."""

    text: str
    changes: tuple[str, ...]


def _entry(mapping: Node | None, key: str) -> tuple[Node, Node] | None:
    if not isinstance(mapping, MappingNode):
        return None
    for k, v in mapping.value:
        if isinstance(k, ScalarNode) and k.value == key:
            return k, v
    return None


def _line_start(text: str, index: int) -> int:
    return text.rfind("\n", 0, index) + 1


def _removal(text: str, mapping: MappingNode, key: Node, value: Node) -> tuple[int, int]:
    """The span of ``text`` that removes the entry ``key: value`` of ``mapping``."""
    start, end = key.start_mark.index, value.end_mark.index
    if mapping.flow_style:
        rest = len(text[end:]) - len(text[end:].lstrip(" \t\n"))
        if text[end + rest:end + rest + 1] == ",":  # "a: 1, b: 2" -> "b: 2"
            end += rest + 1
            end += len(text[end:]) - len(text[end:].lstrip(" \t"))
        else:  # the last entry: "a: 1, b: 2" -> "a: 1"
            before = text[:start].rstrip(" \t\n")
            if before.endswith(","):
                start = len(before) - 1
        return start, end
    first = _line_start(text, start)
    if text[first:start].strip():
        raise ValueError("the key does not start its line")
    if end > 0 and text[end - 1] != "\n":  # rest of the value's line: blanks or a comment, then the break
        newline = text.find("\n", end)
        newline = len(text) if newline < 0 else newline
        tail = text[end:newline].strip()
        if tail and not tail.startswith("#"):
            raise ValueError("something follows the value on its line")
        end = min(newline + 1, len(text))
    return first, end


def _value_text(text: str, node: ScalarNode, value: str, *, flow: bool) -> str:
    """The value as it was written, when that reads the same in its new place; else JSON."""
    source = text[node.start_mark.index:node.end_mark.index]
    single = "\n" not in source and node.style in (None, "'", '"')
    if single and not (flow and node.style is None and _FLOW_UNSAFE & set(source)):
        return source
    return json.dumps(value)


def _insertion(text: str, spec: MappingNode, line: str) -> tuple[int, str]:
    """Where and what to insert so ``version: V`` is the first entry of ``spec``."""
    if spec.flow_style:
        brace = spec.start_mark.index
        return brace + 1, line + (", " if spec.value else "")
    first_key = spec.value[0][0]
    return _line_start(text, first_key.start_mark.index), " " * first_key.start_mark.column + line + "\n"


def _recipe_edits(text: str, root: MappingNode, file: str) -> tuple[list[tuple[int, int, str]], list[str]]:
    """The edits (start, end, replacement) converting one NodeRecipe mapping, and the change lines."""
    meta = _entry(root, "metadata")
    spec = _entry(root, "spec")
    meta_node = meta[1] if meta else None
    ann = _entry(meta_node, "annotations")
    found = [(form, where, hit) for form, where, hit in (
        ("metadata.version", meta_node, _entry(meta_node, "version")),
        ("annotation", ann[1] if ann else None, _entry(ann[1] if ann else None, recipes.VERSION_ANNOTATION)),
    ) if hit is not None]
    if not found:
        return [], []
    pos = found[0][2][0].start_mark
    here = SourcePos(file, pos.line + 1, pos.column + 1)
    if spec is None or not isinstance(spec[1], MappingNode) or (not spec[1].value and not spec[1].flow_style):
        raise InputError("cannot move the release: spec is not a mapping", here)
    values = {str(node.value) for _, _, (_, node) in found if isinstance(node, ScalarNode)}
    there = _entry(spec[1], "version")
    if there is not None and isinstance(there[1], ScalarNode):
        values.add(str(there[1].value))
    if len(values) != 1 or not all(isinstance(node, ScalarNode) for _, _, (_, node) in found):
        raise InputError("cannot move the release: it is given more than once with different values, or is not "
                         "a single value; give it once, in spec.version", here)
    edits: list[tuple[int, int, str]] = []
    changes = []
    try:
        for form, mapping, (key, node) in found:
            assert isinstance(mapping, MappingNode)
            alone = form == "annotation" and len(mapping.value) == 1
            if alone and ann is not None and isinstance(meta_node, MappingNode):
                start, end = _removal(text, meta_node, ann[0], ann[1])  # the annotations mapping goes too
            else:
                start, end = _removal(text, mapping, key, node)
            edits.append((start, end, ""))
            name = "metadata.version" if form == "metadata.version" else f"the annotation {recipes.VERSION_ANNOTATION}"
            changes.append(f"{SourcePos(file, key.start_mark.line + 1, key.start_mark.column + 1)}: "
                           f"{name} moved to spec.version")
    except ValueError as e:
        raise InputError(f"cannot move the release by editing the file ({e}); move it to spec.version by hand",
                         here) from None
    if there is None:
        node = found[0][2][1]
        assert isinstance(node, ScalarNode)
        line = "version: " + _value_text(text, node, str(node.value), flow=bool(spec[1].flow_style))
        at, insert = _insertion(text, spec[1], line)
        edits.append((at, at, insert))
    return edits, changes


def _roots(node: Node) -> list[MappingNode]:
    """The NodeRecipe mappings of a document: itself, or the items of a ``v1`` ``List``."""
    kind, api = _entry(node, "kind"), _entry(node, "apiVersion")
    kind_v = kind[1].value if kind and isinstance(kind[1], ScalarNode) else None
    api_v = api[1].value if api and isinstance(api[1], ScalarNode) else None
    if kind_v == "List" and api_v == "v1":
        items = _entry(node, "items")
        if items and isinstance(items[1], SequenceNode):
            return [r for item in items[1].value for r in _roots(item)]
    if kind_v == recipes.KIND and api_v == recipes.API_VERSION and isinstance(node, MappingNode):
        return [node]
    return []


def _recipe_docs(docs: list[YamlDoc]) -> list[YamlDoc]:
    """The NodeRecipe documents of ``docs``, a ``List``'s items included."""
    out = []
    for doc in docs:
        subs = [doc]
        if isinstance(doc.data, dict) and doc.data.get("kind") == "List" and isinstance(doc.data.get("items"), list):
            subs = [doc.sub(("items", i)) for i in range(len(doc.data["items"]))]
        out += [d for d in subs if isinstance(d.data, dict) and d.data.get("kind") == recipes.KIND]
    return out


def _loaded(docs: list[YamlDoc]) -> list[tuple[object, int]]:
    """Each NodeRecipe of ``docs`` as loaded: its model without ``source`` (None when refused)
    and how many deprecated forms it uses."""
    out: list[tuple[object, int]] = []
    for doc in _recipe_docs(docs):
        got = recipes.load_node_recipe(doc, [], locked=False)
        out.append((got.recipe.model_dump(exclude={"source"}), len(got.deprecated)) if got else (None, 0))
    return out


def convert_text(text: str, file: str) -> Converted:
    """Convert the recipe documents of ``text`` (decoded, any line breaks) read from ``file``
    (the name for positions).

    Raises:
        InputError: the text is not YAML the loader reads (as :func:`~reconciler.load.yamlsafe.
            parse_documents`), or a document cannot be converted without changing its meaning
            (module docstring).
    """
    crlf = "\r\n" in text
    plain = text.replace("\r\n", "\n").replace("\r", "\n")
    before = parse_documents(plain, file)  # the loader's guards first: size, aliases, tags, depth
    edits: list[tuple[int, int, str]] = []
    changes: list[str] = []
    for node in YAML(typ="rt", pure=True).compose_all(io.StringIO(plain)):
        for root in _roots(node):
            e, c = _recipe_edits(plain, root, file)
            edits += e
            changes += c
    if not edits:
        return Converted(text, ())
    out = plain
    for start, end, insert in sorted(edits, key=lambda x: (x[0], x[1]), reverse=True):
        out = out[:start] + insert + out[end:]
    old, new = _loaded(before), _loaded(parse_documents(out, file))
    if [m for m, _ in new] != [m for m, _ in old] or any(n for _, n in new):
        raise InputError("converting this file would change a recipe; move the release to spec.version by hand",
                         SourcePos(file, 1, 1))
    return Converted(out.replace("\n", "\r\n") if crlf else out, tuple(changes))

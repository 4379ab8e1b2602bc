"""Load a fleet snapshot (``--cluster sim:FILE``) strictly: every object the reconciler reads is
checked in the shapes Kubernetes defines (:mod:`reconciler.load.kubeshapes`) before anything uses it.

Accepted layouts: one ``List`` (``kind: List`` or ``NodeList``/``PodList``/…, with ``items``), as
``kubectl get nodes,pods,pdb -A -o json|yaml`` prints it or ``--sim-save`` writes it; several YAML
documents, each an object or a List; a JSON array of objects. Objects of kinds we do not read
(Services, Deployments … from ``kubectl get all``) are skipped; a kind that differs from one we read
only in case or plural (``node``, ``Pods``) is an error, as is a known kind with the wrong
``apiVersion``. Two objects of the same kind and name (namespace/name when namespaced) are an error:
a snapshot of one cluster cannot hold both.

Every error names the file, ``line:column`` (YAML always; JSON too, found on the error path), the
object (``items[3] (Node/gpu-a-001)``) and the field; up to :data:`MAX_REPORTED` are collected.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from pydantic import TypeAdapter, ValidationError

from reconciler.errors import InputError, InputErrors, SourcePos
from reconciler.load.kubeshapes import MODELS, PATTERN_HELP
from reconciler.load.snapshotfile import NAMESPACED, SnapshotText, format_path, object_label, read_snapshot

Obj = dict[str, Any]

#: Errors collected before the loader stops reporting more.
MAX_REPORTED = 20

_NEAR = {k.lower(): k for k in MODELS} | {k.lower() + "s": k for k in MODELS} | {"pdb": "PodDisruptionBudget",
                                                                               "pdbs": "PodDisruptionBudget"}


@dataclass
class Snapshot:
    """The objects of a snapshot file with where each came from.

    ``objects[i]`` is a validated Kubernetes object dict (only the kinds in
    :data:`~reconciler.load.kubeshapes.MODELS`), ``origins[i]`` its ``(document, path)`` in the file.
    """

    source: SnapshotText
    objects: list[Obj]
    origins: list[tuple[int, tuple[str | int, ...]]]

    @property
    def file(self) -> str:
        """The snapshot's path."""
        return self.source.file

    def error(self, i: int, field: Sequence[str | int], message: str) -> InputError:
        """An :class:`InputError` about ``field`` of ``objects[i]``, positioned in the file."""
        doc, path = self.origins[i]
        return _error(self.source, doc, path, self.objects[i], tuple(field), message)


def _where(src: SnapshotText, doc: int, path: tuple[str | int, ...]) -> str:
    head = f"document {src.doc_index[doc] + 1}" if len(src.docs) > 1 else ""
    p = format_path(path)
    return f"{head} {p}".strip() if p else head or "document"


def _error(src: SnapshotText, doc: int, path: tuple[str | int, ...], obj: Any, field: tuple[str | int, ...],
           message: str, *, locate: bool = True) -> InputError:
    fld = object_label(_where(src, doc, path), obj, field)
    return InputError(message, src.locate(doc, (*path, *field)) if locate else SourcePos(src.file), fld)


#: Errors given a line:column (finding one in a large JSON file re-reads it up to that point).
MAX_LOCATED = 3

#: Objects validated per call (see :func:`validate_snapshot`).
VALIDATE_BATCH = 2000


@cache
def _adapter(kind: str) -> TypeAdapter[Any]:
    return TypeAdapter(list[MODELS[kind]])  # type: ignore[valid-type]


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value[:60]!r}" + ("..." if len(value) > 60 else "")
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return "null" if value is None else type(value).__name__


def pydantic_message(err: Any) -> str:
    """A one-line message for one pydantic error dict (``ValidationError.errors()`` entry)."""
    typ, inp, ctx = err["type"], err.get("input"), err.get("ctx") or {}
    msg = str(err["msg"])
    if typ == "missing":
        return "missing required field"
    if typ == "union_type":
        return f"must be {msg}, not {_describe(inp)}"
    if typ == "string_type":
        hint = "; quote it" if isinstance(inp, int | float) and not isinstance(inp, bool) else ""
        if isinstance(inp, dict | list):
            hint = " (a value that holds JSON must be written as one string)"
        return f"must be a string, not {_describe(inp)}{hint}"
    if typ in ("int_type", "int_from_float", "int_parsing"):
        return f"must be an integer, not {_describe(inp)}"
    if typ in ("float_type", "float_parsing"):
        return f"must be a number, not {_describe(inp)}"
    if typ == "finite_number":
        return f"must be a finite number, not {_describe(inp)}"
    if typ == "extra_forbidden":
        return "unknown field"
    if typ == "bool_type":
        return f"must be true or false, not {_describe(inp)}"
    if typ in ("dict_type", "model_type", "model_attributes_type"):
        return f"must be a mapping, not {_describe(inp)}"
    if typ in ("list_type", "tuple_type", "set_type", "frozen_set_type"):
        return f"must be a list, not {_describe(inp)}"
    if typ == "literal_error":
        return f"{_describe(inp)} is not allowed: {msg[0].lower()}{msg[1:]}"
    if typ == "string_pattern_mismatch":
        return f"{_describe(inp)} {PATTERN_HELP.get(str(ctx.get('pattern')), 'has the wrong form')}"
    if typ == "string_too_long":
        return f"{_describe(inp)} is longer than {ctx.get('max_length')} characters"
    if typ == "string_too_short":
        return "must not be empty"
    if typ in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        return f"{_describe(inp)}: {msg[0].lower()}{msg[1:]}"
    if typ == "value_error":
        return msg.removeprefix("Value error, ")
    return msg


def _is_tag(x: Any) -> bool:
    return isinstance(x, str) and (x == "[key]" or ("[" in x and x.endswith("]")) or x in _TAGS)


_TAGS = frozenset({"int", "str", "constrained-str", "constrained-int", "constrained-float", "bool", "float", "dict",
                   "list", "none", "tuple"})


def _rank(err: Any) -> tuple[int, int]:
    typ = str(err["type"])
    kind = 2 if typ.endswith("_type") or typ == "int_from_float" else 1 if typ == "literal_error" else 0
    return kind, -len(err["loc"])


def best_errors(errors: list[Any]) -> list[Any]:
    """Pydantic errors with each failed union reduced to its most telling branch: one that got past
    the type check (``'abc%'`` fails the percent pattern rather than "not an integer"), else the
    deepest; when every branch is a plain type mismatch, one error naming the accepted types."""
    groups: dict[tuple[Any, ...], list[Any]] = {}
    order: list[tuple[Any, ...]] = []
    for e in errors:
        loc = tuple(e["loc"])
        cut = next((i for i, x in enumerate(loc) if _is_tag(x) and x != "[key]"), None)
        key = loc[:cut] if cut is not None else loc + ("#",)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(e)
    out = []
    for key in order:
        group = groups[key]
        if len(group) == 1:
            out.append(group[0])
            continue
        best = min(group, key=_rank)
        if _rank(best)[0] == 2 and all(_rank(g)[0] == 2 for g in group):
            wanted = sorted({_TYPE_WORD.get(str(g["type"]), str(g["type"])) for g in group})
            best = dict(best, type="union_type", msg=" or ".join(wanted))
        out.append(best)
    return out


_TYPE_WORD = {"int_type": "an integer", "int_from_float": "an integer", "string_type": "a string",
              "float_type": "a number", "bool_type": "true or false", "dict_type": "a mapping",
              "list_type": "a list", "tuple_type": "a list", "model_type": "a mapping", "none_type": "null"}


def loc_path(loc: tuple[Any, ...]) -> tuple[str | int, ...]:
    """A pydantic ``loc`` (without the list index) → a path in the object; union and key markers
    (``function-after[...]``, ``[key]``, ``int``, ``str``, ``constrained-float``, ``literal[...]``)
    are dropped."""
    out: list[str | int] = []
    for x in loc:
        if isinstance(x, int) or (isinstance(x, str) and not (x == "[key]" or ("[" in x and x.endswith("]"))
                                                           or _TYPE_TAG.fullmatch(x))):
            out.append(x)
    return tuple(out)


#: The names pydantic gives the members of a union in an error's ``loc`` (not fields of the input).
_TYPE_TAG = re.compile(r"(?:constrained-)?(?:int|str|bool|float|dict|list|tuple|set|frozenset|bytes|none|decimal)")


def load_snapshot(path: str, *, max_bytes: int | None = None, prune: bool = False) -> Snapshot:
    """Read ``path`` (at most ``max_bytes``, default
    :data:`~reconciler.load.snapshotfile.MAX_SNAPSHOT_BYTES`) and return its validated objects;
    ``prune``: only the fields the reconciler reads are kept (see
    :func:`~reconciler.load.snapshotfile.read_snapshot`; the same validation, the same errors).

    Raises:
        InputError: the first problem (:class:`InputErrors` when several), positioned.
    """
    return validate_snapshot(read_snapshot(path, max_bytes=max_bytes, prune=prune))


def validate_snapshot(src: SnapshotText) -> Snapshot:
    """Collect the objects of parsed snapshot ``src``, validate them and reject duplicates.

    Raises:
        InputError: see :func:`load_snapshot`.
    """
    errors: list[tuple[int, tuple[str | int, ...], Any, tuple[str | int, ...], str]] = []

    def fail(doc: int, p: tuple[str | int, ...], obj: Any, field: tuple[str | int, ...], message: str) -> None:
        if len(errors) < MAX_REPORTED:
            errors.append((doc, p, obj, field, message))

    groups: dict[str, list[tuple[Obj, int, tuple[str | int, ...]]]] = {k: [] for k in MODELS}
    for d, doc in enumerate(src.docs):
        entries: list[tuple[tuple[str | int, ...], Any]]
        if isinstance(doc, list):
            entries = [((i,), item) for i, item in enumerate(doc)]
        elif isinstance(doc, dict):
            kind = doc.get("kind")
            if isinstance(kind, str) and kind.endswith("List") and kind not in MODELS:
                items = doc.get("items")
                if items is None:
                    entries = []
                elif not isinstance(items, list):
                    fail(d, (), doc, ("items",), f"must be a list of objects, not {_describe(items)}")
                    continue
                else:
                    entries = [(("items", i), item) for i, item in enumerate(items)]
            else:
                entries = [((), doc)]
        else:
            fail(d, (), None, (), f"is {_describe(doc)}, not a Kubernetes object (a mapping with apiVersion, "
                                  "kind and metadata) or a List of them")
            continue
        for p, item in entries:
            if not isinstance(item, dict):
                fail(d, p, None, (), f"is {_describe(item)}, not a Kubernetes object")
                continue
            kind = item.get("kind")
            if not isinstance(kind, str) or not kind:
                fail(d, p, item, ("kind",), "missing required field" if kind is None else
                     f"must be a non-empty string, not {_describe(kind)}")
                continue
            if kind in MODELS:
                groups[kind].append((item, d, p))
                continue
            api = item.get("apiVersion")
            if not isinstance(api, str):
                fail(d, p, item, ("apiVersion",), "missing required field" if api is None else
                     f"must be a string, not {_describe(api)}")
            elif kind.lower() in _NEAR:
                fail(d, p, item, ("kind",), f"unknown kind {kind[:60]!r}; kinds are case-sensitive and "
                                            f"singular: did you mean {_NEAR[kind.lower()]}?")
            elif kind.endswith("List"):
                fail(d, p, item, ("kind",), "a List inside a List is not a snapshot layout")
            # any other kind (Service, Deployment ...) is not read: skipped
    objects: list[Obj] = []
    origins: list[tuple[int, tuple[str | int, ...]]] = []
    for kind, entries_ in groups.items():
        if not entries_:
            continue
        validate = _adapter(kind).validate_python
        # in batches: pydantic builds a validated copy of its input, dropped at once here, so
        # only one batch's copy is ever alive (not one of every pod of a large fleet)
        for start in range(0, len(entries_), VALIDATE_BATCH):
            batch = entries_[start:start + VALIDATE_BATCH]
            try:
                validate([e[0] for e in batch])
            except ValidationError as exc:
                for err in best_errors(exc.errors(include_url=False)):
                    loc = err["loc"]
                    bad, bd, bp = batch[int(loc[0])]
                    fail(bd, bp, bad, loc_path(tuple(loc[1:])), pydantic_message(err))
        seen: dict[tuple[str, str], tuple[str | int, ...]] = {}
        for obj, d, p in entries_:
            meta = obj.get("metadata")
            if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
                continue
            name = meta["name"]
            ns = (meta.get("namespace") or "default") if kind in NAMESPACED else ""
            key = (str(ns), name)
            if key in seen:
                first = _where(src, d, seen[key]) if seen[key] or len(src.docs) > 1 else "an earlier object"
                fail(d, p, obj, ("metadata", "name"), f"a second {kind} named {'/'.join(x for x in key if x)} "
                                                      f"(the first is {first}); names are unique in a cluster")
            else:
                seen[key] = p
            objects.append(obj)
            origins.append((d, p))
    if errors:
        errors.sort(key=lambda e: (e[0], next((x for x in e[1] if isinstance(x, int)), -1)))
        found = [_error(src, *e, locate=i < MAX_LOCATED) for i, e in enumerate(errors)]
        raise found[0] if len(found) == 1 else InputErrors(found)
    if not any(o["kind"] == "Node" for o in objects):
        raise InputError("the fleet snapshot holds no Node objects (expected kubectl get nodes,pods,pdb -A -o "
                         "json|yaml output)", src.locate(0, ()) if src.docs else SourcePos(src.file, 1, 1))
    return Snapshot(src, objects, origins)

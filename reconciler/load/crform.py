"""NodeRecipe objects as the API server returns them → the document form the loader reads.

A NodeRecipe object and a recipe file are the same document (the release is ``spec.version`` in
both); the server only adds metadata (``uid``, ``resourceVersion``, ``generation``,
``creationTimestamp``, ``managedFields``, ...) and a ``status``, which are not the user's input
and are dropped here (the loader would ignore them too), with the annotation ``kubectl apply``
adds to every object.

There is no file, so every position is the object itself (``NodeRecipe/<name>``, no line): an
error names the object and the dotted field.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from reconciler.load.yamlsafe import PathKey, YamlDoc

#: The metadata a user writes; everything else in an object's metadata is set by the server.
USER_METADATA = ("name", "labels", "annotations")

#: Annotations tools add to every object they apply; not part of the recipe.
_TOOL_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


def object_label(obj: Mapping[str, Any]) -> str:
    """``<kind>/<name>`` of an object (``NodeRecipe/gpu-tuning``), for messages and positions."""
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return f"{obj.get('kind') or 'object'}/{name if isinstance(name, str) else '?'}"


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _positions(data: Any, path: PathKey, out: dict[PathKey, tuple[int, int]]) -> None:
    out[path] = (0, 0)
    if isinstance(data, dict):
        for k, v in data.items():
            _positions(v, (*path, k), out)
    elif isinstance(data, list):
        for i, v in enumerate(data):
            _positions(v, (*path, i), out)


def document_of(obj: Mapping[str, Any], index: int = 0) -> YamlDoc:
    """The document form of one object (module docstring): ``apiVersion``, ``kind``, the user's
    ``metadata`` (name, labels, annotations less the ones tools add) and ``spec`` as they are
    (an unknown top-level or spec field still reaches the loader and is reported there)."""
    data: dict[str, Any] = {k: _plain(v) for k, v in obj.items() if k not in ("metadata", "status")}
    meta = obj.get("metadata")
    if isinstance(meta, Mapping):
        kept: dict[str, Any] = {k: _plain(meta[k]) for k in USER_METADATA if k in meta and meta[k] is not None}
        ann = kept.get("annotations")
        if isinstance(ann, dict):
            ann = {k: v for k, v in ann.items() if k not in _TOOL_ANNOTATIONS}
            if ann:
                kept["annotations"] = ann
            else:
                del kept["annotations"]
        data["metadata"] = kept
    elif meta is not None:
        data["metadata"] = _plain(meta)
    positions: dict[PathKey, tuple[int, int]] = {}
    _positions(data, (), positions)
    return YamlDoc(object_label(obj), index, data, MappingProxyType(positions))

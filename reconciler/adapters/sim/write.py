"""Write Kubernetes objects as one ``v1 List`` file (a saved simulated fleet, a generated fleet).

:func:`write_list` streams to the file one object at a time, so a 10,000-node fleet is never one
string in memory: JSON (``path`` ending in ``.json``) through orjson (indented by 2; an object
orjson cannot encode, such as an integer beyond 64 bits, through the standard library), anything
else YAML through libyaml's C emitter (PyYAML ``CSafeDumper``, block style, no anchors), falling
back to PyYAML's pure emitter without libyaml. :func:`dumps_list` returns the same list as one
string (JSON indented by 4, as ``kubectl get -o json`` prints it).
Strings that a YAML 1.1 *or* 1.2 reader would take for another type (``yes``, ``on``, ``0o17``,
``1e3``, timestamps) are quoted, so the file reads back identically with our loader
(:mod:`reconciler.load.snapshotfile`), kubectl and other tools. A regular file is replaced
atomically (written next to it, then renamed: :mod:`reconciler.fileio.writing`), so a reader
never sees half a fleet.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import orjson
import yaml

from reconciler.fileio.writing import Output, prepare_output

_BASE: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_BASE):  # type: ignore[misc]
    """Safe dumper that never writes anchors and quotes what either YAML version would not read
    back as a string."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


_STD = "tag:yaml.org,2002:"
for _tag, _regexp, _first in (
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)\Z", "tTfF"),
    ("null", r"^(?:~|null|Null|NULL|)\Z", "~nN"),
    ("int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)\Z", "-+0123456789"),
    ("float", r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)"
              r"|\.(?:nan|NaN|NAN))\Z", "-+.0123456789"),
):
    _Dumper.add_implicit_resolver(_STD + _tag, re.compile(_regexp), list(_first))


def dumps_list(objects: list[Any], fmt: str) -> str:
    """The text of a ``v1 List`` of ``objects`` in ``fmt`` (``"json"`` or ``"yaml"``)."""
    doc = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": objects}
    if fmt == "json":
        return json.dumps(doc, indent=4, ensure_ascii=False) + "\n"
    out: str = yaml.dump(doc, Dumper=_Dumper, default_flow_style=False, sort_keys=False, allow_unicode=True,
                         width=1 << 30)
    return out


def _json_item(obj: Any) -> bytes:
    try:
        out = orjson.dumps(obj, option=orjson.OPT_INDENT_2)
    except (orjson.JSONEncodeError, TypeError):
        out = json.dumps(obj, indent=2, ensure_ascii=False).encode("utf-8")
    return out.replace(b"\n", b"\n    ")


def _write_json(fh: Any, objects: list[Any]) -> None:
    fh.write(b'{\n  "apiVersion": "v1",\n  "kind": "List",\n  "metadata": {"resourceVersion": ""},\n  "items": [')
    for i, obj in enumerate(objects):
        fh.write(b",\n    " if i else b"\n    ")
        fh.write(_json_item(obj))
    fh.write(b"\n  ]\n}\n" if objects else b"]\n}\n")


def _write_yaml(fh: Any, objects: list[Any]) -> None:
    # the C emitter writes to the stream as it goes (no whole-file string)
    fh.write(b'apiVersion: v1\nkind: List\nmetadata:\n  resourceVersion: ""\nitems:')
    if not objects:
        fh.write(b" []\n")
        return
    fh.write(b"\n")
    for obj in objects:
        yaml.dump([obj], fh, Dumper=_Dumper, default_flow_style=False, sort_keys=False, allow_unicode=True,
                  width=1 << 30, encoding="utf-8")


def write_list(path: str | os.PathLike[str] | Output, objects: list[Any], *, option: str = "fleet file") -> None:
    """Write ``objects`` as a ``v1 List`` to ``path`` (format by the suffix of the file's name, see
    the module docstring), one object at a time, through the one output writer
    (:mod:`reconciler.fileio.writing`: a regular file replaced atomically, a device or FIFO
    written in place). ``path``: an output checked already, or a path checked now as ``option``.

    Raises:
        InputError: ``path`` cannot be written (checked now; the file is left as it was).
        OutputError: the write failed (the file is left as it was).
    """
    out = path if isinstance(path, Output) else prepare_output(option, os.fspath(path))
    try:
        json_file = out.target.endswith(".json") or out.path.endswith(".json")
        out.write_with(lambda fh: (_write_json if json_file else _write_yaml)(fh, objects))
    finally:
        if out is not path:
            out.close()

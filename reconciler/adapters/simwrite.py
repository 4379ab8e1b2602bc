"""Write Kubernetes objects as one ``v1 List`` file (a saved simulated fleet, a generated fleet).

JSON (``path`` ending in ``.json``) goes through the standard library's C encoder, indented as
``kubectl get -o json`` prints it; anything else is YAML through libyaml's C emitter (PyYAML
``CSafeDumper``, block style, no anchors), falling back to PyYAML's pure emitter without libyaml.
Strings that a YAML 1.1 *or* 1.2 reader would take for another type (``yes``, ``on``, ``0o17``,
``1e3``, timestamps) are quoted, so the file reads back identically with our loader
(:mod:`reconciler.load.snapshotfile`), kubectl and other tools. The file is replaced atomically
(written next to it, then renamed), so a reader never sees half a fleet.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from typing import Any

import yaml

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


def write_list(path: str | os.PathLike[str], objects: list[Any]) -> None:
    """Write ``objects`` as a ``v1 List`` to ``path`` (format by suffix, see the module docstring).

    Raises:
        OSError: the directory is not writable (the file is left as it was).
    """
    target = os.fspath(path)
    text = dumps_list(objects, "json" if target.endswith(".json") else "yaml")
    folder = os.path.dirname(os.path.abspath(target))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=os.path.basename(target)[-40:], dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        try:
            mode = os.stat(target).st_mode & 0o777
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise

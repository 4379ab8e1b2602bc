"""Machine-readable output shared by the verbs: ``-o json``, ``-o yaml`` and ``-o name``.

* json: ``json.dumps(doc, indent=2, sort_keys=True)``;
* yaml: the same document as YAML (ruamel, block style; bidi and zero-width characters escaped as
  ``\\uXXXX``, never printed raw);
* name: one ``kind/name`` line per object (``kubectl get -o name``): ``noderecipe/<recipe>`` for
  plan and apply, ``node/<node>`` for the node verbs, ``configmap/<ns>/<name>`` for a control
  switch. Names come from the cluster or inputs and are printed through
  :func:`reconciler.report.safetext.visible`.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterable
from typing import Any

from reconciler.report.safetext import visible


def dumps(doc: Any, fmt: str) -> str:
    """``doc`` as ``json`` or ``yaml`` text (ending in a newline).

    Raises:
        ValueError: another ``fmt``.
    """
    if fmt == "json":
        return json.dumps(doc, indent=2, sort_keys=True) + "\n"
    if fmt != "yaml":
        raise ValueError(f"not a document format: {fmt}")
    from ruamel.yaml import YAML

    plain = json.loads(json.dumps(doc))  # exactly the JSON document (enums as their values, tuples as lists)
    buf = io.StringIO()
    y = YAML(typ="safe", pure=True)
    y.allow_unicode = False
    y.default_flow_style = False
    y.dump(plain, buf)
    return buf.getvalue()


def dump(doc: Any, fmt: str) -> None:
    """Print ``doc`` as ``json`` or ``yaml`` on stdout."""
    sys.stdout.write(dumps(doc, fmt))


def print_names(kind: str, names: Iterable[str]) -> None:
    """One ``kind/name`` line per name (``name`` as given when ``kind`` is empty), in order,
    without repeats."""
    seen: set[str] = set()
    for n in names:
        if n not in seen:
            seen.add(n)
            print(visible(f"{kind}/{n}" if kind else n))


def print_results(fmt: str, docs: list[dict[str, Any]]) -> None:
    """Run results of ``apply``/``simulate`` in ``fmt``: ``json``/``yaml`` the one result document
    (``{"results": [...]}`` for several), ``name`` one ``noderecipe/<recipe>`` line per result."""
    if fmt == "name":
        print_names("noderecipe", (str(d.get("recipe", "")) for d in docs))
        return
    dump(docs[0] if len(docs) == 1 else {"results": docs}, fmt)

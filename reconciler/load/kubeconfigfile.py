"""A kubeconfig file checked as an input before the ``kubernetes`` client reads it.

The client's loader reads kubeconfigs with PyYAML and indexes into them as it goes, so a syntax
error, a YAML tag, a list where a mapping belongs or an unknown context came out as a Python
traceback or as a bare exception text ("list indices must be integers", "Invalid base64-encoded
string", "Expected object with name nope in ... contexts list") with exit 4. Read here first
through :mod:`reconciler.load.yamlsafe` (size, encoding, tag, alias-bomb and duplicate-key guards;
a position for every field), a malformed kubeconfig is bad input (exit 2) at its file, line and
column. Messages name fields and the names of clusters, contexts and users, never a value
(tokens, keys and passwords live in the same file).

The shape follows client-go's ``clientcmd/api/v1`` ``Config``: ``clusters``, ``contexts`` and
``users`` are lists of ``{name, cluster|context|user}`` entries, ``current-context`` a string, and
the ``*-data`` fields base64. Checked per file; which context is used (``--context``, else
``current-context``) is checked only when one file is the whole configuration (a
``$KUBECONFIG`` list is merged by the client, and any one file of it may be partial).
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Sequence
from typing import Any

from reconciler.errors import InputError, InputErrors, SourcePos
from reconciler.load.yamlsafe import YamlDoc, load_file

#: The named lists of a kubeconfig and the key of each entry's body.
_LISTS = {"clusters": "cluster", "contexts": "context", "users": "user"}
#: Fields holding base64 data (the client decodes them when it loads the file).
_BASE64 = {"cluster": ("certificate-authority-data",), "user": ("client-certificate-data", "client-key-data")}
#: Fields naming a file the client reads (relative to the kubeconfig's directory, as client-go's
#: ``ResolvePaths`` does): each must be a regular file when it exists, so no FIFO or device is
#: opened by the client (a FIFO ``tokenFile`` blocked the command forever).
_FILES = {"cluster": ("certificate-authority",), "user": ("client-certificate", "client-key", "tokenFile")}


def check_kubeconfig_file(path: str, *, context: str | None = None, whole: bool = True) -> None:
    """Check the kubeconfig at ``path`` (module docstring). ``context``: the ``--context`` asked
    for; ``whole``: this file is the whole configuration (not one of a ``$KUBECONFIG`` list), so
    the context used and the cluster and user it names must be in it.

    Raises:
        InputError: with ``file:line:column`` and the field (:class:`~reconciler.errors.InputErrors`
            when several).
    """
    docs = load_file(path)
    if len(docs) > 1:
        raise InputError("a kubeconfig is one YAML document", docs[1].pos())
    if not docs:
        if whole:
            raise InputError("kubeconfig is empty (no clusters, contexts or users)", SourcePos(path, 1, 1))
        return
    doc = docs[0]
    if not isinstance(doc.data, dict):
        raise InputError("a kubeconfig is a mapping (apiVersion, kind, clusters, contexts, users, current-context)",
                         doc.pos())
    errors = _shape_errors(doc)
    if not errors and whole:
        errors = _reference_errors(doc, context)
    if errors:
        raise errors[0] if len(errors) == 1 else InputErrors(errors)


def _shape_errors(doc: YamlDoc) -> list[InputError]:
    data: dict[str, Any] = doc.data
    errors: list[InputError] = []
    cur = data.get("current-context")
    if cur is not None and not isinstance(cur, str):
        errors.append(doc.error(("current-context",), "must be a string (the name of a context)"))
    for key, body_key in _LISTS.items():
        entries = data.get(key)
        if entries is None:
            continue
        if not isinstance(entries, list):
            errors.append(doc.error((key,), f"must be a list of {{name, {body_key}}} entries"))
            continue
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict):
                errors.append(doc.error((key, i), f"must be a mapping {{name, {body_key}}}"))
                continue
            if not isinstance(entry.get("name"), str) or not entry["name"]:
                errors.append(doc.error((key, i, "name"), "must be a non-empty string"))
            body = entry.get(body_key)
            if body is None:
                continue
            if not isinstance(body, dict):
                errors.append(doc.error((key, i, body_key), "must be a mapping"))
                continue
            for field in _BASE64.get(body_key, ()):
                value = body.get(field)
                if value is None:
                    continue
                if not isinstance(value, str) or not _is_base64(value):
                    errors.append(doc.error((key, i, body_key, field), "is not base64 data"))
            for field in _FILES.get(body_key, ()):
                problem = _file_problem(doc.file, body.get(field))
                if problem:
                    errors.append(doc.error((key, i, body_key, field), problem))
    return errors


def _file_problem(kubeconfig: str, value: Any) -> str | None:
    """Why the file a path field names cannot be given to the client: not a string, or an existing
    path that is not a regular file (a missing one is the client's to report when it is used)."""
    from reconciler.fileio.reading import not_regular

    if value is None or value == "":
        return None
    if not isinstance(value, str):
        return "must be a string (a file path)"
    path = os.path.join(os.path.dirname(kubeconfig), value)
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    problem = not_regular(st.st_mode)
    return f"names a file that {problem}" if problem else None


def _is_base64(value: str) -> bool:
    try:  # line breaks and spaces inside are allowed (a YAML block scalar; Go's decoder skips them)
        base64.b64decode("".join(value.split()).encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        return False
    return True


def _names(doc: YamlDoc, key: str) -> Sequence[str]:
    entries = doc.data.get(key) or []
    return [e["name"] for e in entries if isinstance(e, dict) and isinstance(e.get("name"), str)]


def _reference_errors(doc: YamlDoc, context: str | None) -> list[InputError]:
    contexts = _names(doc, "contexts")
    if context is not None:
        if context not in contexts:
            return [InputError(f"--context {context!r}: no such context (it has: {', '.join(contexts) or 'none'})",
                               doc.pos(("contexts",)))]
        name = context
    else:
        cur = doc.data.get("current-context")
        if not isinstance(cur, str) or not cur:
            return []  # the client says so (no current context): a connection error, not a shape one
        if cur not in contexts:
            return [doc.error(("current-context",), f"names context {cur!r}, which the file does not have "
                                                    f"(it has: {', '.join(contexts) or 'none'})")]
        name = cur
    entries: list[Any] = doc.data.get("contexts") or []
    i = next(k for k, e in enumerate(entries) if isinstance(e, dict) and e.get("name") == name)
    raw = entries[i].get("context")
    body: dict[str, Any] = raw if isinstance(raw, dict) else {}
    errors = []
    for ref, key in (("cluster", "clusters"), ("user", "users")):
        target = body.get(ref)
        if isinstance(target, str) and target and target not in _names(doc, key):
            errors.append(doc.error(("contexts", i, "context", ref),
                                    f"context {name!r} names {ref} {target!r}, which the file does not have"))
    return errors


__all__ = ["check_kubeconfig_file"]

"""Package version parsing and ordering (semver 2.0; NodeWright accepts a leading ``v`` and the
``X`` / ``X.Y`` shorthands of Go's ``x/mod/semver``; build metadata is ignored for ordering)."""

from __future__ import annotations

import re
from functools import lru_cache

import semver

_SHORT = re.compile(r"v?(0|[1-9]\d*)(?:\.(0|[1-9]\d*))?")
#: Longest version accepted (a version becomes part of annotation values and image tags).
MAX_VERSION = 128


@lru_cache(maxsize=4096)
def parse_version(text: str) -> semver.Version:
    """Parse a package version.

    Accepts ``1.2.3``, ``v1.2.3``, ``1.2.3-rc.1+build.5`` and the shorthands ``1`` / ``1.2``
    (completed with zeros, as Go's ``x/mod/semver`` does).

    No surrounding whitespace is accepted (``"1.2.3\n"`` is not a version: it would become part
    of node-state keys and image tags); at most :data:`MAX_VERSION` characters.

    Raises:
        ValueError: not a semantic version.
    """
    raw = text
    if len(raw) > MAX_VERSION or raw != raw.strip():
        raise ValueError(f"{text[:80]!r} is not a semantic version (e.g. 1.2.3 or v1.2.3-rc.1)")
    m = _SHORT.fullmatch(raw)
    if m:
        return semver.Version(int(m.group(1)), int(m.group(2) or 0), 0)
    core = raw[1:] if raw.startswith("v") else raw
    try:
        return semver.Version.parse(core)
    except ValueError:
        raise ValueError(f"{text!r} is not a semantic version (e.g. 1.2.3 or v1.2.3-rc.1)") from None


def is_exact(text: str) -> bool:
    """True when ``text`` is a full ``X.Y.Z[-pre][+build]`` version (no shorthand); used by locked mode."""
    raw = text[1:] if text.startswith("v") else text
    try:
        semver.Version.parse(raw)
    except ValueError:
        return False
    return True


@lru_cache(maxsize=65536)
def compare(a: str, b: str) -> int:
    """Semver order of two version strings: -1, 0 or 1 (build metadata ignored).

    Raises:
        ValueError: either is not a semantic version.
    """
    if a == b:
        parse_version(a)
        return 0
    va, vb = parse_version(a).replace(build=None), parse_version(b).replace(build=None)
    return int(va.compare(vb))

"""Validating patterns match the whole value (issue #14): Python's ``$`` also matches before a final
``\\n`` and ``re.match`` only anchors the start, so ``re.match(r"^sha256:[0-9a-f]{64}$", v)``
accepts ``"sha256:…\\n"``. This test scans every module of ``reconciler/`` and fails on

* a regular expression literal (given to ``re.compile/match/search/fullmatch/sub/split/…`` or as a
  pydantic ``pattern=``) holding an unescaped ``$`` outside a character class, unless compiled
  with ``re.MULTILINE`` (use ``fullmatch`` or ``\\Z``);
* ``re.match(...)``, or ``X.match(value)`` (without a start position) on a pattern compiled in the
  module: validation uses ``fullmatch``. A deliberate prefix test says so with ``# prefix match``
  on the line;
* ``re.search`` / ``X.search`` with a ``^``-anchored pattern (a disguised ``match``).

The table tests below pin the behaviour the scan protects: each validator refuses a trailing
newline, and pydantic's own ``pattern=`` (Rust regex, where ``$`` is the end of the text) does too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import BaseModel, Field, ValidationError

ROOT = Path(__file__).resolve().parents[3] / "reconciler"
_RE_FUNCS = {"compile", "match", "search", "fullmatch", "sub", "subn", "split", "findall", "finditer"}

#: Violations in modules other helpers own (issue #14 split): (path, what). Each entry must still
#: be found, so it is removed once fixed. Fix: ``fullmatch`` without ``^``/``$``.
KNOWN: set[tuple[str, str]] = set()


def _literal(node: ast.AST) -> str | None:
    """The text of a string literal (f-strings: their constant parts)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return None


def has_end_dollar(pattern: str) -> bool:
    """Whether ``pattern`` holds ``$`` as an anchor (not escaped, not inside ``[...]``)."""
    i, in_class = 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
        elif ch == "[":
            in_class = True
            if pattern[i + 1: i + 2] == "^":
                i += 1
            if pattern[i + 1: i + 2] == "]":
                i += 1
        elif ch == "$":
            return True
        i += 1
    return False


def _multiline(call: ast.Call) -> bool:
    return "MULTILINE" in ast.unparse(call) or "re.M" in ast.unparse(call)


def scan(path: Path) -> list[tuple[int, str]]:
    """``(line, what)`` of every violation in one module (see the module docstring)."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = ast.parse(source)
    compiled: dict[str, str] = {}  # NAME = re.compile("literal")
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            f = node.value.func
            if isinstance(f, ast.Attribute) and f.attr == "compile" and isinstance(f.value, ast.Name) \
                    and f.value.id == "re" and node.value.args:
                text = _literal(node.value.args[0])
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        compiled[t.id] = text if text is not None else ""
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        patterns: list[str] = []
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "re" \
                and f.attr in _RE_FUNCS and node.args:
            text = _literal(node.args[0])
            if text is not None and not _multiline(node):
                patterns.append(text)
            if f.attr == "match":
                out.append((node.lineno, "re.match"))
            if f.attr == "search" and text is not None and text.startswith("^"):
                out.append((node.lineno, "re.search ^"))
        for kw in node.keywords:
            if kw.arg == "pattern" and (text := _literal(kw.value)) is not None:
                patterns.append(text)
        out.extend((node.lineno, "$ in pattern") for p in patterns if has_end_dollar(p))
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in compiled:
            name, pat = f.value.id, compiled[f.value.id]
            if f.attr == "match" and len(node.args) == 1 and "# prefix match" not in lines[node.lineno - 1]:
                out.append((node.lineno, f"{name}.match"))
            if f.attr == "search" and pat.startswith("^"):
                out.append((node.lineno, f"{name}.search ^"))
    return sorted(set(out))


def test_no_validation_pattern_can_accept_a_trailing_newline() -> None:
    found: set[tuple[str, str]] = set()
    report: list[str] = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for line, what in scan(path):
            found.add((rel, what))
            if (rel, what) not in KNOWN:
                report.append(f"reconciler/{rel}:{line}: {what}")
    assert not report, "patterns that accept a trailing newline (use fullmatch, or \\Z):\n" + "\n".join(report)
    stale = KNOWN - found
    assert not stale, f"fixed, remove from KNOWN: {sorted(stale)}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('import re\nX = re.compile(r"^a+$")\n', [(2, "$ in pattern")]),
        ('import re\nX = re.compile(r"a+")\ndef f(v):\n    return X.match(v)\n', [(4, "X.match")]),
        ('import re\nX = re.compile(r"a+")\ndef f(v):\n    return X.match(v)  # prefix match\n', []),
        ('import re\nX = re.compile(r"a+")\ndef f(v, i):\n    return X.match(v, i)\n', []),
        ('import re\ndef f(v):\n    return re.match("a", v)\n', [(3, "re.match")]),
        ('import re\ndef f(v):\n    return re.search("^a", v)\n', [(3, "re.search ^")]),
        ('import re\ndef f(v):\n    return re.fullmatch(r"[$]\\$", v)\n', []),
        ('import re\ndef f(v):\n    return re.sub(r"x$", "", v, flags=re.MULTILINE)\n', []),
        ('from pydantic import Field\nF = Field(pattern=r"^a$")\n', [(2, "$ in pattern")]),
    ],
)
def test_scan_finds_each_kind_of_violation(tmp_path: Path, source: str, expected: list[tuple[int, str]]) -> None:
    mod = tmp_path / "m.py"
    mod.write_text(source)
    assert scan(mod) == expected


# ---------------------------------------------------------------------------------------------
# the validators themselves refuse a trailing newline (table)


def _validators() -> list[tuple[str, object, str]]:
    from reconciler.load.recipes import OBJECT_NAME
    from reconciler.model.recipe import (
        ENV_NAME,
        PACKAGE_NAME,
        SHA256,
        configmap_key_problem,
        parse_duration,
        parse_quantity,
    )
    from reconciler.model.selector import check_label_key, check_label_value
    from reconciler.model.versions import parse_version

    def pat(p: object) -> object:
        def check(v: str) -> None:
            if not p.fullmatch(v):  # type: ignore[attr-defined]
                raise ValueError(v)
        return check

    def cmk(v: str) -> None:
        if configmap_key_problem(v):
            raise ValueError(v)

    return [
        ("sha", pat(SHA256), "sha256:" + "a" * 64),
        ("package name", pat(PACKAGE_NAME), "tuned"),
        ("env name", pat(ENV_NAME), "HTTP_PROXY"),
        ("object name", pat(OBJECT_NAME), "gpu-tuning"),
        ("label key", check_label_key, "example.com/pool"),
        ("label value", check_label_value, "gpu"),
        ("configmap key", cmk, "intent.conf"),
        ("duration", parse_duration, "30s"),
        ("quantity", parse_quantity, "500m"),
        ("version", parse_version, "1.2.3"),
    ]


@pytest.mark.parametrize(("what", "check", "good"), _validators(), ids=[v[0] for v in _validators()])
@pytest.mark.parametrize("tail", ["\n", "\r\n", " ", "\x00"])
def test_validator_refuses_a_trailing_newline_or_space(what: str, check: object, good: str, tail: str) -> None:
    check(good)  # type: ignore[operator]
    with pytest.raises(ValueError):
        check(good + tail)  # type: ignore[operator]


def test_pydantic_pattern_dollar_is_the_end_of_the_text() -> None:
    """pydantic-core's default engine is Rust ``regex``, where ``$`` means the end of the text: a
    ``pattern=`` with ``$`` is safe there (the scan still asks for no ``$``, so a switch to the
    ``python-re`` engine cannot reopen the hole)."""

    class M(BaseModel):
        v: str = Field(pattern=r"^[a-z]+$")

    assert M(v="abc").v == "abc"
    with pytest.raises(ValidationError):
        M(v="abc\n")

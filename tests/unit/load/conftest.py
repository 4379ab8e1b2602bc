"""Fixtures for the load-layer tests: write small YAML files and collect load errors."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from reconciler.errors import InputError, InputErrors
from reconciler.load import load_inputs
from tests.unit.ops.conftest import cli  # ``cli(*argv)``, for the tests of validate

__all__ = ["cli"]

WriteFn = Callable[[str, str], str]
FailFn = Callable[..., list[InputError]]

#: A well-formed sha256 digest for test packages.
SHA = "sha256:" + "ab" * 32


@pytest.fixture
def write(tmp_path: Path) -> WriteFn:
    """``write(relpath, text)``: dedent ``text``, write it under ``tmp_path``, return the path."""

    def _write(rel: str, text: str) -> str:
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return str(p)

    return _write


@pytest.fixture
def fail() -> FailFn:
    """``fail(paths, policy_paths=(), locked=False)``: load, expect failure, return every error."""

    def _fail(paths: Sequence[str], policy_paths: Sequence[str] = (), locked: bool = False) -> list[InputError]:
        with pytest.raises(InputError) as info:
            load_inputs(paths, policy_paths, locked=locked)
        err = info.value
        return list(err.errors) if isinstance(err, InputErrors) else [err]

    return _fail


def _marked_line(path: str, marker: str = "# <-") -> int:
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if marker in line:
            return n
    raise AssertionError(f"no {marker!r} marker in {path}")


@pytest.fixture
def line_of() -> Callable[..., int]:
    """``line_of(path, marker="# <-")``: 1-based line of ``path`` carrying ``marker`` (where an
    error must point)."""
    return _marked_line


@pytest.fixture
def sha() -> str:
    """A well-formed sha256 digest."""
    return SHA

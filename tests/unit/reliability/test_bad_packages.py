"""Bad package directories (issue #14): every case under ``tests/data/bad/packages/`` (symlinks made
here, see its README.md) makes ``reconciler package validate`` exit 2 with an error located inside
the package (``config.json:line:column`` for JSON problems), no traceback, nothing of a linked
file printed, and the directory unchanged."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

import pytest

from reconciler.cli.main import main

CASES_DIR = Path(__file__).resolve().parents[2] / "data" / "bad" / "packages"
CASES = sorted(p for p in CASES_DIR.iterdir() if (p / "CASE").is_file())
_LOC = re.compile(r"^(?:warning: )?(?P<file>/[^:]+?)(?::(?P<line>\d+):(?P<col>\d+))?: ")
GOOD_CONFIG = CASES_DIR / "step-symlink-passwd" / "config.json"  # its config.json is the valid one


def _case(p: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in (p / "CASE").read_text().splitlines():
        key, _, value = line.partition(": ")
        out.setdefault(key, []).append(value)
    return out


def _tree(root: Path) -> dict[str, str]:
    """Every entry below ``root`` (links not followed): path → digest, link target or "dir"."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def materialise(case: Path, tmp: Path) -> Path:
    """Copy ``case`` into ``tmp``, make an ``outside`` package next to it, create the CASE links."""
    outside = tmp / "outside"
    (outside / "skyhook_dir").mkdir(parents=True)
    shutil.copy(GOOD_CONFIG, outside / "config.json")
    for f in ("apply.sh", "apply_check.sh"):
        (outside / "skyhook_dir" / f).write_text("#!/bin/sh\necho owned\n")
        (outside / f).write_text("#!/bin/sh\necho owned\n")
    root = tmp / case.name
    shutil.copytree(case, root, symlinks=False)
    for link in _case(case).get("link", []):
        path, _, target = link.partition(" -> ")
        p = root / path
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        elif p.exists() or p.is_symlink():
            p.unlink()
        if target != "(removed)":
            os.symlink(target, p)
    return root


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_package_is_rejected_with_location_and_no_writes(
        case: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = materialise(case, tmp_path)
    before = _tree(tmp_path)
    rc = main(["package", "validate", str(root)])
    out = capsys.readouterr()
    text = out.out + out.err
    assert rc == 2, f"{case.name}: exit {rc}\n{text}"
    assert "Traceback" not in text and "root:x:0:0" not in text and "echo owned" not in text
    errors = [x for x in out.err.splitlines() if x.strip() and not x.startswith("warning: ")]
    assert errors, text
    expect = _case(case)["expect"][0].lower()
    assert any(expect in e.lower() for e in errors), f"{case.name}: no error mentions {expect!r}: {errors}"
    json_case = case.name.startswith(("json-", "returncode-", "expected-", "step-env", "step-name", "version-"))
    for e in errors:
        m = _LOC.match(e)
        assert m, f"{case.name}: error without a location: {e!r}"
        assert Path(m["file"]).is_relative_to(root), e
        if json_case:
            assert m["line"] and m["file"].endswith("config.json"), f"{case.name}: no line:column: {e!r}"
    assert _tree(tmp_path) == before


def test_corpus_covers_every_class() -> None:
    names = {c.name for c in CASES}
    assert len(CASES) >= 25
    assert sum("symlink" in n for n in names) >= 7
    assert sum(n.startswith("json-") for n in names) >= 9


def test_config_json_nested_100000_deep_is_an_input_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = materialise(CASES_DIR / "json-deep-nesting", tmp_path)
    (root / "config.json").write_text('{"schema_version": "v1", "modes": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert main(["package", "validate", str(root)]) == 2
    err = capsys.readouterr().err
    assert f"{root}/config.json:1:" in err and "deeper than 64" in err and "Traceback" not in err


def test_symlinks_inside_the_package_are_fine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The rule is "no symlink may leave", not "no symlinks": a step linking to another step file
    of the same package validates."""
    root = materialise(CASES_DIR / "step-symlink-passwd", tmp_path)
    (root / "skyhook_dir" / "lib").mkdir()
    (root / "skyhook_dir" / "lib" / "real.sh").write_text("#!/bin/sh\nexit 0\n")
    (root / "skyhook_dir" / "apply.sh").unlink()
    os.symlink("lib/real.sh", root / "skyhook_dir" / "apply.sh")
    assert main(["package", "validate", str(root)]) == 0, capsys.readouterr().err

"""Writes the bad package directories of this corpus (issue #14); run from the repository root:
``python tests/data/bad/packages/make_cases.py``. See README.md here for the ``CASE`` file.

Each case is the valid package :data:`CONFIG` (``skyhook_dir/apply.sh`` and ``apply_check.sh``)
with one change. Symlink cases only *describe* their links (``link:`` lines in ``CASE``): the test
creates them in a copy, so no symlink is committed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def step(name: str, path: str | None = None, **more: Any) -> dict[str, Any]:
    return {"name": name, "path": path or name, "arguments": [], "returncodes": [0], "on_host": True,
            "idempotence": True, "upgrade_step": False, **more}


def config(**top: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"schema_version": "v1", "package_name": "corpus", "package_version": "1.0.0",
                           "expected_config_files": [],
                           "modes": {"apply": [step("apply.sh")], "apply-check": [step("apply_check.sh")]}}
    doc.update(top)
    return doc


def text(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2) + "\n"


def replace(old: str, new: str, doc: dict[str, Any] | None = None) -> str:
    out = text(doc or config())
    assert old in out, old
    return out.replace(old, new, 1)


GOOD = text(config())
DEEP = GOOD.replace('"expected_config_files": []', '"expected_config_files": ' + "[" * 1000 + "]" * 1000)

# name -> (checks, expect, config.json text or bytes, link lines, extra files/dirs)
CASES: dict[str, tuple[str, str, str | bytes, list[str], list[str]]] = {
    "step-symlink-passwd": ("a step file that is a symlink to /etc/passwd", "outside skyhook_dir", GOOD,
                            ["skyhook_dir/apply.sh -> /etc/passwd"], []),
    "step-symlink-dotdot": ("a step file that is a symlink out of the package through ..", "outside skyhook_dir",
                            GOOD, ["skyhook_dir/apply.sh -> ../../outside/apply.sh"], []),
    "step-symlink-to-config": ("a step file linking to the package's config.json (outside skyhook_dir)",
                               "outside skyhook_dir", GOOD, ["skyhook_dir/apply.sh -> ../config.json"], []),
    "step-dir-symlink-root": ("a directory inside skyhook_dir that is a symlink to /", "outside skyhook_dir",
                              replace('"path": "apply.sh"', '"path": "root/etc/passwd"'),
                              ["skyhook_dir/root -> /"], []),
    "step-symlink-loop": ("a step file that is a symlink to itself", "not a regular file", GOOD,
                          ["skyhook_dir/apply.sh -> apply.sh"], []),
    "skyhook-dir-symlink-etc": ("skyhook_dir itself is a symlink to /etc", "outside the package",
                                replace('"path": "apply.sh"', '"path": "passwd"'), ["skyhook_dir -> /etc"], []),
    "config-symlink-outside": ("config.json is a symlink to a file outside the package", "outside the package",
                               GOOD, ["config.json -> ../outside/config.json"], []),
    "image-dir-symlink-outside": ("an unpacked image whose skyhook-package/ links outside it", "outside the package",
                                  GOOD, ["config.json -> (removed)", "skyhook_dir -> (removed)",
                                         "skyhook-package -> ../outside"], []),
    "json-deep-nesting": ("config.json nested 1000 levels deep (RecursionError before)", "deeper than", DEEP, [], []),
    "json-nan": ("a return code NaN (Python's json accepts it)", "nan is not a json number",
                 replace('"returncodes": [\n          0', '"returncodes": [\n          NaN'), [], []),
    "json-infinity": ("a return code -Infinity", "infinity is not a json number",
                      replace('"returncodes": [\n          0', '"returncodes": [\n          -Infinity'), [], []),
    "json-huge-integer": ("a return code of 20,000 digits (int/str conversion limit)", "out of range",
                          replace('"returncodes": [\n          0', '"returncodes": [\n          ' + "9" * 20000),
                          [], []),
    "json-int64-overflow": ("a return code of 2^63", "out of range",
                            replace('"returncodes": [\n          0',
                                    '"returncodes": [\n          9223372036854775808'), [], []),
    "json-float-overflow": ("a number 1e400 (infinity)", "too large",
                            replace('"returncodes": [\n          0', '"returncodes": [\n          1e400'), [], []),
    "json-duplicate-key": ("package_name given twice", "duplicate key",
                           replace('"package_name": "corpus",', '"package_name": "corpus",\n  "package_name": "x",'),
                           [], []),
    "json-lone-surrogate": ("a step name holding a lone UTF-16 surrogate", "surrogate",
                            replace('"name": "apply.sh"', '"name": "apply\\ud800.sh"'), [], []),
    "json-syntax-error": ("a trailing comma", "syntax error", GOOD.replace('"v1",', '"v1",,', 1), [], []),
    "json-not-utf8": ("config.json in Latin-1", "utf-8",
                      GOOD.replace('"corpus"', '"corpus\u00e9"').encode("latin-1"), [], []),
    "json-top-level-array": ("config.json holding an array", "json object", "[1, 2]\n", [], []),
    "returncode-256": ("a return code 256 (exit codes are 8 bits)", "0-255",
                       replace('"returncodes": [\n          0', '"returncodes": [\n          256'), [], []),
    "returncode-negative": ("a return code -1", "0-255",
                            replace('"returncodes": [\n          0', '"returncodes": [\n          -1'), [], []),
    "step-is-directory": ("a step path naming a directory", "not a regular file",
                          replace('"path": "apply.sh"', '"path": "tools"'), [], ["skyhook_dir/tools/"]),
    "step-path-too-deep": ("a step path 20 directories deep", "nested too deep",
                           replace('"path": "apply.sh"', '"path": "' + "d/" * 20 + 'apply.sh"'), [], []),
    "step-path-nul": ("a step path holding a NUL character", "stay inside",
                      replace('"path": "apply.sh"', '"path": "apply.sh\\u0000x"'), [], []),
    "expected-config-dotdot": ("an expected_config_files entry '..data'", "configmap key",
                               replace('"expected_config_files": []', '"expected_config_files": ["..data"]'), [], []),
    "expected-config-traversal": ("an expected_config_files entry '../../etc/cron.d/x'", "configmap key",
                                  replace('"expected_config_files": []',
                                          '"expected_config_files": ["../../etc/cron.d/x"]'), [], []),
    "step-env-bad-name": ("a step env variable named 'BAD NAME'", "environment variable name",
                          replace('"upgrade_step": false\n', '"upgrade_step": false,\n"env": {"BAD NAME": "x"}\n'),
                          [], []),
    "step-name-newline": ("a step name with a trailing newline", "step name",
                          replace('"name": "apply.sh"', '"name": "apply.sh\\n"'), [], []),
    "version-newline": ("a package_version with a trailing newline", "package_version",
                        replace('"package_version": "1.0.0"', '"package_version": "1.0.0\\n"'), [], []),
}


def main() -> None:
    for old in HERE.iterdir():
        if old.is_dir():
            shutil.rmtree(old)
    for name, (checks, expect, body, links, extra) in CASES.items():
        root = HERE / name
        (root / "skyhook_dir").mkdir(parents=True)
        for f in ("apply.sh", "apply_check.sh"):
            (root / "skyhook_dir" / f).write_text("#!/bin/sh\nexit 0\n")
        for e in extra:
            (root / e).mkdir(parents=True, exist_ok=True)
            (root / e / ".keep").write_text("")
        data = body if isinstance(body, bytes) else body.encode("utf-8")
        (root / "config.json").write_bytes(data)
        lines = [f"checks: {checks}", f"expect: {expect}", *(f"link: {x}" for x in links)]
        (root / "CASE").write_text("\n".join(lines) + "\n")
    print(f"wrote {len(CASES)} package cases")


if __name__ == "__main__":
    main()

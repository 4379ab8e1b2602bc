"""The layer contracts of pyproject.toml ``[tool.importlinter]`` (docs/architecture-layers.md): the
package keeps them, the configuration covers every top-level module, and the contracts do catch
each kind of break (a copy of the package with injected imports, lazy ones included, fails)."""

from __future__ import annotations

import os
import pkgutil
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import reconciler

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(reconciler.__file__).resolve().parent


def _lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the ``reconciler`` package found in ``cwd`` (it puts ``cwd`` first on
    ``sys.path``) with ``cwd``'s pyproject.toml; no cache written."""
    code = "from importlinter.cli import lint_imports_command; lint_imports_command()"
    return subprocess.run([sys.executable, "-c", code, "--no-cache", "--no-logo", "pyproject.toml"],
                          cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(cwd), "COLUMNS": "200"})


def _contracts() -> dict[str, dict[str, Any]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {c["id"]: c for c in config["contracts"]}


def test_the_package_keeps_its_layer_contracts() -> None:
    assert PACKAGE == ROOT / "reconciler"  # the checked package is this checkout's
    r = _lint(ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout


def test_every_top_level_module_is_placed() -> None:
    top = {m.name for m in pkgutil.iter_modules([str(PACKAGE)])}
    contracts = _contracts()
    layered = {name.strip() for layer in contracts["layers"]["layers"] for name in layer.split("|")}
    assert layered == top
    outside = {m.removeprefix("reconciler.") for m in contracts["outside-world"]["source_modules"]}
    assert outside == top - {"adapters"}
    # no escape hatch: a break is fixed by moving code, not by an exception
    ignored = {i for c in contracts.values() for i in c.get("ignore_imports", [])}
    assert not ignored


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def test_contracts_catch_each_kind_of_break(tmp_path: Path) -> None:
    shutil.copytree(PACKAGE, tmp_path / "reconciler", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    pkg = tmp_path / "reconciler"
    _append(pkg / "model" / "recipe.py", "\n\ndef _up() -> None:\n    import reconciler.plan.planner  # noqa\n")
    _append(pkg / "report" / "render.py", "\nimport reconciler.execute.timeline  # noqa\n")
    _append(pkg / "ops" / "patches.py", "\n\ndef _kube() -> None:\n    from reconciler.adapters import kube  # noqa\n")
    _append(pkg / "execute" / "taints.py", "\nimport socket  # noqa\n")
    _append(pkg / "cli" / "plan.py", "\nimport kubernetes  # noqa\n")
    _append(pkg / "plan" / "batching.py", "\nimport time  # noqa\n")
    _append(pkg / "execute" / "sequencing.py", "\nimport reconciler.adapters.sim.fleet  # noqa\n")
    r = _lint(tmp_path)
    out = " ".join((r.stdout + r.stderr).split())
    assert r.returncode != 0, out
    for broken in (
        "reconciler.model is not allowed to import reconciler.plan",
        "reconciler.report is not allowed to import reconciler.execute",
        "reconciler.ops is not allowed to import reconciler.adapters",
        "reconciler.execute is not allowed to import socket",
        "reconciler.cli is not allowed to import kubernetes",
        "reconciler.plan is not allowed to import time",
        "reconciler.execute.sequencing -> reconciler.adapters.sim.fleet",
    ):
        assert broken in out, out

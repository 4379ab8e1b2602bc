"""Build and run the small Go programs under ``tests/gitops/`` (real kstatus, real Flux CEL).

Each program has its own ``go.mod``/``go.sum``; it is built with the Go toolchain (modules from
the Go module proxy) into ``$RECONCILER_GITOPS_CACHE`` or ``~/.cache/reconciler-gitops`` (outside
the repository), named by a digest of its sources, so later runs reuse it. Without ``go`` on PATH
the tests that need it are skipped with that reason — or fail when CI=true or
RECONCILER_REQUIRE_E2E=1 (the tools are part of what CI must check).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent


def _cache() -> Path:
    return Path(os.environ.get("RECONCILER_GITOPS_CACHE") or Path.home() / ".cache" / "reconciler-gitops")


def _required() -> bool:
    return os.environ.get("CI") == "true" or os.environ.get("RECONCILER_REQUIRE_E2E") == "1"


def go_tool(name: str) -> Path:
    """Path of the built program ``tests/gitops/<name>`` (built on first use)."""
    src = HERE / name
    digest = hashlib.sha256()
    for f in sorted(src.iterdir()):
        if f.suffix in (".go", ".mod", ".sum"):
            digest.update(f.name.encode() + b"\0" + f.read_bytes())
    out = _cache() / f"{name}-{digest.hexdigest()[:16]}"
    if out.exists():
        return out
    go = shutil.which("go")
    if go is None:
        msg = f"tests/gitops/{name}: no Go toolchain on PATH (needed to build the real {name} checker)"
        if _required():
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    cp = subprocess.run(
        [go, "build", "-o", str(tmp), "."],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, "GOFLAGS": "-mod=readonly"},
    )
    if cp.returncode != 0:
        pytest.fail(f"building tests/gitops/{name} failed:\n{cp.stderr[-3000:]}", pytrace=False)
    tmp.replace(out)
    return out


def kstatus(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """kstatus ``status.Compute`` of each object: ``[{name, status, message, conditions}]``."""
    cp = subprocess.run(
        [str(go_tool("kstatus"))], input=json.dumps(objects), capture_output=True, text=True, timeout=60, check=False
    )
    assert cp.returncode == 0, cp.stderr
    out: list[dict[str, Any]] = json.loads(cp.stdout)
    return out


def flux_cel(exprs: dict[str, str], objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Flux's CEL StatusEvaluator on each object: ``[{name, status, error}]``."""
    cp = subprocess.run(
        [str(go_tool("fluxcel"))],
        input=json.dumps({"exprs": exprs, "objects": objects}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert cp.returncode == 0, cp.stderr
    out: list[dict[str, Any]] = json.loads(cp.stdout)
    return out

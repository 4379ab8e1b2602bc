"""Shared helpers of the deployability tests (image, chart, packaging).

The image and chart tests need tools built outside the repository (scripts/build-image,
tests/deploy/build-helm.sh, both called by scripts/test). When a tool or its output is missing
they are skipped with the reason, except in CI (``CI=true``) or with
``RECONCILER_REQUIRE_DEPLOY=1``, where they fail: a missing toolchain must not turn into a
silently green run (the same rule as the e2e tests, tests/e2e/conftest.py).
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parents[2]
VERSION: str = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
IMAGE_CACHE = Path(os.environ.get("NODE_RECONCILER_IMAGE_CACHE", Path.home() / ".cache" / "node-reconciler-image"))
HELM_VERSION = "v3.22.0"  # tests/deploy/build-helm.sh


#: ObjectMeta fields a manifest may set (k8s.io/apimachinery ObjectMeta, less the server-set ones)
OBJECT_META_FIELDS = ("name", "generateName", "namespace", "labels", "annotations", "finalizers", "ownerReferences")


def required() -> bool:
    """Whether a missing deploy tool is a failure (CI) rather than a skip."""
    return os.environ.get("CI") == "true" or os.environ.get("RECONCILER_REQUIRE_DEPLOY") == "1"


def unavailable(reason: str) -> NoReturn:
    """Fail (CI) or skip (elsewhere) with ``reason``."""
    if required():
        pytest.fail(f"{reason} (required: CI=true or RECONCILER_REQUIRE_DEPLOY=1)", pytrace=False)
    pytest.skip(reason)


def helm_binary() -> Path:
    """The Helm CLI built by tests/deploy/build-helm.sh (``$HELM`` overrides)."""
    override = os.environ.get("HELM")
    cache = Path(os.environ.get("HELM_CACHE", Path.home() / ".cache" / "helm" / HELM_VERSION))
    p = Path(override) if override else cache / "helm"
    if not (p.is_file() and os.access(p, os.X_OK)):
        unavailable(f"helm not found at {p}: build it with tests/deploy/build-helm.sh (needs Go)")
    return p

"""Fixtures for the operations tests: simulated fleets written to files, and the CLI entry point."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from reconciler.cli.main import main
from reconciler.testing import fleetgen

Obj = dict[str, Any]


def write_fleet(path: Path, objs: list[Obj]) -> Path:
    """Write ``objs`` as a kubectl ``v1 List`` YAML file (a ``--cluster sim:`` fleet)."""
    fleetgen.write_fleet(path, objs)
    return path


def load_fleet(path: Path) -> dict[str, Obj]:
    """Nodes of a saved fleet file by name."""
    doc = YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))
    return {o["metadata"]["name"]: o for o in doc["items"] if o["kind"] == "Node"}


def config_maps(path: Path) -> dict[str, Obj]:
    """ConfigMaps of a saved fleet file by ``namespace/name``."""
    doc = YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))
    return {f"{o['metadata'].get('namespace')}/{o['metadata']['name']}": o for o in doc["items"]
            if o["kind"] == "ConfigMap"}


RunCli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> RunCli:
    """``cli(*argv)`` → ``(exit code, stdout, stderr)`` of ``reconciler argv...``."""

    def run(*argv: str) -> tuple[int, str, str]:
        rc = main(list(argv))
        out = capsys.readouterr()
        return rc, out.out, out.err

    return run


def as_json(text: str) -> Any:
    """Parse a JSON document printed on stdout."""
    return json.loads(text)

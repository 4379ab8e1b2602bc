"""``reconciler simulate``: a what-if run that changes nothing."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from reconciler.cli.main import main

FLEET = Path("examples/fleets/gpu-24.yaml")


def test_what_if_reports_injected_failures_and_changes_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    before = hashlib.sha256(FLEET.read_bytes()).hexdigest()
    rc = main(["simulate", "recipes/gpu-training-tuning.yaml", "--cluster", f"sim:{FLEET}",
               "--sim-config", "examples/fleets/what-if.yaml", "-o", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1 and doc["simulated"] is True
    failed = {n["name"]: n for n in doc["nodes"] if n["state"] == "failed"}
    assert set(failed) == {"gpu-a-004", "gpu-b-007"}
    assert failed["gpu-a-004"]["exitCode"] == 2 and "profile" in failed["gpu-a-004"]["logTail"]
    assert failed["gpu-b-007"]["reason"] == "RebootTimeout"
    assert all(c["maxDisrupted"] <= c["ceiling"] for c in doc["compartments"])
    assert hashlib.sha256(FLEET.read_bytes()).hexdigest() == before

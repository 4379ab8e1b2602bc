"""`plan` agrees with `apply` about a paused recipe: it says apply skips it, and its changes are not
pending for `--detailed-exitcode` (a pipeline gating on plan saw changes apply never makes)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from reconciler.cli.main import main

ROOT = Path(__file__).resolve().parents[3]


def test_a_paused_recipe_is_planned_with_a_warning_and_nothing_pending(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    fleet = tmp_path / "fleet.yaml"
    shutil.copy(ROOT / "examples" / "fleets" / "gpu-24.yaml", fleet)
    recipe = str(ROOT / "recipes" / "gpu-node-stack.yaml")
    args = ["plan", recipe, "--cluster", f"sim:{fleet}", "--detailed-exitcode", "-o", "json"]
    assert main(args) == 3  # changes pending
    capsys.readouterr()
    assert main(["pause", "gpu-node-stack", "--cluster", f"sim:{fleet}", "-y", "--new", "--reason", "freeze"]) == 0
    capsys.readouterr()
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    plans = doc.get("plans", [doc])
    assert any("paused" in w and "apply skips it" in w for w in plans[0]["warnings"])

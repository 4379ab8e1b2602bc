"""The captured fixtures are what this control plane serves: capture again (tests/controlplane/
capture.py) and run the table tests' expectations (tests/unit/adapters/test_captured_objects.py)
on the fresh objects and error answers (issue 13)."""

from __future__ import annotations

from pathlib import Path

from tests.controlplane.capture import capture
from tests.controlplane.cluster import ControlPlane
from tests.unit.adapters.test_captured_objects import EXPECT, check_captured


def test_a_fresh_capture_meets_the_fixtures_expectations(controlplane: ControlPlane, tmp_path: Path) -> None:
    written = capture(controlplane, tmp_path)
    assert sorted(p.name for p in written) == sorted(EXPECT)
    assert check_captured(tmp_path) == sorted(EXPECT)

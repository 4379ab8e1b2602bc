"""Print (and optionally write) the figures of the fault sweeps at the end of the session."""

from __future__ import annotations

import json
import os
from typing import Any


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """One line with the sweep figures; ``$RELIABILITY_FIGURES`` names a JSON file to write them to."""
    import sys

    figures: dict[str, int] = {}
    for mod, name in (("tests.unit.reliability.sweep", "FIGURES"),
                      ("tests.unit.reliability.test_bad_inputs", "CORPUS_FIGURES")):
        loaded = sys.modules.get(mod)
        figures.update(getattr(loaded, name, {}) if loaded else {})
    if not figures.get("scenarios") and not figures.get("inputs_tried"):
        return
    terminalreporter.write_line("reliability figures: " + ", ".join(f"{k}={v}" for k, v in figures.items()))
    path = os.environ.get("RELIABILITY_FIGURES")
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(figures, fh, indent=2, sort_keys=True)

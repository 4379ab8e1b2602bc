"""Event streams carry the UTC instant of each event (issue 38): ``-o jsonl`` lines have ``at``
(RFC 3339, milliseconds) beside ``t`` (seconds since the run started), and ``--events-file`` lines
start with it, so events of several runs or tools line up on one clock."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_jsonl_and_the_events_file_carry_the_utc_instant(tmp_path: Path) -> None:
    fleet, events = tmp_path / "fleet.yaml", tmp_path / "events.log"
    shutil.copy(ROOT / "examples/fleets/gpu-24.yaml", fleet)
    r = subprocess.run([sys.executable, "-m", "reconciler", "apply", "recipes/cve-ksmbd-blacklist.yaml",
                        "--cluster", f"sim:{fleet}", "-o", "jsonl", "--events-file", str(events)],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    evs = [d for d in lines if d["kind"] == "event"]
    assert len(evs) > 10

    def instant(text: str) -> float:
        assert text.endswith("Z") and len(text) == 24, text
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()

    origins = {round(instant(d["at"]) - d["t"], 2) for d in evs}
    assert len(origins) == 1, origins  # one run start: at - t is the same for every event
    assert max(d["t"] for d in evs) > 60  # the simulated run lasts: the instants move with t
    written = events.read_text().splitlines()
    assert len(written) == len(evs)
    for line, d in zip(written, evs, strict=True):
        assert line.split()[:2] == [d["at"], f"{d['t']:.1f}s"]

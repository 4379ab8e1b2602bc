"""docs/benchmarks.md figures are written by bench/record.py (issue 39): each recorded run names
its date, machine, commit and command, newest first under "## Recorded runs"."""

from __future__ import annotations

import datetime as dt
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]


def _record() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_record", ROOT / "bench" / "record.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_section_names_date_machine_commit_and_command() -> None:
    rec = _record()
    when = dt.datetime(2026, 12, 7, 18, 30, tzinfo=dt.UTC)
    text = rec.section("smoke", ["python", "bench/run.py", "--quick"], "a  b\n1  2\n", when=when, load=0.5)
    assert text.startswith("### 2026-12-07 18:30 UTC — smoke\n")
    assert re.search(r"^- machine: \S+ \d+ cores.*Python 3\.\d+.*; load average before the run: 0\.50$", text, re.M)
    assert re.search(r"^- commit: `[0-9a-f]{7,}(-dirty)?`$", text, re.M)
    assert "- command: `python bench/run.py --quick`" in text
    assert "```\na  b\n1  2\n```\n" in text


def test_runs_are_inserted_newest_first_under_the_heading() -> None:
    rec = _record()
    page = "# Benchmarks\n\nintro\n"
    page = rec.insert(page, "### first\n\nA\n")
    page = rec.insert(page, "### second\n\nB\n")
    assert page.index("## Recorded runs") < page.index("### second") < page.index("### first")
    assert page.startswith("# Benchmarks\n\nintro\n")
    assert page.count("## Recorded runs") == 1


def test_a_failing_command_records_nothing(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "record.py"), "--", sys.executable, "-c",
                          "import sys; print('x'); sys.exit(3)"], capture_output=True, text=True, check=False)
    assert out.returncode == 3
    assert "nothing recorded" in out.stderr


def test_every_recorded_run_on_the_page_has_its_provenance() -> None:
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    _, _, recorded = page.partition("## Recorded runs\n")
    for block in re.split(r"^### ", recorded, flags=re.M)[1:]:
        title = block.splitlines()[0]
        assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC — ", title), title
        for field in ("- machine: ", "- commit: `", "- command: `"):
            assert field in block, (title, field)

"""Every NodeWright ``spec`` field the loader reads has a row in the field table of
docs/explanation/nodewright.md, and the table names no field the loader does not know: an operator
moving from NodeWright looks a field up there (a fresh-reader trial found no field-level mapping)."""

from __future__ import annotations

import re
from pathlib import Path

from reconciler.load.compat import SPEC_FIELDS

PAGE = Path(__file__).resolve().parents[3] / "docs" / "explanation" / "nodewright.md"


def _table_fields() -> set[str]:
    text = PAGE.read_text()
    section = text.split("## Field by field", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([A-Za-z]+)`", row.split("|")[1])}


def test_the_field_table_covers_exactly_the_fields_the_loader_reads() -> None:
    assert _table_fields() == set(SPEC_FIELDS)

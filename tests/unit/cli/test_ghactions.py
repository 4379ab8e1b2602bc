"""GitHub Actions ``::error`` workflow commands for input errors: escaping as the runner defines
it, the revision label removed, and ``validate`` under ``GITHUB_ACTIONS=true``."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.cli.ghactions import commands, enabled, problems
from reconciler.errors import InputError, InputErrors, SourcePos
from tests.unit.ops.conftest import RunCli


def test_commands_escape_data_and_properties() -> None:
    err = InputErrors([
        InputError("bad\nvalue 100%", SourcePos("0123456789ab:recipes/a,b:c.yaml", 12, 7), "spec.x"),
        InputError("no position"),
    ])
    lines = commands(problems(err))
    assert lines == [
        "::error file=recipes/a%2Cb%3Ac.yaml,line=12,col=7,title=reconciler::spec.x: bad value 100%25",
        "::error title=reconciler::no position",
    ]
    assert enabled({"GITHUB_ACTIONS": "true"}) and not enabled({"GITHUB_ACTIONS": "1"}) and not enabled({})


def test_validate_annotates_under_actions_only(cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "r.yaml"
    f.write_text("apiVersion: reconciler.nodewright.dev/v1alpha1\nkind: NodeRecipe\nmetadata:\n  name: x\n"
                 "spec:\n  bogus: 1\n")
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    rc, _, err = cli("validate", str(f))
    assert rc == 2 and "::error" not in err
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    rc, _, err = cli("validate", str(f))
    assert rc == 2 and f"::error file={f},line=6," in err

"""The GitHub workflows call reconciler with options that exist (parsed by the real CLI parser)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from reconciler.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[3]
FILES = [ROOT / ".github/workflows/plan-comment.yml", ROOT / "examples/github/apply.yml"]


def commands(path: Path) -> list[list[str]]:
    doc = YAML(typ="safe").load(path.read_text())
    out = []
    for job in doc["jobs"].values():
        for step in job.get("steps", []):
            script = re.sub(r"\\\n\s*", " ", step.get("run", ""))
            for line in script.splitlines():
                line = line.split("|")[0].strip()
                if line.startswith("reconciler "):
                    line = line.replace("$CLUSTER_ARGS", "--cluster sim:fleet.yaml")
                    out.append(shlex.split(re.sub(r"\$\{?(\w+)\}?", "1", line)))
    return out


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_workflow_commands_parse(path: Path) -> None:
    cmds = commands(path)
    assert cmds, f"no reconciler command in {path}"
    for argv in cmds:
        args = build_parser().parse_args(argv[1:])
        assert args.verb in ("plan", "apply", "version")


def test_pr_plan_runs_on_recipe_and_policy_changes() -> None:
    doc = YAML(typ="safe").load((ROOT / ".github/workflows/pr-plan.yml").read_text())
    on = doc.get("on") or doc.get(True)
    assert sorted(on["pull_request"]["paths"]) == ["policies/**", "recipes/**"]
    assert doc["jobs"]["plan"]["uses"] == "./.github/workflows/plan-comment.yml"
    test = YAML(typ="safe").load((ROOT / ".github/workflows/test.yml").read_text())
    assert any(s.get("run", "").strip().endswith("./scripts/test") for s in test["jobs"]["test"]["steps"])

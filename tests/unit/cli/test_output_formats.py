"""``-o`` named the same on every verb (issue 16): table/wide/json/yaml/name (+ markdown for plan),
``text`` accepted as ``table``; ``-o name`` and ``-o yaml`` on plan and apply; ``--no-headers``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from reconciler.cli.main import build_parser
from reconciler.model.nodestate import PackageState, dump_state, state_key
from reconciler.testing.fleetgen import make_node, write_fleet
from tests.unit.cli.test_apply_cli import RECIPE
from tests.unit.ops.conftest import RunCli

CANONICAL = {"table", "wide", "json", "yaml", "name", "markdown", "jsonl", "jsonpath=...", "custom-columns=..."}


def _verbs_with_output() -> list[tuple[str, argparse.ArgumentParser]]:
    out: list[tuple[str, argparse.ArgumentParser]] = []

    def walk(prefix: str, p: argparse.ArgumentParser) -> None:
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, child in a.choices.items():
                    walk(f"{prefix} {name}".strip(), child)
            elif "-o" in a.option_strings:
                out.append((prefix, p))

    walk("", build_parser())
    return out


def test_every_output_option_uses_the_same_names() -> None:
    verbs = _verbs_with_output()
    assert len(verbs) >= 15  # plan, apply, status, the switches, node/package sub-commands, ...
    for verb, p in verbs:
        action = next(a for a in p._actions if "-o" in a.option_strings)
        names = set(str(action.metavar).split("|"))
        assert names <= CANONICAL, (verb, names)
        assert "json" in names, verb
        if "table" in names:  # scripts written for `-o text` keep working
            assert action.type("text") == "table" and action.default == "table", verb  # type: ignore[operator]


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    state = dump_state({"base|1.0.0": PackageState(name="base", version="1.0.0", image="ghcr.io/example/base",
                                                   stage="config", state="complete")})  # type: ignore[arg-type]
    fleet = Path(write_fleet(tmp_path / "fleet.yaml", [
        make_node("n1", {"pool": "gpu"}, annotations={state_key("kernel-fix"): state}),
        make_node("n2", {"pool": "gpu"})]))
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE)
    return fleet, recipe


def test_plan_yaml_is_the_json_document_and_name_is_noderecipe(files: tuple[Path, Path], cli: RunCli) -> None:
    fleet, recipe = files
    rc, as_json, _ = cli("plan", str(recipe), "--cluster", f"sim:{fleet}", "-o", "json")
    rc2, as_yaml, _ = cli("plan", str(recipe), "--cluster", f"sim:{fleet}", "-o", "yaml")
    assert rc == rc2 == 0
    assert YAML(typ="safe").load(as_yaml) == json.loads(as_json)
    assert cli("plan", str(recipe), "--cluster", f"sim:{fleet}", "-o", "name")[1] == "noderecipe/kernel-fix\n"
    rc, text, _ = cli("plan", str(recipe), "--cluster", f"sim:{fleet}", "-o", "text")
    assert rc == 0 and text == cli("plan", str(recipe), "--cluster", f"sim:{fleet}", "-o", "table")[1]


def test_apply_name_and_yaml(files: tuple[Path, Path], tmp_path: Path, cli: RunCli) -> None:
    fleet, recipe = files
    rc, out, _ = cli("apply", str(recipe), "--cluster", f"sim:{fleet}", "-o", "name")
    assert rc == 0 and out == "noderecipe/kernel-fix\n"  # the event log went to stderr
    rc, out, _ = cli("apply", str(recipe), "--cluster", f"sim:{fleet}", "-o", "yaml")
    doc = YAML(typ="safe").load(out)
    assert rc == 0 and doc["recipe"] == "kernel-fix" and doc["result"] == "succeeded"


def test_node_verbs_name_output(files: tuple[Path, Path], cli: RunCli) -> None:
    fleet, _ = files
    assert cli("node", "status", "--cluster", f"sim:{fleet}", "-o", "name")[1] == "node/n1\nnode/n2\n"
    assert cli("status", "--cluster", f"sim:{fleet}", "-o", "name")[1] == "node/n1\nnode/n2\n"
    assert cli("package", "status", "base", "--cluster", f"sim:{fleet}", "-o", "name")[1] == "node/n1\n"
    rc, out, _ = cli("node", "ignore", "n.*", "--cluster", f"sim:{fleet}", "--dry-run", "-o", "name")
    assert rc == 0 and out == "node/n1\nnode/n2\n"
    rc, out, _ = cli("pause", "kernel-fix", "--cluster", f"sim:{fleet}", "--dry-run", "-o", "name")
    assert rc == 0 and out == "configmap/node-reconciler/node-reconciler-controls\n"
    rc, out, _ = cli("reset", "kernel-fix", "--cluster", f"sim:{fleet}", "--dry-run", "-o", "yaml")
    assert rc == 0 and YAML(typ="safe").load(out)["changes"][0]["name"] == "n1"


def test_no_headers(files: tuple[Path, Path], cli: RunCli) -> None:
    fleet, _ = files
    for argv in (["status", "-o", "wide"], ["package", "status", "base"]):
        with_h = cli(*argv, "--cluster", f"sim:{fleet}")[1]
        without = cli(*argv, "--cluster", f"sim:{fleet}", "--no-headers")[1]
        assert "recipe" in with_h and "recipe" not in without.split("\n")[1], argv
        assert "n1" in without
        # kubectl's --no-headers: no borders, one line per row, the same number of fields in each
        # (an empty cell is <none>), so awk and cut work on it
        assert not set(without) & set("│┃┏┗━─┌└╇╋"), without
        lines = [ln for ln in without.splitlines() if ln]
        assert len({len(ln.split()) for ln in lines}) == 1 and lines == [ln.rstrip() for ln in lines], without


def test_unknown_format_is_exit_2_listing_the_choices(files: tuple[Path, Path], cli: RunCli) -> None:
    fleet, _ = files
    with pytest.raises(SystemExit) as e:
        cli("status", "--cluster", f"sim:{fleet}", "-o", "xml")
    assert e.value.code == 2

"""Saving a simulated fleet (``--sim-save``) and reading it back: JSON and YAML through C encoders,
values any YAML reader would retype kept as strings, the file replaced atomically."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.adapters.sim.fleet import SimFleet
from reconciler.adapters.sim.write import dumps_list, write_list
from reconciler.load.snapshotfile import parse_snapshot
from reconciler.testing.fleetgen import make_node, make_pod

TRICKY = ["on", "yes", "no", "off", "y", "n", "true", "True", "null", "~", "", "1e3", "0o17", "0x1f", "017", "1_000",
          "12:30", ".inf", ".nan", "2026-11-30", "2026-11-30T12:00:00Z", "+1", "-0", "1.", "*", "&a", "!x", "#c",
          "a: b", "- x", "'q'", '"q"', "\ttab", "line\nbreak", "ünï", "\u2028"]


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_strings_any_yaml_reader_would_retype_survive_the_round_trip(fmt: str) -> None:
    objs = [make_node("n1", {"pool": "gpu"}, annotations={f"example.com/k{i}": v for i, v in enumerate(TRICKY)})]
    back = parse_snapshot(dumps_list(objs, fmt), "f").docs[0]["items"]
    assert back == objs


@pytest.mark.parametrize("name", ["after.json", "after.yaml", "after"])
def test_saved_fleet_resumes_from_either_format(tmp_path: Path, name: str) -> None:
    objs = [make_node(f"n{i}", {"pool": "gpu"}) for i in (1, 2)]
    objs.append(make_pod("ml", "train", "n1", owner=("ReplicaSet", "train-7"), labels={"app": "train"}))
    sim = SimFleet(objs)
    sim.evict_pod("ml", "train", "", None)  # a terminating pod: its timer is saved with the fleet
    out = tmp_path / name
    sim.save(str(out))
    text = out.read_text(encoding="utf-8")
    if name.endswith(".json"):
        assert json.loads(text)["kind"] == "List"
    else:
        assert text.startswith("apiVersion: v1\nkind: List\n")
    again = SimFleet.from_file(str(out))
    assert sorted(again.nodes) == ["n1", "n2"]
    assert again.pods[("ml", "train")]["metadata"]["deletionTimestamp"]
    again.advance(60)  # the saved removal timer fires; the ReplicaSet pod is recreated elsewhere
    assert ("ml", "train") not in again.pods


def test_write_is_atomic_and_keeps_the_mode(tmp_path: Path) -> None:
    out = tmp_path / "fleet.yaml"
    out.write_text("old")
    out.chmod(0o640)
    write_list(out, [make_node("n1", {})])
    assert out.stat().st_mode & 0o777 == 0o640
    assert "kind: Node" in out.read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["fleet.yaml"]  # no temporary file left

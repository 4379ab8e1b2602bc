"""``reset`` acts on each node on its own (issue 34, item 6), on a simulated fleet.

One node that still owes a reboot made ``reset`` refuse every node, so another node that was only
cordoned kept our cordon and records. Now the nodes that owe an interrupt are refused, each named
with why, and the others are reset; the exit code (1) says some were refused; ``--force`` includes
them. The same through the library's front door (``Session.reset``: ``Operation.refused``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.model.nodestate import (
    CordonRecord,
    InFlight,
    cordon_key,
    dump_model,
    inflight_key,
    status_key,
)
from reconciler.session import simulate
from reconciler.testing.fleetgen import make_node
from tests.unit.ops.conftest import RunCli, load_fleet, write_fleet

R = "tune"
CLAIM = dump_model(CordonRecord(runId="run-1", at=1.0))


def _inflight(phase: str, **kw: object) -> str:
    return dump_model(InFlight.model_validate({"runId": "run-1", "planHash": "h", "phase": phase,
                                               "interrupt": {"type": "reboot"}, **kw}))


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    # owes its reboot (requested, not confirmed): reset would lose it
    owing = make_node("owing", {"pool": "gpu"}, unschedulable=True, annotations={
        cordon_key(R): CLAIM, status_key(R): "in_progress",
        inflight_key(R): _inflight("interrupt", requestedAt="2026-12-01T00:00:00Z", bootID="b0")})
    # only cordoned by us, drained, nothing started: nothing owed
    cordoned = make_node("cordoned", {"pool": "gpu"}, unschedulable=True, annotations={
        cordon_key(R): CLAIM, status_key(R): "in_progress", inflight_key(R): _inflight("drain")})
    done = make_node("done", {"pool": "gpu"}, annotations={status_key(R): "complete"})
    return write_fleet(tmp_path / "fleet.yaml", [owing, cordoned, done])


def _ours(fleet: Path, name: str) -> bool:
    return cordon_key(R) in (load_fleet(fleet)[name]["metadata"].get("annotations") or {})


def _cordoned(fleet: Path, name: str) -> bool:
    return bool((load_fleet(fleet)[name].get("spec") or {}).get("unschedulable"))


def test_reset_refuses_only_the_node_that_owes_an_interrupt_and_resets_the_others(fleet: Path, cli: RunCli) -> None:
    rc, out, err = cli("reset", R, "--cluster", f"sim:{fleet}", "-y")
    assert rc == 1, (out, err)
    assert "refused: node owing: recipe tune still owes a reboot" in err and "pass --force" in err
    assert "1 node(s) refused" in err and "cordoned" not in err.replace("cordoned by", "")
    assert "written: 2 object(s)" in out
    assert not _ours(fleet, "cordoned") and not _cordoned(fleet, "cordoned")  # our cordon and records released
    assert _ours(fleet, "owing") and _cordoned(fleet, "owing")  # left exactly as it was


def test_a_dry_run_names_the_refused_node_and_exits_1(fleet: Path, cli: RunCli) -> None:
    before = fleet.read_bytes()
    rc, out, err = cli("reset", R, "--cluster", f"sim:{fleet}", "--dry-run", "-o", "json")
    assert rc == 1 and fleet.read_bytes() == before
    doc = json.loads(out)
    assert [c["name"] for c in doc["changes"]] == ["cordoned", "done"]
    assert [r["node"] for r in doc["refused"]] == ["owing"] and "owes a reboot" in doc["refused"][0]["message"]
    assert "refused: node owing" in err


def test_force_resets_every_node(fleet: Path, cli: RunCli) -> None:
    rc, out, err = cli("reset", R, "--cluster", f"sim:{fleet}", "-y", "--force")
    assert rc == 0 and "refused" not in err and "written: 3 object(s)" in out
    assert not _ours(fleet, "owing") and not _cordoned(fleet, "owing")


def test_node_reset_of_the_owing_node_alone_changes_nothing_and_says_why(fleet: Path, cli: RunCli) -> None:
    before = fleet.read_bytes()
    rc, out, err = cli("node", "reset", "owing", "--recipe", R, "--cluster", f"sim:{fleet}", "-y")
    assert rc == 1 and "refused: node owing" in err and fleet.read_bytes() == before
    assert "nothing to change on the nodes not refused (1 refused)" in out  # not a bare "nothing to change"


def test_the_session_names_the_refused_nodes(fleet: Path) -> None:
    with simulate(fleet) as s:
        op = s.reset(R)
        assert [p.node for p in op.changes] == ["cordoned", "done"]
        assert [r.node for r in op.refused] == ["owing"] and "still owes a reboot" in op.refused[0].message
        assert op.write() == 2
        assert s.reset(R).refused[0].node == "owing"  # still owed: still refused
        assert not s.reset(R, force=True).refused

"""``apply --sim-crash-after N`` through the CLI, for every N from 1 to the number of writes a small
run makes (issue #14): every write counts as a crash point — the Lease (acquire, renew, release),
node patches and conditions, events, evictions, stage pods and ConfigMaps — and each crash exits
137 with no traceback and leaves a ``--sim-save`` fleet that loads and from which a second
``apply`` finishes the rollout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.sim import fleet as sim_adapter
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.cli.main import main
from reconciler.model.nodestate import parse_state, state_key
from reconciler.ports import LeaseSpec
from reconciler.testing.fleetgen import make_node, make_pod, write_fleet

SHA = "sha256:" + "f" * 64
RECIPE = f"""\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: NodeRecipe
metadata: {{name: sweep}}
spec:
  version: 2026.11.1
  nodeSelector: {{matchLabels: {{pool: gpu}}}}
  interruptionBudget: {{count: 1}}
  packages:
    base: {{version: 1.0.0, image: ghcr.io/example/base, containerSHA: "{SHA}", interrupt: {{type: reboot}}}}
"""


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    fleet = tmp_path / "fleet.yaml"
    write_fleet(fleet, [make_node("n1", {"pool": "gpu"}), make_node("n2", {"pool": "gpu"}),
                        make_pod("web", "w-1", "n1", labels={"app": "w"}, owner=("ReplicaSet", "w"))])
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE)
    return {"fleet": fleet, "recipe": recipe}


def _writes_of_a_full_run(files: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    fleets: list[SimFleet] = []
    real = SimFleet.from_file

    def recording(cls: type[SimFleet], path: str, config: Any = None, crash_after: int | None = None) -> SimFleet:
        f = real(path, config, crash_after)
        fleets.append(f)
        return f

    with monkeypatch.context() as m:
        m.setattr(sim_adapter.SimFleet, "from_file", classmethod(recording))
        assert main(["apply", str(files["recipe"]), "--cluster", f"sim:{files['fleet']}", "-o", "json"]) == 0
    return list(fleets[0].calls)


def _complete(path: Path) -> dict[str, bool]:
    fleet = SimFleet.from_file(str(path))
    out = {}
    for n in fleet.list_nodes():
        state = parse_state(n.annotations.get(state_key("sweep")), node=n.name)
        out[n.name] = bool(state) and all(e.state == "complete" for e in state.values())
    return out


@pytest.mark.slow
def test_a_crash_after_every_write_exits_137_and_saves_a_resumable_fleet(
        files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    calls = _writes_of_a_full_run(files, monkeypatch)
    capsys.readouterr()
    verbs = {v for v, _ in calls}
    assert {"create-lease", "update-lease", "delete-lease", "patch", "create-pod"} <= verbs, verbs  # Lease writes too
    assert len(calls) >= 20
    assert calls[0][0] == "create-lease" and calls[-1][0] == "delete-lease"
    before = files["fleet"].read_bytes()
    for n in range(1, len(calls) + 1):
        saved = tmp_path / f"crash-{n}.yaml"
        rc = main(["apply", str(files["recipe"]), "--cluster", f"sim:{files['fleet']}", "--sim-crash-after", str(n),
                   "--sim-save", str(saved), "-o", "json"])
        out = capsys.readouterr()
        assert rc == 137, f"crash after write {n} ({calls[n - 1]}): exit {rc}\n{out.err}"
        assert "Traceback" not in out.err and f"crashed: simulated crash after {n} writes" in out.err, out.err
        assert saved.exists(), f"crash after write {n} ({calls[n - 1]}): no saved fleet"
        SimFleet.from_file(str(saved))  # loads
        assert files["fleet"].read_bytes() == before
        # the next run resumes from the crash and finishes every node
        resumed = tmp_path / f"resumed-{n}.yaml"
        rc = main(["apply", str(files["recipe"]), "--cluster", f"sim:{saved}", "--sim-save", str(resumed),
                   "-o", "json"])
        out = capsys.readouterr()
        assert rc == 0, f"resume after a crash at write {n} ({calls[n - 1]}): exit {rc}\n{out.err}"
        assert _complete(resumed) == {"n1": True, "n2": True}, n


def test_a_crash_needs_no_save_path(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["apply", str(files["recipe"]), "--cluster", f"sim:{files['fleet']}", "--sim-crash-after", "1"])
    out = capsys.readouterr()
    assert rc == 137 and "Traceback" not in out.err and "crashed:" in out.err


@pytest.mark.parametrize("write", [
    lambda f: f.patch_config_map("reconciler-system", "controls", {"x": "1"}),
    lambda f: f.create_lease("sweep", LeaseSpec("me", 60, f.utc(), f.utc())),
    lambda f: f.emit_event("n1", "Test", "m"),
    lambda f: f.patch_node("n1", labels={"a": "b"}),
], ids=["configmap", "lease", "event", "node"])
def test_every_kind_of_write_is_a_crash_point_and_saves_first(write: Any, files: dict[str, Path],
                                                              tmp_path: Path) -> None:
    from reconciler.errors import CrashInjected

    fleet = SimFleet.from_file(str(files["fleet"]), crash_after=1)
    fleet.save_on_crash = str(tmp_path / "at-crash.yaml")
    with pytest.raises(CrashInjected):
        write(fleet)
    assert fleet.writes == 1
    SimFleet.from_file(fleet.save_on_crash)

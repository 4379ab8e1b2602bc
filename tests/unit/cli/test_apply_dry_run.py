"""``apply --dry-run[=client|server]`` (kubectl's habit): the plans apply would carry out, nothing
persisted; the server form sends the first batch's cordons with the API server's dry run.
``--confirm`` is NodeWright's spelling of ``-y/--yes`` on the operations verbs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.sim.fleet import SimFleet
from reconciler.cli import clusters
from reconciler.errors import ClusterError
from reconciler.ports import ClusterPorts
from reconciler.testing import fleetgen
from tests.unit.ops.conftest import RunCli, load_fleet

ROOT = Path(__file__).resolve().parents[3]
FLEET = ROOT / "examples" / "fleets" / "gpu-24.yaml"
RECIPE = str(ROOT / "recipes" / "gpu-training-tuning.yaml")


@pytest.fixture
def no_apply(monkeypatch: pytest.MonkeyPatch) -> None:
    """The service's apply must not be reached by a dry run."""
    import reconciler.service

    def refuse(*a: Any, **k: Any) -> Any:
        raise AssertionError("apply_recipes called during a dry run")

    monkeypatch.setattr(reconciler.service, "apply_recipes", refuse)


@pytest.mark.parametrize("flag", ["--dry-run", "--dry-run=client"])
def test_client_dry_run_prints_the_plans_and_runs_nothing(cli: RunCli, no_apply: None, flag: str) -> None:
    rc, out, err = cli("apply", RECIPE, "--cluster", f"sim:{FLEET}", flag, "-o", "json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["recipe"]["name"] == "gpu-training-tuning" and len(doc["planHash"]) == 64
    assert doc["summary"]["nodesChanging"] == 24 and "dry run: nothing was written" in err
    rc, out, _ = cli("apply", RECIPE, "--cluster", f"sim:{FLEET}", flag, "-o", "name")
    assert (rc, out) == (0, "noderecipe/gpu-training-tuning\n")


def test_client_dry_run_report_is_the_predicted_rollout(cli: RunCli, no_apply: None, tmp_path: Path) -> None:
    page = tmp_path / "dry.html"
    rc, _, err = cli("apply", RECIPE, "--cluster", f"sim:{FLEET}", "--dry-run", "-o", "name", "--report", str(page))
    assert rc == 0, err
    assert "gpu-training-tuning · predicted (simulated)" in page.read_text()


def test_dry_run_refuses_write_options_and_server_mode_on_the_sim(cli: RunCli, no_apply: None,
                                                                  tmp_path: Path) -> None:
    rc, _, err = cli("apply", RECIPE, "--cluster", f"sim:{FLEET}", "--dry-run", "--sim-save", str(tmp_path / "x"))
    assert rc == 2 and "--sim-save with --dry-run" in err and not (tmp_path / "x").exists()
    rc, _, err = cli("apply", RECIPE, "--cluster", f"sim:{FLEET}", "--dry-run=server")
    assert rc == 2 and "--dry-run=server needs a real API server" in err


class _ServerDryRunFleet(SimFleet):
    """A simulated fleet posing as an API server with dry run: node patches are recorded with the
    dry-run flag and never applied; ``refuse`` nodes answer 403 (RBAC)."""

    def __init__(self, objects: list[dict[str, Any]], refuse: set[str]) -> None:
        super().__init__(objects)
        self.server_dry_run = False
        self.refuse = refuse
        self.patches: list[tuple[str, dict[str, Any], bool]] = []

    def patch_node(self, name: str, **kw: Any) -> Any:
        self.patches.append((name, kw, self.server_dry_run))
        if name in self.refuse:
            raise ClusterError(f'nodes "{name}" is forbidden: cannot patch resource "nodes"', 403, "Forbidden")
        return self.get_node(name)


def test_server_dry_run_sends_the_first_cordons_with_dry_run(cli: RunCli, no_apply: None,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from ruamel.yaml import YAML

    objs = YAML(typ="safe", pure=True).load(FLEET.read_text())["items"]
    fake = _ServerDryRunFleet(objs, refuse={"gpu-b-001"})
    real = clusters.open_cluster

    def opened(args: Any) -> Any:
        o = real(args)
        return clusters.Opened(ClusterPorts.of(fake), o.clock, poll_seconds=o.poll_seconds,
                               description="fake API server", kube=fake)  # type: ignore[arg-type]  # posing as the real cluster's dry-run switch

    monkeypatch.setattr(clusters, "open_cluster", opened)
    rc, out, err = cli("apply", RECIPE, "--cluster", f"sim:{FLEET}", "--dry-run=server", "-o", "name")
    assert rc == 4 and out == "noderecipe/gpu-training-tuning\n"
    # batch 1 of each compartment is one node (us-east-1a: gpu-a-001, us-east-1b: gpu-b-001)
    assert [(n, kw, dry) for n, kw, dry in fake.patches] == [
        ("gpu-a-001", {"unschedulable": True}, True), ("gpu-b-001", {"unschedulable": True}, True)]
    assert "cordon node/gpu-a-001 (gpu-training-tuning, us-east-1a batch 1) accepted" in err
    assert "cordon node/gpu-b-001 refused" in err and "forbidden" in err
    assert not any(n.unschedulable for n in fake.list_nodes())  # nothing was persisted


def test_confirm_is_yes_on_operations_verbs(cli: RunCli, tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    fleetgen.write_fleet(path, fleetgen.gpu_fleet(2))
    rc, _, err = cli("node", "ignore", "gpu-a-001", "--cluster", f"sim:{path}")
    assert rc == 2 and "needs confirmation" in err  # no terminal to ask on
    rc, _, err = cli("node", "ignore", "gpu-a-001", "--cluster", f"sim:{path}", "--confirm")
    assert rc == 0, err
    assert load_fleet(path)["gpu-a-001"]["metadata"]["labels"]["reconciler.nodewright.dev/ignore"] == "true"

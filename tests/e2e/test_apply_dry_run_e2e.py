"""``apply --dry-run=server`` on the real control plane: the first batch's cordons are sent with the
API server's dry run (``dryRun=All``) and accepted, and nothing is persisted — every node stays
schedulable and carries none of our records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reconciler.cli.main import main
from reconciler.model.nodestate import PREFIX

from .test_reliability_e2e import recipe_text


def test_server_dry_run_sends_the_first_cordons_and_persists_nothing(
        controlplane: Any, api: Any, make_nodes: Any, test_id: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    from kubernetes import client

    core = client.CoreV1Api(api)
    nodes = make_nodes(3)
    name = f"dry-{test_id[-6:]}"
    recipe = tmp_path / f"{name}.yaml"
    recipe.write_text(recipe_text(name, test_id, budget=2))

    rc = main(["apply", str(recipe), "--kubeconfig", str(controlplane.kubeconfig), "--dry-run=server",
               "--no-status-object", "-o", "json"])
    out = capsys.readouterr()
    assert rc == 0, out.err[-2000:]
    accepted = [line for line in out.err.splitlines() if "server dry run: cordon node/" in line and "accepted" in line]
    assert len(accepted) == 2, out.err  # the first batch of the one compartment: budget 2
    assert "nothing was written" in out.err
    for n in nodes:
        node = core.read_node(n)
        assert not node.spec.unschedulable, n
        assert not any(k.startswith(PREFIX) for k in (node.metadata.annotations or {})), n

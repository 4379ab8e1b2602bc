"""Decisions and observers on one thread, on the real control plane (issue 12, finding 7).

``reconciler apply --workers 4`` with the status object on (a NodeRecipeRollout written as the
rollout goes): every lifecycle decision (:func:`reconciler.execute.machine.step`) and every status
object write happens on the thread that runs the apply, while the node API calls are spread over
the job pool's threads (reconciler/execute/jobs.py), through the official client.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.kube.nodes import KubeNodes
from reconciler.adapters.kube.statusobject import StatusObjects
from reconciler.cli.main import main
from reconciler.execute import lifecycle

from .test_gitops_surfaces import crd  # noqa: F401  (fixture: the NodeRecipeRollout CRD)
from .test_reliability_e2e import recipe_text


def _recording(calls: list[int], fn: Any) -> Any:
    def wrapped(*a: Any, **kw: Any) -> Any:
        calls.append(threading.get_ident())
        return fn(*a, **kw)
    return wrapped


def test_apply_with_workers_and_the_status_object_decides_and_reports_on_one_thread(
        crd: None, controlplane: Any, controlplane_reboots: Any, make_nodes: Any, test_id: str,  # noqa: F811
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = make_nodes(6)
    name = f"threads-{test_id[-6:]}"
    recipe = tmp_path / f"{name}.yaml"
    recipe.write_text(recipe_text(name, test_id, budget=3, stage_seconds="2s"))
    steps: list[int] = []
    status_writes: list[int] = []
    patches: list[int] = []
    monkeypatch.setattr(lifecycle, "step", _recording(steps, lifecycle.step))
    monkeypatch.setattr(StatusObjects, "write_status", _recording(status_writes, StatusObjects.write_status))
    monkeypatch.setattr(KubeNodes, "patch_node", _recording(patches, KubeNodes.patch_node))
    me = threading.get_ident()

    rc = main(["apply", str(recipe), "--kubeconfig", str(controlplane.kubeconfig), "--workers", "4",
               "--poll-seconds", "1", "-o", "json"])
    out = capsys.readouterr()
    assert rc == 0, out.err[-3000:]
    doc = json.loads(out.out)
    assert doc["result"] == "succeeded" and len(doc["nodes"]) == len(nodes)
    assert steps and set(steps) == {me}, "a lifecycle decision ran off the apply's thread"
    assert len(status_writes) >= 3 and set(status_writes) == {me}, "a status object write ran off the apply's thread"
    assert len(set(patches) - {me}) >= 2, "the node writes did not go through the job pool's threads"

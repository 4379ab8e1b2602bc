"""docs/api.md's real-cluster example runs, as written, against the real control plane (issue 37):
``reconciler.connect()`` from ``$KUBECONFIG``, plan, apply with the reviewed plans, pause, status;
the recipe file it names is this test's (its nodes only)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

import reconciler

from .test_reliability_e2e import assert_all_complete, recipe_text

ROOT = Path(__file__).resolve().parents[2]


def test_the_api_page_real_cluster_example_runs(controlplane: Any, controlplane_reboots: Any, make_nodes: Any,
                                                api: Any, test_id: str, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from kubernetes import client

    (code,) = re.findall(r"```py\n(.*?)```", (ROOT / "docs" / "api.md").read_text(), re.S)
    assert len(code.strip().splitlines()) < 15
    assert set(re.findall(r"\b(?:from|import) (\S+)", code)) == {"reconciler"}  # only reconciler.* names
    nodes = make_nodes(2)
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "gpu-training-tuning.yaml").write_text(
        recipe_text("gpu-training-tuning", test_id, budget=2, stage_seconds="1s"))
    shutil.copytree(ROOT / "policies", tmp_path / "policies")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KUBECONFIG", str(controlplane.kubeconfig))
    try:
        exec(compile(code, "docs/api.md", "exec"), {})
        out = capsys.readouterr().out
        assert "gpu-training-tuning 2 nodes change" in out and "succeeded: True" in out, out
        for n in nodes:
            assert f"{n} base-tools 1.0.0 complete, gpu-tuning 2.0.0 complete" in out, out
        assert_all_complete(client.CoreV1Api(api), nodes, "gpu-training-tuning")
    finally:
        with reconciler.connect(controlplane.kubeconfig) as session:
            if "gpu-training-tuning" in session.controls():
                session.resume("gpu-training-tuning").write()
                left = session.controls().get("gpu-training-tuning")
                assert left is None or not left.active

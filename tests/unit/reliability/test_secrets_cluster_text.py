"""Secrets in the cluster's own text and in what people type are never printed or copied onto
nodes: a stage's log tail and termination message (a token in a clone URL, ``password=…``) are
masked when they are read, before the failure record carrying them is written on the node (every
reader of nodes can read it) and wherever they are shown (the run summary, ``-o jsonl``,
``package logs``, ``node status``); a ``--reason`` given to ``pause`` is masked before it is
stored in the controls ConfigMap. Records written by someone else are masked when read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.adapters.kube.stagepod import stage_status_from_pod
from reconciler.cli.main import main
from reconciler.model.nodestate import FailureRecord
from reconciler.ops.controls import Control

ROOT = Path(__file__).resolve().parents[3]
FLEET = ROOT / "examples" / "fleets" / "gpu-24.yaml"
RECIPE = str(ROOT / "recipes" / "gpu-training-tuning.yaml")
LOG = ("git clone https://bob:s3cr3tpass@git.example.com/r.git?token=abc123 "
       "GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789 Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.xyz "
       "db password=hunter2hunter2")
SECRETS = ("s3cr3tpass", "abc123", "ghp_abcdefghij", "eyJhbGciOiJIUzI1NiJ9", "hunter2")


def _clean(label: str, text: str) -> None:
    for s in SECRETS:
        assert s not in text, f"{label}: {s!r} leaked: {text[max(0, text.find(s) - 60):][:160]!r}"


def test_a_failure_record_masks_the_stage_s_message_and_log_however_it_is_made() -> None:
    rec = FailureRecord(runId="run-1", reason="StageFailed", message=f"exit 2: {LOG}", logTail=LOG)
    _clean("built", rec.model_dump_json())
    assert "https://***@git.example.com" in rec.logTail and rec.reason == "StageFailed"
    read = FailureRecord.model_validate_json(json.dumps({"runId": "r", "reason": "x", "logTail": LOG}))
    _clean("read from a node", read.model_dump_json())  # a record written by another tool


def test_a_stage_pod_s_termination_message_is_masked_when_it_is_read() -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]},
           "status": {"phase": "Failed", "message": LOG, "containerStatuses": [
               {"name": "c", "state": {"terminated": {"exitCode": 2, "reason": "Error", "message": LOG}}}]}}
    st, _ = stage_status_from_pod(pod)
    assert st.phase == "failed" and st.exit_code == 2
    assert st.reason.startswith("Failed: git clone https://***@")
    _clean("stage status", st.reason)


def test_a_failing_stage_s_secrets_reach_no_output_and_no_node(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "what-if.yaml"
    cfg.write_text("failures:\n  - {node: gpu-a-004, package: nvidia-tuned, stage: apply, exitCode: 2, times: 99,\n"
                   f"     logTail: {json.dumps(LOG)}}}\n")
    saved = tmp_path / "after.yaml"
    rc = main(["apply", RECIPE, "--cluster", f"sim:{FLEET}", "--sim-config", str(cfg), "--sim-save", str(saved),
               "-o", "jsonl"])
    out = capsys.readouterr()
    assert rc == 1
    _clean("apply -o jsonl", out.out + out.err)
    assert "https://***@git.example.com" in out.out  # the log tail is there, masked
    failure = [ln for ln in saved.read_text().splitlines() if "failure_gpu-training-tuning" in ln]
    assert failure and all("***" in ln for ln in failure)
    _clean("the failure record on the node", "\n".join(failure))
    for argv in (["package", "logs", "nvidia-tuned", "--recipe", "gpu-training-tuning"],
                 ["node", "status", "gpu-a-004"], ["status", "-o", "json"]):
        assert main([*argv, "--cluster", f"sim:{saved}"]) in (0, 1)
        got = capsys.readouterr()
        _clean(" ".join(argv), got.out + got.err)


def test_a_pause_reason_is_masked_before_it_is_stored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_bytes(FLEET.read_bytes())
    assert main(["pause", "gpu-training-tuning", "--new", "--reason", f"see {LOG}", "--cluster", f"sim:{fleet}",
                 "-y"]) == 0
    assert main(["pause", "--list", "--cluster", f"sim:{fleet}"]) == 0
    assert main(["plan", RECIPE, "--cluster", f"sim:{fleet}"]) == 0
    out = capsys.readouterr()
    _clean("pause, pause --list, plan", out.out + out.err)
    _clean("the controls ConfigMap", fleet.read_text())
    assert "reason: see git clone https://***@" in out.out
    assert Control(paused=True, reason=LOG).reason.count("***") >= 4

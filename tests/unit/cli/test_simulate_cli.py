"""``reconciler simulate``: a what-if run that changes nothing."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from reconciler.cli.main import main

FLEET = Path("examples/fleets/gpu-24.yaml")


def test_what_if_reports_injected_failures_and_changes_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    before = hashlib.sha256(FLEET.read_bytes()).hexdigest()
    rc = main(["simulate", "recipes/gpu-training-tuning.yaml", "--cluster", f"sim:{FLEET}",
               "--sim-config", "examples/fleets/what-if.yaml", "-o", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1 and doc["simulated"] is True
    failed = {n["name"]: n for n in doc["nodes"] if n["state"] == "failed"}
    assert set(failed) == {"gpu-a-004", "gpu-b-007"}
    assert failed["gpu-a-004"]["exitCode"] == 2 and "profile" in failed["gpu-a-004"]["logTail"]
    assert failed["gpu-b-007"]["reason"] == "RebootTimeout"
    assert all(c["maxDisrupted"] <= c["ceiling"] for c in doc["compartments"])
    assert hashlib.sha256(FLEET.read_bytes()).hexdigest() == before


@pytest.mark.parametrize("verb", ["simulate", "apply", "plan"])
def test_a_sim_config_naming_nodes_or_packages_that_do_not_exist_is_bad_input(
        verb: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A typo in a what-if (a node or package that is not there) would make it silently pass:
    exit 2 at the name's line and column, before anything runs (nothing saved)."""
    cfg = tmp_path / "what-if.yaml"
    cfg.write_text("rebootSeconds: 60\n"
                   "failures:\n"
                   "  - {node: gpu-a-004, package: nvidia-tunned, stage: apply}\n"
                   "neverReturns: [gpu-b-007, gpu-zz-1]\n")
    saved = tmp_path / "after.yaml"
    extra = ["--sim-save", str(saved)] if verb == "apply" else []
    rc = main([verb, "recipes/gpu-training-tuning.yaml", "--cluster", f"sim:{FLEET}", "--sim-config", str(cfg),
               *extra])
    err = capsys.readouterr().err
    assert rc == 2
    assert f"{cfg}:3:" in err and "failures[0].package: no package 'nvidia-tunned' in the recipes given" in err
    assert "did you mean 'nvidia-tuned'?" in err and "(and 1 more)" in err
    assert not saved.exists()


@pytest.mark.parametrize(("text", "unknown"), [
    ("failures: [{node: '*', package: '*'}]\n", []),
    ("failures: [{node: gpu-a-004, package: nvidia-tuned}]\nneverReturns: [gpu-b-007]\n", []),
    ("neverReturns: [gpu-b-007, nope]\n", [("neverReturns", 1)]),
    ("failures: [{node: nope}, {package: nope}]\n", [("failures", 0, "node"), ("failures", 1, "package")]),
    ("validator: {failsOn: [gpu-a-001, nope]}\n", [("validator", "failsOn", 1)]),
])
def test_unknown_names_table(text: str, unknown: list[tuple[str | int, ...]], tmp_path: Path) -> None:
    from reconciler.cli.clusters import load_sim_config

    f = tmp_path / "c.yaml"
    f.write_text(text)
    nodes = {"gpu-a-001", "gpu-a-004", "gpu-b-007"}
    got = load_sim_config(str(f)).unknown_names(lambda: nodes, {"nvidia-tuned"})
    assert [at for at, _ in got] == unknown


@pytest.mark.parametrize(("text", "message"), [
    ("rebootSeconds: 60\nstageSeconds: -5\n", ":2:1: stageSeconds: the number -5: input should be greater than"),
    ("rebootSeconds: 60\nneverReturns: gpu-b-007\n", ":2:1: neverReturns: must be a list, not the string 'gpu-b-007'"),
])
def test_sim_config_errors_name_the_field_not_the_validator(text: str, message: str, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Not pydantic's union member names (``stageSeconds.constrained-float``) nor its ``tuple``."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text)
    rc = main(["simulate", "recipes/gpu-training-tuning.yaml", "--cluster", f"sim:{FLEET}", "--sim-config", str(cfg)])
    err = capsys.readouterr().err
    assert rc == 2 and f"{cfg}{message}" in err and "constrained" not in err, err

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


def _what_if(verb: str, text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, Path, Path]:
    """``verb`` of gpu-training-tuning on the example fleet with ``text`` as ``--sim-config``
    (``apply`` saving the fleet to a file): ``(exit code, stderr, config path, save path)``."""
    cfg = tmp_path / "what-if.yaml"
    cfg.write_text(text)
    saved = tmp_path / "after.yaml"
    extra = ["--sim-save", str(saved)] if verb == "apply" else []
    rc = main([verb, "recipes/gpu-training-tuning.yaml", "--cluster", f"sim:{FLEET}", "--sim-config", str(cfg),
               *extra])
    return rc, capsys.readouterr().err, cfg, saved


@pytest.mark.parametrize("verb", ["simulate", "apply", "plan"])
def test_a_sim_config_naming_nodes_or_packages_that_do_not_exist_is_bad_input(
        verb: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A typo in a what-if (a node or package that is not there) would make it silently pass:
    exit 2 at the name's line and column, before anything runs (nothing saved)."""
    rc, err, cfg, saved = _what_if(verb, "rebootSeconds: 60\n"
                                         "failures:\n"
                                         "  - {node: gpu-a-004, package: nvidia-tunned, stage: apply}\n"
                                         "neverReturns: [gpu-b-007, gpu-zz-1]\n", tmp_path, capsys)
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


@pytest.mark.parametrize("verb", ["simulate", "apply", "plan"])
def test_a_sim_config_failure_on_a_node_no_recipe_runs_is_bad_input(
        verb: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """cpu-001 exists and nvidia-tuned exists, but gpu-training-tuning does not select cpu-001: the
    failure could never happen and the what-if would pass silently, as with a typo (exit 2 at the
    entry, nothing run or saved)."""
    rc, err, cfg, saved = _what_if(verb, "rebootSeconds: 60\n"
                                         "failures:\n"
                                         "  - {node: cpu-001, package: nvidia-tuned, stage: apply, exitCode: 3}\n",
                                   tmp_path, capsys)
    assert rc == 2, err
    assert (f"{cfg}:3:" in err and "failures[0].node: no recipe given selects node 'cpu-001'" in err
            and "this failure could never happen" in err), err
    assert not saved.exists()


@pytest.mark.parametrize(("text", "unmet"), [
    ("failures: [{node: gpu-a-004, package: nvidia-tuned}]\n", []),
    ("failures: [{node: '*', package: nvidia-tuned}, {node: cpu-001}]\n", [("failures", 1, "node")]),
    ("failures: [{node: cpu-001, package: nvidia-tuned}]\n", [("failures", 0, "node")]),
    ("failures: [{node: gpu-a-004, package: other-pkg}]\n", [("failures", 0, "node")]),  # no recipe runs it there
    ("neverReturns: [gpu-b-007, cpu-001]\n", [("neverReturns", 1)]),
    ("validator: {failsOn: [cpu-001, gpu-a-001]}\n", [("validator", "failsOn", 0)]),
    # an unknown name is reported as such, not twice
    ("failures: [{node: cpu-001, package: nope}]\n", [("failures", 0, "package")]),
])
def test_names_that_exist_but_never_meet(text: str, unmet: list[tuple[str | int, ...]], tmp_path: Path) -> None:
    from reconciler.cli.clusters import load_sim_config

    f = tmp_path / "c.yaml"
    f.write_text(text)
    nodes = {"gpu-a-001", "gpu-a-004", "gpu-b-007", "cpu-001"}
    runs = {"gpu-a-001": {"nvidia-tuned"}, "gpu-a-004": {"nvidia-tuned"}, "gpu-b-007": {"nvidia-tuned"},
            "cpu-001": set()}
    got = load_sim_config(str(f)).unknown_names(lambda: nodes, {"nvidia-tuned", "other-pkg"}, runs.__getitem__)
    assert [at for at, _ in got] == unmet


def test_an_ignored_node_runs_nothing(tmp_path: Path) -> None:
    from reconciler.cli.clusters import check_sim_names, load_sim_config
    from reconciler.errors import InputError
    from reconciler.load import load_inputs
    from reconciler.model.nodestate import IGNORE_LABEL

    cfg = tmp_path / "c.yaml"
    cfg.write_text("neverReturns: [gpu-b-007]\n")
    recipes = load_inputs(["recipes/gpu-training-tuning.yaml"], []).recipes
    labels = {"nodepool": "gpu", "node.kubernetes.io/instance-type": "p5.48xlarge"}
    check_sim_names(str(cfg), load_sim_config(str(cfg)), lambda: {"gpu-b-007": labels}, recipes)
    with pytest.raises(InputError, match="no recipe given selects node 'gpu-b-007'"):
        check_sim_names(str(cfg), load_sim_config(str(cfg)), lambda: {"gpu-b-007": {**labels, IGNORE_LABEL: "true"}},
                        recipes)


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

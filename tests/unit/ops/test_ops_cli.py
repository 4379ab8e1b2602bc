"""Operations verbs through the CLI on a simulated fleet (issue #8 item 5): dry runs print the exact
patches and write nothing, confirmation is required, resets release only our cordons, pause and
disable are honoured by apply, status views, package rerun and logs."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from reconciler.model.nodestate import (
    RECONCILE_REQUEST_KEY,
    CordonRecord,
    FailureRecord,
    PackageState,
    cordon_key,
    dump_model,
    dump_state,
    failure_key,
    parse_state,
    state_key,
    status_key,
)
from reconciler.ops.controls import CONTROLS_CONFIGMAP
from reconciler.ops.nodeops import IGNORE_LABEL
from reconciler.testing.fleetgen import make_node
from tests.unit.ops.conftest import RunCli, config_maps, load_fleet, write_fleet

R = "kernel-fix"
SHA = "sha256:" + "b" * 64
RECIPE = f"""\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: NodeRecipe
metadata: {{name: {R}}}
spec:
  version: 2026.11.1
  nodeSelector: {{matchLabels: {{pool: gpu}}}}
  interruptionBudget: {{count: 3}}
  packages:
    fix:
      version: 2.1.0
      image: ghcr.io/example/fix
      containerSHA: {SHA}
"""


def _state(stage: str, state: str) -> str:
    return dump_state({"fix|2.1.0": PackageState(name="fix", version="2.1.0", image="ghcr.io/example/fix",
                                                  stage=stage, state=state)})  # type: ignore[arg-type]


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    n1 = make_node("n1", {"pool": "gpu", status_key(R): "erroring"}, unschedulable=True, annotations={
        state_key(R): _state("apply", "erroring"), status_key(R): "erroring",
        cordon_key(R): dump_model(CordonRecord(runId="run-1", at=1.0)),
        failure_key(R): dump_model(FailureRecord(runId="run-1", reason="StageFailed", stage="apply", package="fix",
                                                 exitCode=3, logTail="apply.sh: exit 3"))})
    n2 = make_node("n2", {"pool": "gpu"}, unschedulable=True, annotations={
        state_key(R): _state("config", "complete"), status_key(R): "complete"})
    n3 = make_node("n3", {"pool": "gpu"})
    return write_fleet(tmp_path / "fleet.yaml", [n1, n2, n3])


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    p = tmp_path / "recipe.yaml"
    p.write_text(RECIPE)
    return p


def test_dry_run_prints_the_exact_patch_and_writes_nothing(fleet: Path, cli: RunCli) -> None:
    before = fleet.read_bytes()
    rc, out, _ = cli("node", "ignore", "n[13]", "--cluster", f"sim:{fleet}", "--dry-run")
    assert rc == 0 and "dry run: nothing was written" in out
    assert 'PATCH node/n1 {"metadata":{"labels":{"reconciler.nodewright.dev/ignore":"true"}' in out
    assert "PATCH node/n3" in out and "node/n2" not in out
    lines = out.splitlines()  # the two writes share their summary line (it was printed before each)
    assert lines[:2] == ["node ignore", "  ignore: every recipe skips this node"]
    assert [ln[:16] for ln in lines[2:4]] == ["    PATCH node/n", "    PATCH node/n"]
    rc, out, _ = cli("reset", R, "--cluster", f"sim:{fleet}", "--dry-run", "-o", "json")
    doc = json.loads(out)
    assert rc == 0 and doc["dryRun"] and doc["written"] == 0
    assert [c["name"] for c in doc["changes"]] == ["n1", "n2"]
    assert doc["changes"][0]["patch"]["spec"] == {"unschedulable": False}
    assert "spec" not in doc["changes"][1]["patch"]
    assert fleet.read_bytes() == before


def test_confirmation_is_required(fleet: Path, cli: RunCli, monkeypatch: pytest.MonkeyPatch) -> None:
    before = fleet.read_bytes()
    rc, _, err = cli("node", "ignore", "n1", "--cluster", f"sim:{fleet}")
    assert rc == 2 and "pass -y/--yes" in err and fleet.read_bytes() == before

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Tty("n\n"))
    rc, _, err = cli("node", "ignore", "n1", "--cluster", f"sim:{fleet}")
    assert rc == 1 and "[y/N]" in err and "aborted" in err and fleet.read_bytes() == before
    monkeypatch.setattr("sys.stdin", Tty("y\n"))
    rc, out, _ = cli("node", "ignore", "n1", "--cluster", f"sim:{fleet}")
    assert rc == 0 and "written: 1" in out
    assert load_fleet(fleet)["n1"]["metadata"]["labels"][IGNORE_LABEL] == "true"
    rc, _, _ = cli("node", "unignore", "n1", "--cluster", f"sim:{fleet}", "-y")
    assert rc == 0 and IGNORE_LABEL not in load_fleet(fleet)["n1"]["metadata"]["labels"]


def test_reset_releases_only_the_cordons_we_hold(fleet: Path, tmp_path: Path, cli: RunCli) -> None:
    out_file = tmp_path / "after.yaml"
    rc, out, _ = cli("reset", R, "--cluster", f"sim:{fleet}", "-y", "--sim-save", str(out_file))
    assert rc == 0 and "1 node(s) to uncordon" in out
    nodes = load_fleet(out_file)
    assert not nodes["n1"]["spec"].get("unschedulable")  # our cordon: released
    assert nodes["n2"]["spec"].get("unschedulable") is True  # someone else's: stays
    for n in ("n1", "n2"):
        ann = nodes[n]["metadata"].get("annotations") or {}
        # every record of ours is gone; only the request for a pass (for a running controller) stays
        assert not [k for k in ann if k.startswith("reconciler.nodewright.dev/") and k != RECONCILE_REQUEST_KEY], ann
        assert status_key(R) not in nodes[n]["metadata"]["labels"]
    rc, out, err = cli("reset", R, "--cluster", f"sim:{out_file}", "-y")  # R is known nowhere now
    assert rc == 2 and f"recipe {R!r} not found" in err
    rc, out, _ = cli("reset", R, "--cluster", f"sim:{out_file}", "-y", "--ignore-not-found")
    assert rc == 0 and "nothing to change" in out


def test_node_reset_one_node_json(fleet: Path, cli: RunCli) -> None:
    rc, out, _ = cli("node", "reset", "n1", "--recipe", R, "--cluster", f"sim:{fleet}", "-y", "-o", "json")
    doc = json.loads(out)
    assert rc == 0 and doc["written"] == 1 and doc["changes"][0]["name"] == "n1"
    n = load_fleet(fleet)
    assert not n["n1"]["spec"].get("unschedulable") and state_key(R) in n["n2"]["metadata"]["annotations"]


def test_package_rerun(fleet: Path, cli: RunCli) -> None:
    rc, out, _ = cli("package", "rerun", "fix", "--recipe", R, "--node", "n2", "--stage", "config",
                     "--cluster", f"sim:{fleet}", "-y")
    assert rc == 0 and "config/complete -> config/in_progress" in out
    st = parse_state(load_fleet(fleet)["n2"]["metadata"]["annotations"][state_key(R)])
    assert (st["fix|2.1.0"].stage, st["fix|2.1.0"].state) == ("config", "in_progress")
    rc, out, _ = cli("package", "rerun", "fix", "--recipe", R, "--node", "n[13]", "--cluster", f"sim:{fleet}", "-y")
    assert rc == 0 and "failure record (StageFailed) removed" in out and "no entry of fix for recipe" in out
    ann = load_fleet(fleet)["n1"]["metadata"]["annotations"]
    assert parse_state(ann[state_key(R)]) == {} and failure_key(R) not in ann


def _failed_apply(recipe: Path, tmp_path: Path, cli: RunCli) -> tuple[Path, Path]:
    """Apply ``recipe`` to a one-node fleet (n1) whose ``fix`` apply stage always fails (exit 7):
    ``(the --sim-config injecting the failure, the fleet saved after the failed run)``."""
    fleet = write_fleet(tmp_path / "f.yaml", [make_node("n1", {"pool": "gpu"})])
    cfg = tmp_path / "sim.yaml"
    cfg.write_text("failures:\n- {node: n1, package: fix, stage: apply, exitCode: 7, times: 99}\n")
    failed = tmp_path / "failed.yaml"
    assert cli("apply", str(recipe), "--cluster", f"sim:{fleet}", "--sim-config", str(cfg), "--sim-save",
               str(failed), "-o", "json")[0] == 1
    return cfg, failed


def test_package_rerun_of_a_failed_node_runs_the_stage_again(recipe: Path, tmp_path: Path, cli: RunCli) -> None:
    """The new-user trial, through the CLI: apply fails a stage; `package rerun` says the lifecycle
    failed and what works; with --force the next apply (nothing injected now) runs the stage again
    and succeeds, instead of reading the failed pods of the first run back; `package logs` of a
    rerun that fails again shows the rerun's pods first, then the earlier ones."""
    cfg, failed = _failed_apply(recipe, tmp_path, cli)
    rc, _, err = cli("package", "rerun", "fix", "--recipe", R, "--node", "n1", "--cluster", f"sim:{failed}", "-y")
    assert rc == 2 and "lifecycle of recipe kernel-fix failed (StageFailed at fix apply" in err
    assert "pass --force to rerun fix" in err and "`reconciler apply --retry-failed`" in err and "node reset" not in err
    rc, out, _ = cli("package", "rerun", "fix", "--recipe", R, "--node", "n1", "--force", "--cluster", f"sim:{failed}",
                     "-y")
    assert rc == 0 and "fix restarted (rerun 1: new stage pod names)" in out
    again = tmp_path / "again.yaml"
    rc, out, _ = cli("apply", str(recipe), "--cluster", f"sim:{failed}", "--sim-config", str(cfg), "--sim-save",
                     str(again), "-o", "json")
    assert rc == 1  # the package still fails (injected again): logs show both runs' pods
    rc, out, _ = cli("package", "logs", "fix", "--recipe", R, "--node", "n1", "--cluster", f"sim:{again}", "-o", "json")
    pods = [x for x in json.loads(out)["logs"] if x["source"] == "pod"]
    assert rc == 0 and len({x["pod"] for x in pods}) == len(pods) == 6  # 3 attempts of each run
    doc = YAML(typ="safe", pure=True).load(failed.read_text(encoding="utf-8"))
    first_run = {o["metadata"]["name"] for o in doc["items"] if o["kind"] == "Pod"}
    assert [x["pod"] in first_run for x in pods] == [False] * 3 + [True] * 3
    fixed = tmp_path / "fixed.yaml"
    rc, out, _ = cli("package", "rerun", "fix", "--recipe", R, "--node", "n1", "--force", "--cluster", f"sim:{again}",
                     "-y", "--sim-save", str(fixed))
    assert rc == 0 and "(rerun 2: new stage pod names)" in out
    done = tmp_path / "done.yaml"
    rc, out, _ = cli("apply", str(recipe), "--cluster", f"sim:{fixed}", "--sim-save", str(done), "-o", "json")
    assert rc == 0, out
    n1 = load_fleet(done)["n1"]
    assert failure_key(R) not in n1["metadata"]["annotations"] and not n1["spec"].get("unschedulable")
    assert parse_state(n1["metadata"]["annotations"][state_key(R)])["fix|2.1.0"].state == "complete"


def test_pause_and_disable_are_honoured_by_apply(fleet: Path, recipe: Path, tmp_path: Path, cli: RunCli) -> None:
    rc, out, err = cli("pause", R, "--reason", "change freeze", "--cluster", f"sim:{fleet}", "-y")
    assert rc == 0 and f"PATCH configmap/node-reconciler/{CONTROLS_CONFIGMAP}" in out
    assert f"simulated fleet written to {fleet}" in err  # the --cluster file is rewritten: said so
    record = json.loads(config_maps(fleet)[f"node-reconciler/{CONTROLS_CONFIGMAP}"]["data"][R])
    assert record["paused"] is True and record["reason"] == "change freeze" and record["by"]
    rc, out, _ = cli("pause", "--list", "--cluster", f"sim:{fleet}")
    assert rc == 0 and out.startswith(f"{R}: paused (by ") and "reason: change freeze" in out
    rc, out, _ = cli("pause", R, "--cluster", f"sim:{fleet}", "-y")
    assert rc == 0 and "nothing to change" in out

    before = load_fleet(fleet)
    rc, out, err = cli("apply", str(recipe), "--cluster", f"sim:{fleet}", "--sim-save", str(tmp_path / "s.yaml"),
                       "-o", "json")
    assert rc == 0 and json.loads(out) == {"results": []} and f"{R}: paused" in err and "skipped" in err
    assert f"simulated fleet written to {tmp_path / 's.yaml'}" in err
    assert load_fleet(tmp_path / "s.yaml") == before  # nothing was touched

    assert cli("resume", R, "--cluster", f"sim:{fleet}", "-y")[0] == 0
    assert R not in (config_maps(fleet)[f"node-reconciler/{CONTROLS_CONFIGMAP}"].get("data") or {})
    assert cli("disable", R, "--cluster", f"sim:{fleet}", "-y")[0] == 0
    rc, _, err = cli("apply", str(recipe), "--cluster", f"sim:{fleet}", "-o", "json")
    assert rc == 0 and f"{R}: disabled" in err
    assert cli("enable", R, "--cluster", f"sim:{fleet}", "-y")[0] == 0
    rc, out, err = cli("apply", str(recipe), "--cluster", f"sim:{fleet}", "-o", "json", "--retry-failed")
    assert rc == 0 and json.loads(out)["result"] == "succeeded", (out, err)


def test_status_views(fleet: Path, cli: RunCli) -> None:
    cli("node", "ignore", "n3", "--cluster", f"sim:{fleet}", "-y")
    rc, out, _ = cli("status", "--cluster", f"sim:{fleet}", "--node", "n[13]", "-o", "json")
    docs = {d["name"]: d for d in json.loads(out)["nodes"]}
    assert rc == 0 and set(docs) == {"n1", "n3"}
    assert docs["n3"]["ignored"] and not docs["n1"]["ignored"]
    assert docs["n1"]["cordonedByUs"] and docs["n1"]["statuses"] == {R: "erroring"}
    assert docs["n1"]["packages"][0]["state"] == "erroring" and docs["n1"]["failures"][0]["exitCode"] == 3
    rc, out, _ = cli("status", "--cluster", f"sim:{fleet}", "--package", "fix", "-o", "json")
    doc = json.loads(out)
    assert rc == 0 and [r["node"] for r in doc["nodes"]] == ["n1", "n2"]
    assert doc["counts"] == {"2.1.0/erroring": 1, "2.1.0/complete": 1}
    rc, out, _ = cli("status", "--cluster", f"sim:{fleet}", "-o", "yaml")
    y = YAML(typ="safe", pure=True).load(out)
    assert rc == 0 and [n["name"] for n in y["nodes"]] == ["n1", "n2", "n3"] and "cordonedByUs" in y["nodes"][0]
    rc, out, _ = cli("status", "--cluster", f"sim:{fleet}", "-o", "json")  # the existing contract is unchanged
    assert rc == 0 and {"name", "unschedulable", "cordonedByUs", "packages"} <= set(json.loads(out)["nodes"][0])
    rc, out, _ = cli("node", "status", "n1", "--cluster", f"sim:{fleet}")
    assert rc == 0 and "n1" in out and "cordoned by us" in out and "erroring" in out
    rc, out, _ = cli("package", "status", "fix", "--cluster", f"sim:{fleet}", "-o", "wide")
    assert rc == 0 and "fix: 2 node(s)" in out and "2.1.0/complete: 1" in out


def test_package_logs_finds_failed_stage_pods(recipe: Path, tmp_path: Path, cli: RunCli) -> None:
    fleet = write_fleet(tmp_path / "f.yaml", [make_node("n1", {"pool": "gpu"})])
    cfg = tmp_path / "sim.yaml"
    cfg.write_text("failures:\n- {node: n1, package: fix, stage: apply, exitCode: 7, times: 99, "
                   "logTail: 'fix: /etc/fix.conf is read-only'}\n")
    saved = tmp_path / "saved.yaml"
    rc, _, _ = cli("apply", str(recipe), "--cluster", f"sim:{fleet}", "--sim-config", str(cfg),
                   "--sim-save", str(saved), "-o", "json")
    assert rc == 1
    rc, out, _ = cli("package", "logs", "fix", "--recipe", R, "--node", "n1", "--cluster", f"sim:{saved}", "-o", "json")
    logs = json.loads(out)["logs"]
    pods = [x for x in logs if x["source"] == "pod"]
    assert rc == 0 and pods and all(x["phase"] == "failed" and x["exit_code"] == 7 for x in pods)
    assert [x["attempt"] for x in pods] == sorted((x["attempt"] for x in pods), reverse=True)
    assert "read-only" in pods[0]["log"] and logs[-1]["source"] == "failure"
    rc, out, _ = cli("package", "logs", "fix", "--recipe", R, "--cluster", f"sim:{saved}")
    assert rc == 0 and "== n1 fix 2.1.0 apply pod" in out and "exit 7" in out
    rc, out, err = cli("package", "logs", "other", "--recipe", R, "--cluster", f"sim:{saved}")
    assert rc == 2 and "package 'other' not found" in err and "known packages: fix" in err and not out


def test_resuming_a_recipe_switched_only_with_new_twice_says_why_it_is_unknown(fleet: Path, cli: RunCli) -> None:
    assert cli("pause", "later", "--new", "--cluster", f"sim:{fleet}", "-y")[0] == 0
    assert cli("resume", "later", "--cluster", f"sim:{fleet}", "-y")[0] == 0
    rc, _, err = cli("resume", "later", "--cluster", f"sim:{fleet}", "-y")
    assert rc == 2 and "recipe 'later' not found" in err
    assert "nothing is paused or disabled under that name" in err and "pass --new" not in err
    rc, _, err = cli("pause", "latr", "--cluster", f"sim:{fleet}", "-y")
    assert rc == 2 and "pass --new" in err


def test_package_logs_says_which_stage_pods_stay(tmp_path: Path, cli: RunCli,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The help said successful stage pods are deleted (NodeWright's rule); ours stay until the
    node's lifecycle completes (a completed stage is recorded with the node's next write, its pod
    being the record until then). On a failed node the successful stage's pod is found; once the
    node completes, none is, and the help and the empty answer say why."""
    two = RECIPE.replace("  packages:\n", f"  packages:\n    base: {{version: 1.0.0, image: ghcr.io/example/base, "
                                          f"containerSHA: {SHA}}}\n")
    recipe = tmp_path / "two.yaml"
    recipe.write_text(two.replace("      containerSHA: " + SHA, "      containerSHA: " + SHA
                                  + "\n      dependsOn: {base: 1.0.0}"))
    _, failed = _failed_apply(recipe, tmp_path, cli)
    rc, out, _ = cli("package", "logs", "base", "--recipe", R, "--node", "n1", "--cluster", f"sim:{failed}",
                     "-o", "json")
    assert rc == 0 and [(x["stage"], x["phase"]) for x in json.loads(out)["logs"]] == [("config", "succeeded")]
    with pytest.raises(SystemExit):
        cli("package", "logs", "--help")
    text = " ".join(capsys.readouterr().out.split())
    assert "deleted when its lifecycle completes" in text and "the successful ones as the record" in text
    assert cli("package", "rerun", "fix", "--recipe", R, "--node", "n1", "--force", "--cluster", f"sim:{failed}",
               "-y")[0] == 0
    done = tmp_path / "done.yaml"
    assert cli("apply", str(recipe), "--cluster", f"sim:{failed}", "--sim-save", str(done), "-o", "json")[0] == 0
    rc, out, _ = cli("package", "logs", "base", "--recipe", R, "--node", "n1", "--cluster", f"sim:{done}")
    assert rc == 0 and "stage pods are deleted when the node's lifecycle completes" in out

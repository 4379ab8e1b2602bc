"""Prometheus metrics (issue #8 item 7): exposition format, atomic textfile, Pushgateway push against a
local HTTP server, ``apply --metrics-file`` and the ``metrics`` verb."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import pytest

from reconciler.adapters.metrics.pushgateway import push, push_url
from reconciler.errors import InputError
from reconciler.execute.timeline import NodeOutcome, RunResult
from reconciler.model.nodestate import (
    FailureRecord,
    InFlight,
    PackageState,
    dump_model,
    dump_state,
    failure_key,
    inflight_key,
    state_key,
    status_key,
)
from reconciler.report.metrics import MetricsError, MetricSet, rollout_metrics, write_textfile
from reconciler.testing import builders
from reconciler.testing.fleetgen import make_node
from tests.httpfake import QuietHandler
from tests.unit.ops.conftest import RunCli, write_fleet
from tests.unit.ops.test_ops_cli import RECIPE

R = "kernel-fix"


def _st(state: str, stage: str = "config", restarts: int = 0) -> str:
    return dump_state({"fix|2.1.0": PackageState(name="fix", version="2.1.0", stage=stage,  # type: ignore[arg-type]
                                                  state=state, restarts=restarts)})  # type: ignore[arg-type]


NODES = [
    builders.node("n1", annotations={state_key(R): _st("complete"), status_key(R): "complete"}),
    builders.node("n2", annotations={state_key(R): _st("erroring", "apply", 2), status_key(R): "erroring",
                                     failure_key(R): dump_model(FailureRecord(runId="r", reason="StageFailed"))}),
    builders.node("n3", annotations={state_key(R): _st("in_progress", "apply"), status_key(R): "in_progress",
                                     inflight_key(R): dump_model(InFlight(runId="r", planHash="h", phase="stages"))}),
    builders.node("n4"),
]
RESULT = RunResult(
    run_id="r", plan_hash="h", recipe=R, result="halted",
    nodes=[NodeOutcome("n1", "complete", "zone-a"), NodeOutcome("n2", "failed", "zone-a"),
           NodeOutcome("n3", "untouched", "zone-b"), NodeOutcome("n4", "untouched", "zone-b")],
    compartments=[
        {"name": "zone-a", "ceiling": 1, "strategy": "fixed", "batches": [{"number": 1}, {"number": 2}],
         "halted": True, "haltReason": "failure threshold", "maxDisrupted": 1, "untouched": []},
        {"name": "zone-b", "ceiling": 2, "strategy": "linear", "batches": [{"number": 1}], "halted": False,
         "haltReason": "", "maxDisrupted": 1, "untouched": ["n4"]},
    ],
    timeline=[], duration=812.5,
)


def test_rollout_metrics_from_a_run() -> None:
    ms = rollout_metrics(R, NODES, result=RESULT, policy="gpu-rollout", paused=False, disabled=True, now=1795000000)
    a = {"compartment": "zone-a"}
    b = {"compartment": "zone-b"}
    assert ms.value("rollout_matched_nodes", **a) == 2 and ms.value("rollout_ceiling", **b) == 2
    assert ms.value("rollout_completed", **a) == 1 and ms.value("rollout_failed", **a) == 1
    assert ms.value("rollout_in_progress", **b) == 1 and ms.value("rollout_completed", **b) == 0  # n4 not started
    assert ms.value("rollout_current_batch", **a) == 2 and ms.value("rollout_halted", **a) == 1
    assert ms.value("rollout_halted", **b) == 0 and ms.value("rollout_progress_percent", **a) == 50
    assert ms.value("rollout_matched_nodes", strategy="linear", policy="gpu-rollout") == 2
    assert ms.value("run_result", result="halted") == 1 and ms.value("run_result", result="succeeded") == 0
    assert ms.value("package_state_count", package="fix", version="2.1.0", state="erroring") == 1
    assert ms.value("package_stage_count", stage="apply") == 2
    assert ms.value("package_restarts_count", package="fix") == 2
    assert ms.value("node_status_count", status="none") == 1 and ms.value("node_target_count") == 4
    assert ms.value("recipe_disabled") == 1 and ms.value("recipe_paused") == 0
    assert ms.value("run_duration_seconds") == 812.5


def test_exposition_format() -> None:
    ms = MetricSet()
    ms.set("rollout_ceiling", {"recipe": 'we"ird\\name\n', "compartment": "a"}, 3)
    ms.set("run_duration_seconds", {"recipe": "x"}, 1.25)
    text = ms.render()
    assert text.endswith("\n")
    lines = text.splitlines()
    assert lines[0] == ("# HELP node_reconciler_rollout_ceiling Budget ceiling: nodes the compartment may disrupt "
                        "at once.")
    assert lines[1] == "# TYPE node_reconciler_rollout_ceiling gauge"
    assert lines[2] == 'node_reconciler_rollout_ceiling{compartment="a",recipe="we\\"ird\\\\name\\n"} 3'
    assert lines[-1] == 'node_reconciler_run_duration_seconds{recipe="x"} 1.25'
    full = rollout_metrics(R, NODES, result=RESULT).render()
    assert full == rollout_metrics(R, NODES, result=RESULT).render()  # deterministic
    names = [line.split()[2] for line in full.splitlines() if line.startswith("# TYPE")]
    assert names == sorted(names) and all(n.startswith("node_reconciler_") for n in names)
    for line in full.splitlines():
        assert line.startswith("#") or line.rsplit(" ", 1)[1].replace(".", "").isdigit()


def test_plan_only_metrics_leave_run_series_out(tmp_path: Path) -> None:
    ms = rollout_metrics(R, NODES)  # no run, no plan: counts over nodes with state
    assert ms.value("node_target_count") == 3 and ms.value("rollout_current_batch") is None
    assert ms.value("run_result") is None and ms.value("rollout_matched_nodes") is None


def test_textfile_is_written_atomically(tmp_path: Path) -> None:
    path = tmp_path / "node_reconciler.prom"
    path.write_text("old\n")
    write_textfile(str(path), "new 1\n")
    assert path.read_text() == "new 1\n" and oct(path.stat().st_mode & 0o777) == "0o644"
    assert os.listdir(tmp_path) == ["node_reconciler.prom"]  # no temporary file left
    with pytest.raises(InputError, match=r"--metrics-file .*missing' does not exist"):
        write_textfile(str(tmp_path / "missing" / "x.prom"), "x")


class _Gateway(QuietHandler):
    received: ClassVar[list[tuple[str, str, str, bytes]]] = []
    status = 200

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        _Gateway.received.append((self.command, self.path, self.headers.get("Content-Type", ""), body))
        self.send_response(_Gateway.status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")



@pytest.fixture
def gateway(http_server: Callable[[type[_Gateway]], str]) -> str:
    _Gateway.received, _Gateway.status = [], 200
    return http_server(_Gateway)


def test_push_to_pushgateway(gateway: str) -> None:
    text = rollout_metrics(R, NODES, result=RESULT).render()
    url = push(gateway + "/", text, grouping={"recipe": R})
    assert url == f"{gateway}/metrics/job/node-reconciler/recipe/{R}"
    ((method, path, ctype, body),) = _Gateway.received
    assert (method, path) == ("PUT", f"/metrics/job/node-reconciler/recipe/{R}")
    assert ctype.startswith("text/plain; version=0.0.4") and body.decode() == text
    assert push_url("http://gw:9091", "j", {"recipe": "a/b"}).endswith("/recipe@base64/YS9i")
    _Gateway.status = 400
    with pytest.raises(MetricsError, match="HTTP 400"):
        push(gateway, "x 1\n")
    with pytest.raises(InputError):
        push_url("file:///etc/passwd", "j", {})


def test_apply_writes_metrics_file_and_pushes(tmp_path: Path, cli: RunCli, gateway: str) -> None:
    fleet = write_fleet(tmp_path / "fleet.yaml", [make_node(f"n{i}", {"pool": "gpu"}) for i in (1, 2)])
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE)
    prom = tmp_path / "node_reconciler.prom"
    rc, out, err = cli("apply", str(recipe), "--cluster", f"sim:{fleet}", "-o", "json",
                       "--metrics-file", str(prom), "--pushgateway", gateway)
    assert rc == 0 and json.loads(out)["result"] == "succeeded", err
    text = prom.read_text()
    assert f'node_reconciler_rollout_completed{{compartment="__default__",policy="legacy",recipe="{R}",' in text
    assert f'node_reconciler_run_result{{recipe="{R}",result="succeeded"}} 1' in text
    labels = f'package="fix",recipe="{R}",state="complete",version="2.1.0"'
    assert f"node_reconciler_package_state_count{{{labels}}} 2" in text
    assert f'node_reconciler_recipe_paused{{recipe="{R}"}} 0' in text
    assert [p for _, p, _, _ in _Gateway.received] == [f"/metrics/job/node-reconciler/recipe/{R}"]
    assert "metrics written to" in err and "metrics pushed to" in err
    # a push failure is a warning; the run's result and exit code stand
    _Gateway.status = 500
    rc, out, err = cli("apply", str(recipe), "--cluster", f"sim:{fleet}", "-o", "json", "--pushgateway", gateway)
    assert rc == 0 and "warning: metrics not exported" in err
    with pytest.raises(SystemExit):
        cli("apply", str(recipe), "--cluster", f"sim:{fleet}", "--pushgateway", "ftp://x")


def test_metrics_verb(tmp_path: Path, cli: RunCli) -> None:
    nodes = [make_node("n1", {"pool": "gpu"}, annotations={state_key(R): _st("complete"), status_key(R): "complete"}),
             make_node("n2", {"pool": "gpu"}), make_node("cpu", {"pool": "cpu"})]
    fleet = write_fleet(tmp_path / "fleet.yaml", nodes)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE)
    rc, out, _ = cli("metrics", str(recipe), "--cluster", f"sim:{fleet}")
    assert rc == 0
    assert f'node_reconciler_rollout_matched_nodes{{compartment="__default__",policy="legacy",recipe="{R}",' in out
    line = next(x for x in out.splitlines() if x.startswith("node_reconciler_rollout_completed{"))
    assert line.endswith(" 1")  # n1 is up to date, n2 still has work
    assert "node_reconciler_rollout_current_batch" not in out  # only a run knows it
    prom = tmp_path / "m.prom"
    rc, out, _ = cli("metrics", str(recipe), "--cluster", f"sim:{fleet}", "--metrics-file", str(prom))
    assert rc == 0 and f"metrics written to {prom}" in out and "node_reconciler_node_target_count" in prom.read_text()

"""Prometheus metrics (issue #8 item 7): exposition format, atomic textfile, Pushgateway push against a
local HTTP server, ``apply --metrics-file`` and the ``metrics`` verb."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import pytest

from reconciler.adapters.metrics.pushgateway import check_url, push
from reconciler.errors import InputError
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
from reconciler.report.metrics import MetricsError, exposition, rollout_metrics
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
def test_records_only_metrics_leave_rollout_series_out() -> None:
    ms = rollout_metrics(R, NODES)  # no rollout, no plan: counts over nodes with state
    assert ms.value("node_target_count") == 3 and ms.value("rollout_current_batch") is None
    assert ms.value("run_result") is None and ms.value("rollout_matched_nodes") is None
    assert ms.value("package_state_count", package="fix", version="2.1.0", state="erroring") == 1
    assert ms.value("package_stage_count", stage="apply") == 2
    assert ms.value("package_restarts_count", package="fix") == 2
    assert ms.value("node_status_count", status="none") is None  # n4 carries no state: not a target


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
    ms = rollout_metrics(R, NODES)
    url = push(gateway + "/", ms, grouping={"recipe": R})
    assert url == f"{gateway}/metrics/job/node-reconciler/recipe/{R}"
    push(gateway, ms, grouping={"recipe": "a/b"})
    (method, path, ctype, body), (_, slashed, _, _) = _Gateway.received
    assert (method, path) == ("PUT", f"/metrics/job/node-reconciler/recipe/{R}")
    assert slashed == "/metrics/job/node-reconciler/recipe@base64/YS9i"  # prometheus_client's grouping key
    assert ctype.startswith("text/plain; version=") and body == exposition(ms)
    _Gateway.status = 400
    with pytest.raises(MetricsError, match="HTTP 400"):
        push(gateway, ms)
    with pytest.raises(InputError):
        check_url("file:///etc/passwd")


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
    assert f'node_reconciler_run_result{{recipe="{R}",result="succeeded"}} 1.0' in text
    assert f'node_reconciler_recipe_phase{{phase="Complete",recipe="{R}"}} 1.0' in text
    assert f'node_reconciler_rollout_nodes{{recipe="{R}",state="complete"}} 2.0' in text
    labels = f'package="fix",recipe="{R}",state="complete",version="2.1.0"'
    assert f"node_reconciler_package_state_count{{{labels}}} 2.0" in text
    assert f'node_reconciler_recipe_paused{{recipe="{R}"}} 0.0' in text
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
    assert line.endswith(" 1.0")  # n1 is up to date, n2 still has work
    assert "node_reconciler_rollout_current_batch" not in out  # only a run knows it
    prom = tmp_path / "m.prom"
    rc, out, _ = cli("metrics", str(recipe), "--cluster", f"sim:{fleet}", "--metrics-file", str(prom))
    assert rc == 0 and f"metrics written to {prom}" in out and "node_reconciler_node_target_count" in prom.read_text()

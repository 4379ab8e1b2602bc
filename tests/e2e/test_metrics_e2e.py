"""The controller's ``/metrics`` on the real control plane, in the middle of a rollout (issue 38):
the progress gauges move (nodes by state, batch k of N, budget in use, phase) and every query of
the Grafana dashboard and of the alert rules resolves to a scraped metric with the labels it uses.

The controller runs as in tests/e2e/test_controller_e2e.py: a host process with a token of the
chart's ServiceAccount, NodeRecipe objects applied server side.
"""

from __future__ import annotations

import contextlib
from typing import Any

from kubernetes import client
from kubernetes.dynamic import DynamicClient

from tests.e2e.test_chart_e2e import apply
from tests.e2e.test_chart_e2e import chart_applied as chart_applied  # the fixture, requested by name
from tests.e2e.test_controller_e2e import (
    GROUP,
    PLURAL,
    VERSION,
    _complete,
    _kstatus,
    _metric,
    _wait,
    recipe_object,
)
from tests.e2e.test_controller_e2e import replicas as replicas  # the fixture
from tests.e2e.test_controller_e2e import sa_kubeconfig as sa_kubeconfig  # the fixture
from tests.unit.report.test_grafana_dashboard import check_queries, series_of


def test_every_dashboard_and_rule_query_resolves_in_a_scrape_mid_rollout(
        controlplane: Any, api: Any, make_nodes: Any, test_id: str, replicas: Any) -> None:
    nodes = make_nodes(4)
    name = f"met-{test_id[-4:]}"
    a = replicas("metrics")
    _wait("the controller ready", lambda: a.get("/readyz")[0] == 200, timeout=60)
    apply(DynamicClient(api), recipe_object(name, test_id, budget=1, run_for="3s", runtime_required=False))
    try:
        def mid() -> str:
            done = _complete(api, nodes, name)
            if not 1 <= len(done) < len(nodes):
                return ""
            code, body = a.get("/metrics", a.metrics)
            return body if code == 200 and f'recipe="{name}"' in body else ""

        body = _wait("a scrape with some nodes complete and some not", mid, timeout=240, every=0.5)
        check_queries(series_of(body), "the controller's /metrics mid-rollout")
        label = f'recipe="{name}"'
        assert _metric(body, f'node_reconciler_recipe_phase{{phase="Progressing",{label}}}') == 1, body
        assert 1 <= _metric(body, f'node_reconciler_rollout_nodes{{{label},state="complete"}}') < len(nodes), body
        def gauge(metric: str) -> float:
            (line,) = [x for x in body.splitlines() if x.startswith(metric + "{") and label in x]
            return float(line.rsplit(" ", 1)[1])

        assert 1 <= gauge("node_reconciler_rollout_current_batch") <= gauge("node_reconciler_rollout_batches") \
            == len(nodes), body  # batch k of N, one node per batch
        assert 0 <= gauge("node_reconciler_rollout_disrupted") <= 1, body  # budget 1: never more in use
        _wait("the NodeRecipe Current by kstatus", lambda: _kstatus(api, name) == "Current", timeout=240)
        body = a.get("/metrics", a.metrics)[1]
        assert _metric(body, f'node_reconciler_recipe_phase{{phase="Complete",{label}}}') == 1, body
        assert _metric(body, f'node_reconciler_rollout_nodes{{{label},state="complete"}}') == len(nodes), body
    except BaseException:
        print(a.tail())
        raise
    finally:
        with contextlib.suppress(Exception):
            client.CustomObjectsApi(api).delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)

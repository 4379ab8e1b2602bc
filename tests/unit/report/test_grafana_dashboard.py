"""docs/grafana/node-reconciler-dashboard.json and charts/node-reconciler/files/prometheus-rules.yaml
(the chart's PrometheusRule):
every query uses metric names and labels the reconciler really exports, as ``apply
--metrics-file`` writes them and as a controller serves them on ``/metrics`` in the middle of a
rollout (the real control plane: tests/e2e/test_metrics_e2e.py); the dashboard is well formed
(unique panel ids, layout inside the 24-column grid, data source from its variable)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.cli.main import main
from reconciler.report.metrics import HELP, PREFIX

ROOT = Path(__file__).resolve().parents[3]
DASHBOARD = ROOT / "docs" / "grafana" / "node-reconciler-dashboard.json"
RULES = ROOT / "charts" / "node-reconciler" / "files" / "prometheus-rules.yaml"
FLEET = ROOT / "examples" / "fleets" / "gpu-24.yaml"
METRIC = re.compile(r"\bnode_reconciler_[a-z_]+\b")
PROMQL_WORDS = {"by", "without", "sum", "min", "max", "time", "label_values"}


def _panels(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for p in items:
        out.append(p)
        out += _panels(p.get("panels", []))
    return out


def series_of(text: str) -> dict[str, set[str]]:
    """Metric name → label names of the samples in an exposition text."""
    series: dict[str, set[str]] = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        m = re.match(r"([a-z_]+)(?:\{(.*)\})? ", line)
        assert m, line
        series.setdefault(m.group(1), set()).update(re.findall(r'([a-z_]+)="', m.group(2) or ""))
    return series


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """Metric name → label names, from a real apply run's metrics file."""
    out = tmp_path_factory.mktemp("m") / "metrics.prom"
    rc = main(["apply", str(ROOT / "recipes" / "gpu-training-tuning.yaml"), "--cluster", f"sim:{FLEET}",
               "--metrics-file", str(out), "-o", "json"])
    assert rc == 0
    return series_of(out.read_text())


def queries() -> list[tuple[str, str, str]]:
    """(where, expr, legendFormat) of every dashboard panel target and query variable, and of
    every alert rule (its annotations' ``$labels.x`` as the legend)."""
    dash = json.loads(DASHBOARD.read_text())
    out = []
    for p in _panels(dash["panels"]):
        for t in p.get("targets", []):
            out.append((f"panel {p['id']} {p['title']}", t["expr"], t.get("legendFormat", "")))
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            out.append((f"variable {v['name']}", v["query"]["query"], ""))
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            legend = " ".join(f"{{{{{x}}}}}" for x in re.findall(r"\$labels\.([a-z_]+)", json.dumps(rule)))
            out.append((f"rule {rule['alert']}", rule["expr"], legend))
    return out


def check_queries(series: dict[str, set[str]], what: str) -> set[str]:
    """Every query's metrics are in ``series`` with the labels it uses; returns the metrics used."""
    used: set[str] = set()
    for where, expr, legend in queries():
        names = set(METRIC.findall(expr))
        assert names, f"{where}: no node_reconciler_ metric in {expr!r}"
        assert names <= set(series), f"{where}: metric(s) {names - set(series)} not in {what}"
        used |= names
        labels = set.intersection(*(series[n] for n in names))
        referenced = set(re.findall(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", expr))
        wanted = {x.strip() for group in referenced for x in group.split(",") if x.strip()}
        for metric, selector in re.findall(r"(node_reconciler_[a-z_]+)\{([^}]*)\}", expr):
            on_it = set(re.findall(r"([a-z_]+)\s*(?:=~|!=|!~|=)\s*\"", selector))
            assert on_it <= series[metric], f"{where}: label(s) {on_it - series[metric]} not on {metric}"
        wanted |= set(re.findall(r"\{\{\s*([a-z_]+)\s*\}\}", legend))
        m = re.search(r"label_values\([^,]+,\s*([a-z_]+)\)", expr)
        if m:
            wanted.add(m.group(1))
        assert wanted <= labels, f"{where}: label(s) {wanted - labels} not on {names}"
        assert expr.count("(") == expr.count(")") and expr.count("{") == expr.count("}"), where
    return used


def test_every_query_uses_exported_metrics_and_their_labels(exported: dict[str, set[str]]) -> None:
    assert set(exported) == {PREFIX + k for k in HELP}  # the run exports every documented family
    assert len(queries()) >= 18
    used = check_queries(exported, "an apply's metrics file")
    # the dashboard shows every family
    assert used == set(exported), set(exported) - used


def test_every_query_resolves_in_a_scrape_of_a_controller_mid_rollout() -> None:
    """The controller (on the simulated fleet) scraped while its rollout has nodes in progress:
    every dashboard and rule query finds its metrics and labels there."""
    from prometheus_client import generate_latest

    from tests.unit.controller.conftest import make, recipe_object

    ctl, _, writer = make([recipe_object("gpu-training-tuning.yaml")])
    scraped: list[str] = []

    def hook(name: str, status: dict[str, Any]) -> None:
        nodes = status.get("nodes", {})
        if not scraped and status.get("phase") == "Progressing" and nodes.get("complete", 0) >= 3 and \
                nodes.get("pending"):
            scraped.append(generate_latest(ctl.metrics.registry).decode())

    writer.hook = hook
    assert ctl.reconcile(["startup"]) == "succeeded"
    (text,) = scraped
    series = series_of(text)
    check_queries(series, "the controller's /metrics mid-rollout")
    assert 'node_reconciler_recipe_phase{phase="Progressing",recipe="gpu-training-tuning"} 1.0' in text


def test_dashboard_is_well_formed() -> None:
    dash = json.loads(DASHBOARD.read_text())
    panels = _panels(dash["panels"])
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    names = {v["name"] for v in dash["templating"]["list"]}
    assert {"datasource", "recipe", "compartment"} <= names
    for p in panels:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
        if p["type"] != "row":
            assert p["datasource"]["uid"] == "${datasource}" and p["targets"], p["title"]
            assert all(t["datasource"]["uid"] == "${datasource}" for t in p["targets"])
    # no two panels overlap
    cells: dict[tuple[int, int], str] = {}
    for p in panels:
        g = p["gridPos"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, (p["title"], cells.get((x, y)))
                cells[(x, y)] = p["title"]

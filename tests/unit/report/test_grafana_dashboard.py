"""docs/grafana/node-reconciler-dashboard.json: every query uses metric names and labels the
reconciler really exports (as ``apply --metrics-file`` writes them), and the dashboard is well
formed (unique panel ids, layout inside the 24-column grid, data source from its variable)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from reconciler.cli.main import main
from reconciler.report.metrics import _HELP, PREFIX

ROOT = Path(__file__).resolve().parents[3]
DASHBOARD = ROOT / "docs" / "grafana" / "node-reconciler-dashboard.json"
FLEET = ROOT / "examples" / "fleets" / "gpu-24.yaml"
METRIC = re.compile(r"\bnode_reconciler_[a-z_]+\b")
PROMQL_WORDS = {"by", "without", "sum", "min", "max", "time", "label_values"}


def _panels(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for p in items:
        out.append(p)
        out += _panels(p.get("panels", []))
    return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """Metric name → label names, from a real apply run's metrics file."""
    out = tmp_path_factory.mktemp("m") / "metrics.prom"
    rc = main(["apply", str(ROOT / "recipes" / "gpu-training-tuning.yaml"), "--cluster", f"sim:{FLEET}",
               "--metrics-file", str(out), "-o", "json"])
    assert rc == 0
    series: dict[str, set[str]] = {}
    for line in out.read_text().splitlines():
        if line.startswith("#") or not line:
            continue
        m = re.match(r"([a-z_]+)(?:\{(.*)\})? ", line)
        assert m, line
        series.setdefault(m.group(1), set()).update(re.findall(r'([a-z_]+)="', m.group(2) or ""))
    return series


def _queries(dash: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(where, expr, legendFormat) of every panel target and query variable."""
    out = []
    for p in _panels(dash["panels"]):
        for t in p.get("targets", []):
            out.append((f"panel {p['id']} {p['title']}", t["expr"], t.get("legendFormat", "")))
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            out.append((f"variable {v['name']}", v["query"]["query"], ""))
    return out


def test_every_query_uses_exported_metrics_and_their_labels(exported: dict[str, set[str]]) -> None:
    dash = json.loads(DASHBOARD.read_text())
    assert set(exported) == {PREFIX + k for k in _HELP}  # the run exports every documented family
    queries = _queries(dash)
    assert len(queries) >= 15
    used: set[str] = set()
    for where, expr, legend in queries:
        names = set(METRIC.findall(expr))
        assert names, f"{where}: no node_reconciler_ metric in {expr!r}"
        assert names <= set(exported), f"{where}: unknown metric(s) {names - set(exported)}"
        used |= names
        labels = set.intersection(*(exported[n] for n in names))
        referenced = set(re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr))
        wanted = {x.strip() for group in referenced for x in group.split(",") if x.strip()}
        wanted |= set(re.findall(r"\{?([a-z_]+)\s*(?:=~|!=|!~|=)\s*\"", expr))
        wanted |= set(re.findall(r"\{\{\s*([a-z_]+)\s*\}\}", legend))
        m = re.search(r"label_values\([^,]+,\s*([a-z_]+)\)", expr)
        if m:
            wanted.add(m.group(1))
        assert wanted <= labels, f"{where}: label(s) {wanted - labels} not on {names}"
        assert expr.count("(") == expr.count(")") and expr.count("{") == expr.count("}"), where
    # the dashboard shows every family except none
    assert used == set(exported), set(exported) - used


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

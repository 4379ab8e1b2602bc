"""``-o jsonpath=`` and ``-o custom-columns=`` (kubectl's template outputs, issue 38) on ``status``
and ``plan``: filled from the ``-o json`` document; a malformed template is exit 2 naming it."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.cli.templates import parse_template

ROOT = Path(__file__).resolve().parents[3]
DOC = {"nodes": [{"name": "a", "ok": True, "failures": []},
                 {"name": "b", "ok": False, "failures": [{"reason": "StageFailed"}, {"reason": "RebootTimeout"}]}]}


@pytest.mark.parametrize(("spec", "out"), [
    ("jsonpath={.nodes[*].name}", "a b"),
    ('jsonpath={.nodes[*].name}{"\\n"}', "a b\n"),
    ("jsonpath=nodes: {.nodes[1].name}!", "nodes: b!"),
    ("jsonpath={.nodes[*].ok}", "true false"),
    ('jsonpath={.nodes[?(@.name=="b")].failures[*].reason}', "StageFailed RebootTimeout"),
    ("jsonpath={nodes[0].name}", "a"),  # the leading dot is optional
    ("custom-columns=NODE:.name,WHY:.failures[*].reason",
     "NODE   WHY\na      <none>\nb      StageFailed,RebootTimeout\n"),
], ids=["list", "literal-newline", "text-around", "booleans", "filter", "no-dot", "columns"])
def test_a_template_fills_in_the_document(spec: str, out: str) -> None:
    t = parse_template(spec)
    assert t is not None and t.render(DOC, DOC["nodes"]) == out


@pytest.mark.parametrize(("spec", "words"), [
    ("jsonpath={range .nodes[*]}{.name}{end}", "{range}/{end}"),
    ("jsonpath=plain text", "no {expression}"),
    ("jsonpath={.nodes[*].name", "unbalanced"),
    ("jsonpath={.nodes[}", "not a JSONPath expression"),
    ("custom-columns=NODE", "not NAME:EXPRESSION"),
    ("custom-columns=:.name", "not NAME:EXPRESSION"),
], ids=["range", "no-expression", "unbalanced", "bad-expression", "no-colon", "no-name"])
def test_a_malformed_template_names_the_problem(spec: str, words: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=words.replace("{", r"\{").replace("}", r"\}")):
        parse_template(spec)


def test_other_outputs_are_not_templates() -> None:
    assert parse_template("json") is None and parse_template("wide") is None


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "reconciler", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_status_and_plan_print_templates_from_their_json_documents() -> None:
    fleet = "sim:examples/fleets/gpu-24.yaml"
    nodes = json.loads(_cli("status", "--cluster", fleet, "-o", "json").stdout)["nodes"]
    r = _cli("status", "--cluster", fleet, "-o", "jsonpath={.nodes[*].name}")
    assert r.returncode == 0 and r.stdout.split() == [n["name"] for n in nodes]
    r = _cli("status", "--cluster", fleet, "-o", "custom-columns=NODE:.name", "--no-headers")
    assert r.stdout.split() == [n["name"] for n in nodes]
    plan = json.loads(_cli("plan", "recipes/gpu-training-tuning.yaml", "--cluster", fleet, "-o", "json").stdout)
    r = _cli("plan", "recipes/gpu-training-tuning.yaml", "--cluster", fleet, "-o",
             "custom-columns=NODE:.name,BATCH:.batch")
    rows = [line.split() for line in r.stdout.splitlines()]
    assert rows[0] == ["NODE", "BATCH"] and rows[1:] == [[n["name"], str(n["batch"])] for n in plan["nodes"]]
    bad = _cli("status", "--cluster", fleet, "-o", "jsonpath={range .nodes[*]}{.name}{end}")
    assert bad.returncode == 2 and "-o jsonpath" in bad.stderr and "Traceback" not in bad.stderr

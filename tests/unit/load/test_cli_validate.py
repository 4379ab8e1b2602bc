"""``reconciler validate``: exit codes, one-line errors on stderr, JSON output."""

from __future__ import annotations

import json
import re

import pytest

import reconciler.cli.main as cli

GOOD = """\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: NodeRecipe
metadata: {name: good}
spec:
  deploymentPolicy: gpu
  packages:
    tools: {version: 1.0.0, image: ghcr.io/x/shellscript, containerSHA: "sha256:%s"}
""" % ("a" * 64)
POLICY = """\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: DeploymentPolicy
metadata: {name: gpu}
spec: {default: {budget: {count: 1}}}
"""
BAD = """\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: NodeRecipe
metadata: {name: bad}
spec:
  priority: 0
  packages:
    tools: {version: one, image: ghcr.io/x/shellscript, extra: 1, containerSHA: "sha256:%s"}
""" % ("a" * 64)

LINE = re.compile(r"^\S+:\d+:\d+: \S+: .+$")


@pytest.fixture(autouse=True)
def only_validate(monkeypatch: pytest.MonkeyPatch) -> None:
    """Build the parser with the validate verb only, so this test does not depend on other verbs."""
    monkeypatch.setattr(cli, "VERBS", ("validate",))


def test_ok_exit_0_with_summary(write, capsys):
    r = write("r.yaml", GOOD)
    p = write("p.yaml", POLICY)
    assert cli.main(["validate", r, "--policy", p]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "ok: 1 recipes (good), 1 policies (gpu)" and err == ""


def test_errors_exit_2_one_line_each_on_stderr(write, capsys):
    bad = write("bad.yaml", BAD)
    assert cli.main(["validate", bad, "--no-locked"]) == 2  # locked mode adds its own line for 'one'
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and "Traceback" not in err
    assert len(lines) == 3 and all(LINE.match(line) for line in lines), lines
    assert lines[0] == f"{bad}:5:3: spec.priority: Input should be greater than or equal to 1"
    assert lines[1].startswith(f"{bad}:7:13: spec.packages.tools.version: 'one' is not a semantic version")
    assert lines[2] == f"{bad}:7:57: spec.packages.tools.extra: unknown field 'extra'"


def test_locked_flag_enforces_pinning(write, capsys):
    r = write("r.yaml", GOOD.replace(', containerSHA: "sha256:%s"' % ("a" * 64), ""))
    p = write("p.yaml", POLICY)
    assert cli.main(["validate", "--locked", r, "--policy", p]) == 2
    err = capsys.readouterr().err
    assert f"{r}:7:5: spec.packages.tools: package 'tools' has no containerSHA" in err


def test_missing_policy_is_reported_by_validate(write, capsys):
    r = write("r.yaml", GOOD)
    p = write("p.yaml", POLICY.replace("name: gpu", "name: other"))
    assert cli.main(["validate", r, "--policy", p]) == 2
    assert f"{r}:5:3: spec.deploymentPolicy: deploymentPolicy 'gpu' is not defined" in capsys.readouterr().err


def test_json_output(write, capsys):
    bad = write("bad.yaml", BAD)
    assert cli.main(["validate", bad, "-o", "json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and doc["recipes"] == [] and doc["policies"] == []
    assert doc["errors"][0] == {
        "file": bad,
        "line": 5,
        "column": 3,
        "field": "spec.priority",
        "message": "Input should be greater than or equal to 1",
    }
    good = write("good.yaml", GOOD.replace("  deploymentPolicy: gpu\n", ""))
    assert cli.main(["validate", good, "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"ok": True, "recipes": ["good"], "policies": [], "errors": [],
                                                   "warnings": []}


def test_unreadable_yaml_is_exit_2_not_a_traceback(write, capsys):
    path = write("broken.yaml", "a: [\n")
    assert cli.main(["validate", path]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:2:1: YAML syntax error") and "Traceback" not in err


def test_locked_by_default_as_plan_and_apply(write, capsys):
    """A CI gate that runs validate passes exactly what apply takes: an unpinned package is an
    error unless --no-locked says so (as for plan and apply)."""
    r = write("r.yaml", GOOD.replace(', containerSHA: "sha256:%s"' % ("a" * 64), ""))
    p = write("p.yaml", POLICY)
    assert cli.main(["validate", r, "--policy", p]) == 2
    assert "has no containerSHA" in capsys.readouterr().err
    assert cli.main(["validate", r, "--policy", p, "--locked"]) == 2
    capsys.readouterr()
    assert cli.main(["validate", r, "--policy", p, "--no-locked"]) == 0

"""DeploymentPolicy documents (semantics-nodewright.md §1.2, decision (i))."""

from __future__ import annotations

import textwrap

import pytest

from reconciler.load import load_inputs
from reconciler.model.policy import Budget
from reconciler.model.selector import LabelSelector

POLICY = """\
apiVersion: {api}
kind: DeploymentPolicy
metadata:
  name: gpu-rollout
  labels: {{team: infra}}
spec:
  resetBatchStateOnCompletion: false
  default:
    budget: {{count: 1}}
    strategy: {{fixed: {{initialBatch: 1, failureThreshold: 1}}}}
  compartments:
    - name: us-east-1a
      selector: {{matchLabels: {{topology.kubernetes.io/zone: us-east-1a}}}}
      budget: {{percent: 25}}
      strategy:
        exponential: {{initialBatch: 1, growthFactor: 2, batchThreshold: 100, failureThreshold: 2, safetyLimit: 50}}
    - name: us-east-1b
      selector: {{matchLabels: {{topology.kubernetes.io/zone: us-east-1b}}}}
      budget: {{count: 3}}
      strategy: {{linear: {{initialBatch: 1, delta: 2, batchThreshold: 90}}}}
status: {{ignored: true}}
"""


@pytest.mark.parametrize(
    "api",
    ["reconciler.nodewright.dev/v1alpha1", "nodewright.nvidia.com/v1alpha1", "skyhook.nvidia.com/v1alpha1"],
)
def test_policy_loads_in_every_accepted_group(write, api):
    path = write("p.yaml", POLICY.format(api=api))
    inputs = load_inputs([path])
    assert inputs.recipes == ()
    pol = inputs.policies["gpu-rollout"]
    assert pol.source == path and pol.resetBatchStateOnCompletion is False
    assert pol.default.budget == Budget(count=1)
    assert pol.default.strategy is not None and pol.default.strategy.kind == "fixed"
    assert pol.default.strategy.params.failureThreshold == 1
    a, b = pol.compartments
    assert a.name == "us-east-1a" and a.budget == Budget(percent=25)
    assert a.selector == LabelSelector(matchLabels={"topology.kubernetes.io/zone": "us-east-1a"})
    assert a.strategy is not None and a.strategy.exponential is not None
    assert (a.strategy.exponential.growthFactor, a.strategy.exponential.failureThreshold) == (2, 2)
    assert b.strategy is not None and b.strategy.linear is not None and b.strategy.linear.delta == 2
    assert b.strategy.linear.safetyLimit == 50  # default filled in


def test_policy_with_only_a_default(write):
    path = write(
        "p.yaml",
        """
        apiVersion: reconciler.nodewright.dev/v1alpha1
        kind: DeploymentPolicy
        metadata: {name: simple}
        spec:
          default: {budget: {percent: 10}}
        """,
    )
    pol = load_inputs([path]).policies["simple"]
    assert pol.compartments == () and pol.default.strategy is None and pol.resetBatchStateOnCompletion


HEAD = """\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: DeploymentPolicy
metadata:
  name: bad
spec:
"""

OK_DEFAULT = "default:\n  budget: {count: 1}\n"

# (id, spec body with "# <-" where the error must point, message part, field)
REJECTIONS = [
    # numbers and booleans are taken only as themselves (no lax coercion of "25", true or "yes")
    ("percent-string", 'default:\n  budget:\n    percent: "25"  # <-\n', "Input should be a valid integer",
     "spec.default.budget.percent"),
    ("percent-bool", "default:\n  budget:\n    percent: true  # <-\n", "Input should be a valid integer",
     "spec.default.budget.percent"),
    ("initial-batch-string", 'default:\n  budget: {count: 1}\n  strategy:\n    fixed:\n      initialBatch: "1"  # <-\n',
     "Input should be a valid integer", "spec.default.strategy.fixed.initialBatch"),
    (
        "zero-count-default",
        "default:\n  budget:\n    count: 0  # <-\n",
        "a policy that can never finish",
        "spec.default.budget.count",
    ),
    (
        "zero-percent-compartment",
        OK_DEFAULT + "compartments:\n  - name: a\n    selector: {matchLabels: {z: a}}\n    budget:\n"
        "      percent: 0  # <-\n",
        "a policy that can never finish",
        "spec.compartments[0].budget.percent",
    ),
    (
        "percent-over-100",
        "default:\n  budget:\n    percent: 101  # <-\n",
        "must be 1-100 (a percentage of the compartment's nodes)",  # not "0 would never let a node move"
        "spec.default.budget.percent",
    ),
    (
        "budget-with-both",
        "default:\n  budget: {count: 1, percent: 5}  # <-\n",
        "budget needs exactly one of percent or count",
        "spec.default.budget",
    ),
    (
        "identical-selectors",
        OK_DEFAULT + "compartments:\n"
        "  - {name: a, selector: {matchLabels: {zone: a, pool: gpu}}, budget: {count: 1}}\n"
        "  - name: b\n"
        "    selector: {matchLabels: {pool: gpu, zone: a}}  # <-\n"
        "    budget: {count: 1}\n",
        "compartments 'a' (line 9) and 'b' have identical selectors",
        "spec.compartments[1].selector",
    ),
    (
        "duplicate-compartment-name",
        OK_DEFAULT + "compartments:\n"
        "  - {name: a, selector: {matchLabels: {zone: a}}, budget: {count: 1}}\n"
        "  - name: a  # <-\n"
        "    selector: {matchLabels: {zone: b}}\n"
        "    budget: {count: 1}\n",
        "compartment name 'a' is used twice (first at line 9)",
        "spec.compartments[1].name",
    ),
    (
        "reserved-compartment-name",
        OK_DEFAULT + "compartments:\n  - name: __default__  # <-\n    selector: {}\n    budget: {count: 1}\n",
        "is reserved",
        "spec.compartments[0].name",
    ),
    (
        "two-strategies",
        "default:\n  budget: {count: 1}\n  strategy: {fixed: {}, linear: {}}  # <-\n",
        "strategy needs exactly one of fixed, linear or exponential",
        "spec.default.strategy",
    ),
    (
        "unknown-strategy-param",
        "default:\n  budget: {count: 1}\n  strategy:\n    exponential:\n      growth: 2  # <-\n",
        "unknown field 'growth'",
        "spec.default.strategy.exponential.growth",
    ),
    (
        "growth-factor-one",
        "default:\n  budget: {count: 1}\n  strategy:\n    exponential:\n      growthFactor: 1  # <-\n",
        "greater than or equal to 2",
        "spec.default.strategy.exponential.growthFactor",
    ),
    (
        "unknown-spec-field",
        OK_DEFAULT + "compartment: []  # <-\n",
        "unknown field 'compartment' in spec; did you mean 'compartments'?",
        "spec.compartment",
    ),
    (
        "name-in-spec",
        OK_DEFAULT + "name: other  # <-\n",
        "unknown field 'name' in spec",
        "spec.name",
    ),
]


@pytest.mark.parametrize(("body", "message", "field"), [c[1:] for c in REJECTIONS], ids=[c[0] for c in REJECTIONS])
def test_policy_rejection_names_file_line_and_field(write, fail, line_of, body, message, field):
    path = write("policy.yaml", HEAD + textwrap.indent(body, "  "))
    errors = fail([path])
    hits = [e for e in errors if e.field == field]
    assert hits, [str(e) for e in errors]
    assert message in hits[0].message
    line = line_of(path)
    assert str(hits[0]).startswith(f"{path}:{line}:")


def test_missing_default_points_at_spec(write, fail):
    path = write("p.yaml", HEAD + "  resetBatchStateOnCompletion: true\n")
    (err,) = fail([path])
    assert str(err) == f"{path}:5:1: spec.default: missing required field 'default'"


def test_identical_selectors_reported_once(write, fail):
    body = (
        OK_DEFAULT + "compartments:\n"
        "  - {name: a, selector: {matchLabels: {zone: a}}, budget: {count: 1}}\n"
        "  - {name: b, selector: {matchLabels: {zone: a}}, budget: {count: 1}}\n"
    )
    errors = fail([write("p.yaml", HEAD + textwrap.indent(body, "  "))])
    assert len(errors) == 1 and "identical selectors" in errors[0].message


def test_policy_name_must_be_valid(write, fail):
    path = write("p.yaml", HEAD.replace("name: bad", "name: Bad_Policy") + textwrap.indent(OK_DEFAULT, "  "))
    (err,) = fail([path])
    assert err.field == "metadata.name" and err.pos is not None and err.pos.line == 4

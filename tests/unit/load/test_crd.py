"""The NodeRecipe CRD's schema as the API server applies it (reconciler.load.crd): our check agrees
with jsonschema on the same schema translated to JSON Schema, and `validate` refuses what the API
server would refuse even where the loader is lenient."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from reconciler.load.crd import object_schema, schema_problems
from reconciler.load.yamlsafe import YamlDoc, load_file
from tests.unit.ops.conftest import RunCli

ROOT = Path(__file__).resolve().parents[3]


def _json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The structural schema as JSON Schema with strict field validation (independent of ours)."""
    s = copy.deepcopy(schema)

    def walk(n: dict[str, Any]) -> None:
        if n.pop("x-kubernetes-int-or-string", False):
            n["type"] = ["integer", "string"]
        if n.pop("nullable", False) and "type" in n:
            n["type"] = [n["type"], "null"]
        if "properties" in n and not n.get("x-kubernetes-preserve-unknown-fields"):
            n["additionalProperties"] = False
        for v in (n.get("properties") or {}).values():
            walk(v)
        for k in ("items", "additionalProperties"):
            if isinstance(n.get(k), dict):
                walk(n[k])

    walk(s)
    return s


def _docs() -> list[YamlDoc]:
    out = []
    for p in sorted([*(ROOT / "recipes").glob("*.yaml"), *(ROOT / "tests" / "data").rglob("*.yaml")]):
        try:
            docs = load_file(str(p))
        except Exception:  # the corpus holds files the parser refuses
            continue
        out += [d for d in docs if isinstance(d.data, dict) and d.data.get("kind") == "NodeRecipe"]
    return out


MUTATIONS: list[tuple[tuple[str | int, ...], Any]] = [
    (("spec", "priority"), "high"), (("spec", "priority"), 0), (("spec", "sequencing"), "cluster"),
    (("spec", "drain", "timeoutSeconds"), True), (("spec", "packagez"), {}), (("metadata", "version"), "1"),
    (("spec", "packages", "x"), {"version": "1.0.0", "image": "a/b", "resources": {"cpuLimit": 4}}),
    (("spec", "nodeSelector", "matchExpressions"), [{"key": "a", "operator": "Near"}]),
    (("spec", "interruptionBudget"), {"percent": None}), (("status",), {"anything": [1]}),
    (("spec", "version"), 2026), (("spec",), None),
]


@pytest.mark.slow
def test_our_check_agrees_with_jsonschema_on_the_corpus_and_its_mutations() -> None:
    schema = object_schema()
    validator = jsonschema.validators.validator_for({})(_json_schema(dict(schema)))
    docs = _docs()
    assert len(docs) > 100
    checked = 0
    for doc in docs:
        variants = [doc.data]
        for path, value in MUTATIONS:
            data = copy.deepcopy(doc.data)
            node = data
            for key in path[:-1]:
                node = node.setdefault(key, {}) if isinstance(node, dict) else {}
            if isinstance(node, dict):
                node[path[-1]] = value
                variants.append(data)
        for data in variants:
            ours = schema_problems(YamlDoc(doc.file, 0, data, {}))
            theirs = list(validator.iter_errors({k: v for k, v in data.items() if k != "status"}))
            assert bool(ours) == bool(theirs), (doc.file, json.dumps(data)[:300], [str(e) for e in ours],
                                                [e.message for e in theirs])
            checked += 1
    assert checked > 1000


def test_validate_refuses_what_the_api_server_would_though_the_loader_reads_it(tmp_path: Path, cli: RunCli) -> None:
    """The loader takes resources quantities written as YAML numbers (rendered AICR manifests do);
    the CRD says string, so `kubectl apply` of this file would be refused."""
    f = tmp_path / "r.yaml"
    f.write_text("apiVersion: reconciler.nodewright.dev/v1alpha1\nkind: NodeRecipe\nmetadata: {name: r}\nspec:\n"
                 "  version: '1'\n  packages:\n    tools:\n      version: 1.0.0\n      image: ghcr.io/example/tools\n"
                 "      resources: {cpuRequest: 1, cpuLimit: '2', memoryRequest: 1Gi, memoryLimit: 1Gi}\n")
    rc, out, err = cli("validate", "--no-locked", str(f))
    assert rc == 2 and out == ""
    assert f"{f}:10:19: spec.packages.tools.resources.cpuRequest: the NodeRecipe CRD's schema refuses it: must be " \
           "of type string" in err


@pytest.mark.parametrize("output", ["table", "json"])
def test_validate_passes_the_deprecated_form_with_a_warning(tmp_path: Path, cli: RunCli, output: str) -> None:
    f = tmp_path / "r.yaml"
    f.write_text("apiVersion: reconciler.nodewright.dev/v1alpha1\nkind: NodeRecipe\nmetadata: {name: r, version: '1'}\n"
                 "spec:\n  packages: {tools: {version: 1.0.0, image: ghcr.io/example/tools}}\n")
    rc, out, err = cli("validate", "--no-locked", "-o", output, str(f))
    assert rc == 0
    assert err.startswith("warning: 1 recipe gives the release in metadata.version")
    if output == "json":
        assert json.loads(out)["warnings"] == [err.strip().removeprefix("warning: ")]

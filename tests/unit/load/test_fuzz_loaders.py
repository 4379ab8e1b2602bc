"""Property-based fuzzing of the input loaders (issue #14): recipes, policies, package
``config.json`` and ``apply --plan`` files.

Documents are generated structurally valid (a known-good document), then mutated: a value
anywhere replaced by an arbitrary JSON value (huge integers, NaN, odd strings with newlines and
control characters, deep lists), a key deleted or added, or the text itself cut or spliced. The
property: only the project's :class:`~reconciler.errors.InputError` escapes, and every error
names the file with a line and column. Fixed example budget, derandomised, so CI runs are
repeatable (``.ci/run`` runs them with the unit tier).
"""

from __future__ import annotations

import atexit
import copy
import itertools
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.cli.apply import _read_plan_hashes
from reconciler.errors import InputError, InputErrors
from reconciler.load import load_inputs
from reconciler.packages.config import load_package, validate_package

pytestmark = pytest.mark.slow  # fuzz sweeps with a fixed example budget: CI runs them, the fast tier not

FUZZ = settings(max_examples=200, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SHA = "sha256:" + "ab" * 32
_COUNTER = itertools.count()
_DIR = Path(tempfile.mkdtemp(prefix="reconciler-fuzz-"))
atexit.register(shutil.rmtree, _DIR, ignore_errors=True)

RECIPE: dict[str, Any] = {
    "apiVersion": "reconciler.nodewright.dev/v1alpha1",
    "kind": "NodeRecipe",
    "metadata": {"name": "fuzz", "version": "1.0.0", "labels": {"team": "infra"}},
    "spec": {
        "nodeSelector": {"matchLabels": {"pool": "gpu"},
                         "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
        "interruptionBudget": {"percent": 50},
        "priority": 10,
        "additionalTolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoExecute",
                                   "tolerationSeconds": 30}],
        "drain": {"timeoutSeconds": 600, "podSelector": {"matchLabels": {"app": "x"}}},
        "timeouts": {"stage": 600, "retryBackoff": 1.5},
        "packages": {
            "base": {"version": "1.0.0", "image": "ghcr.io/example/base", "containerSHA": SHA},
            "tuned": {"version": "2.0.0", "image": "ghcr.io/example/tuned", "containerSHA": SHA,
                      "dependsOn": {"base": "1.0.0"}, "interrupt": {"type": "service", "services": ["kubelet"]},
                      "configMap": {"a.conf": "x=1"}, "configInterrupts": {"a.conf": {"type": "noop"}},
                      "env": [{"name": "A", "value": "b"}], "gracefulShutdown": "30s",
                      "resources": {"cpuRequest": "500m", "cpuLimit": "1", "memoryRequest": "1Gi",
                                    "memoryLimit": "2Gi"}},
        },
    },
}
POLICY: dict[str, Any] = {
    "apiVersion": "reconciler.nodewright.dev/v1alpha1",
    "kind": "DeploymentPolicy",
    "metadata": {"name": "fuzz-policy"},
    "spec": {
        "default": {"budget": {"count": 1}, "strategy": {"fixed": {"initialBatch": 1}}},
        "compartments": [{"name": "gpu", "selector": {"matchLabels": {"pool": "gpu"}},
                          "budget": {"percent": 25},
                          "strategy": {"exponential": {"initialBatch": 1, "growthFactor": 2,
                                                       "failureThreshold": 2, "batchThreshold": 90}}}],
    },
}
STEP = {"name": "apply.sh", "path": "apply.sh", "arguments": [], "returncodes": [0], "on_host": True,
        "idempotence": True, "upgrade_step": False}
CONFIG: dict[str, Any] = {
    "schema_version": "v1", "package_name": "fuzz", "package_version": "1.0.0",
    "expected_config_files": ["a.conf"],
    "modes": {"apply": [STEP], "apply-check": [{**STEP, "name": "apply_check.sh", "path": "apply_check.sh",
                                               "env": {"X": "y"}}]},
}
PLAN: dict[str, Any] = {"plans": [{"planHash": "a" * 64, "recipe": {"name": "fuzz", "version": "1"},
                                   "summary": {"nodesChanging": 3}, "nodes": [{"name": "n1"}]}]}

_ODD_TEXT = st.sampled_from(["", " ", "\n", "x\n", "a/b/c", "..", "../../etc/passwd", "\x00", "\ud800",
                             "NaN", "1e400", "9" * 30, "{{ x }}", "-", "sha256:", "0x" + "f" * 40, "é", "\t"])
_TEXT = st.one_of(st.text(max_size=12), _ODD_TEXT)
_SCALAR = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True), _TEXT,
)
_VALUE = st.recursive(_SCALAR, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(_TEXT, inner, max_size=4)), max_leaves=12)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any]) -> Any:
    """``base`` with 0-3 mutations (replace a value, delete an entry, add a key)."""
    doc: Any = copy.deepcopy(base)
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        paths = list(_paths(doc))
        path = draw(st.sampled_from(paths))
        op = draw(st.sampled_from(["replace", "delete", "add"]))
        if not path:
            if op == "replace":
                doc = draw(_VALUE)
            continue
        parent: Any = doc
        for k in path[:-1]:
            parent = parent[k]
        last = path[-1]
        if op == "replace":
            parent[last] = draw(_VALUE)
        elif op == "delete":
            del parent[last]
        elif isinstance(parent[last], dict):
            parent[last][draw(_TEXT)] = draw(_VALUE)
        elif isinstance(parent[last], list):
            parent[last].append(draw(_VALUE))
    return doc


def _json(value: Any) -> str:
    return json.dumps(value, indent=1, ensure_ascii=False) if _dumpable(value) else json.dumps(value, indent=1)


def _dumpable(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (UnicodeEncodeError, ValueError):
        return False
    return True


@st.composite
def text_of(draw: st.DrawFn, base: dict[str, Any]) -> str:
    """A document as text: a mutated document as JSON (JSON is YAML), sometimes cut or spliced."""
    text = _json(draw(mutated(base)))
    how = draw(st.sampled_from(["as-is", "as-is", "cut", "splice"]))
    if how == "cut":
        text = text[: draw(st.integers(min_value=0, max_value=len(text)))]
    elif how == "splice":
        at = draw(st.integers(min_value=0, max_value=len(text)))
        text = text[:at] + draw(st.one_of(st.text(max_size=6), _ODD_TEXT, st.just("[" * 200))) + text[at:]
    return text


def _file(name: str, text: str) -> str:
    path = _DIR / f"{next(_COUNTER)}-{name}"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    return str(path)


def assert_located(err: InputError, file: str) -> None:
    """Every error of ``err`` names ``file`` with a line and a column."""
    for e in err.errors if isinstance(err, InputErrors) else [err]:
        assert e.pos is not None, str(e)
        assert e.pos.file == file, str(e)
        assert e.pos.line >= 1 and e.pos.column >= 1, str(e)
        assert "\n" not in str(e), repr(str(e))


@FUZZ
@given(text=text_of(RECIPE))
def test_recipe_loader_raises_only_positioned_input_errors(text: str) -> None:
    path = _file("recipe.yaml", text)
    try:
        load_inputs([path], locked=True, allow_empty=False)
    except InputError as e:
        assert_located(e, path)


@FUZZ
@given(text=text_of(POLICY))
def test_policy_loader_raises_only_positioned_input_errors(text: str) -> None:
    path = _file("policy.yaml", text)
    try:
        load_inputs([path], [path], allow_empty=True)
    except InputError as e:
        for one in e.errors if isinstance(e, InputErrors) else [e]:
            assert one.pos is not None and one.pos.line >= 1, str(one)


@pytest.fixture(scope="module")
def package_dir() -> Path:
    root = _DIR / "package"
    (root / "skyhook_dir").mkdir(parents=True)
    for f in ("apply.sh", "apply_check.sh"):
        (root / "skyhook_dir" / f).write_text("#!/bin/sh\nexit 0\n")
    return root


@FUZZ
@given(text=text_of(CONFIG))
def test_package_config_loader_raises_only_positioned_input_errors(package_dir: Path, text: str) -> None:
    config = package_dir / "config.json"
    config.write_text(text, encoding="utf-8", errors="surrogatepass")
    report = validate_package(str(package_dir))  # never raises
    for e in report.errors + report.warnings:
        assert e.pos is not None and e.pos.file == str(config) and e.pos.line >= 1, str(e)
    try:
        load_package(str(package_dir))
    except InputError as e:
        assert_located(e, str(config))


@FUZZ
@given(text=text_of(PLAN))
def test_plan_file_reader_raises_only_positioned_input_errors(text: str) -> None:
    path = _file("plan.json", text)
    try:
        hashes = _read_plan_hashes(path)
    except InputError as e:
        assert_located(e, path)
    else:
        assert hashes and all(isinstance(k, str) and len(v) == 64 for k, v in hashes.items())


def test_the_unmutated_documents_are_valid(package_dir: Path) -> None:
    """The generators start from valid documents (else the fuzzing would only test rejection)."""
    recipe = _file("recipe.yaml", _json(RECIPE))
    assert [r.name for r in load_inputs([recipe], locked=True).recipes] == ["fuzz"]
    policy = _file("policy.yaml", _json(POLICY))
    assert list(load_inputs([recipe], [policy]).policies) == ["fuzz-policy"]
    (package_dir / "config.json").write_text(_json(CONFIG))
    assert load_package(str(package_dir)).package_name == "fuzz"
    assert _read_plan_hashes(_file("plan.json", _json(PLAN))) == {"fuzz": "a" * 64}
    os.sync()

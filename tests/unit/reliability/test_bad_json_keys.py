"""Duplicate keys in JSON inputs (issue 36): refused as YAML's are, in every input written as JSON.

Python's JSON reader keeps the last of two equal keys silently; the YAML loader refuses them. Each
input the tool reads — a recipe (alone and inside a recipes directory), a policy, a kubeconfig
(``--kubeconfig`` and ``$KUBECONFIG``), ``--sim-config``, an ``apply --plan`` file, a ``draw``
result, a package's ``config.json`` and a saved simulated fleet's state — is written as JSON with
one key given twice: the document's first key, a key of its deepest object, a key of an object in
a list, and the same key spelled with a ``\\uXXXX`` escape. Each run ends with exit 2, no traceback,
one error at the second key's ``file:line:column`` naming the key and the line of the first, and
nothing written.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.cli.main import main
from reconciler.testing.fleetgen import make_node, write_fleet

ROOT = Path(__file__).resolve().parents[3]
RECIPE = ROOT / "recipes" / "gpu-training-tuning.yaml"
POLICY = ROOT / "policies" / "gpu-rollout.yaml"
PACKAGE = ROOT / "examples" / "packages" / "sysctl-shell"
KUBECONFIG = {"apiVersion": "v1", "kind": "Config",
              "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
              "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
              "current-context": "x", "users": [{"name": "u", "user": {"token": "t"}}]}
#: The labels the recipe selects.
GPU = {"nodepool": "gpu", "node.kubernetes.io/instance-type": "p5.48xlarge"}
SIM_CONFIG = {"stageSeconds": {"apply": 5, "default": 5},
              "failures": [{"node": "n1", "package": "sysctl-tuning", "stage": "apply", "exitCode": 3, "times": 1}]}


def render(value: Any, target: tuple[str | int, ...] | None, escape: bool = False) -> tuple[str, dict[str, Any]]:
    """``value`` as indented JSON with the first key of the object at ``target`` written twice (the
    second time with its first character as a ``\\uXXXX`` escape when ``escape``); returns the
    text and where: ``first`` (line of the first key), ``at`` ((line, column) of the second), ``key``."""
    lines: list[str] = []
    where: dict[str, Any] = {}

    def emit(v: Any, path: tuple[str | int, ...], ind: int, prefix: str, suffix: str) -> None:
        pad = " " * ind
        if isinstance(v, dict) and v:
            lines.append(pad + prefix + "{")
            members = [(k, x, False) for k, x in v.items()]
            if path == target:
                members.insert(1, (members[0][0], members[0][1], True))
            for n, (k, x, dup) in enumerate(members):
                text = json.dumps(k)
                if dup:
                    if escape:
                        text = '"' + f"\\u{ord(k[0]):04x}" + text[2:]
                    where["at"], where["key"] = (len(lines) + 1, ind + 3), k
                elif path == target and n == 0:
                    where["first"] = len(lines) + 1
                emit(x, (*path, k), ind + 2, text + ": ", "," if n < len(members) - 1 else "")
            lines.append(pad + "}" + suffix)
        elif isinstance(v, list) and v:
            lines.append(pad + prefix + "[")
            for n, x in enumerate(v):
                emit(x, (*path, n), ind + 2, "", "," if n < len(v) - 1 else "")
            lines.append(pad + "]" + suffix)
        else:
            lines.append(pad + prefix + json.dumps(v) + suffix)

    emit(value, (), 0, "", "")
    return "\n".join(lines) + "\n", where


Where = tuple[str | int, ...]


def _paths(value: Any, path: Where = (), in_list: bool = False) -> list[tuple[Where, bool]]:
    """Every non-empty object's path, and whether it sits in a list, depth first."""
    out: list[tuple[Where, bool]] = []
    if isinstance(value, dict) and value:
        out.append((path, in_list))
        for k, v in value.items():
            out += _paths(v, (*path, k), False)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*path, i), True)
    return out


def targets(value: Any) -> dict[str, tuple[tuple[str | int, ...], bool]]:
    """The four placements of the duplicate in ``value``."""
    found = _paths(value)
    nested = max((p for p, _ in found), key=len)  # the deepest object
    listed = next(p for p, in_list in found if in_list)
    return {"first-key": ((), False), "nested": (nested, False), "in-a-list": (listed, False),
            "escaped": ((), True)}


#: input → (the valid document, argv with {bad} and the world's files, file name of the input)
def _inputs(world: dict[str, Path]) -> dict[str, tuple[Any, list[str], str]]:
    recipe = yaml.safe_load(RECIPE.read_text())
    policy = yaml.safe_load(POLICY.read_text())
    return {
        "recipe": (recipe, ["validate", "{bad}", "--policy", "{policy}"], "bad.json"),
        "recipe-in-directory": (recipe, ["plan", "{dir}", "--policy", "{policy}", "--cluster", "sim:{fleet}"],
                                "recipes/bad.yaml"),
        "policy": (policy, ["plan", "{recipe}", "--policy", "{bad}", "--cluster", "sim:{fleet}"], "bad.json"),
        "kubeconfig": (KUBECONFIG, ["plan", "{recipe}", "--policy", "{policy}", "--kubeconfig", "{bad}"], "bad.json"),
        "kubeconfig-env": (KUBECONFIG, ["plan", "{recipe}", "--policy", "{policy}"], "bad.json"),
        "sim-config": (SIM_CONFIG, ["simulate", "{recipe}", "--policy", "{policy}", "--cluster", "sim:{fleet}",
                                    "--sim-config", "{bad}"], "bad.json"),
        "plan-file": (json.loads(world["plan"].read_text()), ["apply", "{recipe}", "--policy", "{policy}",
                                                               "--cluster", "sim:{fleet}", "--plan", "{bad}"],
                      "bad.json"),
        "draw-input": (json.loads(world["result"].read_text()), ["draw", "{bad}", "--report", "{scratch}/r.html"],
                       "bad.json"),
        "package-config": (json.loads((PACKAGE / "config.json").read_text()), ["package", "validate", "{pkg}"],
                           "pkg/config.json"),
    }


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("json-keys")
    fleet = d / "fleet.yaml"
    write_fleet(fleet, [make_node(f"n{i}", GPU) for i in (1, 2)])
    plan, result = d / "plan.json", d / "result.json"
    run = d / "run-fleet.yaml"
    shutil.copy(fleet, run)
    for argv, out in ((["plan", str(RECIPE), "--policy", str(POLICY), "--cluster", f"sim:{fleet}", "-o", "json"], plan),
                      (["apply", str(RECIPE), "--policy", str(POLICY), "--cluster", f"sim:{run}", "-o", "json"],
                       result)):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert main(argv) == 0
        out.write_text(buf.getvalue())
    return {"fleet": fleet, "plan": plan, "result": result}


INPUTS = ["recipe", "recipe-in-directory", "policy", "kubeconfig", "kubeconfig-env", "sim-config", "plan-file",
          "draw-input", "package-config"]
PLACES = ["first-key", "nested", "in-a-list", "escaped"]


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("what", INPUTS)
def test_a_duplicate_key_is_refused_at_its_position(what: str, place: str, world: dict[str, Path], tmp_path: Path,
                                                    capfd: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    doc, argv, name = _inputs(world)[what]
    target, escape = targets(doc)[place]
    text, where = render(doc, target, escape)
    bad = tmp_path / name
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_text(text)
    if what == "package-config":
        shutil.copytree(PACKAGE / "skyhook_dir", tmp_path / "pkg" / "skyhook_dir")
    fleet = tmp_path / "fleet.yaml"
    shutil.copy(world["fleet"], fleet)
    recipe = tmp_path / "recipe.yaml"
    shutil.copy(RECIPE, recipe)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    values = {"bad": str(bad), "dir": str(bad.parent), "fleet": str(fleet), "recipe": str(recipe),
              "policy": str(POLICY), "scratch": str(scratch), "pkg": str(tmp_path / "pkg")}
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    if what == "kubeconfig-env":
        monkeypatch.setenv("KUBECONFIG", str(bad))
    before = hashlib.sha256(fleet.read_bytes()).hexdigest()
    try:
        rc = main([a.format(**values) for a in argv])
    except SystemExit as e:
        rc = int(e.code or 0)
    out = capfd.readouterr()
    assert "Traceback" not in out.err + out.out
    assert rc == 2, f"{what}/{place}: exit {rc}\n{out.err}"
    line, column = where["at"]
    want_at = f"{bad}:{line}:{column}: "
    want = f"duplicate key {where['key']!r} (first defined at line {where['first']})"
    hits = [x for x in out.err.splitlines() if want_at in x and want in x]
    assert hits, f"{what}/{place}: no line with {want_at!r} and {want!r} in\n{out.err}"
    assert hashlib.sha256(fleet.read_bytes()).hexdigest() == before
    assert list(scratch.iterdir()) == []


@pytest.mark.parametrize("escape", [False, True])
def test_a_duplicate_key_in_a_saved_simulation_state_is_refused(escape: bool, tmp_path: Path,
                                                                capfd: pytest.CaptureFixture[str]) -> None:
    """The saved state of a ``--sim-save`` fleet (JSON in an annotation) was read with Python's
    reader: a key given twice was taken silently, the last one winning."""
    key = "\\u0072ebootUpAt" if escape else "rebootUpAt"
    fleet = tmp_path / "fleet.yaml"
    node = make_node("n1", GPU,
                     annotations={"sim.reconciler.nodewright.dev/state": f'{{"rebootUpAt": 5.0, "{key}": 9.0}}'})
    write_fleet(fleet, [node])
    before = fleet.read_bytes()
    rc = main(["plan", str(RECIPE), "--policy", str(POLICY), "--cluster", f"sim:{fleet}"])
    err = capfd.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err
    assert "items[0] (Node/n1)" in err and "saved simulation state" in err
    assert "duplicate key 'rebootUpAt' (first defined at line 1) at line 1 column 21" in err, err
    assert fleet.read_bytes() == before

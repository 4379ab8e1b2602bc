"""The generated reference (scripts/gen-reference, scripts/refgen) covers the code and is up to date with it: every
verb and flag has help text and is on the CLI page, every exit code has a meaning, every recipe
and policy field has a description that is on its page and in the NodeRecipe CRD's schema, and
the checked-in pages are what the generator writes today."""

from __future__ import annotations

import argparse
import ast
import itertools
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from reconciler.cli.main import build_parser
from reconciler.cli.opsargs import DRY_RUN_VALUE
from reconciler.load import policies as policy_loader
from reconciler.load import recipes as recipe_loader
from reconciler.load.crd import noderecipe_crd
from reconciler.model.policy import DeploymentPolicy
from reconciler.model.recipe import Package, Recipe
from reconciler.model.vocab import Phase

ROOT = Path(__file__).resolve().parents[3]


sys.path.insert(0, str(ROOT / "scripts"))
import refgen as GEN  # noqa: E402  (scripts/refgen: the generators of scripts/gen-reference)


def every_parser() -> list[tuple[str, argparse.ArgumentParser]]:
    out = []

    def walk(path: str, parser: argparse.ArgumentParser) -> None:
        out.append((path, parser))
        for name, _aliases, child in GEN.subparsers(parser):
            walk(f"{path} {name}", child)

    walk("reconciler", build_parser())
    return out


PARSERS = every_parser()


def test_every_verb_and_flag_has_help_text() -> None:
    missing = []
    for path, parser in PARSERS:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                missing += [f"{path} {c.dest}" for c in action._choices_actions if not c.help]
            elif action.help == argparse.SUPPRESS:
                # the one hidden option: --dry-run=VALUE parsed apart (cli/opsargs.dry_run_argv)
                assert action.option_strings == [DRY_RUN_VALUE], (path, action.option_strings)
            elif not (action.help or "").strip():
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, f"no help text: {missing}"


def test_the_cli_page_names_every_verb_and_flag() -> None:
    page = (ROOT / "docs" / "reference" / "cli.md").read_text()
    assert len(PARSERS) > 25
    for path, parser in PARSERS:
        assert f"# {path}\n" in page or path == "reconciler", path
        for action in GEN.documented(parser):
            for option in set(action.option_strings) - {"-h", "--help"}:  # -h: every verb's, said once
                assert f"`{option}" in page or f", {option}" in page, (path, option)


def test_every_exit_code_has_a_meaning() -> None:
    codes = GEN.exit_codes()
    assert {0, 1, 2, 3, 4} <= set(codes.values())
    assert set(GEN.EXIT_MEANINGS) == set(codes)


@pytest.mark.parametrize("page", sorted(GEN.PAGES))
def test_the_checked_in_page_is_what_the_code_generates(page: str) -> None:
    path = ROOT / "docs" / page
    assert path.read_text() == GEN.PAGES[page](), f"docs/{page} is out of date: run scripts/gen-reference"


def _reachable(model: type[BaseModel]) -> list[type[BaseModel]]:
    seen: list[type[BaseModel]] = []

    def walk(m: type[BaseModel]) -> None:
        if m not in seen:
            seen.append(m)
            for field in m.model_fields.values():
                for sub in GEN._models_in(field.annotation):
                    walk(sub)

    walk(model)
    return seen


MODELS = [*_reachable(Recipe), *_reachable(DeploymentPolicy)]


def test_every_recipe_and_policy_field_has_a_description() -> None:
    assert len(MODELS) >= 15
    missing = [f"{m.__name__}.{name}" for m in MODELS for name, f in m.model_fields.items()
               if not (f.description or "").strip()]
    assert not missing, f"Field(description=...) missing: {missing}"


def test_every_field_of_the_noderecipe_crd_has_a_description() -> None:
    spec = noderecipe_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    seen, missing = [], []

    def walk(schema: dict[str, Any], path: str) -> None:
        for name, sub in schema.get("properties", {}).items():
            seen.append(f"{path}.{name}")
            if not sub.get("description"):
                missing.append(f"{path}.{name}")
            walk(sub, f"{path}.{name}")
        if isinstance(schema.get("items"), dict):
            walk(schema["items"], f"{path}[]")
        if isinstance(schema.get("additionalProperties"), dict):
            walk(schema["additionalProperties"], f"{path}.*")

    walk(spec, "spec")
    assert "spec.packages.*.interrupt.type" in seen and len(seen) > 70
    assert not missing, missing


@pytest.mark.parametrize(("page", "root", "spec_fields"), [
    ("recipe.md", Recipe, recipe_loader.SPEC_FIELDS), ("policy.md", DeploymentPolicy, policy_loader.SPEC_FIELDS)])
def test_the_field_pages_list_every_spec_field_with_its_description(
        page: str, root: type[BaseModel], spec_fields: tuple[str, ...]) -> None:
    text = (ROOT / "docs" / "reference" / page).read_text()
    models = [m for m in _reachable(root) if m is not root]
    for name in spec_fields:
        assert f"- **`{name}`**" in text, (page, name)
    for model in models:
        for name, field in model.model_fields.items():
            if model is Package and name == "name":
                continue  # the key of spec.packages
            assert f"- **`{name}`**" in text, (page, model.__name__, name)
            assert GEN._md_keep_code(field.description or "")[:40] in text, (model, name)


_KEY = re.compile(r"(?:reconciler\.nodewright\.dev|skyhook\.nvidia\.com|nodewright\.nvidia\.com|<legacy>|"
                  r"app\.kubernetes\.io)/[A-Za-z<][\w.<>/-]*")
_PLACEHOLDER = re.compile(r"<[^>]*>")


def _key_strings(path: Path) -> set[str]:
    """Key-shaped strings of one module: constants and f-strings, with ``{PREFIX}`` and module
    string constants filled in, a NodeWright prefix variable as ``<legacy>`` and any other
    interpolation as a placeholder."""
    tree = ast.parse(path.read_text())
    consts = {t.id: n.value.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
              for t in n.targets if isinstance(t, ast.Name)
              and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}
    consts["PREFIX"] = "reconciler.nodewright.dev"
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = ""
            for part in node.values:
                if isinstance(part, ast.Constant):
                    text += str(part.value)
                elif isinstance(part, ast.FormattedValue) and isinstance(part.value, ast.Name):
                    name = part.value.id
                    text += consts.get(name, "<legacy>" if name in ("p", "prefix", "old") else f"<{name}>")
                else:
                    text += "<x>"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        # "<legacy>/<x>...": a path made from variables (status/<cluster>/<recipe>.json), no key
        if _KEY.fullmatch(text) and not text.endswith("/v1alpha1") and not text.startswith("<legacy>/<"):
            found.add(text)
    return found


def _shape(key: str) -> str:
    key = re.sub(r"^(?:skyhook|nodewright)\.nvidia\.com/", "<legacy>/", key)
    return _PLACEHOLDER.sub("<>", key)


def test_every_key_the_code_reads_or_writes_is_on_the_node_keys_page() -> None:
    documented = [_shape(k) for k, _where, _meaning in GEN.KEYS]
    found: dict[str, str] = {}
    for path in sorted((ROOT / "reconciler").rglob("*.py")):
        for key in _key_strings(path):
            found.setdefault(_shape(key), str(path.relative_to(ROOT)))
    assert "reconciler.nodewright.dev/inflight_<>" in found and len(found) > 25
    missing = {k: where for k, where in found.items()
               if k not in documented and not any(d.startswith(k) for d in documented)}  # a prefix scan
    assert not missing, f"keys not in scripts/gen-reference KEYS: {missing}"
    unused = [d for d in documented if d not in found and d != "app.kubernetes.io/managed-by"]
    assert not unused, f"KEYS lists keys the code does not use: {unused}"


def test_every_vocabulary_member_has_a_meaning() -> None:
    vocabularies = GEN.vocabularies()
    assert {"Phase", "EventKind", "FailureReason"} <= set(vocabularies)
    for name, enum_type in vocabularies.items():
        meanings = GEN.MEANINGS.get(name, {})
        assert set(meanings) == {str(m.value) for m in enum_type}, name


def test_every_metric_is_on_the_metrics_page() -> None:
    page = (ROOT / "docs" / "reference" / "metrics.md").read_text()
    families = GEN.metric_families()
    assert len(families) > 25
    for name, _kind, _labels, text in families:
        assert f"| `{name}` |" in page and text.strip(), name


def test_the_lifecycle_diagram_has_every_phase_and_the_main_path() -> None:
    table = GEN.transitions()
    assert set(table) == set(Phase)
    path = [Phase.START, Phase.CORDON, Phase.WAIT, Phase.DRAIN, Phase.STAGES, Phase.INTERRUPT, Phase.POST_INTERRUPT,
            Phase.READINESS_GATE, Phase.UNCORDON]
    for a, b in itertools.pairwise(path):
        assert b in table[a][0] or a is Phase.START, (a, b)
    assert "COMPLETE" in table[Phase.UNCORDON][1] and "FAILED" in table[Phase.FAILING][1]
    page = (ROOT / "docs" / "explanation" / "lifecycle.md").read_text()
    for phase in Phase:
        assert f"| `{phase.value}` |" in page

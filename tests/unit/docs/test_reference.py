"""The generated reference (scripts/gen-reference) covers the code and is up to date with it: every
verb and flag has help text and is on the CLI page, every exit code has a meaning, every recipe
and policy field has a description that is on its page and in the NodeRecipe CRD's schema, and
the checked-in pages are what the generator writes today."""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
from pathlib import Path
from types import ModuleType
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

ROOT = Path(__file__).resolve().parents[3]


def _generator() -> ModuleType:
    path = ROOT / "scripts" / "gen-reference"
    loader = importlib.machinery.SourceFileLoader("gen_reference", str(path))
    spec = importlib.util.spec_from_loader("gen_reference", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


GEN = _generator()


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
    path = ROOT / "docs" / "reference" / page
    assert path.read_text() == GEN.PAGES[page](), f"docs/reference/{page} is out of date: run scripts/gen-reference"


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

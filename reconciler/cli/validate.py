"""``reconciler validate PATH... [--policy FILE]... [--locked | --no-locked] [-o table|json]``.

Locked by default, as ``plan`` and ``apply`` are (every package pinned: ``containerSHA`` and an
exact version), so a CI gate that runs ``validate`` passes exactly the files ``apply`` takes;
``--no-locked`` allows unpinned packages, as it does for them.

Loads recipes and policies (:func:`reconciler.load.load_inputs`), checks each NodeRecipe document
against the NodeRecipe CRD's schema as the API server would (:func:`reconciler.load.crd.schema_problems`:
a file that validates is an object ``kubectl apply`` stores), and reports:

* text: ``ok: N recipes (a, b), M policies (p)`` on stdout, or every error on stderr, one per line,
  as ``file:line:col: field: message``; a deprecated form as a ``warning:`` line on stderr;
* json (stdout): ``{"ok": bool, "recipes": [names], "policies": [names], "errors": [{"file",
  "line", "column", "field", "message"}], "warnings": [lines]}`` (``line``/``column`` 0 when unknown).

Exit code 0 when everything loads, 2 (bad input) otherwise; inputs holding no recipe, or an empty
file, are bad input unless ``--allow-empty`` says an empty set is intended.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any

from reconciler.cli.common import add_input_args, add_output_arg
from reconciler.errors import EXIT_BAD_INPUT, EXIT_OK, InputError, InputErrors
from reconciler.load import Inputs, load_inputs
from reconciler.report.redact import redact
from reconciler.report.safetext import visible


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``validate`` verb."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "validate",
        help="check recipes and policies (syntax, schema, versions, dependencies, policies)",
        description=(
            "Load recipe and policy files (NodeRecipe, NodeWright/Skyhook resources, DeploymentPolicy, "
            "AICR RecipeResult) and report every problem as file:line:col. Exit 0 when valid, 2 otherwise."
        ),
    )
    add_input_args(p)
    with contextlib.suppress(argparse.ArgumentError):  # in case add_input_args gains --locked
        p.add_argument(
            "--locked",
            action="store_true",
            help="require every package to be pinned: containerSHA and an exact X.Y.Z version (the default)",
        )
        p.add_argument("--no-locked", dest="locked", action="store_false",
                       help="allow packages not pinned by digest (as plan/apply --no-locked)")
    add_output_arg(p, ("table", "json"))
    p.set_defaults(func=run, locked=True)
    return p


def _error_record(e: InputError) -> dict[str, Any]:
    pos = e.pos
    return {
        "file": pos.file if pos else "",
        "line": pos.line if pos else 0,
        "column": pos.column if pos else 0,
        "field": e.field,
        "message": e.message,
    }


def _schema_errors(inputs: Inputs) -> list[InputError]:
    """What the API server would refuse in the NodeRecipe documents of ``inputs`` (the deprecated
    ``metadata.version`` is the loader's warning, not an error here)."""
    from reconciler.load.crd import schema_problems

    out: list[InputError] = []
    for recipe in inputs.recipes:
        doc = inputs.recipe_docs.get(recipe.name)
        if recipe.origin == "NodeRecipe" and doc is not None:
            out += schema_problems(doc, ignore=(("metadata", "version"),))
    return out


def run(args: argparse.Namespace) -> int:
    """Validate; print the summary or the errors; return 0 or 2."""
    errors: list[InputError] = []
    recipe_names: list[str] = []
    policy_names: list[str] = []
    warnings: tuple[str, ...] = ()
    try:
        inputs = load_inputs(args.recipes, args.policy, locked=bool(getattr(args, "locked", True)),
                             allow_empty=bool(getattr(args, "allow_empty", False)))
    except InputErrors as many:
        errors = list(many.errors)
    except InputError as one:
        errors = [one]
    else:
        recipe_names = [r.name for r in inputs.recipes]
        policy_names = sorted(inputs.policies)
        warnings = inputs.warnings
        errors = _schema_errors(inputs)
    if args.output == "json":
        doc = {
            "ok": not errors,
            "recipes": recipe_names,
            "policies": policy_names,
            "errors": [_error_record(e) for e in errors],
            "warnings": list(warnings),
        }
        print(json.dumps(doc, indent=2))
    elif errors:
        for e in errors:
            print(visible(redact(e)), file=sys.stderr)
    else:
        rec = f"{len(recipe_names)} recipes ({', '.join(recipe_names)})"
        pol = f"{len(policy_names)} policies" + (f" ({', '.join(policy_names)})" if policy_names else "")
        print(visible(f"ok: {rec}, {pol}"))
    if errors:
        from reconciler.cli import ghactions

        if ghactions.enabled():  # GitHub Actions marks each line in the diff
            ghactions.emit(ghactions.commands(ghactions.problems(InputErrors(errors))))
    return EXIT_BAD_INPUT if errors else EXIT_OK

"""Options shared by several verbs (inputs, cluster selection, output format)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from reconciler.errors import shown
from reconciler.load import InputPaths


class _RecipePaths(argparse.Action):
    """Stores the RECIPE paths as an :class:`InputPaths` carrying ``--allow-empty`` and printing
    the inputs' warnings (a deprecated form) on stderr."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        from reconciler.cli.safeio import warn

        paths = InputPaths(values if isinstance(values, Sequence) and not isinstance(values, str) else [values])
        paths.allow_empty = bool(getattr(namespace, "allow_empty", False))
        paths.warn = warn
        setattr(namespace, self.dest, paths)


class _AllowEmpty(argparse.Action):
    """``--allow-empty``: sets ``allow_empty`` and marks the RECIPE paths, whichever came first."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, True)
        paths = getattr(namespace, "recipes", None)
        if isinstance(paths, InputPaths):
            paths.allow_empty = True


def add_input_args(p: argparse.ArgumentParser) -> None:
    """RECIPE... positional files/directories plus ``--policy`` and ``--allow-empty``.

    ``args.recipes`` is an :class:`~reconciler.load.InputPaths`, so :func:`reconciler.load.load_inputs`
    sees ``--allow-empty`` without each verb passing it (``args.allow_empty`` holds it too).
    """
    p.add_argument("recipes", nargs="+", metavar="RECIPE", action=_RecipePaths, help="recipe files or directories")
    p.add_argument(
        "--allow-empty",
        nargs=0,
        action=_AllowEmpty,
        default=False,
        help="accept inputs holding no recipe, and empty files, as an intended empty set (default: exit 2)",
    )
    p.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="FILE",
        help="DeploymentPolicy file or directory (repeatable; default: policies/ next to the recipes if present)",
    )


def add_cluster_args(p: argparse.ArgumentParser) -> None:
    """``--cluster sim:PATH`` or ``--kubeconfig``/``--context`` for the real cluster."""
    p.add_argument("--cluster", metavar="sim:PATH", help="simulated fleet from a kubectl YAML or JSON dump")
    p.add_argument("--sim-config", metavar="FILE", help="simulated fleet behaviour (durations, failures)")
    from reconciler.cli.globalflags import add_global_args

    add_global_args(p, root=False)


#: what each ``-o`` format is, for the help (kubectl's names: table, wide, json, yaml, name)
FORMATS = {
    "table": "human-readable tables and lines (alias: text)",
    "wide": "tables with more columns",
    "json": "one JSON document",
    "yaml": "the JSON document as YAML",
    "name": "only the objects' names, one per line (kind/name)",
    "markdown": "Markdown (a pull request comment or a CI step summary)",
    "jsonl": "JSON lines streamed as the run goes: one per event, each recipe's result, then a summary",
    "jsonpath=...": "kubectl's JSONPath template on the JSON document ({.nodes[*].name})",
    "custom-columns=...": "kubectl's columns, NAME:EXPRESSION,..., one row per node",
}
#: accepted ``-o`` values that are other names of a format (kept so existing scripts work)
ALIASES = {"text": "table"}


def add_output_arg(p: argparse.ArgumentParser, choices: tuple[str, ...], *, headers: bool = False,
                   templates: bool = False) -> None:
    """``-o/--output`` with the given canonical choices (first is the default); ``text`` is
    accepted for ``table`` and stored as ``table``. ``headers``: also ``--no-headers`` (table and
    wide output without the header row, as ``kubectl get --no-headers``). ``templates``: also
    ``jsonpath=TEMPLATE`` and ``custom-columns=SPEC``, stored parsed
    (:mod:`reconciler.cli.templates`)."""
    def fmt(value: str) -> Any:
        if templates and value.startswith(("jsonpath=", "custom-columns=")):  # jsonpath-ng imported only then
            from reconciler.cli.templates import parse_template

            parsed = parse_template(value)
            if parsed is not None:
                return parsed
        canon = ALIASES.get(value, value)
        if canon not in choices:
            offered = ", ".join(choices) + (" (or text)" if "table" in choices else "") + (
                ", jsonpath=TEMPLATE, custom-columns=SPEC" if templates else "")
            raise argparse.ArgumentTypeError(f"invalid choice {shown(value)} (choose from {offered})")
        return canon

    fmt.__name__ = "output format"
    shown_choices = (*choices, "jsonpath=...", "custom-columns=...") if templates else choices
    p.add_argument("-o", "--output", type=fmt, default=choices[0], metavar="|".join(shown_choices),
                   help="output format: " + "; ".join(f"{c}: {FORMATS.get(c, c)}" for c in shown_choices))
    if headers:
        p.add_argument("--no-headers", action="store_true", help="table output without the header row")


def _selector(text: str) -> Any:
    from reconciler.model.selectorsyntax import SelectorSyntaxError, parse_selector

    try:
        return parse_selector(text)
    except SelectorSyntaxError as e:
        raise argparse.ArgumentTypeError(f"{shown(text)}: {e}") from None


def add_selector_arg(p: argparse.ArgumentParser) -> None:
    """``-l/--selector``: only nodes whose labels match (kubectl syntax: ``k=v,k!=v,k in (a,b),!k``;
    :mod:`reconciler.model.selectorsyntax`)."""
    p.add_argument("-l", "--selector", type=_selector, default=None, metavar="SELECTOR",
                   help="only nodes with these labels (kubectl syntax: k=v,k!=v,'k in (a,b)',!k)")


def add_retry_failed_arg(p: argparse.ArgumentParser) -> None:
    """``--retry-failed`` of ``apply``, ``plan`` and ``simulate``, with one meaning: nodes that failed
    in an earlier run with the same inputs are started again (without it they are left failed,
    :func:`reconciler.model.nodestate.not_retried`)."""
    p.add_argument("--retry-failed", action="store_true",
                   help="retry nodes that failed in an earlier run with the same inputs (default: leave them failed)")

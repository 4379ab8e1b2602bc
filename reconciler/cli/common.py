"""Options shared by several verbs (inputs, cluster selection, output format)."""

from __future__ import annotations

import argparse


def add_input_args(p: argparse.ArgumentParser) -> None:
    """RECIPE... positional files/directories plus ``--policy`` and ``--locked``."""
    p.add_argument("recipes", nargs="+", metavar="RECIPE", help="recipe files or directories")
    p.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="FILE",
        help="DeploymentPolicy file or directory (repeatable; default: policies/ next to the recipes if present)",
    )


def add_cluster_args(p: argparse.ArgumentParser) -> None:
    """``--cluster sim:PATH`` or ``--kubeconfig``/``--context`` for the real cluster."""
    p.add_argument("--cluster", metavar="sim:PATH", help="simulated fleet from a kubectl YAML dump")
    p.add_argument("--sim-config", metavar="FILE", help="simulated fleet behaviour (durations, failures)")
    p.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig of the real cluster")
    p.add_argument("--context", metavar="NAME", help="kubeconfig context")


def add_output_arg(p: argparse.ArgumentParser, choices: tuple[str, ...]) -> None:
    """``-o/--output`` with the given choices (first is the default)."""
    p.add_argument("-o", "--output", choices=choices, default=choices[0], help="output format")

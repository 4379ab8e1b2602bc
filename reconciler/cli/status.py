"""``reconciler status``: per node and package, the state recorded on the nodes."""

from __future__ import annotations

import argparse
import json
from typing import Any

from reconciler.cli.common import add_cluster_args, add_output_arg, add_selector_arg
from reconciler.cli.console import listing_table, make_console, print_listing
from reconciler.errors import EXIT_OK
from reconciler.model.observed import NodeInfo
from reconciler.model.vocab import Phase
from reconciler.ops.status import STATE_PREFIX
from reconciler.ops.status import node_status as status_of
from reconciler.report.safetext import text

__all__ = ["STATE_PREFIX", "add_parser", "node_status", "run"]


def add_parser(sub: Any) -> None:
    """Register the ``status`` verb."""
    p: argparse.ArgumentParser = sub.add_parser("status", help="show the package state recorded on each node")
    add_cluster_args(p)
    add_output_arg(p, ("table", "wide", "json", "yaml", "name"), headers=True)
    p.add_argument("--recipe", help="only this recipe")
    p.add_argument("--node", action="append", metavar="NODE",
                   help="node view of these nodes (name or regex; repeatable)")
    p.add_argument("--package", metavar="PKG", help="package view: this package on every node")
    add_selector_arg(p)
    p.set_defaults(func=run)


def node_status(node: NodeInfo, recipe: str | None = None) -> dict[str, Any]:
    """The status document of one node (:meth:`reconciler.ops.status.NodeStatus.to_dict`)."""
    return status_of(node, recipe).to_dict()


def run(args: argparse.Namespace) -> int:
    """Print the recorded state of every node."""
    from reconciler.cli.clusters import open_cluster

    opened = open_cluster(args)
    if not (args.node or args.package or args.output in ("yaml", "name")):
        docs = [s.to_dict() for s in opened.status(args.recipe, selector=args.selector)]
        return _print(args, docs)
    from reconciler.cli.statusviews import show  # node/package views, YAML (cli/statusviews.py)

    return show(args, opened.nodes(args.selector, recipe=args.recipe, package=args.package))


def _print(args: argparse.Namespace, docs: list[dict[str, Any]]) -> int:
    """The nodes' status documents as a table or JSON."""
    if args.output == "json":
        print(json.dumps({"nodes": docs}, indent=2, sort_keys=True))
        return EXIT_OK
    console = make_console()
    cols = ["node", "cordoned", "recipe", "package", "version", "stage", "state"]
    if args.output == "wide":
        cols += ["restarts", "failure"]
    t = listing_table(cols, headers=not getattr(args, "no_headers", False))
    for d in docs:
        cordon = "by us" if d["cordonedByUs"] else ("yes" if d["unschedulable"] else "")
        fail = "; ".join(f"{f.get('reason')}: {f.get('message', '')[:80]}" for f in d["failures"])
        if not d["packages"]:
            row = [d["name"], cordon, "", "", "", "", ""]
            t.add_row(*(text(c) for c in row + (["", fail] if args.output == "wide" else [])))
        for p in d["packages"]:
            row = [d["name"], cordon, p["recipe"], p["name"], p["version"], p["stage"], p["state"]]
            if args.output == "wide":
                row += [str(p["restarts"]), fail]
            t.add_row(*(text(c) for c in row))
        for g in d["readinessGate"]:
            row = [d["name"], cordon, g["recipe"], "(readiness gate)", "", Phase.READINESS_GATE,
                   f"waiting since {g['since'] or 'unknown'}"]
            t.add_row(*(text(c) for c in row + (["", ""] if args.output == "wide" else [])))
    print_listing(console, t)
    return EXIT_OK

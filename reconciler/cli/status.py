"""``reconciler status``: the state recorded on the nodes.

The table is a fleet view (issue 38): first one row per recipe (nodes by
:class:`~reconciler.ops.status.RecipeState`, nodes it holds cordoned), then each failed node with
its reason; ``-o wide`` adds a row per node and package (a package on a failed node shows
``failed``, whatever its entry says). With ``--no-headers`` one listing only, for scripts: the
recipe rows, or with ``-o wide`` the node rows. ``-o json`` is the per-node document, unchanged."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from reconciler.cli.common import add_cluster_args, add_output_arg, add_selector_arg
from reconciler.cli.console import listing_table, make_console, print_listing
from reconciler.errors import EXIT_OK
from reconciler.model.observed import NodeInfo
from reconciler.model.vocab import PackageStatus, Phase
from reconciler.ops.status import STATE_PREFIX, NodeStatus, RecipeState, summarize
from reconciler.ops.status import node_status as status_of
from reconciler.report.safetext import text

__all__ = ["STATE_PREFIX", "add_parser", "node_status", "run"]


def add_parser(sub: Any) -> None:
    """Register the ``status`` verb."""
    p: argparse.ArgumentParser = sub.add_parser(
        "status", help="show per recipe where its nodes stand, then each failed node (-o wide: every node and package)")
    add_cluster_args(p)
    add_output_arg(p, ("table", "wide", "json", "yaml", "name"), headers=True, templates=True)
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
    if not isinstance(args.output, str):  # -o jsonpath= / custom-columns= on the -o json document
        docs = [s.to_dict() for s in opened.status(args.recipe, selector=args.selector)]
        sys.stdout.write(args.output.render({"nodes": docs}, docs, headers=not args.no_headers))
        return EXIT_OK
    if not (args.node or args.package or args.output in ("yaml", "name")):
        return _print(args, opened.status(args.recipe, selector=args.selector))
    from reconciler.cli.statusviews import show  # node/package views, YAML (cli/statusviews.py)

    return show(args, opened.nodes(args.selector, recipe=args.recipe, package=args.package))


def _print(args: argparse.Namespace, statuses: list[NodeStatus]) -> int:
    """The fleet view (module doc) or, with ``-o json``, the nodes' status documents."""
    if args.output == "json":
        print(json.dumps({"nodes": [st.to_dict() for st in statuses]}, indent=2, sort_keys=True))
        return EXIT_OK
    console = make_console()
    headers = not getattr(args, "no_headers", False)
    if args.output == "wide" and not headers:  # one listing for scripts: the node rows
        _rows(console, statuses, headers)
        return EXIT_OK
    summary = summarize(statuses)
    states = list(RecipeState)
    t = listing_table(["recipe", "nodes", *states, "cordoned by us"], headers=headers)
    for s in summary:
        t.add_row(*(text(c) for c in (s.recipe, s.nodes, *(s.count(st) for st in states), s.cordoned_by_us)))
    print_listing(console, t)
    if not headers:  # one listing for scripts: the recipe rows
        return EXIT_OK
    if not summary:
        console.print(f"no recipe recorded on any of {len(statuses)} node(s)")
    failed = [(st, f) for st in statuses for f in st.failures]
    if failed:
        f_table = listing_table(["failed node", "recipe", "reason", "message"])
        for st, f in failed:
            f_table.add_row(*(text(c) for c in (st.name, f.recipe, f.reason, f.message[:120])))
        print_listing(console, f_table)
    if args.output == "wide":
        _rows(console, statuses, headers)
    elif statuses:
        console.print("every node and package: -o wide; one node: reconciler node status NODE", style="dim")
    return EXIT_OK


def _rows(console: Any, statuses: list[NodeStatus], headers: bool) -> None:
    """One row per node and package (and readiness gate); a package on a failed node: ``failed``."""
    cols = ["node", "cordoned", "recipe", "package", "version", "stage", "state", "restarts", "failure"]
    t = listing_table(cols, headers=headers)
    for st in statuses:
        cordon = "by us" if st.cordoned_by_us else ("yes" if st.unschedulable else "")
        fail = "; ".join(f"{f.reason}: {f.message[:80]}" for f in st.failures)
        if not st.packages:
            t.add_row(*(text(c) for c in (st.name, cordon, "", "", "", "", "", "", fail)))
        for p in st.packages:
            state = p.state
            if state != PackageStatus.COMPLETE and st.state_of(p.recipe) is RecipeState.FAILED:
                state = "failed"
            t.add_row(*(text(c) for c in (st.name, cordon, p.recipe, p.name, p.version, p.stage, state,
                                          str(p.restarts), fail)))
        for g in st.readiness_gates:
            t.add_row(*(text(c) for c in (st.name, cordon, g.recipe, "(readiness gate)", "", Phase.READINESS_GATE,
                                          f"waiting since {g.since or 'unknown'}", "", "")))
    print_listing(console, t)

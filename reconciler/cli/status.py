"""``reconciler status``: per node and package, the state recorded on the nodes."""

from __future__ import annotations

import argparse
import json
from typing import Any

from reconciler.cli.common import add_cluster_args, add_output_arg, add_selector_arg, selected
from reconciler.cli.console import listing_table, make_console, print_listing
from reconciler.errors import EXIT_OK
from reconciler.model.nodestate import (
    PREFIX,
    InFlight,
    NodeStateError,
    cordon_key,
    failure_of,
    inflight_key,
    parse_model,
    parse_state,
)
from reconciler.model.observed import NodeInfo
from reconciler.model.vocab import Phase
from reconciler.report.safetext import text

STATE_PREFIX = f"{PREFIX}/nodeState_"


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
    """The status document of one node: ``{name, unschedulable, cordonedByUs, recipes, packages,
    failures, readinessGate}``; ``packages`` = ``[{recipe, name, version, stage, state, restarts}]``;
    ``readinessGate`` = ``[{recipe, since}]``: recipes whose lifecycle holds the node at their
    readiness gate (packages complete, waiting for the external validator) since the UTC instant
    ``since`` (RFC 3339)."""
    recipes = sorted(k[len(STATE_PREFIX):] for k in node.annotations if k.startswith(STATE_PREFIX))
    recipes += sorted(
        k[len(f"{PREFIX}/cordon_"):] for k in node.annotations
        if k.startswith(f"{PREFIX}/cordon_") and k[len(f"{PREFIX}/cordon_"):] not in recipes
    )
    if recipe:
        recipes = [r for r in recipes if r == recipe]
    packages: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    gates: list[dict[str, Any]] = []
    for r in recipes:
        try:
            state = parse_state(node.annotations.get(STATE_PREFIX + r), node=node.name, key=STATE_PREFIX + r)
        except NodeStateError as e:
            failures.append({"recipe": r, "reason": "MalformedNodeState", "message": str(e)})
            state = {}
        for key in sorted(state):
            entry = state[key]
            packages.append({"recipe": r, "name": entry.name, "version": entry.version, "stage": entry.stage,
                             "state": entry.state, "restarts": entry.restarts})
        f = failure_of(node.annotations, r)
        if f is not None:
            failures.append({"recipe": r, **f.model_dump(exclude_none=True)})
        fl = parse_model(InFlight, node.annotations.get(inflight_key(r)))
        if fl is not None and fl.phase is Phase.READINESS_GATE:
            gates.append({"recipe": r, "since": fl.timers.get(Phase.READINESS_GATE, fl.since)})
    return {
        "name": node.name,
        "unschedulable": node.unschedulable,
        "cordonedByUs": any(cordon_key(r) in node.annotations for r in recipes),
        "recipes": recipes,
        "packages": packages,
        "failures": failures,
        "readinessGate": gates,
    }


def run(args: argparse.Namespace) -> int:
    """Print the recorded state of every node."""
    from reconciler.cli.clusters import open_cluster

    opened = open_cluster(args)
    nodes = opened.cluster.nodes.list_nodes()
    if args.recipe:
        from reconciler.cli.names import require_recipe

        require_recipe(args.recipe, opened.cluster, nodes)
    if args.package:
        from reconciler.cli.names import require_package

        require_package(args.package, nodes, args.recipe)
    nodes = selected(args, nodes)
    if args.node or args.package or args.output in ("yaml", "name"):  # node/package views, YAML (cli/statusviews.py)
        from reconciler.cli.statusviews import show

        return show(args, nodes)
    docs = [node_status(n, args.recipe) for n in nodes]
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

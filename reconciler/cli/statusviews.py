"""Node and package views of ``reconciler status`` (``--node``, ``--package``) and its YAML output.

* fleet (no ``--node``/``--package``) in YAML: the ``status`` document ``{"nodes": [...]}`` — the
  same contract as ``reconciler status -o json``;
* ``--node NODE`` (repeatable; exact names or regular expressions): per node the ``status``
  document extended with ``ignored``, ``statuses`` (recipe → recorded status), ``inflight``
  (recipe → ``{runId, phase, lifecycle}``) and ``taints``; the table prints one block per node;
* ``--package PKG``: one row per node and recipe carrying the package: ``node, recipe, version,
  stage, state`` (wide: ``restarts, image``) and ``counts`` per ``version/state``.

``-o table|wide|json|yaml|name`` (name: ``node/<name>`` per node shown), ``--no-headers``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from reconciler.cli.console import listing_table, make_console, print_listing, whole_lines
from reconciler.cli.outputs import print_names
from reconciler.cli.status import node_status
from reconciler.errors import EXIT_OK
from reconciler.model.nodestate import (
    InFlight,
    NodeStateError,
    inflight_key,
    parse_model,
    parse_state,
    recorded_status,
    state_key,
)
from reconciler.model.observed import NodeInfo
from reconciler.ops.nodeops import is_ignored, owed_interrupt
from reconciler.ops.patches import select_nodes
from reconciler.report.safetext import markup, text, visible


def node_view(node: NodeInfo, recipe: str | None = None) -> dict[str, Any]:
    """The ``status`` document of a node plus ``ignored``, ``statuses``, ``inflight``, ``taints``."""
    doc = node_status(node, recipe)
    doc["ignored"] = is_ignored(node)
    doc["statuses"] = {r: recorded_status(node.labels, node.annotations, r) for r in doc["recipes"]}
    flying: dict[str, Any] = {}
    for r in doc["recipes"]:
        rec = parse_model(InFlight, node.annotations.get(inflight_key(r)))
        if rec is not None:
            flying[r] = {"runId": rec.runId, "phase": rec.phase.value, "lifecycle": rec.lifecycle,
                         "owes": owed_interrupt(node, r)}
    doc["inflight"] = flying
    doc["taints"] = [str(t) for t in node.taints]
    return doc


def package_rows(nodes: Sequence[NodeInfo], package: str, recipe: str | None = None) -> list[dict[str, Any]]:
    """Rows ``{node, recipe, package, version, stage, state, restarts, image}`` for ``package``."""
    rows = []
    for n in nodes:
        for r in node_status(n, recipe)["recipes"]:
            try:
                state = parse_state(n.annotations.get(state_key(r)), node=n.name)
            except NodeStateError:
                continue
            for e in sorted(state.values(), key=lambda x: x.key):
                if e.name == package:
                    rows.append({"node": n.name, "recipe": r, "package": e.name, "version": e.version,
                                 "stage": e.stage, "state": e.state, "restarts": e.restarts, "image": e.image})
    return rows


def _dump(doc: Any, output: str) -> None:
    from reconciler.cli.outputs import dump

    dump(doc, output)


def show(args: argparse.Namespace, nodes: Sequence[NodeInfo]) -> int:
    """Print the view ``args`` asks for (see the module doc)."""
    recipe = getattr(args, "recipe", None)
    patterns = getattr(args, "node", None) or []
    package = getattr(args, "package", None)
    chosen = select_nodes(nodes, patterns) if patterns else list(nodes)
    out = args.output
    headers = not getattr(args, "no_headers", False)
    if package:
        rows = package_rows(chosen, package, recipe)
        if out == "name":
            print_names("node", (r["node"] for r in rows))
            return EXIT_OK
        counts: dict[str, int] = {}
        for r in rows:
            k = f"{r['version']}/{r['state']}"
            counts[k] = counts.get(k, 0) + 1
        if out in ("json", "yaml"):
            _dump({"package": package, "nodes": rows, "counts": counts}, out)
            return EXIT_OK
        cols = ["node", "recipe", "version", "stage", "state"] + (["restarts", "image"] if out == "wide" else [])
        t = listing_table(cols, headers=headers)
        for r in rows:
            t.add_row(*(text(r[c]) for c in cols))
        console = make_console()
        print_listing(console, t)
        tally = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) or "not recorded on any node"
        console.print(text(f"{package}: {len(rows)} node(s); {tally}"), soft_wrap=whole_lines(console))
        return EXIT_OK
    if out == "name":
        print_names("node", (n.name for n in chosen))
        return EXIT_OK
    if not patterns:  # fleet view in YAML (json/table stay in reconciler.cli.status)
        _dump({"nodes": [node_status(n, recipe) for n in chosen]}, "yaml" if out == "yaml" else "json")
        return EXIT_OK
    docs = [node_view(n, recipe) for n in chosen]
    if out in ("json", "yaml"):
        _dump({"nodes": docs}, out)
        return EXIT_OK
    console = make_console()
    for d in docs:
        cordon = "cordoned by us" if d["cordonedByUs"] else ("cordoned" if d["unschedulable"] else "schedulable")
        flags = [cordon] + (["IGNORED"] if d["ignored"] else [])
        console.print(f"[bold]{markup(d['name'])}[/bold]: {', '.join(flags)}", soft_wrap=whole_lines(console))
        for r in d["recipes"]:
            fl = d["inflight"].get(r)
            extra = f"; in flight: run {fl['runId']} phase {fl['phase']}" if fl else ""
            if fl and fl.get("owes"):
                extra += f"; owes a {fl['owes']}"
            console.print(text(f"  recipe {r}: status {d['statuses'].get(r) or '-'}{extra}"),
                          soft_wrap=whole_lines(console))
        if out == "wide" and d["taints"]:
            console.print(text(f"  taints: {', '.join(d['taints'])}"), soft_wrap=whole_lines(console))
        for f in d["failures"]:
            msg = str(f.get("message", ""))[:200]
            console.print(visible(f"  failure ({f.get('recipe')}): {f.get('reason')}: {msg}"), style="red",
                          markup=False, soft_wrap=whole_lines(console))
        if d["packages"]:
            cols = ["recipe", "name", "version", "stage", "state"] + (["restarts"] if out == "wide" else [])
            t = listing_table(cols, headers=headers)
            for p in d["packages"]:
                t.add_row(*(text(p[c]) for c in cols))
            print_listing(console, t)
    return EXIT_OK

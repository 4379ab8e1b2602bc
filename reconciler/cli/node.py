"""``reconciler node ignore|unignore|reset|status NODE...``.

NODE is an exact node name or a regular expression matching whole names (``gpu-a-0[0-4]``). A
NODE matching no node, or a ``--recipe`` with no record on any node and no control switch, is an
error (exit 2) listing what exists.

* ``ignore`` / ``unignore``: set / remove the label ``reconciler.nodewright.dev/ignore=true``
  (every recipe skips an ignored node);
* ``reset --recipe R``: remove R's state, config, in-flight and failure records and status from
  the nodes, and uncordon a node whose cordon R holds (unlike NodeWright's ``node reset``); the
  next ``apply`` runs every package of R on them again;
* ``status`` (alias ``list``, NodeWright's ``node list``): the node view of ``reconciler status --node``.

Write options (:mod:`reconciler.cli.opsargs`): ``--dry-run``, ``-y``, ``--sim-save``, ``-o``.
"""

from __future__ import annotations

import argparse
from typing import Any

from reconciler.cli.common import add_cluster_args, add_output_arg, add_selector_arg
from reconciler.cli.opsargs import add_write_args, finish
from reconciler.errors import InputError


def add_parser(sub: Any) -> None:
    """Register the ``node`` verb and its sub-commands."""
    p: argparse.ArgumentParser = sub.add_parser("node", help="node operations: ignore, unignore, reset, status",
                                                description=__doc__,
                                                formatter_class=argparse.RawDescriptionHelpFormatter)
    nsub = p.add_subparsers(dest="node_cmd", metavar="COMMAND")
    nsub.required = True
    for cmd, text in (("ignore", "every recipe skips these nodes (label reconciler.nodewright.dev/ignore=true)"),
                      ("unignore", "remove the ignore label")):
        c = nsub.add_parser(cmd, help=text)
        c.add_argument("nodes", nargs="*", metavar="NODE", help="node name or regular expression (or -l)")
        add_selector_arg(c)
        add_write_args(c)
        c.set_defaults(func=run)
    r = nsub.add_parser("reset", help="forget a recipe's records on these nodes (and release our cordon)")
    r.add_argument("nodes", nargs="*", metavar="NODE", help="node name or regular expression (or -l)")
    add_selector_arg(r)
    r.add_argument("--recipe", required=True, help="recipe whose records are removed")
    r.add_argument("--force", action="store_true",
                   help="even when a node still owes an interrupt (a pending reboot is then dropped)")
    add_write_args(r)
    r.set_defaults(func=run)
    s = nsub.add_parser("status", aliases=["list"],
                        help="per node: recipes, status, cordon, in-flight step, packages (alias: list)")
    s.add_argument("nodes", nargs="*", metavar="NODE", help="node names or regular expressions (default: all)")
    s.add_argument("--recipe", help="only this recipe")
    add_selector_arg(s)
    add_cluster_args(s)
    add_output_arg(s, ("table", "wide", "json", "yaml", "name"), headers=True)
    s.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the node sub-command."""
    from reconciler.cli.clusters import open_cluster

    opened = open_cluster(args)
    if args.node_cmd in ("status", "list"):
        from reconciler.cli.statusviews import show

        args.node, args.package = list(args.nodes) or [".*"], None
        return show(args, opened.nodes(args.selector, recipe=getattr(args, "recipe", None)))
    if args.node_cmd in ("ignore", "unignore"):
        op = (opened.ignore if args.node_cmd == "ignore" else opened.unignore)(args.nodes, selector=args.selector)
        question = f"{args.node_cmd} {len(op.changes)} node(s)?"
    else:
        if not args.nodes and args.selector is None:
            raise InputError(f"node {args.node_cmd}: name the nodes (NODE...) or select them with -l/--selector")
        op = opened.reset(args.recipe, args.nodes, selector=args.selector, force=args.force)
        question = f"reset recipe {args.recipe} on {len(op.changes)} node(s)?"
    return finish(args, opened, list(op.changes), list(op.notes), op.write, header=f"node {args.node_cmd}",
                  question=question, refused=op.refused)

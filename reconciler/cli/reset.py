"""``reconciler reset RECIPE``: forget a recipe on every node.

On every node with a record of RECIPE: remove its state, config digests, in-flight and failure
records and status (annotation and label), and **release the cordons RECIPE holds** (NodeWright's
``reset`` leaves nodes cordoned). Cordons placed by someone else stay. The next ``apply`` runs
every package of the recipe again on every selected node. There is no persistent batch state to
reset: each run computes its batches from the nodes. ``--package PKG`` forgets only that
package's state (NodeWright's ``reset --package``): every recorded version of it and its failure
record; the cordon, other packages and the config digests stay. An unknown RECIPE is an error (exit 2)
listing the recipes known on the cluster; ``--ignore-not-found`` makes it "nothing to change" (a
reset run twice). Write options as every operations verb
(:mod:`reconciler.cli.opsargs`): ``--dry-run``, ``-y``, ``--sim-save``, ``-o table|json|yaml|name``.
"""

from __future__ import annotations

import argparse
from typing import Any

from reconciler.cli.common import add_selector_arg
from reconciler.cli.opsargs import add_write_args, finish


def add_parser(sub: Any) -> None:
    """Register the ``reset`` verb."""
    p: argparse.ArgumentParser = sub.add_parser(
        "reset", help="remove a recipe's records from every node and release the cordons it holds",
        description=__doc__)
    p.add_argument("recipe", metavar="RECIPE", help="recipe name (metadata.name)")
    p.add_argument("--force", action="store_true",
                   help="even when a node still owes an interrupt (a pending reboot is then dropped)")
    p.add_argument("--package", metavar="PKG",
                   help="forget only this package's state (every version; its failure record), nothing else")
    p.add_argument("--ignore-not-found", action="store_true",
                   help="a recipe known nowhere is not an error: nothing to change (as kubectl delete)")
    add_selector_arg(p)
    add_write_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Reset the recipe on every node."""
    from reconciler.cli.clusters import open_cluster

    opened = open_cluster(args)
    op = opened.reset(args.recipe, selector=args.selector, package=args.package, force=args.force,
                      ignore_not_found=args.ignore_not_found)
    what = f"package {args.package} of recipe {args.recipe}" if args.package else f"recipe {args.recipe}"
    return finish(args, opened, list(op.changes), list(op.notes), op.write, header=f"reset {what}",
                  question=f"reset {what} on {len(op.changes)} node(s)?", refused=op.refused)

"""``reconciler pause|resume|disable|enable RECIPE [--reason TEXT]``: a recipe's control switches.

The switches live in the ConfigMap ``node-reconciler-controls`` of the reconciler's namespace
(:mod:`reconciler.ops.controls`); ``apply`` skips a paused or disabled recipe with a message.
Running pods are not stopped: a pause only keeps the next ``apply`` from starting anything.
``--list`` (on any of the four) prints every recipe's switches. RECIPE must be known on the
cluster (records on a node, or a switch): an unknown name is an error listing the known ones;
``pause --new`` / ``disable --new`` switch a recipe that has not run yet. Write options as every operations
verb (:mod:`reconciler.cli.opsargs`): ``--dry-run``, ``-y``, ``--sim-save``, ``-o table|json|yaml|name``.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

from reconciler.adapters.host import operator_identity
from reconciler.cli.opsargs import add_write_args, finish
from reconciler.errors import EXIT_OK, InputError
from reconciler.model.recipe import check_recipe_name
from reconciler.ops.controls import ACTIONS, Action, control_patch, read_controls, store_for
from reconciler.report.safetext import visible

_HELP = {
    "pause": "pause a recipe: apply starts nothing for it until `resume`",
    "resume": "resume a paused recipe",
    "disable": "disable a recipe: apply skips it and it does not hold back later priorities",
    "enable": "enable a disabled recipe",
}


def add_parser(sub: Any) -> None:
    """Register the ``pause``, ``resume``, ``disable`` and ``enable`` verbs."""
    for action in ACTIONS:
        p: argparse.ArgumentParser = sub.add_parser(action, help=_HELP[action], description=__doc__)
        p.add_argument("recipe", nargs="?", metavar="RECIPE", help="recipe name (metadata.name)")
        if action in ("pause", "disable"):
            p.add_argument("--reason", default="", help="why (recorded with the switch)")
            p.add_argument("--new", action="store_true",
                           help=f"{action} a recipe that has not run on this cluster yet (default: an unknown "
                                "recipe name is an error)")
        p.add_argument("--list", action="store_true", help="print every recipe's switches and change nothing")
        add_write_args(p)
        p.set_defaults(func=run, action=action)


def run(args: argparse.Namespace) -> int:
    """Set or clear the switch (or list them)."""
    from reconciler.cli.clusters import open_cluster

    opened = open_cluster(args)
    if args.list:
        controls = read_controls(opened.cluster)
        if args.output == "json":
            print(json.dumps({k: v.model_dump() for k, v in sorted(controls.items())}, indent=2, sort_keys=True))
        elif not controls:
            print("no recipe is paused or disabled" if store_for(opened.cluster) else
                  "this cluster adapter cannot store recipe controls")
        else:
            for name, c in sorted(controls.items()):
                print(visible(f"{name}: {c.describe()}"))
        return EXIT_OK
    if not args.recipe:
        raise InputError(f"{args.action}: name the recipe (or use --list)")
    if getattr(args, "new", False):
        try:  # the name becomes a key of the controls ConfigMap and matches recipes: it must be one
            check_recipe_name(args.recipe)
        except ValueError as e:
            raise InputError(f"{args.action} --new: {e}") from None
    else:
        from reconciler.cli.names import require_recipe

        setting = args.action in ("pause", "disable")
        hint = (f" (to {args.action} a recipe before its first apply, pass --new)" if setting
                else " (so nothing is paused or disabled under that name: a recipe switched with --new before "
                     "its first apply leaves no trace once its switches are cleared)")
        require_recipe(args.recipe, opened.cluster, opened.cluster.nodes.list_nodes(), hint=hint)
    action: Action = args.action
    at = datetime.fromtimestamp(opened.wall(), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    patch, before, after = control_patch(opened.cluster, args.recipe, action,
                                         reason=getattr(args, "reason", ""), by=operator_identity(), at=at)
    notes = [f"recipe {args.recipe} is {before.describe() or 'active'}; after: {after.describe() or 'active'}"]
    store = store_for(opened.cluster)

    def write() -> int:
        assert patch is not None and store is not None
        patch.write(store)
        return 1

    return finish(args, opened, [patch] if patch else [], notes, write,
                  header=f"{action} recipe {args.recipe}", question=f"{action} recipe {args.recipe}?")

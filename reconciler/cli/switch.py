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
from typing import Any

from reconciler.adapters.host import operator_identity
from reconciler.cli.opsargs import add_write_args, finish
from reconciler.errors import EXIT_OK, InputError
from reconciler.ops.controls import ACTIONS, Action, store_for
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
        controls = opened.controls()
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
    action: Action = args.action
    by, reason, new = operator_identity(), getattr(args, "reason", ""), getattr(args, "new", False)
    op = (opened.pause(args.recipe, reason=reason, by=by, new=new) if action == "pause"
          else opened.disable(args.recipe, reason=reason, by=by, new=new) if action == "disable"
          else opened.resume(args.recipe, by=by) if action == "resume" else opened.enable(args.recipe, by=by))
    return finish(args, opened, list(op.changes), list(op.notes), op.write,
                  header=f"{action} recipe {args.recipe}", question=f"{action} recipe {args.recipe}?")

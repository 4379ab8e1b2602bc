"""``reconciler import --from skyhook|nodewright --name NAME [--recipe RECIPE]``: take over the node
state of a NodeWright/Skyhook resource (:mod:`reconciler.ops.migrate`).

Writes, per node with ``<prefix>/nodeState_NAME``: our state for RECIPE (default NAME), its status,
the ownership of the cordon the old operator holds, and the ignore label. Packages are not run
again: the next ``plan``/``apply`` of RECIPE shows only the work NodeWright had not finished.
Pause or stop the old operator first. ``--overwrite`` replaces state we already have;
``--remove-legacy`` also deletes the old annotations in the same write. Write options as every
operations verb (:mod:`reconciler.cli.opsargs`): ``--dry-run``, ``-y``, ``--sim-save``, ``-o``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from reconciler.cli.opsargs import add_write_args, confirm, save_sim
from reconciler.errors import EXIT_FAILED, EXIT_OK, InputError, clip
from reconciler.ops.migrate import PREFIXES, NodeImport, import_node, plan_import
from reconciler.ops.patches import NodePatch, write_node_patches
from reconciler.report.safetext import visible


def add_parser(sub: Any) -> None:
    """Register the ``import`` verb."""
    p: argparse.ArgumentParser = sub.add_parser(
        "import", help="take over the node state of a NodeWright/Skyhook resource (no package re-runs)",
        description=__doc__)
    p.add_argument("--from", dest="source", required=True, choices=sorted(PREFIXES),
                   help="skyhook: skyhook.nvidia.com/ keys; nodewright: nodewright.nvidia.com/, "
                   "then skyhook.nvidia.com/")
    p.add_argument("--name", required=True, help="name of the Skyhook/NodeWright resource")
    p.add_argument("--recipe", help="our recipe name (default: --name)")
    p.add_argument("--overwrite", action="store_true", help="replace state this recipe already has on a node")
    p.add_argument("--remove-legacy", action="store_true", help="also delete the old operator's annotations of NAME")
    add_write_args(p, ("table", "json"))
    p.set_defaults(func=run)


def _print(imports: list[NodeImport], recipe: str) -> None:
    for imp in imports:
        if imp.error:
            print(visible(f"  {imp.node}: NOT imported: {imp.error}"))
            continue
        pk = ", ".join(f"{k} {v}" for k, v in imp.packages.items()) or "no packages"
        extra = [x for x in (f"status {imp.status}" if imp.status else "", "cordon taken over" if imp.cordon else "",
                             "ignored" if imp.ignore else "") if x]
        print(visible(f"  {imp.node} (from {imp.prefix}): {pk}" + (f"; {', '.join(extra)}" if extra else "")))
        for n in imp.notes:
            print(visible(f"    note: {n}"))
        if imp.patch is not None:
            print(visible(f"    {imp.patch.describe()}"))


def run(args: argparse.Namespace) -> int:
    """Plan the import, show it, confirm, write."""
    from reconciler.cli.clusters import open_cluster

    if args.dry_run == "server":
        raise InputError("import: --dry-run=server is not supported (the import is planned from the nodes as read); "
                         "use --dry-run")
    opened = open_cluster(args)
    recipe = args.recipe or args.name
    now = opened.wall()
    imports = plan_import(opened.cluster.nodes.list_nodes(), args.name, args.source, recipe=recipe, at=now,
                          overwrite=args.overwrite, remove_legacy=args.remove_legacy)
    patches: list[NodePatch] = [i.patch for i in imports if i.patch is not None]
    errors = [i for i in imports if i.error]
    doc: dict[str, Any] = {"dryRun": bool(args.dry_run), "source": args.source, "name": args.name, "recipe": recipe,
                           "nodes": [i.to_dict() for i in imports], "written": 0}
    as_json = args.output == "json"
    if not imports:
        keys = " or ".join(clip(f"{p}/nodeState_{args.name}") for p in PREFIXES[args.source])
        raise InputError(f"no node carries {keys}")
    if not as_json:
        print(visible(f"import {args.source} resource {args.name} as recipe {recipe}: {len(patches)} node(s) to "
                      f"write, {len(errors)} unreadable, {len(imports) - len(patches) - len(errors)} left as is"))
        _print(imports, recipe)
    if not patches or args.dry_run:
        if as_json:
            print(json.dumps(doc, indent=2, sort_keys=True))
        elif patches:
            print("dry run: nothing was written")
        return EXIT_FAILED if errors else EXIT_OK
    if not confirm(args, f"import {len(patches)} node(s) as recipe {recipe}?"):
        print("aborted: nothing was written")
        return EXIT_FAILED

    def op(node: Any) -> NodePatch | None:
        imp = import_node(node, args.name, args.source, recipe=recipe, at=now, overwrite=args.overwrite,
                          remove_legacy=args.remove_legacy)
        return imp.patch if imp is not None else None

    res = write_node_patches(opened.cluster.nodes, patches, op)
    save_sim(args, opened)
    doc["written"] = len(res.written)
    if as_json:
        print(json.dumps(doc, indent=2, sort_keys=True))
    else:
        print(visible(f"written: {len(res.written)} node(s)" + (f"; gone: {', '.join(res.missing)}" if res.missing
                                                                 else "")))
    return EXIT_FAILED if errors else EXIT_OK

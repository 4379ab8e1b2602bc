"""``reconciler package validate|render|status|rerun|logs``.

* ``validate DIR...``: check NodeWright packages (a directory with ``config.json`` and
  ``skyhook_dir/``, or an unpacked image with ``skyhook-package/``) — schema v1, step files,
  check modes — and print every problem as ``file:line:col: field: message``; exit 2 on errors
  (on warnings too with ``--strict``);
* ``render RECIPE --package NAME``: the ConfigMap of that package version (``configmaps/`` files
  of its stage pods) and, with ``--node`` on a cluster, the node metadata ConfigMap
  (``labels.json``, ``annotations.json``, ``packages.json``), as YAML or JSON; ``--check DIR``
  also compares the package directory's ``config.json`` with the recipe (version,
  ``expected_config_files`` present in the configMap);
* ``status PKG``: per node, the package's version, stage and state (``reconciler status --package``);
* ``rerun PKG --recipe R --node N... [--stage S]``: rewrite the package's entry to stage S,
  ``in_progress``, with a fresh set of attempts (without ``--stage``: delete the entry, the
  package restarts from apply) and drop the node's failure record; the next ``apply`` runs it.
  On a node whose lifecycle failed (or, with ``--force``, is in flight) that lifecycle resumes,
  keeping our cordon and the interrupt it owes, with the package counted as restarted in it, so
  its stage pods get new names: the stage runs again instead of the failed pods of the earlier
  run being read back (they stay, for their logs). A lifecycle already at its interrupt or after
  it would skip a restart of an earlier stage: refused, even with ``--force``, naming the way on;
* ``logs PKG --recipe R [--node N...] [--tail N] [-f]``: log tails of the package's stage pods
  that still exist and the failure record's tail (best effort). A node's stage pods are deleted
  when its lifecycle completes; until then — in progress, or failed — they stay, the failed ones
  for their logs and the successful ones as the record of what completed (a resumed run reads
  them: a stage's completion is recorded with the node's next write), so on a failed node the
  pod of a successful stage is found too (``succeeded``; on a cluster it shows ``Running``: the
  stage ran in the init containers, the pause container keeps the pod).
  ``--tail N`` keeps the last N lines of each; ``-f`` keeps looking while a stage pod is pending
  or running and prints phase changes and new lines (the lines are those the cluster reports for
  the pod's failing container: a running pod's output shows once it fails).

For ``status``, ``rerun`` and ``logs`` a PKG recorded on no node (for ``--recipe`` when given), a
``--recipe`` known nowhere on the cluster and a ``--node`` matching no node are errors (exit 2)
listing what exists.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from typing import Any

from reconciler.cli.common import add_cluster_args, add_output_arg, add_selector_arg
from reconciler.cli.opsargs import add_write_args, finish
from reconciler.cli.optcheck import count, seconds
from reconciler.cli.safeio import error_line
from reconciler.errors import EXIT_BAD_INPUT, EXIT_OK, PATH_LIMIT, InputError, clip, shown, suggestion
from reconciler.ops.names import listing
from reconciler.ops.nodeops import RERUN_STAGES
from reconciler.ops.patches import select_nodes
from reconciler.report.redact import redact
from reconciler.report.safetext import visible


def add_parser(sub: Any) -> None:
    """Register the ``package`` verb and its sub-commands."""
    p: argparse.ArgumentParser = sub.add_parser(
        "package", help="package operations: validate, render, status, rerun, logs", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    psub = p.add_subparsers(dest="package_cmd", metavar="COMMAND")
    psub.required = True

    v = psub.add_parser("validate", help="check NodeWright package directories (config.json schema v1)")
    v.add_argument("dirs", nargs="+", metavar="DIR", help="package directory, unpacked image or config.json")
    v.add_argument("--strict", action="store_true", help="warnings fail too")
    add_output_arg(v, ("table", "json"))
    v.set_defaults(func=run)

    r = psub.add_parser("render", help="ConfigMaps a stage pod of the package gets")
    r.add_argument("recipe", metavar="RECIPE", help="recipe file")
    r.add_argument("--package", required=True, help="package name in the recipe")
    r.add_argument("--node", help="also render this node's metadata ConfigMap (needs --cluster/--kubeconfig)")
    r.add_argument("--agent-version", default="", help="agent version written to packages.json (default: recipe's "
                   "agentImageOverride tag, else 'unknown')")
    r.add_argument("--check", metavar="DIR", help="package directory to compare with the recipe's package")
    add_cluster_args(r)
    add_output_arg(r, ("yaml", "json"))
    r.set_defaults(func=run)

    s = psub.add_parser("status", help="the package on every node: version, stage, state")
    s.add_argument("package", metavar="PKG", help="package name")
    s.add_argument("--recipe", help="only this recipe")
    s.add_argument("--node", action="append", default=[], metavar="NODE", help="only these nodes (repeatable)")
    add_selector_arg(s)
    add_cluster_args(s)
    add_output_arg(s, ("table", "wide", "json", "yaml", "name"), headers=True)
    s.set_defaults(func=run)

    rr = psub.add_parser("rerun", help="run a package (or one of its stages) again on nodes")
    rr.add_argument("package", metavar="PKG", help="package name")
    rr.add_argument("--recipe", required=True, help="the recipe whose package it is")
    rr.add_argument("--node", action="append", default=[], metavar="NODE",
                    help="node name or regular expression (repeatable; or -l)")
    add_selector_arg(rr)
    rr.add_argument("--stage", choices=RERUN_STAGES, help="restart at this stage (default: from apply)")
    rr.add_argument("--version", help="entry version when several are recorded")
    rr.add_argument("--force", action="store_true",
                    help="even while a lifecycle is in flight on the node or failed there (that lifecycle then "
                         "resumes with the package restarted)")
    add_write_args(rr)
    rr.set_defaults(func=run)

    lg = psub.add_parser(
        "logs", help="log tails of the package's stage pods that still exist (best effort)",
        description="Log tails of the package's stage pods that still exist, and the failure record's tail. "
                    "A node's stage pods are deleted when its lifecycle completes; until then (in progress, or "
                    "failed) they stay: the failed ones for their logs, the successful ones as the record of what "
                    "completed (on a cluster they show Running: the pause container holds the pod). Looked up: the "
                    "package's recorded stage (or --stage), every attempt up to --attempts, of the node's lifecycle "
                    "(each rerun of the package in it, newest first) and of its failed run.")
    lg.add_argument("package", metavar="PKG", help="package name")
    lg.add_argument("--recipe", required=True, help="the recipe whose package it is")
    lg.add_argument("--node", action="append", default=[], metavar="NODE", help="node name or regex (repeatable)")
    add_selector_arg(lg)
    lg.add_argument("--stage", help="stage (default: the stage recorded on the node)")
    lg.add_argument("--attempts", type=count(1, 1000), default=6, help="attempts to look up per stage (default 6)")
    lg.add_argument("--tail", type=count(-1, 100000), default=-1, metavar="N",
                    help="only the last N lines of each log (default -1: every line the cluster gives)")
    lg.add_argument("-f", "--follow", action="store_true",
                    help="keep watching while a stage pod of the package is pending or running: print phase "
                         "changes and new log lines until none is (Ctrl-C stops)")
    lg.add_argument("--interval", type=seconds(0, 3600, low_inclusive=False), default=5.0, metavar="SECONDS",
                    help="with -f: seconds between looks (default 5)")
    add_cluster_args(lg)
    add_output_arg(lg, ("table", "json"))
    lg.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Dispatch the sub-command."""
    cmd = args.package_cmd
    if cmd == "validate":
        return _validate(args)
    if cmd == "render":
        return _render(args)
    from reconciler.cli.clusters import open_cluster

    opened = open_cluster(args)
    if cmd == "rerun":
        if not args.node and args.selector is None:
            raise InputError("package rerun: name the nodes (--node) or select them with -l/--selector")
        op = opened.rerun(args.recipe, args.package, args.node, selector=args.selector, stage=args.stage,
                          version=args.version, force=args.force)
        what = f"stage {args.stage}" if args.stage else "from apply"
        return finish(args, opened, list(op.changes), list(op.notes), op.write,
                      header=f"rerun {args.package} ({what})",
                      question=f"rerun {args.package} ({what}) on {len(op.changes)} node(s)?")
    nodes = opened.nodes(args.selector, recipe=args.recipe, package=args.package)
    if cmd == "status":
        from reconciler.cli.statusviews import show

        return show(args, nodes)
    return _logs(args, opened, nodes)


def _validate(args: argparse.Namespace) -> int:
    from reconciler.packages.config import validate_package

    reports = [validate_package(d) for d in args.dirs]
    bad = any(not r.ok or (args.strict and r.warnings) for r in reports)
    if args.output == "json":
        print(json.dumps({"ok": not bad, "packages": [r.to_dict() for r in reports]}, indent=2, sort_keys=True))
        return EXIT_BAD_INPUT if bad else EXIT_OK
    for r in reports:
        for e in r.errors:
            print(visible(redact(e)), file=sys.stderr)
        for w in r.warnings:
            print(error_line("warning", w), file=sys.stderr)
        if r.config is not None:
            modes = ", ".join(r.config.defined_modes)
            print(visible(f"ok: {r.config.package_name} {r.config.package_version} ({r.root}): {modes}"
                          + (f"; {len(r.warnings)} warning(s)" if r.warnings else "")))
    return EXIT_BAD_INPUT if bad else EXIT_OK


def _render(args: argparse.Namespace) -> int:
    from reconciler.load import load_inputs
    from reconciler.packages.config import load_package
    from reconciler.packages.render import (
        image_tag,
        missing_config_files,
        node_metadata_config_map,
        package_config_map,
    )

    inputs = load_inputs([args.recipe], [], locked=False)
    recipes = [r for r in inputs.recipes if args.package in r.packages]
    if not recipes:
        known = {p for r in inputs.recipes for p in r.packages}
        where = clip(args.recipe, PATH_LIMIT)
        raise InputError(f"no recipe in {where} has a package named {shown(args.package)}"
                         f"{suggestion(args.package, known)}; {listing(known, 'packages', f'in {where}')}")
    recipe = recipes[0]
    pkg = recipe.packages[args.package]
    agent = args.agent_version or (image_tag(pkg.agentImageOverride) if pkg.agentImageOverride else "unknown")
    namespace = args.namespace or "node-reconciler"
    objs = [package_config_map(recipe, pkg, namespace)]
    if args.node:
        from reconciler.cli.clusters import open_cluster

        node = open_cluster(args).cluster.nodes.get_node(args.node)
        objs.append(node_metadata_config_map(node, recipe, agent, namespace))
    problems: list[str] = []
    if args.check:
        cfg = load_package(args.check)
        if cfg.package_version != pkg.version:
            problems.append(f"{cfg.config_file}: package_version {cfg.package_version} but the recipe pins "
                            f"{args.package} {pkg.version}")
        missing = missing_config_files(cfg.expected_config_files, pkg.configMap)
        if missing:
            problems.append(f"{cfg.config_file}: expected_config_files {', '.join(missing)} missing from the recipe's "
                            f"configMap of {args.package} (the agent fails the stage)")
    if args.output == "json":
        print(json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}, indent=2, sort_keys=True))
    else:
        from ruamel.yaml import YAML

        buf = io.StringIO()
        y = YAML(typ="safe", pure=True)
        y.allow_unicode = False  # bidi and zero-width characters escaped (\uXXXX), never printed raw
        y.default_flow_style = False
        y.dump_all(objs, buf)
        sys.stdout.write(buf.getvalue())
    for p in problems:
        print(error_line("error", p), file=sys.stderr)
    return EXIT_BAD_INPUT if problems else EXIT_OK


def _tail(log: str, n: int) -> str:
    """The last ``n`` lines of ``log`` (all of them for -1), as ``kubectl logs --tail``."""
    if n < 0:
        return log
    lines = log.rstrip("\n").split("\n") if log else []
    return "\n".join(lines[-n:]) if n else ""


def _logs(args: argparse.Namespace, opened: Any, nodes: list[Any]) -> int:
    from dataclasses import replace

    from reconciler.ops.logs import find_logs

    cluster = opened.cluster.stages
    chosen = select_nodes(nodes, args.node) if args.node else nodes

    def look(on: list[Any]) -> list[Any]:
        return [replace(log, log=_tail(log.log, args.tail))
                for n in on for log in find_logs(cluster, n, args.recipe, args.package, args.stage,
                                                 max(1, args.attempts))]

    found = look(chosen)
    if args.follow:
        return _follow(args, opened, chosen, found, look)
    if args.output == "json":
        print(json.dumps({"logs": [vars(x) for x in found]}, indent=2, sort_keys=True))
        return EXIT_OK
    if not found:
        print(visible(f"no stage pod or failure record of {args.package} (recipe {args.recipe}) found; stage pods "
                      "are deleted when the node's lifecycle completes, host logs stay under the agent's log "
                      "directory"))
    for x in found:
        print(visible(_head(x)))
        print(visible(x.log.rstrip(), multiline=True) if x.log else "(no log captured)")
    return EXIT_OK


def _head(x: Any) -> str:
    head = (f"== {x.node} {x.package} {x.version} {x.stage} pod {x.pod} (attempt {x.attempt}): {x.phase}"
            if x.source == "pod" else f"== {x.node} {x.package} {x.stage}: failure record")
    if x.exit_code is not None:
        head += f", exit {x.exit_code}"
    if x.reason:
        head += f" ({x.reason})"
    return head


def _follow(args: argparse.Namespace, opened: Any, chosen: list[Any], found: list[Any], look: Any) -> int:
    """``-f``: print what is found, then every ``--interval`` seconds (on the cluster's clock) the
    phase changes and the log lines not printed yet, while any stage pod is pending or running;
    ``-o json`` prints one JSON object per log entry and change (JSON lines)."""
    shown: dict[tuple[str, str, int, str], tuple[str, str]] = {}  # (node, pod, attempt, source) → (phase, log)

    def emit(logs: list[Any]) -> bool:
        active = False
        for x in logs:
            k = (x.node, x.pod, x.attempt, x.source)
            phase, text = shown.get(k, ("", ""))
            new = x.log[len(text):] if x.log.startswith(text) else x.log
            if x.phase != phase or new.strip():
                if args.output == "json":
                    print(json.dumps({**vars(x), "log": new}, sort_keys=True), flush=True)
                else:
                    if x.phase != phase:
                        print(visible(_head(x)), flush=True)
                    if new.strip():
                        print(visible(new.strip("\n"), multiline=True), flush=True)
            shown[k] = (x.phase, x.log)
            active = active or x.phase in ("pending", "running")
        return active

    active = emit(found)
    try:
        while active:
            opened.clock.wait(args.interval)
            fresh = [opened.cluster.nodes.get_node(n.name) for n in chosen]
            active = emit(look(fresh))
    except KeyboardInterrupt:
        return EXIT_OK
    if not shown and args.output != "json":
        print(visible(f"no stage pod or failure record of {args.package} (recipe {args.recipe}) found"))
    return EXIT_OK

"""``reconciler plan RECIPE... [--policy FILE]... --cluster sim:PATH [-o table|wide|json|yaml|name|markdown]``.

Loads the recipes and policies, observes the cluster once, plans every recipe (in the loader's
``(priority, name)`` order) and prints the plans. Nothing is written to the cluster.

Output:

* ``table`` (alias ``text``): one set of tables per recipe (styles only on a terminal, never with ``NO_COLOR`` or
  ``TERM=dumb``); above :data:`~reconciler.report.render.SUMMARY_AT` changing nodes the node
  table has a row per group of nodes that do the same; ``wide``: a row per node, always;
* ``json``: one recipe → its plan document (``Plan.to_json()``); several → ``{"plans": [...]}``
  with the plan documents in order (``apply --plan`` reads both shapes); ``yaml``: the same as YAML;
* ``name``: ``noderecipe/<name>`` per recipe planned;
* ``markdown``: the PR comment body of each recipe, joined by a rule; with several recipes the
  size budget is shared so the whole body stays under GitHub's comment limit.

Exit codes: 0 ok; with ``--detailed-exitcode`` 3 when any recipe has pending changes (a node
with work, or a runtime-required taint to remove; not a node ``apply`` leaves failed, which
``--retry-failed`` plans as ``apply --retry-failed`` does); 2 bad input (no recipe at all, or an empty file,
unless ``--allow-empty``); 4 cluster error.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

from reconciler.cli.common import (
    add_cluster_args,
    add_input_args,
    add_output_arg,
    add_retry_failed_arg,
    add_selector_arg,
)
from reconciler.errors import EXIT_CHANGES, EXIT_OK
from reconciler.model.plan import Plan, canonical_json
from reconciler.report.safetext import visible


def add_parser(sub: Any) -> None:
    """Register the ``plan`` verb."""
    p: argparse.ArgumentParser = sub.add_parser(
        "plan",
        help="show what would change on which nodes, in which batches (no changes are made)",
        description="Plan each recipe against the observed cluster and print the plan.",
    )
    add_input_args(p)
    add_cluster_args(p)
    add_output_arg(p, ("table", "wide", "json", "yaml", "name", "markdown"), templates=True)
    with contextlib.suppress(argparse.ArgumentError):  # in case add_input_args gains it
        p.add_argument(
            "--no-locked",
            dest="locked",
            action="store_false",
            help="allow packages not pinned by containerSHA (default: locked, as apply)",
        )
    p.add_argument(
        "--revision", default="", metavar="REV", help="source revision recorded in the plan (e.g. a git SHA)"
    )
    p.add_argument(
        "--detailed-exitcode",
        action="store_true",
        help="exit 3 when apply would change something, 0 when not (every selected node up to date or "
             "left failed)",
    )
    add_selector_arg(p)
    add_retry_failed_arg(p)
    from reconciler.cli.reportfile import add_report_file_arg

    add_report_file_arg(p, "predicted")
    p.set_defaults(func=run, locked=True)
    from reconciler.cli.planrev import add_revision_args  # --repo/--base/--head, --comment (issue #5)

    add_revision_args(p)


def pending(plan: Plan) -> bool:
    """True when the plan would change something (a node with work or a taint to remove; a node
    left failed, ``notRetried``, is not: ``apply`` does not touch it)."""
    return bool(plan.summary.nodesChanging or plan.summary.untaint)


def format_plans(plans: list[Plan], output: Any, *, color: bool = False) -> str:
    """Render ``plans`` in ``output`` format (see the module docstring for the shapes; a parsed
    ``-o jsonpath=``/``custom-columns=`` template fills in the JSON document, one row per node)."""
    from reconciler.report.render import MARKDOWN_LIMIT, render_json, render_markdown, render_text

    if not isinstance(output, str):
        docs = [p.to_dict() for p in plans]
        return str(output.render(docs[0] if len(docs) == 1 else {"plans": docs},
                                 [n for d in docs for n in d["nodes"]]))

    if output == "name":
        return "".join(visible(f"noderecipe/{p.recipe.name}") + "\n" for p in plans)
    if output == "yaml":
        from reconciler.cli.outputs import dumps

        return dumps(plans[0].to_dict() if len(plans) == 1 else {"plans": [p.to_dict() for p in plans]}, "yaml")
    if output == "json":
        if len(plans) == 1:
            return render_json(plans[0])
        return canonical_json({"plans": [p.to_dict() for p in plans]})
    if output == "markdown":
        sep = "\n---\n\n"
        limit = (MARKDOWN_LIMIT - len(sep) * max(0, len(plans) - 1)) // max(1, len(plans))
        return sep.join(render_markdown(p, limit=limit) for p in plans)
    ascii_only = not _encodes(sys.stdout, "│·→")
    return "\n".join(render_text(p, color=color, ascii_only=ascii_only, wide=output == "wide") for p in plans)


def _encodes(stream: object, sample: str) -> bool:
    """Whether ``stream``'s encoding can write ``sample`` (True when it says none)."""
    encoding = getattr(stream, "encoding", None)
    if not isinstance(encoding, str):
        return True
    try:
        sample.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def run(args: argparse.Namespace) -> int:
    """Load, observe once, plan every recipe, print; see the module docstring for exit codes."""
    from reconciler.cli.clusters import check_sim_config_names, open_cluster
    from reconciler.cli.reportfile import check_report_file
    from reconciler.load import load_inputs

    check_report_file(args)
    inputs = load_inputs(args.recipes, args.policy, locked=getattr(args, "locked", True),
                         allow_empty=bool(getattr(args, "allow_empty", False)))
    opened = open_cluster(args, read_only=True)  # plan never writes the cluster (nor saves a simulated one)
    check_sim_config_names(args, opened, inputs.recipes)
    # a paused or disabled recipe is planned as usual (with a warning), but apply skips it: its
    # changes are not "pending" for --detailed-exitcode (a pipeline gating on plan must agree with apply)
    plans = opened.plan(inputs, selector=args.selector, retry_failed=args.retry_failed, revision=args.revision)
    from reconciler.cli.console import styles_allowed

    controls = opened.controls()
    held = {p.recipe.name: p.recipe.name in controls and controls[p.recipe.name].active for p in plans}
    color = args.output in ("table", "wide") and styles_allowed(sys.stdout)
    sys.stdout.write(format_plans(plans, args.output, color=color))
    if args.report_file:
        write_predicted(args, inputs, opened, plans)
    if args.detailed_exitcode and any(pending(p) for p in plans if not held[p.recipe.name]):
        return EXIT_CHANGES
    return EXIT_OK


def write_predicted(args: argparse.Namespace, inputs: Any, opened: Any, plans: list[Plan]) -> None:
    """``--report FILE`` of ``plan`` (and ``apply --dry-run``): each plan with work run by the
    simulator, drawn as the predicted rollout."""
    from reconciler.cli.clusters import load_sim_config
    from reconciler.cli.estimate import assumptions, simulate_plan
    from reconciler.cli.reportfile import write_report
    from reconciler.load import policy_for
    from reconciler.observe.snapshot import observe
    from reconciler.report.htmlreport import ReportRun

    config = load_sim_config(args.sim_config) if getattr(args, "sim_config", None) else None
    fleet = observe(opened.cluster)
    runs = []
    for plan in plans:
        if not plan.summary.nodesChanging:
            continue
        recipe = inputs.recipe(plan.recipe.name)
        cfg, assumed = assumptions(recipe, inputs, args, config)
        run = simulate_plan(recipe, policy_for(recipe, inputs), fleet, cfg, only=args.selector,
                            retry_failed=getattr(args, "retry_failed", False))
        runs.append(ReportRun(run, "predicted", f"simulated: {assumed.text()} (from {assumed.source})"))
    write_report(args, runs, title="node-reconciler: predicted rollout",
                 subtitle=f"plan against {opened.description}; nothing was changed")

"""``reconciler metrics RECIPE... [--metrics-file PATH] [--pushgateway URL]``: rollout metrics computed
from the cluster, without running anything (for a cron job feeding the node-exporter textfile
collector, or a Pushgateway).

Each recipe is planned against the observed nodes (matched nodes, ceilings, compartments, nodes
with work left) and combined with the node records (in flight, failed, blocked, statuses, package
states) and the recipe's control switches; see :mod:`reconciler.report.metrics`. Series that
only a rollout knows (current batch, budget in use, phase, halted) are left out. Without
``--metrics-file`` and ``--pushgateway`` the exposition text is printed. ``apply
--metrics-file/--pushgateway`` writes the same metrics (with the rollout's series) at the end of a
run, and ``reconciler controller`` serves them on ``/metrics`` as its rollouts go.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from reconciler.cli.common import add_cluster_args, add_input_args
from reconciler.cli.safeio import error_line
from reconciler.errors import EXIT_OK, ReconcilerError
from reconciler.report.redact import redact
from reconciler.report.safetext import visible


def _http_url(text: str) -> str:
    from reconciler.adapters.metrics.pushgateway import check_url

    try:
        check_url(text)
    except ReconcilerError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def add_metrics_args(p: argparse.ArgumentParser) -> None:
    """``--metrics-file PATH``, ``--pushgateway URL`` (checked at parse time), ``--metrics-job NAME``."""
    p.add_argument("--metrics-file", metavar="PATH",
                   help="write Prometheus metrics here (atomically; name it *.prom for the textfile collector)")
    p.add_argument("--pushgateway", metavar="URL", type=_http_url,
                   help="push the metrics to this Pushgateway (one group per recipe)")
    p.add_argument("--metrics-job", default="node-reconciler", metavar="NAME", help="Pushgateway job name")


def add_parser(sub: Any) -> None:
    """Register the ``metrics`` verb."""
    p: argparse.ArgumentParser = sub.add_parser("metrics", help="Prometheus metrics of the recipes' rollouts",
                                                description=__doc__)
    add_input_args(p)
    add_cluster_args(p)
    add_metrics_args(p)
    p.add_argument("--no-locked", dest="locked", action="store_false", help="allow packages not pinned by digest")
    p.set_defaults(func=run, locked=True)


def run(args: argparse.Namespace) -> int:
    """Plan each recipe, build its metrics, print / write / push them."""
    from reconciler.adapters.metrics.pushgateway import export
    from reconciler.cli.clusters import open_cluster
    from reconciler.cli.optcheck import output_of, prepare_outputs
    from reconciler.load import load_inputs, policy_for
    from reconciler.observe.snapshot import observe
    from reconciler.ops.controls import read_controls
    from reconciler.plan.planner import compute_plan
    from reconciler.report.metrics import MetricSet, exposition, rollout_metrics

    prepare_outputs(args)  # --metrics-file, before any work
    inputs = load_inputs(args.recipes, args.policy, locked=args.locked)
    opened = open_cluster(args)
    fleet = observe(opened.cluster)
    controls = read_controls(opened.cluster)
    nodes = list(fleet.nodes.values())
    sets: dict[str, MetricSet] = {}
    for recipe in inputs.recipes:
        policy = policy_for(recipe, inputs)
        plan = compute_plan(recipe, policy, fleet)
        c = controls.get(recipe.name)
        sets[recipe.name] = rollout_metrics(recipe.name, nodes, plan=plan, paused=bool(c and c.paused),
                                            disabled=bool(c and c.disabled), now=opened.wall())
    if not args.metrics_file and not args.pushgateway:
        sys.stdout.write(exposition(*(sets[n] for n in sorted(sets))).decode("utf-8"))
        return EXIT_OK
    file = output_of(args, "--metrics-file") if args.metrics_file is not None else None
    for line in export(sets, file=file, pushgateway=args.pushgateway, job=args.metrics_job):
        print(visible(redact(line)))
    return EXIT_OK


def apply_metrics(args: argparse.Namespace, opened: Any) -> Any:
    """``apply --metrics-file/--pushgateway``: the observer that folds the rollouts for
    :func:`export_after_apply` (:class:`reconciler.report.rolloutmetrics.RolloutMetrics`, the
    controller's own); None without those options."""
    if not (args.metrics_file or args.pushgateway):
        return None
    from reconciler.report.rolloutmetrics import RolloutMetrics

    return RolloutMetrics(opened.cluster.nodes.list_nodes, opened.wall)


def export_after_apply(args: argparse.Namespace, opened: Any, metrics: Any) -> bool:
    """``apply --metrics-file/--pushgateway``: the metrics of the finished rollouts (``metrics``:
    :func:`apply_metrics`'s observer; nodes re-read once, controls read once).
    A failure to write or push is reported on stderr and does not stop anything; returns whether
    the ``--metrics-file`` could not be written (the run then exits 5 if it would exit 0: see
    :func:`reconciler.cli.apply.run`). A failed push stays a warning: the Pushgateway is a remote
    service the run does not own."""
    from reconciler.adapters.metrics.pushgateway import export
    from reconciler.cli.optcheck import output_of
    from reconciler.fileio.writing import OutputError
    from reconciler.ops.controls import read_controls
    from reconciler.report.metrics import MetricsError

    file = output_of(args, "--metrics-file") if args.metrics_file is not None else None
    try:
        for name, c in read_controls(opened.cluster).items():
            metrics.held(name, paused=c.paused, disabled=c.disabled)
        for line in export(metrics.sets(), file=file, pushgateway=args.pushgateway, job=args.metrics_job):
            print(error_line("note", line)[len("note: "):], file=sys.stderr)
    except OutputError as e:
        print(error_line("error", f"metrics not written: {e}"), file=sys.stderr)
        return True
    except (MetricsError, ReconcilerError) as e:
        print(error_line("warning", f"metrics not exported: {e}"), file=sys.stderr)
    return False

"""``reconciler simulate``: a what-if rollout. The current fleet (a real cluster through
``--kubeconfig``, or a fleet file) is copied into the simulated fleet and the recipes are applied
there on a simulated clock: batches, waits, evictions, failures and the makespan, with nothing
changed anywhere. Behaviour (stage and reboot durations, injected failures) from ``--sim-config``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from reconciler.cli.common import add_cluster_args, add_input_args, add_output_arg, add_retry_failed_arg
from reconciler.cli.console import make_console
from reconciler.cli.runsummary import print_summary
from reconciler.errors import EXIT_FAILED, EXIT_OK
from reconciler.execute.timeline import RunResult
from reconciler.report.safetext import text, visible


def add_parser(sub: Any) -> None:
    """Register the ``simulate`` verb."""
    p: argparse.ArgumentParser = sub.add_parser(
        "simulate",
        help="what-if: apply the recipes to a simulated copy of the fleet (changes nothing)",
        description=__doc__,
    )
    add_input_args(p)
    add_cluster_args(p)
    add_output_arg(p, ("table", "json"))
    p.add_argument("--no-locked", dest="locked", action="store_false", help="allow packages not pinned by digest")
    p.add_argument("--timeline", action="store_true", help="print every event of the simulated run")
    add_retry_failed_arg(p)
    from reconciler.cli.reportfile import add_report_file_arg

    add_report_file_arg(p, "predicted (simulated)")
    p.set_defaults(func=run, locked=True)


def run(args: argparse.Namespace) -> int:
    """Copy the fleet into a simulation, apply every recipe there, report."""
    from reconciler.adapters.sim.fleet import SimFleet
    from reconciler.adapters.sim.fromobserved import objects_from_observed
    from reconciler.cli.clusters import check_sim_names, load_sim_config, open_cluster
    from reconciler.cli.reportfile import check_report_file
    from reconciler.execute.rollout import Rollout
    from reconciler.load import load_inputs, policy_for
    from reconciler.load.snapshotfile import paused_gc
    from reconciler.observe.snapshot import observe
    from reconciler.plan.planner import compute_plan

    check_report_file(args)
    inputs = load_inputs(args.recipes, args.policy, locked=args.locked)
    cfg_path = getattr(args, "sim_config", None)
    source = open_cluster(argparse.Namespace(**{**vars(args), "sim_config": None}))
    config = load_sim_config(cfg_path) if cfg_path else None
    check_sim_names(cfg_path, config, lambda: {n.name: n.labels for n in source.cluster.nodes.list_nodes()},
                    inputs.recipes)
    with paused_gc():  # millions of acyclic objects allocated, none freed: no collector passes over them
        sim = SimFleet(objects_from_observed(observe(source.cluster)), config)
    results: list[RunResult] = []
    base = sim.config
    for recipe in inputs.recipes:
        policy = policy_for(recipe, inputs)
        sim.config = base.for_estimate(recipe)  # without a validator, a readiness gate passes at once
        plan = compute_plan(recipe, policy, observe(sim), retry_failed=args.retry_failed)
        results.append(Rollout(recipe, policy, plan, sim, sim, retry_failed=args.retry_failed).run())
    if getattr(args, "report_file", None):
        from reconciler.cli.reportfile import write_report
        from reconciler.report.htmlreport import ReportRun

        cfg = config if config is not None else base
        note = f"stage {cfg.stage_duration('apply'):g} s, reboot {cfg.rebootSeconds:g} s" + (
            f" (from --sim-config {cfg_path})" if cfg_path else " (simulator defaults)")
        write_report(args, [ReportRun(r, "predicted", note) for r in results],
                     title="node-reconciler: simulated rollout",
                     subtitle=f"what-if on a simulated copy of the {source.description}; nothing was changed")
    if args.output == "json":
        docs = [{**r.to_dict(), "simulated": True} for r in results]
        print(json.dumps(docs[0] if len(docs) == 1 else {"results": docs}, indent=2, sort_keys=True))
    else:
        _show(make_console(), results, args.timeline,
              source.description)
    return EXIT_OK if all(r.result == "succeeded" for r in results) else EXIT_FAILED


def _show(console: Any, results: list[RunResult], timeline: bool, source: str) -> None:
    if timeline:
        for r in results:
            for ev in r.timeline:
                console.print(text(f"  {visible(r.recipe)} {ev.t:9.1f}s {visible(ev.node):<20} {visible(ev.event)} "
                                   f"{visible(ev.detail)}"), soft_wrap=True)
    print_summary(console, results, title=f"what-if on a simulated copy of the {source} (nothing was changed)")

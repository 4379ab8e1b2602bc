"""``reconciler apply --dry-run[=client|server]``: what ``apply`` would do, with nothing persisted.

* ``--dry-run`` / ``--dry-run=client``: each recipe is planned exactly as ``apply`` plans it
  (through :func:`reconciler.service.plan_recipes`) and the plans are printed in ``apply``'s
  ``-o`` format; nothing is sent to the cluster (kubectl's client dry run). With ``--report FILE``
  the page shows the *predicted* rollout (the simulator's run of each plan).
* ``--dry-run=server``: the same, and the first write ``apply`` makes to each node of the first
  batch of every compartment — the cordon (``spec.unschedulable``) — is sent with the API
  server's dry run (``dryRun=All``: authenticated, authorised, admitted by webhooks, nothing
  persisted), so missing RBAC or a refusing admission webhook shows before a real run. Later
  writes depend on earlier ones having happened (a drain needs the cordon, a stage the drain), so
  they cannot be dry-run meaningfully; ``reconciler simulate --kubeconfig`` rehearses the whole
  rollout on a copy of the live cluster. Refused on the simulated fleet (it has no API server).

Exit codes: 0; 2 bad input; 4 when the API server refused a dry-run write (each refusal named).
"""

from __future__ import annotations

import argparse
import sys

from reconciler.cli.safeio import error_line
from reconciler.errors import EXIT_CLUSTER, EXIT_OK, InputError, ReconcilerError
from reconciler.report.safetext import visible


def check(args: argparse.Namespace) -> None:
    """Options that make no sense with a dry run.

    Raises:
        InputError: naming the option.
    """
    for opt, flag in (("sim_save", "--sim-save"), ("sim_crash_after", "--sim-crash-after"),
                      ("status_repo", "--status-repo"), ("pushgateway", "--pushgateway"),
                      ("metrics_file", "--metrics-file")):
        if getattr(args, opt, None):
            raise InputError(f"{flag} with --dry-run: a dry run writes nothing, so there is nothing to {flag[2:]}")


def run(args: argparse.Namespace) -> int:
    """Plan as ``apply`` would, print, and (server) dry-run the first cordons."""
    from reconciler.cli.clusters import open_cluster
    from reconciler.cli.plan import format_plans
    from reconciler.cli.reportfile import check_report_file
    from reconciler.load import load_inputs

    check(args)
    check_report_file(args)
    inputs = load_inputs(args.recipes, args.policy, locked=args.locked)
    opened = open_cluster(args)
    server = args.dry_run == "server"
    if server and opened.kube is None:
        raise InputError("--dry-run=server needs a real API server; this cluster adapter has no server-side dry "
                         "run (the simulated fleet), use --dry-run (client)")
    plans = opened.plan(inputs, selector=args.selector, retry_failed=args.retry_failed)  # held: with a warning
    controls = opened.controls()
    held = {p.recipe.name: p.recipe.name in controls and controls[p.recipe.name].active for p in plans}
    sys.stdout.write(format_plans(plans, "json" if args.output == "jsonl" else args.output))
    if getattr(args, "report_file", None):  # a dry run draws the predicted rollout
        from reconciler.cli.plan import write_predicted

        write_predicted(args, inputs, opened, [p for p in plans if not held[p.recipe.name]])
    refused = 0
    if server:
        assert opened.kube is not None  # a real cluster (checked above)
        opened.kube.server_dry_run = True
        for plan in (p for p in plans if not held[p.recipe.name]):
            by_name = {n.name: n for n in plan.nodes}
            for comp in plan.compartments:
                first = comp.batches[0] if comp.batches else ()
                for name in first:
                    node = by_name.get(name)
                    if node is None or not node.cordon:
                        continue
                    try:
                        opened.cluster.nodes.patch_node(name, unschedulable=True)
                        print(visible(f"server dry run: cordon node/{name} ({plan.recipe.name}, {comp.name} batch 1) "
                                      "accepted"), file=sys.stderr)
                    except ReconcilerError as e:
                        refused += 1
                        print(error_line("error", f"server dry run: cordon node/{name} refused: {e}"),
                              file=sys.stderr)
    print("dry run: nothing was written" + (" (first cordons checked by the API server)" if server else ""),
          file=sys.stderr)
    return EXIT_CLUSTER if refused else EXIT_OK

"""``reconciler apply``: plan and carry out recipes on a cluster, batch by batch.

Exit codes: 0 every recipe succeeded, 1 a node failed or a compartment halted, 2 bad input (nothing
was changed), 4 cluster error, 137 a simulated crash (``--sim-crash-after``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

from rich.console import Console

from reconciler.cli.common import add_cluster_args, add_input_args, add_output_arg
from reconciler.cli.console import make_console
from reconciler.cli.optcheck import check_apply_options, count, run_id, seconds
from reconciler.cli.runsummary import print_summary
from reconciler.cli.safeio import error_line
from reconciler.errors import EXIT_FAILED, EXIT_OK, CrashInjected, InputError, PlanMismatchError
from reconciler.execute.timeline import Event, RunResult
from reconciler.report.safetext import markup, visible

EXIT_CRASHED = 137


def add_parser(sub: Any) -> None:
    """Register the ``apply`` verb."""
    p: argparse.ArgumentParser = sub.add_parser(
        "apply",
        help="carry out the plan: cordon, wait, drain, stages, interrupt, uncordon, batch by batch",
        description="Plan each recipe against the cluster and carry it out with batch gating.",
    )
    add_input_args(p)
    add_cluster_args(p)
    add_output_arg(p, ("text", "json"))
    p.add_argument("--plan", metavar="plan.json", help="refuse to run unless the current plan has this planHash")
    p.add_argument("--no-locked", dest="locked", action="store_false", help="allow packages not pinned by digest")
    p.add_argument("--sim-save", metavar="PATH", help="write the simulated fleet after the run (kubectl YAML)")
    p.add_argument("--sim-crash-after", type=count(1, 10**9), metavar="N",
                   help="stop abruptly after N cluster writes (tests)")
    p.add_argument("--run-id", type=run_id, help="run id recorded on nodes (default: random)")
    p.add_argument("--workers", type=count(1, 1024), default=None, metavar="N",
                   help="nodes advanced at once on a real cluster (threads; default: the largest batch "
                        "the budget allows, 16 to 128)")
    p.add_argument("--retry-failed", action="store_true",
                   help="retry nodes that failed in an earlier run with the same inputs (default: leave them failed)")
    p.add_argument("--poll-seconds", type=seconds(0, 3600, low_inclusive=False), default=None,
                   help="seconds between looks at the cluster")
    p.add_argument("--wait-for-lock", type=seconds(0, 7 * 86400), default=0.0, metavar="SECONDS",
                   help="wait this long for another run holding a recipe's Lease (default: exit 1 at once)")
    p.add_argument("--lease-duration", type=count(1, 86400), default=60, metavar="SECONDS",
                   help="Lease duration; renewed every third of it, taken over this long after a run died")
    p.set_defaults(func=run, locked=True)
    from reconciler.cli.applyreport import add_report_args  # status commit / status object (issue #5)

    add_report_args(p)
    from reconciler.cli.metrics import add_metrics_args  # --metrics-file/--pushgateway (issue #8)

    add_metrics_args(p)


def _read_plan_hashes(path: str) -> dict[str, str]:
    """``{recipe name: planHash}`` of a ``reconciler plan -o json`` file (one plan or ``{"plans": [...]}``).

    Read with the guarded readers (size limit, UTF-8, :func:`reconciler.jsonsafe.parse_json`:
    bounded depth, no NaN/huge numbers/duplicate keys), then checked for that shape: each plan an
    object with ``planHash`` (64 lower-case hex digits) and ``recipe.name`` (a string), no recipe
    twice.

    Raises:
        InputError: unreadable, not JSON, or not that shape; positioned ``file:line:column`` with the field.
    """

    from reconciler.jsonsafe import parse_json, path_pos
    from reconciler.load.yamlsafe import format_path, read_text

    max_bytes = 512 * 1024 * 1024  # a 100,000-node plan is about 130 MB of JSON
    text = read_text(path, max_bytes=max_bytes)
    doc = parse_json(text, path, what="plan file")

    def bad(where: tuple[str | int, ...], message: str) -> InputError:
        return InputError(message, path_pos(text, path, where), format_path(where))

    shape = "expected the JSON of `reconciler plan -o json`: a plan object or {\"plans\": [plan, ...]}"
    if not isinstance(doc, dict):
        raise bad((), f"a plan file holds an object, not {type(doc).__name__}; {shape}")
    if "plans" in doc:
        plans = doc["plans"]
        if not isinstance(plans, list) or not plans:
            raise bad(("plans",), f"plans must be a non-empty list of plan objects; {shape}")
        docs: list[tuple[tuple[str | int, ...], object]] = [(("plans", i), d) for i, d in enumerate(plans)]
    else:
        docs = [((), doc)]
    hashes: dict[str, str] = {}
    for where, d in docs:
        if not isinstance(d, dict):
            raise bad(where, f"a plan must be an object; {shape}")
        h, rec = d.get("planHash"), d.get("recipe")
        if not isinstance(h, str) or not re.fullmatch(r"[0-9a-f]{64}", h):
            raise bad((*where, "planHash"), "planHash must be 64 lower-case hex digits (the sha256 `plan` printed)")
        name = rec.get("name") if isinstance(rec, dict) else None
        if not isinstance(name, str) or not name:
            raise bad((*where, "recipe", "name"), "recipe.name must be the planned recipe's name")
        if name in hashes:
            raise bad((*where, "recipe", "name"), f"recipe {name!r} is planned twice in this file")
        hashes[name] = h
    return hashes


def run(args: argparse.Namespace) -> int:
    """Load, observe, plan and apply every recipe in (priority, name) order."""
    from reconciler.cli.clusters import open_cluster
    from reconciler.execute.rollout import Rollout, default_workers, new_run_id
    from reconciler.execute.sequencing import waiting_nodes
    from reconciler.execute.taints import auto_taint
    from reconciler.load import load_inputs, policy_for
    from reconciler.model.recipe import Recipe
    from reconciler.observe.snapshot import observe
    from reconciler.ops.controls import held_reason
    from reconciler.plan.planner import compute_plan, locked_refusals

    check_apply_options(args)  # output paths and option combinations, before any work
    inputs = load_inputs(args.recipes, args.policy, locked=args.locked)
    policies = {r.name: policy_for(r, inputs) for r in inputs.recipes}
    expected = _read_plan_hashes(args.plan) if args.plan else None
    opened = open_cluster(args)
    console = make_console(stderr=args.output == "json")
    run_id = args.run_id or new_run_id()
    from reconciler.cli.applyreport import Reporter
    from reconciler.errors import ReconcilerError

    reporter = Reporter.from_args(args, opened)  # checks its options before anything runs
    from reconciler.adapters.host import process_identity
    from reconciler.execute.lock import LeaseGroup, holder_identity  # one run per recipe (issue #6)

    leases = LeaseGroup(opened.cluster, opened.clock, [r.name for r in inputs.recipes],
                        holder_identity(run_id, process_identity()), duration=args.lease_duration)
    leases.acquire(args.wait_for_lock)  # before anything is observed or changed; LeaseHeldError names the holder
    from reconciler.execute.fence import FencedCluster

    fenced = FencedCluster(opened.cluster, leases)  # every write checks the leases first (issue 12)
    stopped = ""
    results: list[RunResult] = []
    try:
        # pre-checks on one observation, one plan per recipe; nothing is written before they pass
        fleet = observe(opened.cluster)
        first = {r.name: compute_plan(r, policies[r.name], fleet) for r in inputs.recipes}
        if expected is not None:  # every recipe applied must match its reviewed plan
            for rec in inputs.recipes:
                current = first[rec.name].planHash
                if rec.name not in expected:
                    raise PlanMismatchError(
                        f"plan {args.plan} has no plan for recipe {rec.name}; plan it and review it"
                    )
                if current != expected[rec.name]:
                    raise PlanMismatchError(
                        f"plan {args.plan} is stale for recipe {rec.name}: its planHash {expected[rec.name][:12]} does "
                        f"not match the current inputs and fleet ({current[:12]}); re-run `reconciler plan` and "
                        "review it"
                    )
        if args.locked:  # refuse before anything is changed
            refused = [m for r in inputs.recipes for m in locked_refusals(first[r.name], r)]
            if refused:
                raise InputError("; ".join(refused))
        runtime_required = tuple(r.name for r in inputs.recipes if r.runtimeRequired)
        tainted = auto_taint(fenced, inputs.recipes, fleet)
        if tainted and args.output == "text":
            console.print(f"tainted {len(tainted)} new node(s) NoSchedule until their runtime-required recipes "
                          f"complete (autoTaintNewNodes): {markup(', '.join(tainted))}", soft_wrap=True)
        done: list[Recipe] = []
        for recipe in inputs.recipes:
            leases.tick(opened.clock.now())
            held = held_reason(opened.cluster, recipe.name)  # reconciler pause/disable (ops/controls.py)
            if held:
                console.print(visible(f"{recipe.name}: {held}; skipped"), style="yellow", markup=False)
                if held.startswith("paused"):  # a paused recipe still holds back later ones; a disabled one not
                    done.append(recipe)
                continue
            fleet = observe(opened.cluster)
            plan = compute_plan(recipe, policies[recipe.name], fleet)
            earlier = [(e, compute_plan(e, policies[e.name], fleet)) for e in done]
            waiting = waiting_nodes(recipe, plan, earlier)
            done.append(recipe)
            if args.output == "text":
                console.print(
                    f"[bold]{markup(recipe.name)}[/bold] {markup(recipe.version)}: {plan.summary['nodesChanging']} of "
                    f"{plan.summary['nodes']} selected nodes change; plan {plan.planHash[:12]} on "
                    f"{markup(opened.description)}"
                )
                for w in plan.warnings:
                    console.print(f"  [yellow]warning:[/yellow] {markup(w)}")
            rollout = Rollout(
                recipe,
                policies[recipe.name],
                plan,
                fenced,
                opened.clock,
                run_id=run_id,
                poll_seconds=args.poll_seconds or opened.poll_seconds,
                on_event=reporter.listener(plan, run_id, _printer(console) if args.output == "text" else None),
                retry_failed=args.retry_failed,
                runtime_required=runtime_required,
                waiting=waiting,
                on_tick=leases.tick,
                workers=1 if opened.sim is not None else (args.workers or default_workers(plan)),
            )
            results.append(rollout.run())
            reporter.finished(plan, results[-1])
            if rollout.stopped:  # lease lost: act no more (node records stay; the next holder resumes)
                stopped = rollout.stopped
                break
    except ReconcilerError as e:
        leases.release()  # the status commit records the failed run; then fail as before
        failing = inputs.recipes[min(len(results), len(inputs.recipes) - 1)] if inputs.recipes else None
        if failing is not None:
            reporter.failed(failing.name, failing.version, None, e, run_id)
        raise
    except CrashInjected as e:  # the simulated fleet saved itself (--sim-save); main() maps it elsewhere
        print(error_line("crashed", e), file=sys.stderr)
        return EXIT_CRASHED
    leases.release()
    _save(args, opened)
    if args.metrics_file or args.pushgateway:
        from reconciler.cli.metrics import export_after_apply

        export_after_apply(args, opened, results, {k: p.name for k, p in policies.items()})
    if args.output == "json":
        docs = [r.to_dict() for r in results]
        print(json.dumps(docs[0] if len(docs) == 1 else {"results": docs}, indent=2, sort_keys=True))
    else:
        print_summary(console, results)
    if stopped:
        print(error_line("error", stopped), file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK if all(r.result == "succeeded" for r in results) else EXIT_FAILED


def _save(args: argparse.Namespace, opened: Any) -> None:
    if getattr(args, "sim_save", None) and opened.sim is not None:
        opened.sim.save(args.sim_save)


_STYLE = {"failed": "red", "halted": "red", "complete": "green", "uncordon": "green", "blocked": "yellow",
          "wait": "yellow", "interrupt": "magenta", "rebooted": "magenta", "batch-start": "bold cyan",
          "batch-end": "cyan"}


def _printer(console: Console) -> Any:
    """The event line printer: node, event and detail come from the cluster and are printed
    literally (:mod:`reconciler.report.safetext`), never as markup or terminal control."""
    from rich.text import Text

    def show(ev: Event) -> None:
        line = Text(f"  {ev.t:9.1f}s  {visible(ev.node):<20} ")
        line.append(visible(ev.event), style=_STYLE.get(ev.event, ""))
        if ev.detail:
            line.append(" " + visible(ev.detail))
        console.print(line, soft_wrap=True)

    return show

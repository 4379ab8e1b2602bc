"""``reconciler apply``: plan and carry out recipes on a cluster, batch by batch.

Exit codes: 0 every recipe succeeded, 1 a node failed or a compartment halted, 2 bad input (nothing
was changed), 4 cluster error, 137 a simulated crash (``--sim-crash-after``).
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import IO, Any

from rich.console import Console

from reconciler.cli.common import add_cluster_args, add_input_args, add_output_arg, add_retry_failed_arg
from reconciler.cli.console import make_console, whole_lines
from reconciler.cli.optcheck import check_apply_options, count, output_of, run_id, seconds
from reconciler.cli.runsummary import print_summary
from reconciler.cli.safeio import error_line
from reconciler.errors import EXIT_FAILED, EXIT_OK, EXIT_OUTPUT, CrashInjected, InputError
from reconciler.execute.timeline import Event, RunResult
from reconciler.fileio.writing import Output, OutputError
from reconciler.jsonsafe import json_type
from reconciler.model.utctime import utc_text
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
    add_output_arg(p, ("table", "json", "yaml", "name", "markdown", "jsonl"))
    p.add_argument("--events-file", metavar="PATH",
                   help="also write every event line here (on a terminal the live view replaces them; -v shows both)")
    from reconciler.cli.opsargs import DRY_RUN_VALUE, dry_run_mode

    p.add_argument("--dry-run", action="store_const", const="client", default=None,
                   help="print the plans apply would carry out and send nothing (= --dry-run=client); "
                        "--dry-run=server also sends the first batch's cordons with the API server's dry run")
    p.add_argument(DRY_RUN_VALUE, dest="dry_run", type=dry_run_mode, help=argparse.SUPPRESS)
    p.add_argument("--plan", metavar="plan.json", help="refuse to run unless the current plan has this planHash")
    p.add_argument("--no-locked", dest="locked", action="store_false", help="allow packages not pinned by digest")
    p.add_argument("--sim-save", metavar="PATH", help="write the simulated fleet after the run (kubectl YAML)")
    p.add_argument("--sim-crash-after", type=count(1, 10**9), metavar="N",
                   help="stop abruptly after N cluster writes (tests)")
    p.add_argument("--run-id", type=run_id, help="run id recorded on nodes (default: random)")
    p.add_argument("--workers", type=count(1, 1024), default=None, metavar="N",
                   help="nodes advanced at once on a real cluster (threads; default: the largest batch "
                        "the budget allows, 16 to 128)")
    add_retry_failed_arg(p)
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
    from reconciler.cli.common import add_selector_arg
    from reconciler.cli.reportfile import add_report_file_arg

    add_selector_arg(p)
    add_report_file_arg(p, "actual")


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
    text = read_text(path, max_bytes=max_bytes, option="--plan", what="plan file")
    doc = parse_json(text, path, what="plan file")

    def bad(where: tuple[str | int, ...], message: str) -> InputError:
        return InputError(message, path_pos(text, path, where), format_path(where))

    shape = "expected the JSON of `reconciler plan -o json`: a plan object or {\"plans\": [plan, ...]}"
    if not isinstance(doc, dict):
        raise bad((), f"a plan file must hold a JSON object, not {json_type(doc)}; {shape}")
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
    """Load, observe, plan and apply every recipe in (priority, name) order, through the
    application service (:func:`reconciler.service.apply_recipes`, which carries every safety check)."""
    from reconciler.cli.applyreport import Reporter
    from reconciler.cli.clusters import check_sim_config_names, open_cluster
    from reconciler.cli.reportfile import check_report_file
    from reconciler.load import load_inputs

    if getattr(args, "dry_run", None):  # plans only (and server-checked first cordons): nothing persisted
        from reconciler.cli import applydry

        return applydry.run(args)
    check_apply_options(args)  # output paths and option combinations, before any work
    check_report_file(args)
    inputs = load_inputs(args.recipes, args.policy, locked=args.locked)
    expected = _read_plan_hashes(args.plan) if args.plan else None
    opened = open_cluster(args)
    check_sim_config_names(args, opened, inputs.recipes)
    opened.selector(args.selector)  # matches a node, before any output or write
    console = make_console(stderr=args.output != "table")
    reporter = Reporter.from_args(args, opened)  # checks its options before anything runs
    observer = _CliObserver(console, reporter, text=args.output == "table", where=opened.description,
                            live=_live_view(args, console, inputs, opened),
                            events=EventsFile(output_of(args, "--events-file")) if args.events_file else None,
                            jsonl=sys.stdout if args.output == "jsonl" else None, verbose=args.verbose > 0)
    from reconciler.cli.metrics import apply_metrics

    metrics = apply_metrics(args, opened)  # --metrics-file/--pushgateway: folds the rollouts as they go
    try:
        done = opened.apply(inputs, reviewed=expected, plan_source=f"plan {args.plan}", selector=args.selector,
                            retry_failed=args.retry_failed, locked=args.locked, run_id=args.run_id,
                            workers=args.workers, wait_for_lock=args.wait_for_lock,
                            lease_duration=args.lease_duration, poll_seconds=args.poll_seconds,
                            observers=[observer] if metrics is None else [observer, metrics])
    except CrashInjected as e:  # the simulated fleet saved itself (--sim-save); main() maps it elsewhere
        print(error_line("crashed", e), file=sys.stderr)
        return EXIT_CRASHED
    finally:
        observer.close()
    results = done.results
    unwritten = _write_outputs(args, opened, results, metrics)
    if observer.events is not None and observer.events.failed:
        unwritten.append("--events-file")
    if args.output == "markdown":
        from reconciler.report.runmarkdown import run_markdown

        sys.stdout.write(run_markdown(results))
    elif args.output == "jsonl":
        pass  # streamed as the run went (events, then each result); the summary line follows below
    elif args.output != "table":
        from reconciler.cli.outputs import print_results

        print_results(args.output, [r.to_dict() for r in results])
    else:
        print_summary(console, results)
    rc = EXIT_FAILED if done.stopped else (EXIT_OK if done.succeeded else EXIT_FAILED)
    if rc == EXIT_OK and unwritten:  # the rollout is done; what it could not write is said above
        rc = EXIT_OUTPUT
    if args.output == "jsonl":
        from reconciler.cli.live import jsonl_summary

        jsonl_summary(sys.stdout, results, skipped=done.skipped, stopped=done.stopped or "", exit_code=rc)
    if done.stopped:
        print(error_line("error", done.stopped), file=sys.stderr)
    return rc


class _CliObserver:
    """The terminal and the reports (status object, git status) of ``reconciler apply``, as an
    observer of the application service (:class:`reconciler.service.Observer`)."""

    def __init__(self, console: Console, reporter: Any, *, text: bool, where: str, live: Any = None,
                 events: EventsFile | None = None, jsonl: IO[str] | None = None, verbose: bool = False) -> None:
        self.console, self.reporter, self.text, self.where = console, reporter, text, where
        self.live, self.events, self.jsonl, self.verbose = live, events, jsonl, verbose
        self._listener: Any = None

    def close(self) -> None:
        """Stop the live view and close the events file."""
        if self.live is not None:
            self.live.stop()
        if self.events is not None:
            self.events.close()

    def _sinks(self, plan: Any) -> Any:
        """Where each event goes besides the reporters: the terminal's event lines (not on a terminal,
        or with -v), the events file, the JSON-lines stream, the live view."""
        from reconciler.cli.live import jsonl_event

        sinks = []
        if self.text and (self.live is None or self.verbose):
            sinks.append(_printer(self.console))
        if self.events is not None:
            sinks.append(self.events)
        if self.jsonl is not None:
            sinks.append(jsonl_event(self.jsonl, plan.recipe.name))
        if self.live is not None:
            sinks.append(self.live.event)
        if not sinks:
            return None

        def each(ev: Event) -> None:
            for fn in sinks:
                fn(ev)

        return each

    def tainted(self, nodes: Any) -> None:
        if self.text:
            self.console.print(f"tainted {len(nodes)} new node(s) NoSchedule until their runtime-required recipes "
                               f"complete (autoTaintNewNodes): {markup(', '.join(nodes))}", soft_wrap=True)

    def skipped(self, recipe: Any, reason: str) -> None:
        self.console.print(visible(f"{recipe.name}: {reason}; skipped"), style="yellow", markup=False,
                           soft_wrap=whole_lines(self.console))

    def started(self, recipe: Any, plan: Any, run_id: str) -> None:
        if self.text:
            self.console.print(
                f"[bold]{markup(recipe.name)}[/bold] {markup(recipe.version)}: {plan.summary.nodesChanging} of "
                f"{plan.summary.nodes} selected nodes change; plan {plan.planHash[:12]} on {markup(self.where)}",
                soft_wrap=whole_lines(self.console),
            )
            for w in plan.warnings:
                self.console.print(f"  [yellow]warning:[/yellow] {markup(w)}", soft_wrap=whole_lines(self.console))
        if self.live is not None:
            self.live.start(plan)
        self._listener = self.reporter.listener(plan, run_id, self._sinks(plan))

    def event(self, plan: Any, event: Event) -> None:
        if self._listener is not None:
            self._listener(event)

    def finished(self, recipe: Any, plan: Any, result: RunResult) -> None:
        if self.live is not None:
            self.live.finish(result)
        self.reporter.finished(plan, result)
        if self.jsonl is not None:
            from reconciler.cli.live import jsonl_result

            jsonl_result(self.jsonl, result.to_dict())

    def failed(self, recipe: Any, error: Any, run_id: str) -> None:
        if recipe is not None:
            self.reporter.failed(recipe.name, recipe.version, None, error, run_id)


class EventsFile:
    """The ``--events-file`` sink: one line per event, appended (or written in place to a device or
    FIFO) through the one output writer. A write that fails (a full disk, ``/dev/full``, a reader
    gone) never stops the rollout: it is reported once on stderr, later events are not written,
    and :attr:`failed` makes the run exit 5 where it would exit 0."""

    def __init__(self, out: Output) -> None:
        self.out = out
        self.failed = False

    def __call__(self, ev: Event) -> None:
        """Append ``ev`` as one line: its UTC instant (RFC 3339, milliseconds), the seconds since the
        run started, node, event and detail (made visible)."""
        if self.failed:
            return
        at = f"{utc_text(ev.at)}  " if ev.at is not None else ""
        line = f"{at}{ev.t:9.1f}s  {visible(ev.node):<20} {visible(ev.event)} {visible(ev.detail)}".rstrip() + "\n"
        try:
            self.out.append(line)
        except OutputError as e:
            self.failed = True
            print(error_line("error", f"{e}; later events are not written (the rollout goes on)"), file=sys.stderr)

    def close(self) -> None:
        """Close the file."""
        self.out.close()


def _live_view(args: argparse.Namespace, console: Console, inputs: Any, opened: Any) -> Any:
    """The live view when ``apply`` prints tables to a terminal; its ETA comes from a simulated
    copy of the fleet (a real cluster only: on the simulated fleet the run itself is the simulation)."""
    if args.output != "table" or not console.is_terminal:
        return None
    from reconciler.cli.live import LiveView, predict

    eta = predict(inputs, opened.cluster, args.selector, args.retry_failed) if opened.sim is None else None
    return LiveView(console, eta)


def _write_outputs(args: argparse.Namespace, opened: Any, results: list[RunResult], metrics: Any) -> list[str]:
    """After the rollout: ``--sim-save``, ``--report``, ``--metrics-file``/``--pushgateway``, each
    independent of the others. One that cannot be written is reported on stderr (the option named)
    and the others are still written; returns the options not written."""
    from reconciler.cli.optcheck import output_of

    unwritten: list[str] = []
    if getattr(args, "sim_save", None) is not None and opened.sim is not None:
        try:
            opened.sim.save(output_of(args, "--sim-save"))
            print(f"simulated fleet written to {visible(args.sim_save)}", file=sys.stderr)
        except OutputError as e:
            print(error_line("error", e), file=sys.stderr)
            unwritten.append("--sim-save")
    if getattr(args, "report_file", None):
        from reconciler.cli.reportfile import write_report
        from reconciler.report.htmlreport import ReportRun

        try:
            write_report(args, [ReportRun(r, "actual") for r in results],
                         title="node-reconciler: rollout", subtitle=f"apply on {opened.description}")
        except OutputError as e:
            print(error_line("error", e), file=sys.stderr)
            unwritten.append("--report")
    if metrics is not None:
        from reconciler.cli.metrics import export_after_apply

        if export_after_apply(args, opened, metrics):
            unwritten.append("--metrics-file")
    return unwritten


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

"""``reconciler draw RESULT.json... --report FILE``: the rollout picture of saved run results.

Reads what ``apply -o json`` or ``simulate -o json`` printed (one result document, or
``{"results": [...]}``) — e.g. a CI artifact — and writes the same self-contained HTML/SVG page as
``apply --report`` (:mod:`reconciler.report.htmlreport`): ``actual`` for an apply result,
``predicted`` for a simulated one (``"simulated": true``). Nothing else is read or written.

The files are read by the guarded JSON reader (:mod:`reconciler.jsonsafe`: bounded size and
depth, no NaN, no duplicate keys) and checked for that shape; a bad file is exit 2 naming
``file:line:column`` and the field.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from reconciler.errors import EXIT_OK, InputError
from reconciler.jsonsafe import json_type
from reconciler.model.run import BatchRecord, CompartmentResult, Event, RunResult
from reconciler.model.vocab import RunVerdict

#: Largest result file read (a 100,000-node run's timeline is a few hundred MB of JSON).
MAX_BYTES = 1024 * 1024 * 1024
_RESULTS = tuple(str(v) for v in RunVerdict)


def add_parser(sub: Any) -> None:
    """Register the ``draw`` verb."""
    p: argparse.ArgumentParser = sub.add_parser(
        "draw", help="draw saved apply/simulate -o json results as an HTML/SVG rollout picture",
        description=__doc__)
    p.add_argument("results", nargs="+", metavar="RESULT.json", help="apply -o json / simulate -o json output")
    p.add_argument("--report", dest="report_file", metavar="FILE", required=True, help="HTML file to write")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Read, check, draw."""
    from reconciler.cli.reportfile import check_report_file, write_report

    check_report_file(args)
    runs = [r for path in args.results for r in read_results(path)]
    write_report(args, runs, title="node-reconciler: rollout",
                 subtitle="from " + ", ".join(args.results))
    return EXIT_OK


def read_results(path: str) -> list[Any]:
    """The :class:`~reconciler.report.htmlreport.ReportRun` of each result in ``path``.

    Raises:
        InputError: unreadable, not JSON, or not the shape of ``apply``/``simulate -o json``.
    """
    from reconciler.jsonsafe import parse_json, path_pos
    from reconciler.load.yamlsafe import format_path, read_text
    from reconciler.report.htmlreport import ReportRun

    text = read_text(path, max_bytes=MAX_BYTES)
    doc = parse_json(text, path, what="run result file")

    def bad(where: tuple[str | int, ...], message: str) -> InputError:
        return InputError(message, path_pos(text, path, where), format_path(where))

    shape = "expected the JSON of `reconciler apply -o json` or `simulate -o json`"
    if not isinstance(doc, dict):
        raise bad((), f"a result file must hold a JSON object, not {json_type(doc)}; {shape}")
    if ("planHash" in doc and "result" not in doc) or ("plans" in doc and "results" not in doc):
        raise bad((), "this is a plan (`reconciler plan -o json`), not the result of a run; draw the predicted "
                      "rollout with `reconciler plan … --report FILE`, or give the JSON of `apply`/`simulate -o json`")
    items: list[tuple[tuple[str | int, ...], Any]]
    if "results" in doc:
        if not isinstance(doc["results"], list) or not doc["results"]:
            raise bad(("results",), f"results must be a non-empty list of result objects; {shape}")
        items = [(("results", i), d) for i, d in enumerate(doc["results"])]
    else:
        items = [((), doc)]
    out = []
    for where, d in items:
        out.append(ReportRun(_result(d, where, bad), "predicted" if d.get("simulated") is True else "actual",
                             "simulated" if d.get("simulated") is True else ""))
    return out


def _str(d: dict[str, Any], key: str, where: tuple[str | int, ...], bad: Any, *, required: bool = True) -> str:
    v = d.get(key, None if required else "")
    if not isinstance(v, str):
        raise bad((*where, key), f"{key} must be a string")
    return v


def _seconds(v: Any, where: tuple[str | int, ...], bad: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or not 0 <= v <= 1e9:
        raise bad(where, "must be a number of seconds between 0 and 1e9")
    return float(v)


def _result(d: Any, where: tuple[str | int, ...], bad: Any) -> RunResult:
    if not isinstance(d, dict):
        raise bad(where, "a result must be an object")
    recipe = _str(d, "recipe", where, bad)
    result = _str(d, "result", where, bad)
    if result not in _RESULTS:
        raise bad((*where, "result"), f"result must be one of {', '.join(_RESULTS)}")
    timeline = d.get("timeline")
    if not isinstance(timeline, list):
        raise bad((*where, "timeline"), "timeline must be a list of events")
    events = []
    for i, e in enumerate(timeline):
        at = (*where, "timeline", i)
        if not isinstance(e, dict):
            raise bad(at, "an event must be an object")
        events.append(Event(_seconds(e.get("t"), (*at, "t"), bad), _str(e, "node", at, bad),
                            _str(e, "event", at, bad), _str(e, "detail", at, bad, required=False)))
    comps = d.get("compartments")
    if not isinstance(comps, list):
        raise bad((*where, "compartments"), "compartments must be a list")
    compartments = []
    for i, c in enumerate(comps):
        at = (*where, "compartments", i)
        if not isinstance(c, dict):
            raise bad(at, "a compartment must be an object")
        name = _str(c, "name", at, bad)
        batches = c.get("batches", [])
        if not isinstance(batches, list):
            raise bad((*at, "batches"), "batches must be a list")
        records = []
        for j, b in enumerate(batches):
            bt = (*at, "batches", j)
            if not isinstance(b, dict) or isinstance(b.get("number"), bool) or not isinstance(b.get("number"), int):
                raise bad(bt, "a batch must be an object with an integer number")
            nodes = b.get("nodes")
            if not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes):
                raise bad((*bt, "nodes"), "nodes must be a list of node names")
            failed = b.get("failed", 0)
            if type(failed) is not int or failed < 0:
                raise bad((*bt, "failed"), "failed must be a count of nodes")
            records.append(BatchRecord(b["number"], tuple(nodes), failed=failed))
        compartments.append(CompartmentResult(name, batches=tuple(records), halted=c.get("halted") is True))
    duration = _seconds(d.get("durationSeconds", max((e.t for e in events), default=0.0)),
                        (*where, "durationSeconds"), bad)
    return RunResult(_str(d, "runId", where, bad, required=False), _str(d, "planHash", where, bad, required=False),
                     recipe, result, [], tuple(compartments), events, duration)  # type: ignore[arg-type]

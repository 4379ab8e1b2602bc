"""``--report FILE``: write the rollout picture (:mod:`reconciler.report.htmlreport`).

``plan`` and ``simulate`` write the predicted rollout (each plan run by the simulator
``simulate`` uses, :mod:`reconciler.cli.estimate`), ``apply`` the actual one (its timeline). The
path is checked before any work (exit 2 naming ``--report``); the file is written at the end,
whatever the run's result, by the one output writer (:mod:`reconciler.fileio.writing`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from reconciler.cli.optcheck import output_of, prepare_outputs
from reconciler.report.htmlreport import ReportRun, render_html
from reconciler.report.safetext import visible


def add_report_file_arg(p: argparse.ArgumentParser, what: str) -> None:
    """Add ``--report FILE`` (``what``: "predicted" or "actual", for the help)."""
    p.add_argument("--report", dest="report_file", metavar="FILE", default=None,
                   help=f"write an HTML/SVG picture of the {what} rollout (per node: cordon, wait, drain, stages, "
                        "reboot, uncordon; batches and compartments) to FILE")


def check_report_file(args: argparse.Namespace) -> None:
    """Check ``--report`` (and every other output option given) before any work
    (:func:`reconciler.cli.optcheck.prepare_outputs`).

    Raises:
        InputError: naming the option.
    """
    prepare_outputs(args)


def write_report(args: argparse.Namespace, runs: Sequence[ReportRun], *, title: str, subtitle: str = "") -> None:
    """Render the page and write it to the ``--report`` output (:mod:`reconciler.fileio.writing`:
    a regular file replaced atomically, a device or FIFO written in place), then say so on stderr
    (``wrote the predicted rollout of 2 recipe run(s) to report.html``), for every verb with
    ``--report`` alike.

    Raises:
        OutputError: the page could not be written (exit 5; the option named).
    """
    page = render_html(runs, title=title, subtitle=subtitle)
    out = output_of(args, "--report")
    out.write(page)
    what = "predicted rollout" if runs and all(r.kind == "predicted" for r in runs) else "rollout"
    print(visible(f"wrote the {what} of {len(runs)} recipe run(s) to {out.path}"), file=sys.stderr)

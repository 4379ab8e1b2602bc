"""``--report FILE``: write the rollout picture (:mod:`reconciler.report.htmlreport`).

``plan`` and ``simulate`` write the predicted rollout (each plan run by the simulator
``simulate`` uses, :mod:`reconciler.cli.estimate`), ``apply`` the actual one (its timeline). The
path is checked before any work (exit 2 naming ``--report``); the file is written at the end,
whatever the run's result, through a temporary file renamed into place.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence

from reconciler.cli.optcheck import output_file
from reconciler.report.htmlreport import ReportRun, render_html
from reconciler.report.safetext import visible


def add_report_file_arg(p: argparse.ArgumentParser, what: str) -> None:
    """Add ``--report FILE`` (``what``: "predicted" or "actual", for the help)."""
    p.add_argument("--report", dest="report_file", metavar="FILE", default=None,
                   help=f"write an HTML/SVG picture of the {what} rollout (per node: cordon, wait, drain, stages, "
                        "reboot, uncordon; batches and compartments) to FILE")


def check_report_file(args: argparse.Namespace) -> None:
    """Refuse an unwritable ``--report`` path before any work.

    Raises:
        InputError: naming ``--report``.
    """
    path = getattr(args, "report_file", None)
    if path is not None:
        output_file("--report", path)


def write_report(path: str, runs: Sequence[ReportRun], *, title: str, subtitle: str = "") -> None:
    """Render and write the page atomically (temporary file in the same directory, renamed), then
    say so on stderr (``wrote the predicted rollout of 2 recipe run(s) to report.html``), for every
    verb with ``--report`` alike."""
    page = render_html(runs, title=title, subtitle=subtitle)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".report-", suffix=".html", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(page)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # mkstemp makes it 0600; a report is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    what = "predicted rollout" if runs and all(r.kind == "predicted" for r in runs) else "rollout"
    print(visible(f"wrote the {what} of {len(runs)} recipe run(s) to {path}"), file=sys.stderr)

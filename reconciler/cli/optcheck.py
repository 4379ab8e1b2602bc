"""Options checked before any work: a bad option fails first (exit 2, the option named), never
after a rollout has run.

* argparse ``type=`` functions for numbers with a range (:func:`count`, :func:`seconds`) and run
  ids (:func:`run_id`): a bad value is an argparse error naming the option (exit 2);
* :func:`output_file`: a path we will write at the end (``--sim-save``, ``--metrics-file``) must be
  writable now — not a directory, its parent an existing writable directory;
* :func:`check_apply_options`: the checks of ``apply`` that depend on several options.

Messages are redacted and show control characters visibly (:mod:`reconciler.cli.safeio`).
"""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Callable

from reconciler.errors import PATH_LIMIT, InputError, shown
from reconciler.report.redact import redact
from reconciler.report.safetext import visible

#: a run id is recorded in annotations, labels (as a label value) and object names: keep it to
#: what a Kubernetes label value allows (63 characters, alphanumerics, '-', '_', '.', starting and
#: ending alphanumeric; apimachinery validation.IsValidLabelValue)
_RUN_ID = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")


def _shown(value: str) -> str:
    """A value of the user's as a message quotes it: redacted, made visible, then cut (:func:`shown`)."""
    return shown(visible(redact(value)), PATH_LIMIT)


def count(low: int, high: int) -> Callable[[str], int]:
    """argparse type: an integer in ``[low, high]``."""

    def parse(text: str) -> int:
        try:
            n = int(text.strip(), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not a whole number") from None
        if not low <= n <= high:
            raise argparse.ArgumentTypeError(f"{n} is out of range (expected {low} to {high})")
        return n

    parse.__name__ = "count"
    return parse


def seconds(low: float, high: float, *, low_inclusive: bool = True) -> Callable[[str], float]:
    """argparse type: a finite number of seconds in ``[low, high]`` (``(low, high]`` when not
    ``low_inclusive``)."""

    def parse(text: str) -> float:
        try:
            v = float(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not a number of seconds") from None
        if not math.isfinite(v) or v > high or v < low or (v == low and not low_inclusive):
            bound = f"{'' if low_inclusive else 'more than '}{low:g}"
            raise argparse.ArgumentTypeError(f"{_shown(text)} is out of range (expected {bound} to {high:g} seconds)")
        return v

    parse.__name__ = "seconds"
    return parse


def run_id(text: str) -> str:
    """argparse type: a run id usable as a Kubernetes label value (see :data:`_RUN_ID`)."""
    if not _RUN_ID.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{_shown(text)}: a run id is 1-63 letters, digits, '.', '_' or '-', starting and ending with a letter "
            "or digit")
    return text


def output_file(option: str, path: str) -> None:
    """Check that ``path`` can be written at the end of the run (nothing is created now).

    Raises:
        InputError: empty path, a directory, a symlink loop, a parent that is missing (or a
            symlink loop), not a directory or not writable, or an existing file that is not
            writable; the message names ``option``.
    """
    from reconciler.load.pathwords import MISSING, SYMLINK_LOOP, path_problem

    shown = _shown(path)
    if not path or "\0" in path:
        raise InputError(f"{option} {shown}: not a file path")
    if os.path.isdir(path):
        raise InputError(f"{option} {shown}: is a directory (expected a file path)")
    if os.path.islink(path) and path_problem(path) == SYMLINK_LOOP:
        raise InputError(f"{option} {shown}: {SYMLINK_LOOP}")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.exists(parent):
        problem = path_problem(parent)
        if problem not in (None, MISSING):
            raise InputError(f"{option} {shown}: directory {_shown(parent)}: {problem}")
        raise InputError(f"{option} {shown}: directory {_shown(parent)} does not exist")
    if not os.path.isdir(parent):
        raise InputError(f"{option} {shown}: {_shown(parent)} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{option} {shown}: directory {_shown(parent)} is not writable")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise InputError(f"{option} {shown}: file is not writable")


def check_apply_options(args: argparse.Namespace) -> None:
    """``apply``'s output options, before anything is loaded or written.

    Raises:
        InputError: ``--sim-save``/``--sim-crash-after``/``--sim-config`` without a simulated
            cluster, an output path that cannot be written (:func:`output_file`).
    """
    simulated = bool(getattr(args, "cluster", None))
    for opt in ("sim_save", "sim_crash_after", "sim_config"):
        if getattr(args, opt, None) is not None and not simulated:
            raise InputError(f"--{opt.replace('_', '-')} needs a simulated cluster (--cluster sim:PATH)")
    if getattr(args, "sim_save", None) is not None:
        output_file("--sim-save", args.sim_save)
    if getattr(args, "metrics_file", None) is not None:
        output_file("--metrics-file", args.metrics_file)

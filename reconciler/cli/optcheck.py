"""Options checked before any work: a bad option fails first (exit 2, the option named), never
after a rollout has run.

* argparse ``type=`` functions for numbers with a range (:func:`count`, :func:`seconds`) and run
  ids (:func:`run_id`): a bad value is an argparse error naming the option (exit 2);
* :func:`prepare_outputs`: every output option (``--report``, ``--sim-save``, ``--metrics-file``,
  ``--events-file``) checked and prepared now through the one output writer
  (:mod:`reconciler.fileio.writing`), none of them one of the command's inputs;
* :func:`check_apply_options`: the checks of ``apply`` that depend on several options.

Messages are redacted and show control characters visibly (:mod:`reconciler.cli.safeio`).
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from reconciler.errors import PATH_LIMIT, InputError, shown
from reconciler.report.redact import redact
from reconciler.report.safetext import visible

if TYPE_CHECKING:
    from reconciler.fileio.writing import Output

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


#: The output options, as ``(attribute, option, append)``; every one goes through
#: :func:`reconciler.fileio.writing.prepare_output` (per-option outcomes: docs/reference/files.md).
OUTPUTS = (("report_file", "--report", False), ("sim_save", "--sim-save", False),
           ("metrics_file", "--metrics-file", False), ("events_file", "--events-file", True))

#: The input options and positionals, as ``(attribute, label)``: an output may be none of them.
_INPUTS = (("recipes", "a recipe input"), ("results", "a result-file input"), ("policy", "the --policy input"),
           ("plan", "the --plan input"), ("sim_config", "the --sim-config input"),
           ("kubeconfig", "the --kubeconfig input"))
#: The label of the simulated fleet's file among :func:`command_inputs`.
FLEET = "the fleet input (--cluster sim:)"


def command_inputs(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The files and directories the command reads, as ``(label, path)``; the simulated fleet is
    labelled :data:`FLEET` (revision mode's recipe paths are inside the repository, not here)."""
    found: list[tuple[str, str]] = []
    for attr, label in _INPUTS:
        if attr == "recipes" and getattr(args, "repo", None):
            continue
        value = getattr(args, attr, None)
        for path in [value] if isinstance(value, str) else list(value or []):
            if isinstance(path, str) and path:
                found.append((label, path))
    cluster = getattr(args, "cluster", None)
    if isinstance(cluster, str) and cluster.startswith("sim:") and cluster[4:]:
        found.append((FLEET, cluster[4:]))
    return found


def prepare_outputs(args: argparse.Namespace) -> dict[str, Output]:
    """Check every output option given before any work and keep what was prepared on ``args``
    (``args.prepared_outputs``, by option; prepared once, later calls return the same).

    ``--sim-save`` may name the ``--cluster sim:`` file (the fleet saved over itself, as the
    operation verbs do by default); no other output may name an input, and no two outputs
    replace the same file.

    Raises:
        InputError: naming the option (:func:`reconciler.fileio.writing.prepare_output`).
    """
    from reconciler.fileio.writing import Mode, prepare_output

    done: dict[str, Output] | None = getattr(args, "prepared_outputs", None)
    if done is not None:
        return done
    done = {}
    inputs = command_inputs(args)
    try:
        for attr, option, append in OUTPUTS:
            path = getattr(args, attr, None)
            if path is None:
                continue
            others = [i for i in inputs if not (option == "--sim-save" and i[0] == FLEET)]
            others += [(f"the {o.option} output", o.target) for o in done.values() if o.mode is not Mode.IN_PLACE]
            done[option] = prepare_output(option, path, inputs=others, append=append)
    except InputError:
        for out in done.values():
            out.close()
        raise
    args.prepared_outputs = done
    return done


def output_of(args: argparse.Namespace, option: str) -> Output:
    """The prepared output of ``option`` (prepared now if it was not: :func:`prepare_outputs`).

    Raises:
        KeyError: ``option`` was not given.
    """
    return prepare_outputs(args)[option]


def check_apply_options(args: argparse.Namespace) -> None:
    """``apply``'s output options, before anything is loaded or written.

    Raises:
        InputError: ``--sim-save``/``--sim-crash-after``/``--sim-config`` without a simulated
            cluster, an output path that cannot be written (:func:`prepare_outputs`).
    """
    simulated = bool(getattr(args, "cluster", None))
    for opt in ("sim_save", "sim_crash_after", "sim_config"):
        if getattr(args, opt, None) is not None and not simulated:
            raise InputError(f"--{opt.replace('_', '-')} needs a simulated cluster (--cluster sim:PATH)")
    prepare_outputs(args)

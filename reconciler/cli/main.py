"""Entry point of the ``reconciler`` command (and the ``kubectl-reconciler`` plugin).

Each verb lives in its own module exposing ``add_parser(subparsers)`` and ``run(args) -> int``.
Errors derived from :class:`reconciler.errors.ReconcilerError` are printed as one line on stderr
and mapped to their exit code (0 ok, 1 failed/halted rollout, 2 bad input, 3 changes pending,
4 cluster error); a traceback is never shown for them.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import re
import sys
from collections.abc import Sequence

from reconciler import __version__
from reconciler.errors import EXIT_BAD_INPUT, ReconcilerError

# operations verbs (issue #8): "switch" registers pause/resume/disable/enable, "migrate" registers import
VERBS = ("validate", "plan", "apply", "simulate", "status",
         "switch", "node", "package", "reset", "migrate", "metrics", "version")


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (verbs are imported lazily by name)."""
    p = argparse.ArgumentParser(
        prog="reconciler",
        description="Roll out version-locked host packages (NodeWright model) across a Kubernetes fleet.",
    )
    p.add_argument("--version", action="version", version=f"reconciler {__version__}")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more log output (repeatable)")
    sub = p.add_subparsers(dest="verb", metavar="VERB")
    sub.required = True
    for verb in VERBS:
        mod = importlib.import_module(f"reconciler.cli.{verb}")
        mod.add_parser(sub)
    for sp in {id(v): v for v in sub.choices.values()}.values():
        _plain_help(sp)
    return p


_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")


def _plain_help(p: argparse.ArgumentParser) -> None:
    """Module docstrings reused as help are reStructuredText: show them as plain text."""
    if p.description:
        p.description = _ROLE.sub(r"\1", p.description).replace("``", "")
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _plain_help(child)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING - 10 * min(args.verbose, 2),
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        rc: int = args.func(args)
        return rc
    except ReconcilerError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    raise SystemExit(main())

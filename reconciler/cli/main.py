"""Entry point of the ``reconciler`` command (and the ``kubectl-reconciler`` plugin).

Each verb lives in its own module exposing ``add_parser(subparsers)`` and ``run(args) -> int``.
Errors derived from :class:`reconciler.errors.ReconcilerError` are printed as one line on stderr
and mapped to their exit code (0 ok, 1 failed/halted rollout, 2 bad input, 3 changes pending,
4 cluster error, 137 simulated crash); a traceback is never shown for them. Every line printed
for an error, and every log record, is redacted (:mod:`reconciler.report.redact`) and shows
control characters visibly (:mod:`reconciler.report.safetext`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

from reconciler import __version__
from reconciler.cli.safeio import CiSafeStream, StdoutGuard, ci_log, error_line, install_log_redaction
from reconciler.errors import EXIT_BAD_INPUT, CrashInjected, InputError, ReconcilerError, suggestion

#: exit code of a run stopped by ``--sim-crash-after`` (as a process killed by SIGKILL: 128 + 9)
EXIT_CRASHED = 137


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors redacted and made visible (a token given in an option value is
    never echoed); exit code 2 as argparse's own. The error is one line naming the option, plus
    where the options are listed (not the whole usage, which hides it for a verb with many)."""

    def error(self, message: str) -> Any:
        from reconciler.cli.opsargs import DRY_RUN_VALUE

        # ``--dry-run=VALUE`` is parsed as a hidden option (cli/opsargs.dry_run_argv): named as typed
        message = message.replace(f"argument {DRY_RUN_VALUE}:", "argument --dry-run:")
        self.exit(EXIT_BAD_INPUT, error_line(f"{self.prog}: error", message + did_you_mean(message))
                  + f"\n(`{self.prog} --help` lists the options)\n")

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        """argparse's, except that an option no verb knows is refused by the verb's own parser (the
        error names the verb, suggests its closest option and points at the verb's help), not by
        the root one, whose help does not list the verb's options."""
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            target = chosen_parser(self, ns)
            target.error(f"unrecognized arguments: {' '.join(extras)}" + option_hint(extras, target))
        return ns


def chosen_parser(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> argparse.ArgumentParser:
    """The deepest (sub-)verb parser ``ns`` was parsed with (``parser`` itself without a verb)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and action.dest != argparse.SUPPRESS:
            child = action.choices.get(getattr(ns, action.dest, None) or "")
            if child is not None:
                return chosen_parser(child, ns)
    return parser


def option_hint(extras: Sequence[str], parser: argparse.ArgumentParser) -> str:
    """``"; did you mean '--cluster'?"`` for the first of ``extras`` that looks like a mistyped
    long option of ``parser`` (difflib), else ``""``. The value of ``--opt=value`` is not looked at."""
    known = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    for word in extras:
        if word.startswith("--") and (hint := suggestion(word.split("=", 1)[0], known, cutoff=0.75)):
            return hint
    return ""


_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<word>[^']*)' \(choose from (?P<choices>.*)\)")


def did_you_mean(message: str) -> str:
    """For argparse's "invalid choice: 'aply' (choose from 'apply', ...)": ``"; did you mean
    'apply'?"`` when one choice is close (difflib), else ``""``."""
    m = _INVALID_CHOICE.search(message)
    if m is None:
        return ""
    return suggestion(m["word"], re.findall(r"'([^']*)'", m["choices"]))


# operations verbs (issue #8): "switch" registers pause/resume/disable/enable, "migrate" registers import
VERBS = ("validate", "convert", "plan", "apply", "simulate", "status", "switch", "node", "package", "reset",
         "migrate", "metrics", "version", "completion", "controller", "draw", "crds")


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (verbs are imported lazily by name)."""
    p = _Parser(
        prog="reconciler",
        description="Roll out version-locked host packages (NodeWright model) across a Kubernetes fleet.",
    )
    p.add_argument("--version", action="version", version=f"reconciler {__version__}")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more log output (repeatable)")
    from reconciler.cli.globalflags import add_global_args

    add_global_args(p, root=True)  # also accepted after the verb (kubectl habit)
    sub = p.add_subparsers(dest="verb", metavar="VERB")
    sub.required = True
    for verb in VERBS:
        mod = importlib.import_module(f"reconciler.cli.{verb}")
        mod.add_parser(sub)
    for sp in {id(v): v for v in sub.choices.values()}.values():
        _plain_help(sp)
        _verbose_after_the_verb(sp)
    return p


def _verbose_after_the_verb(p: argparse.ArgumentParser) -> None:
    """``-v``/``--verbose`` after the verb too (``reconciler apply … -v``, a kubectl habit), on
    every verb and sub-verb. Given after the verb, its count is the one used; not given there,
    the count before the verb stays (default SUPPRESS: the verb's parser does not reset it)."""
    if not any("-v" in a.option_strings for a in p._actions):
        p.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                       help="more log output (repeatable; also before the verb)")
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in {id(c): c for c in action.choices.values()}.values():
                _verbose_after_the_verb(child)


_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")
# references to the code (``(:mod:`reconciler.ops.controls`)``, ``; see :mod:`…```) mean nothing to
# a user of the command: dropped from the help
_CODE_REF = re.compile(r"\s*\(:(?:mod|func|class|meth):`[^`]+`\)|[;,]?\s*see :(?:mod|func|class|meth):`[^`]+`")
# any other role naming our code keeps only the last name (``reconciler.ops.controls.X`` -> ``X``)
_CODE_ROLE = re.compile(r":[a-z]+:`~?reconciler\.(?:[\w]+\.)*([\w]+)`")


def plain_text(doc: str) -> str:
    """A reStructuredText docstring as plain help text: code references dropped, roles and
    literal markers removed."""
    doc = _CODE_REF.sub("", doc)
    doc = _CODE_ROLE.sub(r"\1", doc)
    return _ROLE.sub(r"\1", doc).replace("``", "")


def _plain_help(p: argparse.ArgumentParser) -> None:
    """Module docstrings reused as help are reStructuredText: show them as plain text."""
    if p.description:
        p.description = plain_text(p.description)
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _plain_help(child)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code.

    Every error line is redacted and shows control characters visibly
    (:func:`reconciler.cli.safeio.error_line`); log records are redacted when created. A closed
    stdout (``apply | head``) does not stop the verb: output is dropped from then on and one note
    on stderr says so at the end (the exit code is the verb's). A simulated crash
    (``--sim-crash-after``) exits 137 wherever it happens (the simulated fleet saves itself first).

    Run as the program (``argv`` None) after loading a large simulated fleet, the process ends at
    once when the verb is done (output flushed, :func:`_exit_now`) rather than freeing the fleet's
    millions of objects one by one.
    """
    rc = _main(argv)
    if argv is None:
        from reconciler.cli.clusters import LARGE_FLEETS

        if LARGE_FLEETS:
            _exit_now(rc)
    return rc


def _exit_now(rc: int) -> None:
    """End the process with ``rc`` now: flush stdout, stderr and the log handlers, then
    ``os._exit`` (no interpreter teardown: nothing left to write, nothing held but memory)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    logging.shutdown()
    os._exit(rc)


def _main(argv: Sequence[str] | None) -> int:
    install_log_redaction()
    parser = build_parser()
    from reconciler.cli.opsargs import dry_run_argv

    args = parser.parse_args(dry_run_argv(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(
        level=logging.WARNING - 10 * min(args.verbose, 2),
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # urllib3 logs every retry of a refused connection as a warning; the adapter reports the
    # failure once, in words (reconciler.adapters.kube.conn), so its retries show only with -vv
    logging.getLogger("urllib3").setLevel(logging.DEBUG if args.verbose >= 2 else logging.ERROR)
    _escape_unencodable(sys.stdout)
    real_stdout, real_stderr = sys.stdout, sys.stderr
    guard = StdoutGuard(real_stdout if real_stdout is not None else open(os.devnull, "w"))  # noqa: SIM115
    sys.stdout = guard
    if ci_log():  # a CI runner executes commands it finds in the output: every line printed is made inert
        sys.stdout = CiSafeStream(guard)
        sys.stderr = CiSafeStream(real_stderr)
    try:
        return _run(args)
    finally:
        from reconciler.cli.clusters import close_sessions

        close_sessions()
        for out in (getattr(args, "prepared_outputs", None) or {}).values():
            out.close()  # a device or FIFO held open since the check: its reader sees the end now
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, CiSafeStream):
                with contextlib.suppress(OSError, ValueError):
                    stream.close_line()
                    stream.flush()
        sys.stdout = real_stdout
        if isinstance(sys.stderr, CiSafeStream):
            sys.stderr = real_stderr
        if guard.broken:
            to_stderr("note: standard output was closed by its reader; the rest of the output was dropped "
                      "(the command itself ran to its end)")


def _escape_unencodable(stream: object) -> None:
    """Let ``stream`` write a character its encoding lacks as an escape (``\\xb7``) instead of
    raising ``UnicodeEncodeError`` half-way through a verb (``PYTHONIOENCODING=ascii``, a POSIX
    locale without UTF-8 mode: the plan's ``·`` and ``→``), as stderr already does."""
    reconfigure = getattr(stream, "reconfigure", None)
    # "strict", or "surrogateescape" (what Python sets under the POSIX locale): both raise for a
    # character the encoding lacks
    if reconfigure is not None and getattr(stream, "errors", "strict") in ("strict", "surrogateescape"):
        with contextlib.suppress(ValueError, OSError):
            reconfigure(errors="backslashreplace")


def to_stderr(line: str) -> None:
    """Print ``line`` on stderr. A stderr closed by its reader too (``cmd 2>&1 | head``) drops it
    and everything after it (stderr becomes ``/dev/null``), so the exit code stays the verb's
    instead of a BrokenPipeError's."""
    try:
        print(line, file=sys.stderr)
        sys.stderr.flush()
    except (OSError, ValueError):  # BrokenPipeError, or a stream already closed
        with contextlib.suppress(OSError):
            sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process


def _run(args: argparse.Namespace) -> int:
    try:
        rc: int = args.func(args)
        return rc
    except ReconcilerError as e:
        to_stderr(error_line("error", e))
        if isinstance(e, InputError):
            from reconciler.cli import ghactions

            if ghactions.enabled():  # GitHub Actions marks the line in the diff
                with contextlib.suppress(OSError, ValueError):
                    ghactions.emit(ghactions.commands(ghactions.problems(e)))
        return e.exit_code
    except CrashInjected as e:
        to_stderr(error_line("crashed", e))
        return EXIT_CRASHED
    except KeyboardInterrupt:
        to_stderr("interrupted")
        return 130
    except OSError as e:
        to_stderr(error_line("error", e))
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    raise SystemExit(main())

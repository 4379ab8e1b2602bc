"""docs/reference/cli.md from the argument parser, exit-codes.md from the ``EXIT_*`` constants."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager

from reconciler import errors
from reconciler.cli import main as cli_main
from reconciler.cli.main import build_parser
from refgen.common import GENERATED, _md


def subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, list[str], argparse.ArgumentParser]]:
    """``(name, aliases, parser)`` of each sub-verb of ``parser``, in the order they were added."""
    out: list[tuple[str, list[str], argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            by_id: dict[int, tuple[str, list[str], argparse.ArgumentParser]] = {}
            for name, child in action.choices.items():
                if id(child) in by_id:
                    by_id[id(child)][1].append(name)
                else:
                    by_id[id(child)] = (name, [], child)
            out.extend(by_id.values())
    return out


def documented(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The options and positionals a user types: not sub-verb lists, not hidden (SUPPRESS) ones."""
    return [a for a in parser._actions
            if not isinstance(a, argparse._SubParsersAction) and a.help != argparse.SUPPRESS]


def _value(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if action.choices is not None and action.metavar is None:
        return "{" + ",".join(str(c) for c in action.choices) + "}"
    metavar = action.metavar if action.metavar is not None else action.dest.upper()
    return metavar if isinstance(metavar, str) else " ".join(metavar)


def option_line(action: argparse.Action) -> str:
    """One list item: ``- `--flag VALUE` (default …; one of …): help``."""
    value = _value(action)
    names = ", ".join(f"{o} {value}".strip() for o in action.option_strings) if action.option_strings else value
    extra = []
    if action.required and action.option_strings:
        extra.append("required")
    default = action.default
    if (action.nargs != 0 and default not in (None, argparse.SUPPRESS, "", [], ())
            and not isinstance(default, bool)):
        extra.append(f"default `{default}`")
    if action.choices is not None and not isinstance(action.choices, dict):
        extra.append("one of " + ", ".join(f"`{c}`" for c in action.choices))
    if isinstance(action, argparse._CountAction | argparse._AppendAction) and "repeatable" not in (action.help or ""):
        extra.append("repeatable")
    note = f" ({'; '.join(extra)})" if extra else ""
    return f"- `{names}`{note}: {_md(action.help or '')}"


def verb_section(path: list[str], parser: argparse.ArgumentParser, aliases: list[str], level: int) -> list[str]:
    """The section of one (sub-)verb: heading, usage, description, options; then its sub-verbs."""
    lines = [f"{'#' * level} {' '.join(path)}", ""]
    if aliases:
        lines += [f"Also spelled: {', '.join('`' + ' '.join([*path[:-1], a]) + '`' for a in aliases)}.", ""]
    lines += ["```", parser.format_usage().strip(), "```", ""]
    if parser.description:
        lines += [_md(parser.description), ""]
    actions = [a for a in documented(parser) if "-h" not in a.option_strings]
    positionals = [a for a in actions if not a.option_strings]
    options = [a for a in actions if a.option_strings]
    if positionals:
        lines += ["Arguments:", "", *[option_line(a) for a in positionals], ""]
    if options:
        lines += ["Options:", "", *[option_line(a) for a in options], ""]
    for name, more, child in subparsers(parser):
        lines += verb_section([*path, name], child, more, level + 1)
    return lines


@contextmanager
def _columns(width: int) -> Iterator[None]:
    """argparse wraps usage lines at the terminal's width ($COLUMNS): fixed while the page is made."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def cli_page() -> str:
    """docs/reference/cli.md."""
    with _columns(100):
        return _cli_page()


def _cli_page() -> str:
    root = build_parser()
    lines = [GENERATED, "# CLI reference", "",
             "Every verb, sub-verb and flag of `reconciler` (also `kubectl reconciler`), as "
             "`reconciler VERB --help` prints them (`-h`, `--help` on every verb). How they behave alike "
             "(global flags, `-o`, `-l`, `--dry-run`, errors) is in [CLI conventions](cli-conventions.md); "
             "exit codes are in [exit codes](exit-codes.md).", ""]
    lines += ["## Global options", "", "Accepted before or after the verb.", "",
              "```", root.format_usage().strip(), "```", ""]
    lines += [option_line(a) for a in documented(root) if "-h" not in a.option_strings]
    lines.append("")
    for name, more, child in subparsers(root):
        lines += verb_section(["reconciler", name], child, more, 2)
    return "\n".join(lines).rstrip() + "\n"


#: What each exit code means; the codes themselves are the ``EXIT_*`` constants of
#: reconciler.errors and reconciler.cli.main (a code without an entry here fails the tests).
EXIT_MEANINGS = {
    "EXIT_OK": "success: the verb did what it was asked (for `apply`: every recipe succeeded or had nothing "
               "to do; for `plan --detailed-exitcode`: no changes)",
    "EXIT_FAILED": "a node failed, a compartment halted (failure threshold), or nodes wait for an earlier recipe "
                   "(`priority`, `sequencing`), or another run holds a recipe's Lease (`--wait-for-lock` waits); "
                   "for `controller --once`: the pass failed; for `reset` / `node reset`: a node that still owes "
                   "an interrupt was refused, named on stderr (the other nodes were reset)",
    "EXIT_BAD_INPUT": "bad input: a recipe, policy, package, snapshot, kubeconfig or option is invalid; the error "
                      "names the file:line:column (or the object and field, or the option), or an `apply --plan` "
                      "file no longer matches; nothing was changed",
    "EXIT_CHANGES": "changes pending: `plan --detailed-exitcode` found work (`apply` with the same options would "
                    "change something)",
    "EXIT_CLUSTER": "cluster or API error: unreachable server, TLS or credential failure, refused request (RBAC, "
                    "admission) or an API error that persisted through its bounded retries",
    "EXIT_OUTPUT": "the work was done (as reported), but an output file — `--report`, `--sim-save`, "
                   "`--metrics-file`, `--events-file` — could not be written at the end (a full disk, `/dev/full`, "
                   "a FIFO's reader gone); the option is named, the file left as it was ([files](files.md)); "
                   "a failed rollout keeps exit 1",
    "EXIT_CRASHED": "simulated crash: `--sim-crash-after N` stopped the run after N cluster writes (as a process "
                    "killed by SIGKILL: 128 + 9)",
}


def exit_codes() -> dict[str, int]:
    """Every ``EXIT_*`` constant of the error vocabulary and the CLI, by name."""
    found = {k: v for mod in (errors, cli_main) for k, v in vars(mod).items()
             if k.startswith("EXIT_") and isinstance(v, int)}
    return dict(sorted(found.items(), key=lambda kv: kv[1]))


def _subclasses(cls: type) -> list[type]:
    out = [cls]
    for sub in cls.__subclasses__():
        out += _subclasses(sub)
    return out


def exit_codes_page() -> str:
    """docs/reference/exit-codes.md."""
    lines = [GENERATED, "# Exit codes", "",
             "Every verb exits with one of these. Under GitHub Actions (`GITHUB_ACTIONS=true`) every bad-input "
             "error is also printed as a workflow command (`::error file=…,line=…,col=…::…`), so the pull "
             "request's diff marks the line.", "",
             "| code | name | meaning | errors (reconciler.errors, fileio.writing) |", "| --- | --- | --- | --- |"]
    raised: dict[int, list[str]] = {}
    for cls in _subclasses(errors.ReconcilerError):
        if cls.__module__ in (errors.__name__, "reconciler.fileio.writing"):
            raised.setdefault(cls.exit_code, []).append(f"`{cls.__name__}`")
    for name, code in exit_codes().items():
        lines.append(f"| {code} | `{name}` | {EXIT_MEANINGS[name]} | {', '.join(sorted(raised.get(code, [])))} |")
    return "\n".join(lines) + "\n"

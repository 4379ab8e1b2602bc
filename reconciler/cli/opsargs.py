"""Shared pieces of the operations verbs (``pause``…``enable``, ``node``, ``package``, ``reset``,
``import``): write options, confirmation, printing changes, saving a simulated fleet.

Every verb that changes the cluster:

* shows what it will write (one line per object, the exact JSON merge patch) before writing;
* ``--dry-run`` (= ``--dry-run=client``): only shows it, sends nothing, exit 0;
  ``--dry-run=server``: also sends every write with ``dryRun=All`` (the API server validates and
  admits it, persists nothing; no confirmation asked; refused on the simulated fleet);
* asks for confirmation on a terminal; ``-y/--yes`` skips the question; without a terminal and
  without ``-y`` it refuses (exit 2) and writes nothing;
* on a simulated fleet (``--cluster sim:FILE``) saves the fleet back to ``FILE`` after writing (or
  to ``--sim-save PATH``), since the file *is* that cluster;
* ``-o json`` prints ``{"dryRun", "changes": [{kind, name, summary, patch, warnings}], "written",
  "notes"}`` on stdout (the question, if any, goes to stderr); ``-o yaml`` the same as YAML;
  ``-o name`` one ``node/<name>`` (or ``configmap/<ns>/<name>``) line per object changed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, Protocol

from reconciler.cli.common import add_cluster_args, add_output_arg
from reconciler.cli.outputs import dump, print_names
from reconciler.errors import EXIT_FAILED, EXIT_OK, InputError, shown
from reconciler.ops.patches import NodeRefused
from reconciler.report.safetext import visible


class Change(Protocol):
    """A NodePatch or ConfigMapPatch."""

    @property
    def summary(self) -> str:
        """What the change does, in words."""
        ...

    def describe(self) -> str:
        """One line: the request and its body."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        ...


#: ``-o`` formats of the verbs that write (``finish``): the changes as tables, JSON, YAML or names
WRITE_FORMATS = ("table", "json", "yaml", "name")


def add_write_args(p: argparse.ArgumentParser, formats: tuple[str, ...] = WRITE_FORMATS) -> None:
    """Cluster selection, ``--dry-run``, ``-y/--yes``, ``--sim-save``, ``-o`` (``formats``;
    ``text`` accepted for ``table``)."""
    add_cluster_args(p)
    p.add_argument("--dry-run", action="store_const", const="client", default=None,
                   help="print the exact patches and send nothing (= --dry-run=client); --dry-run=server also "
                        "sends them with the API server's dry run (validated and admitted, nothing persisted)")
    # ``--dry-run=VALUE`` arrives here (main() rewrites it), so a bare --dry-run never eats the next word
    p.add_argument(DRY_RUN_VALUE, dest="dry_run", type=dry_run_mode, help=argparse.SUPPRESS)
    p.add_argument("-y", "--yes", "--confirm", dest="yes", action="store_true",
                   help="do not ask for confirmation (--confirm: NodeWright's spelling)")
    p.add_argument("--sim-save", metavar="PATH",
                   help="simulated fleet: write it here after the change (default: back to the --cluster file)")
    add_output_arg(p, formats)


#: the hidden option ``--dry-run=VALUE`` is rewritten to (see :func:`dry_run_argv`)
DRY_RUN_VALUE = "--dry-run-value"


def dry_run_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` with ``--dry-run=VALUE`` spelled as the hidden ``--dry-run-value=VALUE`` (kubectl's
    form: the value only with ``=``; a bare ``--dry-run`` is ``client`` and takes no word)."""
    return [f"{DRY_RUN_VALUE}={a[len('--dry-run='):]}" if a.startswith("--dry-run=") else a for a in argv]


def dry_run_mode(value: str) -> str | None:
    """``--dry-run`` value as kubectl takes it: ``client``, ``server`` or ``none`` (None).

    Raises:
        argparse.ArgumentTypeError: any other value.
    """
    if value in ("client", "server"):
        return value
    if value == "none":
        return None
    raise argparse.ArgumentTypeError(f"{shown(value)}: expected client, server or none")


def confirm(args: argparse.Namespace, question: str) -> bool:
    """True when the change may proceed: ``--yes``, or the user answered yes on a terminal.

    Raises:
        InputError: no terminal to ask on and no ``--yes``.
    """
    if getattr(args, "yes", False):
        return True
    if not sys.stdin.isatty():
        raise InputError(f"{question} needs confirmation: no terminal to ask on; pass -y/--yes (or --dry-run to look)")
    print(f"{visible(question)} [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


def show_changes(changes: Sequence[Change], notes: Sequence[str], *, header: str) -> None:
    """Print what will be written (text output), to stdout: the header, then each change's write
    under its summary; changes in a row with the same summary (``ignore: every recipe skips this
    node`` for 40 nodes) share one summary line."""
    print(visible(header))
    last: str | None = None
    for c in changes:
        if c.summary and c.summary != last:
            print(visible(f"  {c.summary}"))
        last = c.summary
        print(visible(f"    {c.describe()}"))
        for w in getattr(c, "warnings", ()) or ():
            print(visible(f"    warning: {w}"))
    for n in notes:
        print(visible(f"  note: {n}"))


def finish(args: argparse.Namespace, opened: Any, changes: Sequence[Change], notes: Sequence[str],
           write: Any, *, header: str, question: str, refused: Sequence[NodeRefused] = ()) -> int:
    """The common flow: show, stop on ``--dry-run`` / nothing to do, confirm, ``write()``, save the
    simulated fleet, report. ``write`` returns the number of objects written. ``refused``: nodes the
    operation leaves alone (``write`` may add some): each is named on stderr (and in the document
    as ``refused``) and the exit code is 1 — the others were written (issue 34: a reset acts on
    each node on its own)."""
    fmt = args.output
    as_json = fmt in ("json", "yaml", "name")  # a document (or names) on stdout, not the lines
    server = args.dry_run == "server"
    if server and opened.kube is None:
        raise InputError("--dry-run=server needs a real API server; this cluster adapter has no server-side dry "
                         "run (the simulated fleet), use --dry-run (client)")
    doc: dict[str, Any] = {"dryRun": args.dry_run or False, "changes": [c.to_dict() for c in changes],
                           "written": 0, "notes": list(notes),
                           "refused": [{"node": r.node, "message": r.message} for r in refused]}

    def emit() -> None:
        if fmt == "name":
            print_names("", (_object_name(c) for c in changes))
        else:
            dump(doc, fmt)

    def done(rc: int) -> int:
        """``rc``, or 1 when a node was refused (each named on stderr)."""
        if not refused:
            return rc
        for r in refused:
            print(visible(f"refused: {r.message}"), file=sys.stderr)
        print(f"{len(refused)} node(s) refused, left as they were (--force to include them)", file=sys.stderr)
        return EXIT_FAILED

    if not as_json:
        some = f" on the nodes not refused ({len(refused)} refused)" if refused else ""
        empty = f"{header}: nothing to change{some}"
        show_changes(changes, notes, header=header if changes else empty)
    if not changes or args.dry_run == "client":
        if as_json:
            emit()
        elif args.dry_run and changes:
            print("dry run: nothing was written")
        return done(EXIT_OK)
    if server:  # the API server checks every write and persists nothing: no question to ask
        opened.kube.server_dry_run = True
        doc["accepted"] = int(write())
        if as_json:
            emit()
        else:
            print(f"server dry run: the API server accepted {doc['accepted']} object(s); nothing was persisted")
        return done(EXIT_OK)
    if not confirm(args, question):
        if as_json:
            emit()
        print("aborted: nothing was written", file=sys.stderr)
        return EXIT_FAILED
    doc["written"] = int(write())
    doc["refused"] = [{"node": r.node, "message": r.message} for r in refused]  # with those a re-read refused
    save_sim(args, opened)
    if as_json:
        emit()
    else:
        print(f"written: {doc['written']} object(s)")
    return done(EXIT_OK)


def _object_name(c: Change) -> str:
    """``node/<name>`` or ``configmap/<namespace>/<name>`` of a change (``-o name``)."""
    d = c.to_dict()
    kind = str(d.get("kind", "")).lower()
    ns = f"{d['namespace']}/" if d.get("namespace") else ""
    return f"{kind}/{ns}{d.get('name', '')}"


def save_sim(args: argparse.Namespace, opened: Any) -> None:
    """Save a simulated fleet after a write (``--sim-save`` or back to the ``--cluster`` file)."""
    if opened.sim is None:
        return
    if getattr(args, "sim_save", None) is not None:
        from reconciler.cli.optcheck import output_of

        target: Any = output_of(args, "--sim-save")
    else:
        target = args.cluster[4:] if getattr(args, "cluster", "") else None
    if target:
        opened.sim.save(target)
        # the --cluster file itself is rewritten unless --sim-save names another: say so, always
        print(f"simulated fleet written to {visible(getattr(target, 'path', target))}", file=sys.stderr)

"""``reconciler convert PATH... [--write]``: rewrite recipe files into today's NodeRecipe form.

The release moves from ``metadata.version`` (which the API server refuses) or the annotation
``reconciler.nodewright.dev/version`` to ``spec.version``; nothing else in the file changes
(:mod:`reconciler.load.convert`: comments, quoting, indentation and line breaks stay, and each
recipe must load the same before and after). PATH: files, or directories (every ``*.yaml`` and
``*.yml`` below, as the other verbs read them).

Without ``--write`` it changes nothing: it prints the unified diff of every file it would
rewrite and, on stderr, how many. With ``--write`` each such file is replaced through the one output writer
(:mod:`reconciler.fileio.writing`: a temporary file in the same directory, given the file's mode,
renamed over it; a symlink stays one) and named on stdout. A file that
cannot be converted is named with the reason on stderr and left alone; the others are still
converted. Exit 0 when every file could be read and converted (or needed nothing), 5 when a file
could not be written, else 2.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from typing import Any

from reconciler.cli.safeio import error_line
from reconciler.errors import EXIT_BAD_INPUT, EXIT_OK, EXIT_OUTPUT, InputError, ReconcilerError, SourcePos
from reconciler.fileio.reading import read_input
from reconciler.fileio.writing import OutputError, prepare_output
from reconciler.load import expand_paths
from reconciler.load.convert import convert_text
from reconciler.load.yamlsafe import MAX_FILE_BYTES
from reconciler.report.safetext import visible


def add_parser(sub: Any) -> None:
    """Register the ``convert`` verb."""
    p: argparse.ArgumentParser = sub.add_parser(
        "convert", help="rewrite recipe files into today's form (the release in spec.version)", description=__doc__)
    p.add_argument("paths", nargs="+", metavar="PATH", help="recipe files or directories")
    p.add_argument("-w", "--write", action="store_true", help="rewrite the files in place (default: print the diff)")
    p.set_defaults(func=run)


def _read(path: str) -> tuple[str, bytes]:
    """The text of ``path`` as it is (line breaks kept) and its byte-order mark (``b""`` when none);
    the loader's size limit."""
    raw = read_input(path, MAX_FILE_BYTES, what="recipe file")
    bom = raw[:3] if raw.startswith(b"\xef\xbb\xbf") else b""
    try:
        return raw[len(bom):].decode("utf-8"), bom
    except UnicodeDecodeError:
        raise InputError("the file is not UTF-8 text", SourcePos(path)) from None


def run(args: argparse.Namespace) -> int:
    """Convert (or show the diff of) every file under the paths."""
    errors: list[ReconcilerError] = []
    found: list[InputError] = []
    files = expand_paths(args.paths, found)
    errors += found
    changed = 0
    for path in files:
        try:
            text, bom = _read(path)
            result = convert_text(text, path)
            if not result.changes:
                continue
            changed += 1
            if args.write:
                prepare_output("--write", path).write(bom + result.text.encode("utf-8"))
                print(visible(f"converted {path}"))
            else:
                sys.stdout.writelines(visible(line, multiline=True) for line in difflib.unified_diff(
                    text.splitlines(keepends=True), result.text.splitlines(keepends=True), path, path))
            for line in result.changes:
                print(visible(f"  {line}"), file=sys.stderr)
        except (InputError, OutputError) as e:
            errors.append(e)
    for err in errors:
        print(error_line("error", err), file=sys.stderr)
    verb = "converted" if args.write else "to convert (run again with --write)"
    print(f"{changed} of {len(files)} file(s) {verb}" + (f"; {len(errors)} error(s)" if errors else ""),
          file=sys.stderr)
    if any(isinstance(e, OutputError) for e in errors):
        return EXIT_OUTPUT
    return EXIT_BAD_INPUT if errors else EXIT_OK

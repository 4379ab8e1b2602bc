"""Run a benchmark command and record its output on docs/benchmarks.md, with the date, the
machine, the command and the commit, so no figure on that page is typed by hand.

    python bench/record.py --title "500 kwok nodes, 5 s stages" -- python bench/controlplane.py --stage-seconds 5
    python bench/record.py --dry-run -- python bench/run.py --quick     # print the section only

The section goes under the page's "## Recorded runs" heading, newest first. Its header says:
UTC date and time, machine (architecture, cores, memory, Python, kernel), the 1-minute load
average before the run (the machine may be shared: compare figures only with runs of similar
load, or pair them back to back), the commit (``git describe --always --dirty``; a dirty tree is
named as such) and the command as run. The body is the command's standard output, verbatim.
The command's exit status is this script's; nothing is recorded when it fails.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "benchmarks.md"
HEADING = "## Recorded runs"


def machine() -> str:
    """One line naming the machine: architecture, cores, memory, Python, kernel."""
    mem = ""
    try:
        kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                  if line.startswith("MemTotal:"))
        mem = f", {kb / 1024 / 1024:.0f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    return (f"{platform.machine()} {os.cpu_count()} cores{mem}, Python {platform.python_version()}, "
            f"{platform.system()} {platform.release()}")


def commit() -> str:
    """``git describe --always --dirty`` of this tree ("unknown" outside git)."""
    out = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty", "--abbrev=12"],
                         capture_output=True, text=True, check=False)
    return out.stdout.strip() or "unknown"


def section(title: str, command: list[str], output: str, *, when: dt.datetime, load: float) -> str:
    """The Markdown section for one recorded run."""
    fence = "````" if "```" in output else "```"
    return (f"### {when:%Y-%m-%d %H:%M} UTC — {title}\n\n"
            f"- machine: {machine()}; load average before the run: {load:.2f}\n"
            f"- commit: `{commit()}`\n"
            f"- command: `{shlex.join(command)}`\n\n"
            f"{fence}\n{output.rstrip()}\n{fence}\n")


def insert(page: str, text: str) -> str:
    """``page`` with ``text`` placed first under :data:`HEADING` (the heading is added at the end
    of the page when missing)."""
    if HEADING not in page:
        page = page.rstrip("\n") + f"\n\n{HEADING}\n\nWritten by `bench/record.py`, newest first.\n"
    head, _, rest = page.partition(HEADING + "\n")
    intro, sep, older = rest.partition("\n### ")
    return f"{head}{HEADING}\n{intro.rstrip()}\n\n{text}" + (f"\n### {older}" if sep else "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--title", default="", help="the section's title (default: the command)")
    ap.add_argument("--dry-run", action="store_true", help="print the section instead of recording it")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    a = ap.parse_args()
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        ap.error("give the command to run after --")
    load = os.getloadavg()[0]
    when = dt.datetime.now(dt.UTC)
    run = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)
    sys.stdout.write(run.stdout)
    if run.returncode != 0:
        print(f"record.py: the command exited {run.returncode}; nothing recorded", file=sys.stderr)
        return run.returncode
    text = section(a.title or shlex.join(command), command, run.stdout, when=when, load=load)
    if a.dry_run:
        print(text)
    else:
        PAGE.write_text(insert(PAGE.read_text(), text))
        print(f"recorded on {PAGE.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

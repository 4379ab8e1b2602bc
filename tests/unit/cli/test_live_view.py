"""``apply``'s live view on a terminal, and its streamed machine outputs (issue 16).

The live view is driven under a real pseudo-terminal; piped, the same run prints plain event lines
with no escape codes. ``-o jsonl`` streams one JSON object per event then the result; ``-o
markdown`` is the step-summary table; ``--events-file`` gets the event lines.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FLEET = "sim:examples/fleets/gpu-24.yaml"
RECIPE = "recipes/gpu-node-stack.yaml"
ESC = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM", "COLUMNS")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return {**env, **extra}


def _under_pty(args: list[str], cols: int = 100) -> tuple[int, str]:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, cols, 0, 0))
    p = subprocess.Popen([sys.executable, "-m", "reconciler", *args], stdin=slave, stdout=slave, stderr=slave,
                         env=_env(TERM="xterm-256color"), cwd=ROOT)
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return p.wait(timeout=60), out.decode(errors="replace")


def test_on_a_terminal_the_live_view_shows_batches_and_its_final_state() -> None:
    rc, out = _under_pty(["apply", RECIPE, "--cluster", FLEET])
    assert rc == 0, out[-2000:]
    assert "\x1b[" in out  # drawn and redrawn in place
    plain = ESC.sub("", out)
    assert "compartment" in plain and "budget" in plain
    final = plain[plain.rindex("24/24 complete"):]
    assert "succeeded" in final.splitlines()[0]
    assert re.search(r"us-east-1a\s+\d+/\d+\s+12/12\s+0\s+0\s+0\s+0/3", final), final[:600]
    assert " evict " not in plain and " stage-start " not in plain  # event lines only with -v or a file


def test_with_verbose_the_event_lines_show_above_the_live_view() -> None:
    rc, out = _under_pty(["-v", "apply", RECIPE, "--cluster", FLEET])
    assert rc == 0
    assert "stage-start" in ESC.sub("", out) and "compartment" in ESC.sub("", out)


def test_piped_output_has_no_escape_codes_and_keeps_the_event_lines() -> None:
    p = subprocess.run([sys.executable, "-m", "reconciler", "apply", RECIPE, "--cluster", FLEET],
                       capture_output=True, text=True, env=_env(TERM="xterm-256color"), cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "\x1b" not in p.stdout and "\x1b" not in p.stderr
    assert "stage-start" in p.stdout and "compartment  batch" not in p.stdout


def test_jsonl_streams_every_event_then_the_result(tmp_path: Path) -> None:
    events = tmp_path / "events.log"
    p = subprocess.run([sys.executable, "-m", "reconciler", "apply", RECIPE, "--cluster", FLEET, "-o", "jsonl",
                        "--events-file", str(events)], capture_output=True, text=True, env=_env(), cwd=ROOT,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    docs = [json.loads(line) for line in p.stdout.splitlines()]
    summary, docs = docs[-1], docs[:-1]
    assert {d["kind"] for d in docs[:-1]} == {"event"} and docs[-1]["kind"] == "result"
    assert docs[-1]["result"] == "succeeded"
    assert summary == {"kind": "summary", "recipes": [{"recipe": "gpu-node-stack", "result": "succeeded"}],
                       "skipped": {}, "stopped": "", "succeeded": True, "exitCode": 0}
    ts = [d["t"] for d in docs[:-1]]
    assert ts == sorted(ts) and {d["event"] for d in docs[:-1]} >= {"cordon", "rebooted", "uncordon", "complete"}
    lines = events.read_text().splitlines()
    assert len(lines) == len(docs) - 1 and "\x1b" not in events.read_text()


def test_jsonl_summary_says_which_recipe_failed_and_which_waits(tmp_path: Path) -> None:
    cfg = tmp_path / "sim.yaml"
    cfg.write_text("failures: [{node: gpu-a-001, package: base-tools, stage: apply, exitCode: 3, times: 99}]\n")
    p = subprocess.run([sys.executable, "-m", "reconciler", "apply", RECIPE, "recipes/gpu-training-tuning.yaml",
                        "--cluster", FLEET, "--sim-config", str(cfg), "-o", "jsonl"],
                       capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=120)
    assert p.returncode == 1, p.stderr[-2000:]
    summary = json.loads(p.stdout.splitlines()[-1])
    assert summary["recipes"] == [{"recipe": "gpu-node-stack", "result": "failed"},
                                  {"recipe": "gpu-training-tuning", "result": "waiting"}]
    assert summary["succeeded"] is False and summary["exitCode"] == 1


def test_markdown_is_the_step_summary() -> None:
    p = subprocess.run([sys.executable, "-m", "reconciler", "apply", RECIPE, "--cluster", FLEET, "-o", "markdown"],
                       capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    lines = p.stdout.splitlines()
    assert lines[0].startswith("### ") and lines[2].startswith("| recipe | result |")
    row = next(line for line in lines if line.startswith("| gpu"))
    assert "succeeded" in row and "| 24 | 0 | 0 | 24 |" in row


def test_an_events_file_that_cannot_be_opened_is_an_input_error(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "reconciler", "apply", RECIPE, "--cluster", FLEET,
                        "--events-file", str(tmp_path / "no" / "such" / "dir" / "e.log")],
                       capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=120)
    assert p.returncode == 2 and "--events-file" in p.stderr and "Traceback" not in p.stderr

"""The live view of ``reconciler apply`` on a terminal (issue 16): one compact panel per recipe,
redrawn as events arrive (batch k of N per compartment, nodes complete / in progress / waiting on
protected pods / failed, budget in use of its ceiling, elapsed and the ETA), and left on screen in
its final state. The event lines go to ``--events-file`` (and to the terminal above the panel with
``-v``). Not on a terminal, ``apply`` prints event lines as before (CI logs).

Also the machine outputs that stream: ``-o jsonl`` (one JSON object per event as it happens, each
recipe's result, then a summary line) and ``-o markdown`` (the end-of-run summary for ``$GITHUB_STEP_SUMMARY``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from reconciler.cli.runsummary import hms
from reconciler.model.plan import Plan
from reconciler.model.run import Event, RunResult
from reconciler.model.utctime import utc_text
from reconciler.report.progress import ProgressBoard
from reconciler.report.safetext import visible

#: Seconds between redraws while events pour in (the final state is always drawn).
REDRAW_EVERY = 0.2


def render(board: ProgressBoard) -> Group:
    """The panel for ``board``: a header line and one row per compartment (fits 80 columns)."""
    t = board.totals
    eta = board.eta()
    head = Text()
    head.append(visible(board.recipe), style="bold")
    head.append(f" {visible(board.version)}  {t['complete']}/{t['nodes']} complete  elapsed {hms(board.elapsed)}")
    if board.finished:
        head.append(f"  {board.finished}", style={"succeeded": "green", "waiting": "yellow"}.get(board.finished, "red"))
    elif eta is not None:
        rate = board.pace()
        scaled = "" if rate == 1.0 else f", scaled ×{rate:.2g} to the pace seen"
        head.append(f"  ETA {hms(eta)} (simulated{scaled})")
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for col, just in (("compartment", "left"), ("batch", "right"), ("done", "right"), ("running", "right"),
                      ("waiting", "right"), ("failed", "right"), ("budget", "right")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for c in board.compartments.values():
        state = "halted" if c.halted else f"{c.batch}/{c.batches}"
        table.add_row(Text(visible(c.name)), state, f"{c.complete}/{c.nodes}", str(c.in_progress),
                      str(len(c.waiting)), Text(str(c.failed), style="red" if c.failed else ""),
                      f"{len(c.held)}/{c.ceiling}")
    return Group(head, table)


class LiveView:
    """Draws :func:`render` of each recipe's board on ``console`` (a terminal) while it runs.
    ``predicted``: recipe → compartment → simulated batch starts and end (for the ETA)."""

    def __init__(self, console: Console, predicted: Mapping[str, Mapping[str, Sequence[float]]] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.console = console
        self.predicted = dict(predicted or {})
        self.clock = clock
        self.board: ProgressBoard | None = None
        self._live: Live | None = None
        self._drawn = 0.0

    def start(self, plan: Plan) -> None:
        """A recipe's rollout begins: a new panel below the previous one."""
        self.stop()
        self.board = ProgressBoard.for_plan(plan, self.predicted.get(plan.recipe.name))
        self._live = Live(render(self.board), console=self.console, auto_refresh=False, transient=False,
                          redirect_stdout=False, redirect_stderr=False)
        self._live.start()
        self._drawn = self.clock()

    def event(self, ev: Event) -> None:
        """Fold one event in; redraw at most every :data:`REDRAW_EVERY` seconds."""
        if self.board is None or self._live is None:
            return
        self.board.on_event(ev)
        now = self.clock()
        if now - self._drawn >= REDRAW_EVERY:
            self._live.update(render(self.board), refresh=True)
            self._drawn = now

    def finish(self, result: RunResult) -> None:
        """The rollout ended: draw its final state and leave it on screen."""
        if self.board is not None:
            self.board.finished = str(result.result)
            self.board.elapsed = max(self.board.elapsed, result.duration)
        self.stop()

    def stop(self) -> None:
        """Draw the last state and stop redrawing."""
        if self._live is not None and self.board is not None:
            self._live.update(render(self.board), refresh=True)
            self._live.stop()
        self._live = None


def jsonl_event(stream: IO[str], recipe: str) -> Callable[[Event], None]:
    """``-o jsonl``: each event as one JSON line on ``stream``, flushed as it happens; ``at`` is its
    UTC instant (RFC 3339, milliseconds) beside ``t``, the seconds since the run started."""

    def emit(ev: Event) -> None:
        at = {"at": utc_text(ev.at)} if ev.at is not None else {}
        stream.write(json.dumps({"kind": "event", "recipe": recipe, **ev.to_dict(), **at}, sort_keys=True) + "\n")
        stream.flush()

    return emit


def jsonl_result(stream: IO[str], doc: dict[str, Any]) -> None:
    """``-o jsonl``: the result document of a recipe's run as the last line of its stream."""
    stream.write(json.dumps({"kind": "result", **doc}, sort_keys=True) + "\n")
    stream.flush()


def jsonl_summary(stream: IO[str], results: Sequence[RunResult], *, skipped: Mapping[str, str], stopped: str,
                  exit_code: int) -> None:
    """``-o jsonl``: the last line of an ``apply``, so a reader of the stream need not wait for the
    exit status: ``{"kind": "summary", "recipes": [{"recipe", "result"}, ...] (in the order they
    ran), "skipped": {recipe: why} (paused/disabled), "stopped": why the run stopped ("" if it
    did not: a lost Lease, a signal), "succeeded": bool, "exitCode": int}``."""
    doc = {
        "kind": "summary",
        "recipes": [{"recipe": r.recipe, "result": str(r.result)} for r in results],
        "skipped": dict(skipped),
        "stopped": stopped,
        "succeeded": exit_code == 0,
        "exitCode": exit_code,
    }
    stream.write(json.dumps(doc, sort_keys=True) + "\n")
    stream.flush()


#: Fleets larger than this get no ETA (simulating them first would delay the start noticeably).
PREDICT_MAX_NODES = 5000


def predict(inputs: Any, cluster: Any, only: Any = None,
            retry_failed: bool = False) -> dict[str, dict[str, list[float]]]:
    """recipe → compartment → simulated batch starts and end: the recipes applied, in order, to a
    simulated copy of ``cluster`` (what ``reconciler simulate`` does, default durations; ``only``: the
    ``-l`` selector of ``apply``, ``retry_failed`` its ``--retry-failed``). Empty when
    the fleet is larger than :data:`PREDICT_MAX_NODES` or the simulation cannot run."""
    from reconciler.cli.estimate import simulate_recipes
    from reconciler.errors import ReconcilerError
    from reconciler.load import policy_for
    from reconciler.observe.snapshot import observe
    from reconciler.report.progress import predicted_schedule

    try:
        fleet = observe(cluster)
        if len(fleet.nodes) > PREDICT_MAX_NODES:
            return {}
        runs = simulate_recipes([(r, policy_for(r, inputs)) for r in inputs.recipes], fleet, only=only,
                                retry_failed=retry_failed)
        return {plan.recipe.name: predicted_schedule(result.timeline, [c.name for c in plan.compartments])
                for plan, result in runs}
    except ReconcilerError:
        return {}

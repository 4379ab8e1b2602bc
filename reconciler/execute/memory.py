"""What a node run carries from one lifecycle step to the next (issue 12): its
:class:`Memory`, the run's fixed :class:`StepContext`, and how a run ends (:class:`Outcome`).
Plain data; no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from reconciler.execute.retry import DEFAULT_BOUNDS, RetryBounds
from reconciler.execute.stagework import StageRun
from reconciler.model.nodestate import (
    ConfigDigest,
    FailureRecord,
    InFlight,
    PackageState,
)
from reconciler.model.observed import NodeInfo, PodInfo
from reconciler.model.plan import NodePlan
from reconciler.model.recipe import Recipe
from reconciler.model.vocab import (
    Phase,
)

MAX_RECORDONS = 3


class Outcome(Enum):
    """Where a node run ended (RUNNING while it has not)."""

    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"
    BLOCKED = "blocked"
    REMOVED = "removed"
    LEFT = "left"
    WAITING = "waiting"  # never started: the node was not Ready within timeouts.nodeReady


@dataclass(frozen=True)
class StepContext:
    """What every step of one ``apply`` shares (fixed for the run; no ports, no clock).

    ``poll_seconds``: how long to wait between looks at something that has no event;
    ``image_pull_grace``: seconds an image pull may fail before the stage fails (s);
    ``runtime_required``: names of every runtime-required recipe that selects nodes of this run
    (the taint leaves a node only when each of them is complete on it, semantics §3.6);
    ``inputs``: digest of the recipe and policy (failure records carry it).
    """

    recipe: Recipe
    run_id: str
    plan_hash: str
    poll_seconds: float = 5.0
    image_pull_grace: float = 60.0
    agent_image: str | None = None
    inputs: str = ""
    runtime_required: tuple[str, ...] = ()
    retry_bounds: RetryBounds = DEFAULT_BOUNDS


@dataclass
class EvictTrack:
    """One pod the drain removes: evicted (accepted), gone (404 or a new UID), when to try again
    (monotonic clock), the last refusal and how many 429s it got."""

    pod: PodInfo
    evicted: bool = False
    gone: bool = False
    next_try: float = 0.0
    last_error: str = ""
    attempts: int = 0
    asked: bool = False  # an eviction was sent in the last transition; its answer is in View.evictions

    def copy(self) -> EvictTrack:
        """An independent copy."""
        return EvictTrack(self.pod, self.evicted, self.gone, self.next_try, self.last_error, self.attempts,
                          self.asked)


@dataclass
class Memory:
    """Everything a node run knows that is not on the node: the phase, what it holds, its stage and
    eviction progress, deferred records, and how it ended. :func:`step` never changes a Memory it
    is given; it returns a new one."""

    phase: Phase = Phase.START
    outcome: Outcome = Outcome.RUNNING
    failure: FailureRecord | None = None
    message: str = ""
    owns_cordon: bool = False
    node: NodeInfo | None = None  # the node as last read or written (with deferred records merged)
    state: dict[str, PackageState] = field(default_factory=dict)
    inflight: InFlight | None = None
    evictions: dict[str, EvictTrack] = field(default_factory=dict)
    recordons: int = 0
    runs: list[StageRun] = field(default_factory=list)
    waiting_logged: bool = False
    lifecycle: str = ""
    pending: dict[str, str | None] = field(default_factory=dict)
    state_owed: bool = False  # ``state`` changed since written: its annotation joins ``pending`` when read or written
    # the config digests last recorded, parsed, with their text (None: deferred, joins ``pending`` as ``state``)
    digests: tuple[str | None, dict[str, ConfigDigest]] | None = None
    pending_labels: dict[str, str | None] = field(default_factory=dict)
    local_start: dict[str, float] = field(default_factory=dict)
    streak: int = 0  # consecutive API errors (execute/retry.py bounds them)
    streak_start: float = 0.0
    failure_args: tuple[str, str, dict[str, Any]] | None = None
    give_up_recording: bool = False
    uid: str = ""  # the node's UID (metadata.uid) when the lifecycle first read it: the machine it works on
    plan: NodePlan | None = None  # the plan the lifecycle carries out when not the run's (see StepCore.plan)
    superseded: tuple[str, ...] | None = None  # finishing an older release: the packages the recipe changed
    awaited: tuple[str, ...] = ()  # ... and those whose running stage is only awaited (reconciler.plan.owed)

    def copy(self) -> Memory:
        """A copy whose containers are copied; the records in them are immutable, except the
        :class:`EvictTrack` and :class:`~reconciler.execute.stagework.StageRun` objects, which
        are *shared* with this memory (copy on write: a step calls :meth:`own_evictions` or
        :meth:`own_run` on its working copy before it changes a track or a run, so a memory once
        handed to or returned by :func:`~reconciler.execute.machine.step` never changes).
        Issue 17: the drain's tracks (one per pod of the node) and the stage runs (one per
        package step) were copied on every copy, about twice per step in every phase."""
        new = object.__new__(Memory)
        new.__dict__.update(self.__dict__)
        new.state = dict(self.state)
        new.evictions = dict(self.evictions)
        new.runs = list(self.runs)
        new.pending = dict(self.pending)
        new.pending_labels = dict(self.pending_labels)
        new.local_start = dict(self.local_start)
        return new

    def own_evictions(self) -> None:
        """Replace every eviction track by its own copy, so this memory's tracks can be changed
        without changing a memory it was copied from (see :meth:`copy`)."""
        self.evictions = {k: t.copy() for k, t in self.evictions.items()}

    def own_run(self, index: int) -> StageRun:
        """Replace ``runs[index]`` by its own copy and return it, so it can be changed without
        changing a memory this one was copied from (see :meth:`copy`). Raises IndexError."""
        run = self.runs[index].copy()
        self.runs[index] = run
        return run

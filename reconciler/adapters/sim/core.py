"""The simulated fleet's core (:mod:`reconciler.adapters.sim.fleet`): its state, its clock, and the
primitives every part uses — event queue, write accounting and crash injection, resourceVersions,
uids, the simulation's timer annotation and node readiness.

:class:`SimCore` declares the state the other parts read and write: the raw Kubernetes objects
(``nodes``, ``pods``, ``pdbs``, ``config_maps``), their indexes (``_index``), the stage pods, the
Leases and the event queue; :class:`reconciler.adapters.sim.fleet.SimFleet` fills it in.
"""

from __future__ import annotations

import heapq
import json
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from reconciler.adapters.kube.objects import format_time
from reconciler.adapters.sim.config import SimConfig
from reconciler.adapters.sim.index import FleetIndex
from reconciler.adapters.sim.saved import SIM_ANN
from reconciler.errors import CrashInjected

if TYPE_CHECKING:
    from reconciler.fileio.writing import Output
    from reconciler.ports import LeaseInfo

Obj = dict[str, Any]
Key = tuple[str, str]


class SimCore:
    """State and primitives of the simulated fleet (see the module docstring); not used alone."""

    config: SimConfig
    crash_after: int | None
    save_on_crash: str | Output | None
    writes: int
    mono_offset: float
    calls: list[tuple[str, str]]
    nodes: dict[str, Obj]
    pods: dict[Key, Obj]
    pdbs: dict[Key, Obj]
    daemonsets: set[Key]
    config_maps: dict[Key, Obj]
    events: list[Obj]
    stage_log: list[tuple[float, str, str, str, str, str]]
    interrupt_log: list[tuple[float, str, str, str]]
    leases: dict[str, LeaseInfo]
    epoch: float
    _index: FleetIndex
    _stages: dict[str, Obj]
    _pod_parts: dict[tuple[object, ...], Obj]
    _failures_used: dict[int, int]
    _queue: list[tuple[float, int, Callable[[], None]]]
    _seq: int
    _uid: int
    _rv: int
    _now: float
    _read_only: bool

    def save(self, path: str | Output) -> None:
        """Write the fleet to ``path`` (:meth:`reconciler.adapters.sim.fleet.SimFleet.save`)."""
        raise NotImplementedError

    # ---------------------------------------------------------------- clock
    def now(self) -> float:
        """The monotonic reading: simulated seconds since the start of the simulation plus
        :attr:`mono_offset`. A real process's monotonic clock has an arbitrary origin; set
        ``mono_offset`` (e.g. before resuming a saved fleet) to act as a fresh process on another
        host, which is how tests prove nothing persisted depends on it."""
        return self._now + self.mono_offset

    def utc(self) -> float:
        """UTC epoch seconds of the current simulated instant (the same as :meth:`wall`)."""
        return self.epoch + self._now

    def wait(self, seconds: float) -> None:
        """Advance simulated time to the next event or by ``seconds``, whichever comes first,
        running every event due by then."""
        target = self._now + max(0.0, seconds)
        if self._queue and self._queue[0][0] < target:
            target = self._queue[0][0]
        self._now = max(self._now, target)
        while self._queue and self._queue[0][0] <= self._now:
            _, _, fn = heapq.heappop(self._queue)
            fn()

    def advance(self, seconds: float) -> None:
        """Run the simulation for exactly ``seconds`` (every event due by then)."""
        target = self._now + seconds
        while self._now < target:
            self.wait(target - self._now)

    def wall(self) -> float:
        """Epoch seconds of the current simulated instant."""
        return self.epoch + self._now

    def _answer_gate_requests(self, node: str) -> None:
        """A readiness gate's request was written on ``node`` (the simulated validator answers it:
        :class:`~reconciler.adapters.sim.kubelet.SimKubelet`)."""

    def _at(self, t: float, fn: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (t, self._seq, fn))

    def _new_uid(self) -> str:
        self._uid += 1
        return str(uuid.uuid5(uuid.NAMESPACE_OID, f"sim/{self._uid}"))  # deterministic, varied

    def _write(self, verb: str, target: str) -> None:
        if self._read_only:  # what it hands out (pods_by_node) is read from its objects later
            raise RuntimeError(f"a read-only simulated fleet was asked to {verb} {target}")
        self.writes += 1
        self.calls.append((verb, target))

    def _after_write(self) -> None:
        if self.crash_after is not None and self.writes >= self.crash_after:
            if self.save_on_crash:
                self.save(self.save_on_crash)
            raise CrashInjected(f"simulated crash after {self.writes} writes")

    def _bump(self, obj: Obj) -> str:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        return str(self._rv)

    @staticmethod
    def _set_timer(obj: Obj, **timers: float | None) -> None:
        ann = obj["metadata"].setdefault("annotations", {}) or {}
        obj["metadata"]["annotations"] = ann
        cur = json.loads(ann.get(SIM_ANN, "{}"))
        for k, v in timers.items():
            if v is None:
                cur.pop(k, None)
            else:
                cur[k] = v
        if cur:
            ann[SIM_ANN] = json.dumps(cur, sort_keys=True)
        else:
            ann.pop(SIM_ANN, None)
            if not ann:
                del obj["metadata"]["annotations"]

    def _set_condition(self, n: Obj, type_: str, status: str | None, reason: str, message: str) -> None:
        """Set (``status`` None: remove) the condition ``type_`` of node ``n`` as its owner would
        (an external validator); not a write of ours."""
        conds = n.setdefault("status", {}).setdefault("conditions", [])
        ts = format_time(self.wall())
        kept = [c for c in conds if c.get("type") != type_]
        if status is not None:
            old = next((c for c in conds if c.get("type") == type_), None)
            same = old is not None and old.get("status") == status
            kept.append({"type": type_, "status": status, "reason": reason, "message": message,
                         "lastTransitionTime": old.get("lastTransitionTime", ts) if same and old else ts,
                         "lastHeartbeatTime": ts})
        n["status"]["conditions"] = kept
        self._bump(n)
        self._index.node_changed(n["metadata"]["name"])

    def _set_ready(self, n: Obj, ready: bool, reason: str, message: str) -> None:
        ts = format_time(self.wall())
        self._put_ready(n, {"type": "Ready", "status": "True" if ready else "False", "reason": reason,
                            "message": message, "lastTransitionTime": ts, "lastHeartbeatTime": ts})
        self._index.node_changed(n["metadata"]["name"])

    def _put_ready(self, obj: Obj, condition: Obj) -> None:
        """Replace the ``Ready`` condition of a node or pod object by ``condition`` (appended when
        it has none) and bump its resourceVersion; the caller tells the index."""
        conds = obj.setdefault("status", {}).setdefault("conditions", [])
        for i, c in enumerate(conds):
            if isinstance(c, dict) and c.get("type") == "Ready":
                conds[i] = condition
                break
        else:
            conds.append(condition)
        self._bump(obj)

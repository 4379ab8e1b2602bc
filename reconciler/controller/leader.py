"""Leader election on a coordination.k8s.io/v1 Lease (``--leader-elect``), with the run Lease code.

Two replicas run; one is active. :class:`Leadership` runs one thread that takes the Lease
:data:`LEADER_LEASE` (through :class:`~reconciler.execute.lock.LeaseLock`, the same code that
guards every recipe's run: expiry judged by ``renewTime + leaseDurationSeconds``, updates
conditional on the read resourceVersion) and renews it every ``retry_period`` seconds, as
client-go's leader election does (``LeaseDuration`` / ``RenewDeadline`` / ``RetryPeriod``; client-go's
defaults are 15 s / 10 s / 2 s, the verb's and the chart's 10 s / 7 s / 1 s, measured in
docs/controller.md):

* a standby tries to take the Lease every ``retry_period``; it becomes leader when the Lease is
  free (released by a leader that stopped cleanly) or expired (a killed leader);
* the leader stops acting when it could not renew for ``renew_deadline`` (the lock's margin is
  ``lease_duration - renew_deadline``: the local deadline, measured from when the last renewal was
  *sent*, is reached before another replica may take over), or another holder took the Lease;
  :meth:`lost` then says why, the stop signal fences every write (:mod:`.stopping`) and the
  controller goes back to standby;
* :meth:`release` deletes the Lease on a clean stop, so the standby takes over at once.

The recipe Leases the service takes in each pass are a second fence. A new leader takes over at
once the recipe Leases of the replica it took leadership from (:attr:`Leadership.superseded`:
that replica stopped writing by its renew deadline, before its leader Lease expired), so
progress resumes within seconds of a kill, not after the recipe Leases expire; a recipe Lease of
any other holder (a pipeline run) is waited for as before.
"""

from __future__ import annotations

import logging
import threading

from reconciler.errors import ClusterError, LeaseHeldError
from reconciler.execute.lock import LeaseLock, LeaseLostError
from reconciler.ports import Clock, LeaseStore

log = logging.getLogger(__name__)

#: Name given to LeaseLock for the leader Lease. Not a valid recipe name (capitals), so its Lease
#: name ``reconciler-controller-leader-<8 hex>`` can never be a recipe's.
LEADER_LEASE = "Controller-Leader"


class Leadership:
    """The leader Lease of one controller process (module docstring).

    Args:
        leases, clock: the Lease store (:class:`~reconciler.ports.LeaseStore`) and the injected clock.
        holder: this replica's identity (the pod name and process).
        lease_duration, renew_deadline, retry_period: seconds, as client-go
            (``retry_period < renew_deadline < lease_duration``).

    Raises (``ValueError``): the durations are not in that order.
    """

    def __init__(self, leases: LeaseStore, clock: Clock, holder: str, *, lease_duration: float = 15.0,
                 renew_deadline: float = 10.0, retry_period: float = 2.0) -> None:
        if not 0 < retry_period < renew_deadline < lease_duration:
            raise ValueError(f"leader election needs retry period ({retry_period} s) < renew deadline "
                             f"({renew_deadline} s) < lease duration ({lease_duration} s)")
        self.clock = clock
        self.retry_period = retry_period
        self.lock = LeaseLock(leases, clock, LEADER_LEASE, holder, duration=max(1, round(lease_duration)),
                              renew_every=retry_period, retry_every=retry_period,
                              margin=lease_duration - renew_deadline)
        self.leading = threading.Event()
        self.changed = threading.Event()
        self._lost = ""
        self._mutex = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.transitions = 0
        #: holders of the leader Lease this replica took it over from (expired, not released);
        #: rebound, never changed in place, so the decision thread reads it without the lock
        self.superseded: frozenset[str] = frozenset()

    @property
    def lease_name(self) -> str:
        """The Lease object's name."""
        return self.lock.name

    def start(self) -> Leadership:
        """Start the election thread (a daemon)."""
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self._thread.start()
        return self

    def lost(self) -> str:
        """Why this replica stopped leading in its current term (``""`` while leading or standing by).
        Lock-free (one attribute read): the write fence calls it before every write, and must
        not wait while the election thread holds its lock during a slow renewal."""
        return self._lost

    def is_leader(self) -> bool:
        """Leading now, with the Lease held within its renew deadline."""
        if not self.leading.is_set():
            return False
        with self._mutex:
            try:
                self.lock.check()
            except LeaseLostError as e:
                self._step_down(str(e))
                return False
        return True

    def wait_leading(self, stop: threading.Event) -> bool:
        """Block until leading (True) or ``stop`` is set (False)."""
        while not stop.is_set():
            if self.leading.wait(0.5):
                return True
        return False

    def new_term(self) -> None:
        """Forget why the last term ended (called when the controller starts a pass as leader)."""
        with self._mutex:
            self._lost = ""

    def _step_down(self, why: str) -> None:
        if self.leading.is_set():
            log.error("leader election: stopped leading: %s", why)
            self.leading.clear()
            self._lost = why
            self.changed.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._mutex:
                if not self.leading.is_set():
                    try:
                        self.lock.acquire(0.0)
                        if self.lock.took_over_from:
                            self.superseded = self.superseded | {self.lock.took_over_from}
                        self.leading.set()
                        self.transitions += 1
                        self.changed.set()
                        log.warning("leader election: leading (Lease %s, holder %s)", self.lock.name,
                                    self.lock.holder)
                    except LeaseHeldError:
                        pass
                    except ClusterError as e:
                        log.warning("leader election: could not take Lease %s: %s", self.lock.name, e)
                else:
                    try:
                        self.lock.tick(self.clock.now())
                    except LeaseLostError as e:
                        self._step_down(str(e))
            self._stop.wait(self.retry_period)

    def release(self) -> None:
        """Stop the thread and delete the Lease if held (a clean shutdown: the standby takes over
        without waiting for it to expire)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.retry_period + 5)
        with self._mutex:
            self.leading.clear()
            self.lock.release()

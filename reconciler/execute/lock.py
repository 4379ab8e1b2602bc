"""One reconciler run per recipe: a coordination.k8s.io/v1 Lease held and renewed while ``apply`` runs.

Two pipelines, an Argo CD retry and a manual run must never drive the same recipe at once (they
would each count the budget without seeing the other's nodes). Before a recipe is planned and
applied, :class:`LeaseLock` takes the Lease ``reconciler-<recipe>`` (in the reconciler's
namespace) for a holder identity ``<run id>@<host>/<pid>``:

* free, or expired (its holder stopped renewing for ``duration`` seconds: a killed run) → taken;
  a run taking over an expired lease resumes the dead run's nodes from their node records;
* held by a live run → wait up to ``wait_seconds`` (``apply --wait-for-lock``), retrying every
  ``retry_every`` seconds, then :class:`~reconciler.errors.LeaseHeldError` naming the holder
  (CLI exit 1).

While the rollout runs, :meth:`LeaseLock.tick` (the rollout's ``on_tick`` hook) renews it every
``renew_every`` seconds (default 20 s for a 60 s lease). A renewal that fails transiently is
retried every ``retry_every`` seconds; when the lease could not be renewed for so long that it
may have expired (``duration - margin`` since the last renewal), or another holder took it, the
tick raises :class:`LeaseLostError` and the rollout stops before it starts or advances anything
else (node records stay; the next holder resumes them). :meth:`release` deletes the Lease at the
end of a run that was not killed.

The take-over rules live here once, for every adapter (:func:`take_lease`, :func:`renew_lease`,
:func:`release_lease`); the adapters only store Leases (:class:`~reconciler.ports.LeaseStore`:
get / create / replace-if-resourceVersion / delete-if-resourceVersion).

Times: ``clock.now()`` (monotonic) for the cadence and the fence deadline; expiry is judged by the
Lease's ``renewTime`` against ``clock.utc()`` (kube: local wall time; sim: simulated time).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
from collections.abc import Collection, Iterator
from contextlib import contextmanager

from reconciler.errors import (
    EXIT_FAILED,
    ClusterError,
    ConflictError,
    CrashInjected,
    ForbiddenError,
    LeaseHeldError,
    NotFoundError,
    ReconcilerError,
)
from reconciler.ports import Clock, LeaseInfo, LeaseSpec, LeaseStore

log = logging.getLogger(__name__)

DEFAULT_DURATION = 60
DEFAULT_RENEW_EVERY = 20.0
DEFAULT_RETRY_EVERY = 5.0
#: Stop acting this many seconds before the lease could expire when renewals keep failing.
DEFAULT_MARGIN = 10.0


class LeaseLostError(ReconcilerError):
    """The run no longer holds its recipe's Lease (taken over, deleted, or not renewable before
    it could expire); the run stops. Exit code 1.

    ``requested``: the process itself asked the run to stop (a controller's preemption or
    SIGTERM, :class:`reconciler.controller.stopping.PassStopped`): not an error to log, count or
    report; the node records stay and the next pass resumes them."""

    exit_code = EXIT_FAILED
    requested = False


def lease_name(recipe: str) -> str:
    """Lease name of a recipe: ``reconciler-<recipe>`` as a DNS-1123 name (≤ 63 chars; a long or
    unusual name is shortened and suffixed with 8 hex of its SHA-256)."""
    base = re.sub(r"[^a-z0-9-]+", "-", recipe.lower()).strip("-") or "recipe"
    name = f"reconciler-{base}"
    if len(name) <= 63 and base == recipe:
        return name
    h = hashlib.sha256(recipe.encode()).hexdigest()[:8]
    return f"{name[:54].rstrip('-')}-{h}"


def take_lease(store: LeaseStore, name: str, holder: str, duration_seconds: int, now: float,
               cur: LeaseInfo | None, superseded: Collection[str] = ()) -> LeaseInfo:
    """The take-over rule: one write that gives ``holder`` the Lease ``name`` as last read (``cur``).

    Absent → created (transitions 0); held by ``holder`` → renewed (acquireTime kept); free,
    expired at UTC epoch ``now``, or held by a run of a process in ``superseded`` (a controller
    replica whose leadership this process took over: fenced by the leader Lease, it writes no
    more, :func:`holder_process`) → taken over (acquireTime = now, ``leaseTransitions`` + 1 when
    it had a holder). The write carries ``cur``'s resourceVersion, so a concurrent writer makes it
    fail with ConflictError (read again and retry), as client-go's leader election does.

    Raises:
        LeaseHeldError: another holder's Lease has not expired at ``now``.
        ConflictError: created or written concurrently since ``cur`` was read.
    """
    if cur is None:
        return store.create_lease(name, LeaseSpec(holder, duration_seconds, now, now, 0))
    if cur.holder and cur.holder != holder and cur.expires_in(now) > 0 and holder_process(cur.holder) not in superseded:
        raise LeaseHeldError(f"{cur.namespace}/{name}", cur.holder, cur.expires_in(now))
    taking_over = cur.holder != holder
    spec = LeaseSpec(holder, duration_seconds, acquired=now if taking_over else (cur.acquired or now), renewed=now,
                     transitions=cur.transitions + (1 if taking_over and cur.holder else 0))
    return store.replace_lease(name, spec, cur.resource_version)


def renew_lease(store: LeaseStore, name: str, holder: str, duration_seconds: int | None, now: float) -> LeaseInfo:
    """Read, then one conditional write: ``renewTime`` = ``now`` (UTC epoch seconds) on ``holder``'s Lease.

    Raises:
        LeaseHeldError: another holder has it (we lost it).
        NotFoundError: the Lease was deleted.
        ConflictError: written concurrently between the read and the write.
    """
    cur = store.get_lease(name)
    if cur is None:
        raise NotFoundError(f"lease {name} does not exist", 404, "NotFound")
    if cur.holder != holder:
        raise LeaseHeldError(f"{cur.namespace}/{name}", cur.holder or "nobody", cur.expires_in(now))
    spec = LeaseSpec(holder, duration_seconds or cur.duration_seconds, acquired=cur.acquired or now, renewed=now,
                     transitions=cur.transitions)
    return store.replace_lease(name, spec, cur.resource_version)


def release_lease(store: LeaseStore, name: str, holder: str) -> None:
    """Read, then delete the Lease if ``holder`` holds it (conditional on the resourceVersion read);
    a Lease held by someone else, or already gone, is left alone. Raises ConflictError (written
    concurrently) and other ClusterErrors."""
    cur = store.get_lease(name)
    if cur is None or cur.holder != holder:
        return
    with contextlib.suppress(NotFoundError):
        store.delete_lease(name, cur.resource_version)


def holder_process(holder: str) -> str:
    """The process part of a holder identity (``<host>/<pid>`` of ``<run id>@<host>/<pid>``; a
    holder without a run id is all process)."""
    return holder.rsplit("@", 1)[-1]


def holder_identity(run_id: str, process: str) -> str:
    """``<run id>@<host>/<pid>``: who holds a lease, readable in ``kubectl get lease`` and in the
    error a second run prints. ``process`` is ``<host>/<pid>`` of the running process, read by the
    caller (:func:`reconciler.adapters.host.process_identity`): ``execute`` reads no host state."""
    return f"{run_id}@{process}"


class LeaseLock:
    """The Lease of one recipe for one run (see the module docstring).

    Args:
        leases: the Lease store (:class:`~reconciler.ports.LeaseStore`).
        clock: the run's clock (waiting and renewal cadence).
        recipe: recipe name (the lease is :func:`lease_name` of it).
        holder: holder identity (:func:`holder_identity`).
        duration: ``leaseDurationSeconds``.
        renew_every: seconds between renewals (< duration).
        retry_every: seconds between attempts while waiting or after a failed renewal.
        margin: stop this many seconds before a lease we could not renew may expire.
        superseded: processes whose runs' leases may be taken over before they expire
            (:func:`take_lease`).

    Raises (``ValueError``): ``renew_every`` not below ``duration - margin``.
    """

    def __init__(
        self,
        leases: LeaseStore,
        clock: Clock,
        recipe: str,
        holder: str,
        *,
        duration: int = DEFAULT_DURATION,
        renew_every: float = DEFAULT_RENEW_EVERY,
        retry_every: float = DEFAULT_RETRY_EVERY,
        margin: float = DEFAULT_MARGIN,
        superseded: Collection[str] = (),
    ) -> None:
        if renew_every >= duration - margin:
            raise ValueError(f"renew_every {renew_every} s must be below duration {duration} s - margin {margin} s")
        self.leases, self.clock = leases, clock
        self.recipe = recipe
        self.name = lease_name(recipe)
        self.holder = holder
        self.duration = duration
        self.renew_every = renew_every
        self.retry_every = retry_every
        self.margin = margin
        self.superseded = frozenset(superseded)
        self.held = False
        self.renewals = 0
        self.took_over_from = ""
        self._renewed_at = 0.0
        self._next = 0.0
        self._last_error = ""
        self.lost = ""  # why the lease was lost (set once; every later check and tick raises it)

    # ------------------------------------------------------------------ acquire
    def acquire(self, wait_seconds: float = 0.0) -> LeaseInfo:
        """Take the lease, waiting up to ``wait_seconds`` clock seconds for another holder.

        Returns the lease as written. Raises:
            LeaseHeldError: still held by another run after the wait (message names the holder).
            ForbiddenError: RBAC does not allow leases get/create/update.
            ClusterError: the API kept failing until the deadline.
        """
        deadline = self.clock.now() + max(0.0, wait_seconds)
        announced = ""
        while True:
            before: LeaseInfo | None = None
            sent = self.clock.now()  # the lease runs from when the request was sent, not answered
            try:
                before = self.leases.get_lease(self.name)
                rec = take_lease(self.leases, self.name, self.holder, self.duration, self.clock.utc(), before,
                                 self.superseded)
            except LeaseHeldError as e:
                if self.clock.now() >= deadline:
                    raise
                if e.holder != announced:
                    log.warning("recipe %s: lease %s is held by %s; waiting up to %.0f s", self.recipe, self.name,
                                e.holder, deadline - self.clock.now())
                    announced = e.holder
                self._sleep_until(min(deadline, self.clock.now() + self.retry_every))
                continue
            except ConflictError:
                continue  # someone wrote the lease between our read and write: look again
            except ForbiddenError:
                raise
            except ClusterError as e:
                if self.clock.now() >= deadline:
                    raise
                log.warning("recipe %s: could not take lease %s: %s; retrying", self.recipe, self.name, e)
                self._sleep_until(min(deadline, self.clock.now() + self.retry_every))
                continue
            self.held = True
            if before is not None and before.holder and before.holder != self.holder:
                self.took_over_from = before.holder
                log.warning("recipe %s: took over lease %s from %s (it stopped renewing); resuming its nodes",
                            self.recipe, self.name, before.holder)
            self._renewed_at = sent
            self._next = self._renewed_at + self.renew_every
            self.lost = ""
            return rec

    def _sleep_until(self, t: float) -> None:
        while self.clock.now() < t:
            self.clock.wait(t - self.clock.now())

    # ------------------------------------------------------------------ renew
    def tick(self, now: float) -> float | None:
        """Renew when due (the rollout's ``on_tick`` hook). Returns the clock time of the next
        renewal or retry, or None when the lock is not held.

        Raises:
            LeaseLostError: another holder has the lease, it was deleted, or renewals failed for
                ``duration - margin`` seconds (it may have expired).
        """
        if self.lost:
            raise LeaseLostError(self.lost)
        if not self.held:
            return None
        self.check()
        if now < self._next:
            return self._next
        try:
            renew_lease(self.leases, self.name, self.holder, self.duration, self.clock.utc())
        except LeaseHeldError as e:
            self._lose(f"lease {self.name} of recipe {self.recipe} was taken over by {e.holder}; this run "
                       f"({self.holder}) stops writing, its nodes keep their records and the new holder resumes them")
        except NotFoundError:
            self._lose(f"lease {self.name} of recipe {self.recipe} was deleted while this run ({self.holder}) held "
                       "it; stopping (node records are kept; the next run resumes them)")
        except ClusterError as e:
            silent = now - self._renewed_at
            if silent >= self.duration - self.margin:
                self._lose(f"could not renew lease {self.name} of recipe {self.recipe} for {silent:.0f} s (last "
                           f"error: {e}); stopping before another run may take it over (node records are kept; "
                           "the next run resumes them)")
            self._last_error = str(e)
            log.warning("recipe %s: renewing lease %s failed: %s; retrying in %.0f s", self.recipe, self.name, e,
                        self.retry_every)
            self._next = now + self.retry_every
            return self._next
        self.renewals += 1
        self._last_error = ""
        self._renewed_at = now  # ``now`` was read before the request was sent
        self._next = now + self.renew_every
        return self._next

    def check(self) -> None:
        """The write fence (:mod:`reconciler.execute.fence`): return when this run holds the lease
        with margin, i.e. the monotonic clock is before ``last renewal sent + duration - margin``.

        Raises:
            LeaseLostError: the lease is not held, was lost, or could expire before another write
                lands; from then on every check and tick raises it (the run stops writing at once).
        """
        if self.lost:
            raise LeaseLostError(self.lost)
        if not self.held:
            raise LeaseLostError(f"lease {self.name} of recipe {self.recipe} is not held by this run ({self.holder}); "
                                 "no write is allowed")
        left = self._renewed_at + self.duration - self.margin - self.clock.now()
        if left <= 0:
            ago = self.duration - self.margin - left
            why = f" (could not renew: {self._last_error})" if self._last_error else ""
            self._lose(f"lease {self.name} of recipe {self.recipe} was last renewed {ago:.0f} s ago{why} and may "
                       f"expire within the {self.margin:.0f} s margin; this run ({self.holder}) stops writing (node "
                       "records are kept; the next run resumes them)")

    def _lose(self, message: str) -> None:
        self.held = False
        self.lost = message
        log.error("recipe %s: %s", self.recipe, message)
        raise LeaseLostError(message)

    # ------------------------------------------------------------------ release
    def release(self) -> None:
        """Delete the lease if we still hold it (errors are logged, not raised: the lease then
        expires on its own after ``duration`` seconds)."""
        if not self.held:
            return
        self.held = False
        try:
            release_lease(self.leases, self.name, self.holder)
        except ClusterError as e:
            log.warning("recipe %s: could not release lease %s (it expires in %d s): %s", self.recipe, self.name,
                        self.duration, e)

    @contextmanager
    def holding(self, wait_seconds: float = 0.0) -> Iterator[LeaseLock]:
        """``with lock.holding(wait):`` acquire, then release on the way out (also after an error
        or Ctrl-C). A simulated ``kill -9`` (:class:`~reconciler.errors.CrashInjected`) leaves the
        lease to expire, as a dead process would."""
        self.acquire(wait_seconds)
        try:
            yield self
        except CrashInjected:
            raise
        except BaseException:
            self.release()
            raise
        self.release()


class LeaseGroup:
    """The leases of every recipe of one ``apply``, taken together before anything is observed or
    changed, renewed together, released together.

    Recipes are locked in name order, so two runs over overlapping recipe sets cannot each hold
    a part while waiting for the other's. :meth:`tick` is the rollout's ``on_tick`` hook (it renews
    every lease that is due and returns the earliest next renewal).

    Args: as :class:`LeaseLock` (``leases`` the Lease store, ``recipes`` a list of names).
    """

    def __init__(self, leases: LeaseStore, clock: Clock, recipes: list[str], holder: str, *,
                 duration: int = DEFAULT_DURATION, renew_every: float | None = None,
                 retry_every: float = DEFAULT_RETRY_EVERY, margin: float | None = None,
                 superseded: Collection[str] = ()) -> None:
        margin = DEFAULT_MARGIN if margin is None else margin
        margin = min(margin, duration / 6)
        renew = renew_every if renew_every is not None else duration / 3
        self.clock = clock
        self.holder = holder
        self.locks = [
            LeaseLock(leases, clock, name, holder, duration=duration, renew_every=renew,
                      retry_every=min(retry_every, renew), margin=margin, superseded=superseded)
            for name in sorted(set(recipes))
        ]

    def acquire(self, wait_seconds: float = 0.0) -> None:
        """Take every lease (one shared wait budget). On failure the leases already taken are
        released and the error is raised (see :meth:`LeaseLock.acquire`)."""
        deadline = self.clock.now() + max(0.0, wait_seconds)
        try:
            for lock in self.locks:
                lock.acquire(max(0.0, deadline - self.clock.now()))
        except BaseException:
            self.release()
            raise

    def tick(self, now: float) -> float | None:
        """Renew the leases that are due; the earliest next renewal (None when none is held).
        Raises LeaseLostError as :meth:`LeaseLock.tick`."""
        nexts = [t for t in (lock.tick(now) for lock in self.locks) if t is not None]
        return min(nexts) if nexts else None

    def check(self) -> None:
        """The write fence for every recipe of the run: raises LeaseLostError as
        :meth:`LeaseLock.check` when any lease is not held with margin."""
        for lock in self.locks:
            lock.check()

    def release(self) -> None:
        """Release every lease still held (errors logged)."""
        for lock in self.locks:
            lock.release()

    @property
    def took_over_from(self) -> dict[str, str]:
        """Recipe → previous holder, for leases taken over from a run that stopped renewing."""
        return {lock.recipe: lock.took_over_from for lock in self.locks if lock.took_over_from}

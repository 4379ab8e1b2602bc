"""The lifecycle phases that change the node: package stages in dependency order, the merged
interrupt (reboot by bootID), post-interrupt stages. Pure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reconciler.diff import config_digest
from reconciler.execute.decide import (
    StageVerdict,
    judge_stage,
    reboot_confirmed,
)
from reconciler.execute.effects import (
    DeleteStage,
    EmitEvent,
    ReadStage,
    StartStage,
)
from reconciler.execute.memory import MAX_RECORDONS, Outcome
from reconciler.execute.stagework import StageRun, build_runs, interrupt_packages, interrupt_spec, stage_spec
from reconciler.execute.stepcore import StepCore, _Need
from reconciler.model.nodestate import (
    ConfigDigest,
    CordonRecord,
    InFlight,
    config_key,
    cordon_key,
    dump_model,
    dump_state,
    inflight_key,
    parse_config_digests,
    state_key,
)
from reconciler.model.plan import Step
from reconciler.model.recipe import Interrupt
from reconciler.model.utctime import from_rfc3339, to_rfc3339
from reconciler.model.vocab import (
    IMAGE_PULL_REASONS,
    EventKind,
    FailureReason,
    InterruptType,
    PackageStatus,
    Phase,
    Stage,
)
from reconciler.plan.owed import UNKNOWN_CONFIG
from reconciler.ports import StageSpec


class StagePhases(StepCore):
    """The lifecycle phases that change the node (module docstring)."""

    # ------------------------------------------------------------------ stages
    def _spec(self, run: StageRun, stage: str) -> StageSpec:
        lifecycle = self.m.lifecycle or self.ctx.run_id
        fl = self.m.inflight
        # restarted by `package rerun` / `reset --package` in this lifecycle: pods of a new name
        rerun = fl.rerun_of(run.step.package) if fl is not None and fl.lifecycle_id == lifecycle else 0
        return stage_spec(self.recipe, self.name, run, stage, lifecycle=lifecycle,
                          agent_image=self.ctx.agent_image, rerun=rerun)

    def _phase_stages(self) -> float | None:
        if not self.m.runs and self.plan.steps:
            self.m.runs = build_runs(self.recipe, self.m.state, self.plan.steps)
        return self._drive(self._stages_done)

    def _stages_done(self) -> float | None:
        if self.plan.interrupt is not None:
            self.m.phase = Phase.INTERRUPT
            return self._phase_interrupt()
        return self._after_stages()

    def _drive(self, on_done: Callable[[], float | None]) -> float | None:
        """Advance every runnable step (its ``after`` packages done) by its stages, in parallel.
        Before any new stage starts, the node's scope is checked on a fresh read: out of scope, the
        running stages finish and nothing new starts; then the node leaves (:meth:`_leave`).
        Every running stage's status is read first, in one round of reads."""
        m = self.m
        runs = m.runs
        now = self._now
        why = None
        failed = m.failure_args  # a stage failed for good while others ran: they finish, nothing starts
        if failed is not None and not any(r.running and not r.done for r in runs):
            return self._fail(failed[0], failed[1], **failed[2])
        if failed is None and any(not r.done and not r.running for r in runs):
            why = self._out_of_scope(self._refresh())
            if why is not None and not any(r.running for r in runs):
                return self._leave(why)
        looks = [ReadStage(spec) for spec in (self._spec(r, r.stages[r.index]) for r in runs
                                              if r.running and not r.done and r.launched != now
                                              and (r.retry_at is None or r.retry_at <= now))
                 if spec.pod_name not in self.v.stages]
        if looks and not self._wrote:
            raise _Need(*looks)
        done_pkgs = {r.step.package for r in runs if r.done}
        run_pkgs = {r.step.package for r in runs}
        wakes: list[float] = []
        for i, run in enumerate(runs):
            if run.done or ((why is not None or failed is not None) and not run.running):
                continue  # out of scope, or a stage failed for good: let what runs finish
            if any(dep not in done_pkgs for dep in run.step.after if dep in run_pkgs):
                continue
            if run.retry_at is not None and run.retry_at > now:
                wakes.append(run.retry_at)
                continue
            if run.running and run.launched == now:  # created in this cycle: looked at after a poll
                wakes.append(now + self.ctx.poll_seconds)
                continue
            w = self._drive_one(i)
            if m.outcome is not Outcome.RUNNING:
                return None
            if w is not None:
                wakes.append(w)
        if m.failure_args is not None and not any(r.running and not r.done for r in runs):
            args = m.failure_args
            return self._fail(args[0], args[1], **args[2])
        if all(r.done for r in runs):
            return self._leave(why) if why is not None else on_done()
        if why is not None and not any(r.running for r in runs):
            return self._leave(why)
        if any(r.done for r in runs) and not wakes:
            return now  # a dependency finished: start its dependents now
        return min(wakes) if wakes else now + self.ctx.poll_seconds

    def _drive_one(self, index: int) -> float | None:
        """Advance ``m.runs[index]`` by one look or start; the run is changed on this step's own
        copy of it (:meth:`Memory.own_run`), taken after the checkpoint, so a failed write's
        rollback memory keeps the run as it was."""
        wake = self._look_running(index)
        if wake is not None:
            return wake
        self._checkpoint()
        run = self.m.own_run(index)
        now = self._now
        stage = run.stages[run.index]
        spec = self._spec(run, stage)
        if self._awaited(run) and not run.running:
            run.done = True  # a superseded step's stage that is not running is never started
            return None
        if not run.running and run.attempt > self.recipe.timeouts.stageRetries + 1:
            return self._stage_gave_up(run, FailureReason.STAGE_FAILED,
                                       f"{run.step.package} {run.version} {stage} failed {run.attempt - 1} "
                                       "time(s); no attempts left", keep_cordon=True, stage=stage,
                                       package=run.step.package)
        if not run.running:
            self._set_entry(run.key, run.step.package, run.version, stage, PackageStatus.IN_PROGRESS, run.step,
                            restarts=run.attempt - 1)
            self._patch(annotations={state_key(self.recipe.name): dump_state(self.m.state)})
            self._write(StartStage(spec))
            run.running, run.started, run.retry_at, run.launched = True, self._utc, None, now
            self._event(EventKind.STAGE_START, f"{run.step.package} {run.version} {stage} (attempt {run.attempt})")
            return now + self.ctx.poll_seconds
        st = self._stage_status(spec)
        utc = self._utc
        if st.phase != "missing":
            run.seen = True
            run.deleted_by = st.deleting or run.deleted_by
        if run.started is None:  # resumed: the pod's own start time (UTC) keeps the timeout across restarts
            run.started = st.started if st.started is not None else utc
        # a pod made again after someone deleted its predecessor: the stage's timeout counts from the first
        first = self._first_start(run, stage)
        j = judge_stage(st.phase, st.reason, utc - (run.started if first is None else first),
                        timeout=self.recipe.timeouts.stage, pull_grace=self.ctx.image_pull_grace)  # pure (decide.py)
        if j.verdict is StageVerdict.MISSING and self._awaited(run):
            run.done, run.running = True, False  # it never started (or is gone): not re-created
            return now
        if j.verdict is StageVerdict.MISSING:
            if run.seen:  # it existed and is gone before its end: deleted by someone else
                return self._stage_lost(run, stage, spec.pod_name, first)
            if self.m.pending or self.m.state_owed:
                self._patch()  # the records the stage needs first (its commitment, when it is the first)
            self._write(StartStage(spec))  # never created (a run stopped before it did)
            run.started, run.launched = utc, now
            return now + self.ctx.poll_seconds
        if j.verdict is StageVerdict.SUCCEEDED:
            return self._stage_succeeded(run)
        if j.verdict is StageVerdict.FAILED:
            live = spec if st.phase in ("running", "pending") else None  # given up on while its pod runs
            return self._stage_failed(run, spec, st.exit_code, j.reason, live=live)
        return now + min(self.ctx.poll_seconds, j.wake_in)

    def _look_running(self, index: int) -> float | None:
        """The common look at a running stage whose pod still runs: its run's look fields updated as
        :meth:`_drive_one` updates them, and the wake; None when the look decides anything else
        (the pod ended or is gone), which :meth:`_drive_one` then decides from a checkpoint. It
        writes nothing, so it takes no checkpoint: a copy of the whole memory (every package's
        state and run) per running stage per look made a look at a node's stages quadratic in
        its packages (issue 36)."""
        run = self.m.runs[index]
        if not run.running:
            return None
        stage = run.stages[run.index]
        st = self._stage_status(self._spec(run, stage))
        if st.phase in ("missing", "succeeded", "failed"):
            return None
        started = run.started
        if started is None:
            started = st.started if st.started is not None else self._utc
        first = self._first_start(run, stage)
        j = judge_stage(st.phase, st.reason, self._utc - (started if first is None else first),
                        timeout=self.recipe.timeouts.stage, pull_grace=self.ctx.image_pull_grace)
        if j.verdict is not StageVerdict.RUNNING:
            return None
        run = self.m.own_run(index)
        run.seen = True
        run.deleted_by = st.deleting or run.deleted_by
        run.started = started
        return self._now + min(self.ctx.poll_seconds, j.wake_in)

    def _attempt_key(self, run: StageRun, stage: str) -> str:
        """The in-flight timer of ``run``'s current attempt at ``stage`` made again after a deletion."""
        return f"{run.step.package}/{stage}@{run.attempt}"

    def _first_start(self, run: StageRun, stage: str) -> float | None:
        """When the first pod of this attempt's chain started (UTC epoch seconds), when the current
        pod replaces deleted ones (the in-flight record's timer, so it holds across restarts); None
        for a first pod, whose own start counts."""
        fl = self.m.inflight
        if fl is None or fl.lifecycle_id != (self.m.lifecycle or self.ctx.run_id):
            return None
        return from_rfc3339(fl.timers.get(self._attempt_key(run, stage)))

    def _stage_lost(self, run: StageRun, stage: str, pod: str, first: float | None) -> float | None:
        """The stage pod ``pod`` of ``run`` existed and is gone before its end: someone else deleted it
        (a janitor, an eviction, the pod garbage collector). A timeline event and a Kubernetes Event
        say so, naming who was seen deleting it (``StageRun.deleted_by``) when a look caught it
        being deleted; the loss counts as an attempt, recorded in the package entry's ``restarts``
        (a restart goes on counting); the replacement pod's stage timeout counts from the first
        pod's start (an in-flight timer); past ``timeouts.stageRetries`` the node fails with
        ``StagePodDeleted``. The replacement is made only now that the old pod is gone: never two
        pods of a stage on the node at once."""
        m = self.m
        now, utc = self._now, self._utc
        name, pkg = self.recipe.name, run.step.package
        limit = self.recipe.timeouts.stageRetries + 1
        who = run.deleted_by or ("someone: no look caught it being deleted (the API records no deleter on a pod; "
                                 "the cluster's audit log does)")
        what = f"stage pod {pod} ({pkg} {run.version} {stage}, attempt {run.attempt} of {limit})"
        if run.attempt >= limit:
            return self._stage_gave_up(run, FailureReason.STAGE_POD_DELETED,
                                       f"{what} was deleted before it ended, by {who}; no attempts left",
                                       keep_cordon=True, stage=stage, package=pkg)
        chain = first if first is not None else (run.started if run.started is not None else utc)
        run.attempt += 1
        run.started, run.launched, run.seen, run.deleted_by = utc, now, False, ""
        self._set_entry(run.key, pkg, run.version, stage, PackageStatus.IN_PROGRESS, run.step,
                        restarts=run.attempt - 1)
        ann: dict[str, str | None] = {state_key(name): dump_state(m.state)}
        fl = m.inflight
        if fl is not None:
            timers = {**fl.timers, self._attempt_key(run, stage): to_rfc3339(chain)}
            ann[inflight_key(name)] = self._inflight(fl.phase, timers=timers)
        self._patch(annotations=ann)  # failed: nothing of the loss is kept; the next look decides it again
        counted = m.copy()  # recorded: a failed Event or pod creation never counts the loss twice
        detail = f"{what} was deleted before it ended, by {who}"
        self._write(EmitEvent("StagePodDeleted", f"recipe {name}: {detail}; made again as attempt {run.attempt}, "
                                                 "its timeout counted from the first start", "Warning"), counted)
        self._event(EventKind.STAGE_LOST, detail)
        self._write(StartStage(self._spec(run, stage)), counted)
        self._event(EventKind.STAGE_START, f"{pkg} {run.version} {stage} (attempt {run.attempt})")
        return now + self.ctx.poll_seconds

    def _stage_succeeded(self, run: StageRun) -> float | None:
        stage = run.stages[run.index]
        m = self.m
        self._event(EventKind.STAGE_END, f"{run.step.package} {run.version} {stage} ok")
        if stage == Stage.UNINSTALL:
            m.state.pop(run.key, None)
            digests = self._config_digests()
            if digests.pop(run.step.package, None) is not None:
                self._defer_digests(digests)
        else:
            self._set_entry(run.key, run.step.package, run.version, stage, PackageStatus.COMPLETE, run.step, restarts=0)
        if stage == Stage.UPGRADE:  # other versions of the package are replaced (semantics §2.3)
            for k in [k for k in m.state if k.startswith(f"{run.step.package}|") and k != run.key]:
                del m.state[k]
        pkg = self.recipe.packages.get(run.step.package)
        if stage == Stage.CONFIG and pkg is not None and pkg.version == run.version:
            digests = self._config_digests()
            # a superseded step's config ran with a configuration the recipe no longer describes
            superseded = self.m.superseded is not None and run.step.package in self.m.superseded
            digests[pkg.name] = UNKNOWN_CONFIG if superseded else config_digest(pkg)
            self._defer_digests(digests)
        run.index += 1
        run.attempt = 1
        run.running = False
        run.launched = None
        run.seen, run.deleted_by = False, ""
        if run.index >= len(run.stages):
            run.done = True
        self._defer_state()
        return self._now

    def _config_digests(self) -> dict[str, ConfigDigest]:
        """The config digests as last written or deferred (a new dict): what this lifecycle
        recorded last is kept parsed (:attr:`Memory.digests`), so config stages ending one after
        another do not each parse and serialise every package's digest again (issue 36)."""
        known = self.m.digests
        if known is not None and known[0] is None:  # deferred: newer than any text
            return dict(known[1])
        text = self._annotation(config_key(self.recipe.name))
        if known is not None and known[0] == text:
            return dict(known[1])
        return parse_config_digests(text)

    def _stage_failed(self, run: StageRun, spec: StageSpec, code: int | None, reason: str,
                      live: StageSpec | None = None) -> float | None:
        """A stage failed (its exit code, a timeout, an image that never pulls): recorded
        erroring, then retried after the backoff or, out of attempts, the node fails (its pod's log
        read only then, for the failure record). ``live``: the stage's pod still runs (a timeout, a
        pull that never ends): it is deleted once the failure is recorded, so no pod of the stage
        runs beside the next attempt's, nor beside a retried lifecycle's."""
        stage = run.stages[run.index]
        now = self._now
        retries = self.recipe.timeouts.stageRetries
        tail = self._stage_log(spec) if run.attempt > retries else ""  # only a failure record shows it
        self._set_entry(run.key, run.step.package, run.version, stage, PackageStatus.ERRORING, run.step,
                        restarts=run.attempt)
        if self._awaited(run):  # superseded: recorded as it ended, not retried; the newer release follows
            self._defer({state_key(self.recipe.name): dump_state(self.m.state)})
            self._event(EventKind.STAGE_END, f"{run.step.package} {run.version} {stage} failed (exit {code}, "
                                             f"{reason}); superseded: not retried")
            run.done, run.running = True, False
            return now
        if run.attempt <= retries:
            self._patch(annotations={state_key(self.recipe.name): dump_state(self.m.state)})
            if live is not None:
                self._write(DeleteStage(live))
            delay = min(300.0, self.recipe.timeouts.retryBackoff * (2 ** (run.attempt - 1)))
            self._event(EventKind.STAGE_RETRY,
                        f"{run.step.package} {stage} failed (exit {code}, {reason}); retry in {delay:.0f} s")
            run.attempt += 1
            run.running = False
            run.launched = None
            run.seen, run.deleted_by = False, ""
            run.retry_at = now + delay
            return run.retry_at
        wake = self._stage_gave_up(
            run,
            FailureReason(reason) if reason in (FailureReason.STAGE_TIMEOUT, *IMAGE_PULL_REASONS)
            else FailureReason.STAGE_FAILED,
            f"{run.step.package} {run.version} {stage} failed after {run.attempt} attempt(s): "
            f"exit code {code}, {reason}",
            keep_cordon=True,
            stage=stage,
            package=run.step.package,
            exit_code=code,
            log_tail=tail,
        )
        if live is not None:  # after the failure is recorded: a crash between leaves it recorded
            self._write(DeleteStage(live))
        return wake

    def _stage_gave_up(self, run: StageRun, reason: str, message: str, **kw: Any) -> float | None:
        """A stage failed for good: the node fails — once no other stage pod of it runs any more
        (a node runs stage pods of one lifecycle only: a retried lifecycle must never start one
        beside a pod of this one). Until then the failure waits in :attr:`Memory.failure_args`
        and nothing new starts (:meth:`_drive`)."""
        run.running, run.done = False, True
        if any(r.running and not r.done for r in self.m.runs if r is not run):
            self.m.failure_args = (reason, message, kw)
            self._patch(annotations={state_key(self.recipe.name): dump_state(self.m.state)})  # erroring, recorded
            return self._now + self.ctx.poll_seconds
        return self._fail(reason, message, **kw)

    def _awaited(self, run: StageRun) -> bool:
        """The run is of a step an older release committed to that is only awaited (the recipe
        superseded it, or the lifecycle was before its cordon): its running stage ends, nothing of
        it is (re)started (:mod:`reconciler.plan.owed`)."""
        return run.step.package in self.m.awaited

    # ------------------------------------------------------------------ interrupt
    def _interrupt_stage(self, interrupt: Interrupt) -> StageSpec:
        """The interrupt pod: run by the package the commitment named (``InFlight.interruptOwner``),
        at the version it committed to — whatever the recipe says now."""
        fl = self.m.inflight
        owner = fl.interruptOwner if fl is not None else ""
        committed = next((c for c in (fl.steps or ()) if c.package == owner), None) if fl is not None else None
        return interrupt_spec(self.recipe, self.name, self.plan.steps, interrupt,
                              lifecycle=self.m.lifecycle or self.ctx.run_id, agent_image=self.ctx.agent_image,
                              owner_package=owner, owner_version=(committed.to or committed.from_ or "")
                              if committed is not None else "", state=self.m.state)

    def _phase_interrupt(self) -> float | None:
        self._checkpoint()
        m = self.m
        now = self._now
        node = self._read()
        fl = m.inflight  # the record as the node holds it (with our deferred records): never a request
        # this process decided but the node did not get
        if fl is None or fl.phase is not Phase.INTERRUPT or fl.requestedAt is None:
            interrupt = self.plan.interrupt
            if interrupt is None:
                return self._after_stages()
            if (why := self._out_of_scope(node)) is not None:
                return self._leave(f"{why} (before the interrupt)")
            if self.plan.cordon and not node.unschedulable:
                # S11: never interrupt a node that is not cordoned. Whoever held the cordon, it is ours
                # now (a claim), and the uncordons are bounded as during the drain
                m.recordons += 1
                if m.recordons > MAX_RECORDONS:
                    return self._fail(FailureReason.EXTERNALLY_UNCORDONED,
                                      f"node was uncordoned by someone else {m.recordons} times before its interrupt")
                claim = dump_model(CordonRecord(runId=self.ctx.run_id, at=self._stamp(), uid=node.uid))
                self._patch(annotations={cordon_key(self.recipe.name): claim}, unschedulable=True)
                m.owns_cordon = True
                self._event(EventKind.CORDON, "re-cordoned before the interrupt")
                m.phase = Phase.DRAIN
                m.evictions.clear()
                return self._now
            pkgs = interrupt_packages(self.plan.steps)
            for s in self.plan.steps:
                if s.package in pkgs and s.to:
                    self._set_entry(f"{s.package}|{s.to}", s.package, s.to, Stage.INTERRUPT,
                                    PackageStatus.IN_PROGRESS, s)
            ann: dict[str, str | None] = {
                inflight_key(self.recipe.name): self._inflight(
                    Phase.INTERRUPT,
                    interrupt=interrupt.model_dump(mode="json"),
                    interruptPackages=pkgs,
                    bootID=node.boot_id,
                    requestedAt=self._stamp(),
                    interruptOwner=self._interrupt_stage(interrupt).package,
                ),
                state_key(self.recipe.name): dump_state(m.state),
            }
            self._patch(annotations=ann)
            self._write(StartStage(self._interrupt_stage(interrupt)))
            services = f" {','.join(interrupt.services)}" if interrupt.services else ""
            self._event(EventKind.INTERRUPT, f"{interrupt.type}{services}")
            return now + self.ctx.poll_seconds
        interrupt = Interrupt.model_validate(fl.interrupt) if fl.interrupt else self.plan.interrupt
        if interrupt is None:
            m.phase = Phase.POST_INTERRUPT
            return self._now
        spec = self._interrupt_stage(interrupt)
        if interrupt.type == InterruptType.REBOOT:
            if reboot_confirmed(node, fl.bootID):
                self._event(EventKind.REBOOTED, f"bootID {fl.bootID[:8]} -> {node.boot_id[:8]}")
                return self._interrupt_done()
            st = self._stage_status(spec)
            if st.phase == "missing" and node.boot_id == fl.bootID and node.ready is True:
                # the request never reached the node (we stopped between the record and the pod, or
                # someone deleted the pod before it acted): requested again, bounded
                return self._request_again(spec, interrupt, fl)
            waited = self._elapsed(Phase.INTERRUPT, fl.requestedAt)
            if waited >= self.recipe.timeouts.reboot:
                return self._fail(FailureReason.REBOOT_TIMEOUT,
                                  f"node did not come back from the reboot within {self.recipe.timeouts.reboot} s "
                                  f"(bootID still {node.boot_id[:8] or 'unknown'}, Ready={node.ready})",
                                  keep_cordon=True, stage=Stage.INTERRUPT)
            return now + min(self.ctx.poll_seconds, self.recipe.timeouts.reboot - waited)
        st = self._stage_status(spec)
        if st.phase == "missing":
            return self._request_again(spec, interrupt, fl)
        if st.phase == "succeeded":
            return self._interrupt_done()
        if st.phase == "failed" or self._elapsed(Phase.INTERRUPT, fl.requestedAt) >= self.recipe.timeouts.stage:
            return self._fail(FailureReason.INTERRUPT_FAILED,
                              f"{interrupt.type} interrupt failed: exit {st.exit_code} {st.reason}",
                              keep_cordon=True, stage=Stage.INTERRUPT, exit_code=st.exit_code,
                              log_tail=self._stage_log(spec))
        return now + self.ctx.poll_seconds

    def _request_again(self, spec: StageSpec, interrupt: Interrupt, fl: InFlight) -> float | None:
        """The interrupt pod is gone before it acted: request the interrupt again — recorded first,
        with the time of this request (``requestedAt``: its timeout counts from now) and its number
        (timer ``interrupt@<n>``, kept across restarts) — at most ``max(1, stageRetries)`` times, so
        a request a crash kept from reaching the node is always sent once more, and a pod deleted
        by someone else each time it is made fails the node (``StagePodDeleted``) instead of being
        made again without bound (the world-moves sweep)."""
        made = 1 + sum(1 for k in fl.timers if k.startswith(INTERRUPT_AGAIN))
        bound = max(1, self.recipe.timeouts.stageRetries)
        if made > bound:
            return self._fail(FailureReason.STAGE_POD_DELETED,
                              f"the {interrupt.type} interrupt pod {spec.pod_name} was gone before it acted "
                              f"{made} times (requested again at most {bound} times)",
                              keep_cordon=True, stage=Stage.INTERRUPT)
        stamp = self._stamp()
        self._patch(annotations={inflight_key(self.recipe.name): self._inflight(
            Phase.INTERRUPT, requestedAt=stamp, timers={**fl.timers, f"{INTERRUPT_AGAIN}{made + 1}": stamp})})
        self._write(StartStage(spec))
        self._event(EventKind.INTERRUPT, f"{interrupt.type} (requested again, request {made + 1}: the last one "
                                         "never reached the node)")
        return self._now + self.ctx.poll_seconds

    def _interrupt_done(self) -> float | None:
        m = self.m
        pkgs = m.inflight.interruptPackages if m.inflight else ()
        for s in self.plan.steps:
            if s.package in pkgs and s.to and _follows_interrupt(s):
                self._set_entry(f"{s.package}|{s.to}", s.package, s.to, Stage.INTERRUPT, PackageStatus.COMPLETE, s)
        self._defer({
            inflight_key(self.recipe.name): self._inflight(Phase.POST_INTERRUPT),
            state_key(self.recipe.name): dump_state(m.state),
        })
        m.phase = Phase.POST_INTERRUPT
        return self._now

    def _phase_post_interrupt(self) -> float | None:
        m = self.m
        if not m.runs or m.runs[0].stages != [Stage.POST_INTERRUPT]:
            if m.node is None or m.inflight is None:
                self._read()
            pkgs = m.inflight.interruptPackages if m.inflight else interrupt_packages(self.plan.steps)
            steps = [s for s in self.plan.steps if s.package in pkgs and s.to and _follows_interrupt(s)]
            m.runs = []
            for s in steps:
                run = build_runs(self.recipe, m.state,
                                 [s.model_copy(update={"stages": (Stage.POST_INTERRUPT,), "after": ()})])[0]
                run.stages = [Stage.POST_INTERRUPT]
                entry = m.state.get(run.key)
                run.index, run.done, run.running, run.attempt = 0, False, False, 1
                if entry is not None and entry.stage == Stage.POST_INTERRUPT:
                    run.done = entry.state == PackageStatus.COMPLETE
                    run.running = entry.state == PackageStatus.IN_PROGRESS
                    run.attempt = entry.restarts + 1
                m.runs.append(run)
        return self._drive(self._post_done)

    def _post_done(self) -> float | None:
        return self._after_stages()


#: The in-flight record's timer of the n-th request of the interrupt (``interrupt@2`` ...).
INTERRUPT_AGAIN = "interrupt@"


def _follows_interrupt(step: Step) -> bool:
    """The step's package is one the merged interrupt completes (its own interrupt, or its
    post-interrupt stage): not a superseded step awaited only for its running stage."""
    return step.interrupt is not None or Stage.POST_INTERRUPT in step.stages

"""What a lifecycle of an older release still owes a node (pure; issue 34, "the in-flight record
is the contract").

A node's in-flight record carries the release its lifecycle committed to and, per package, the
version and stages (:class:`~reconciler.model.nodestate.CommittedStep`). When the recipe is at
another release, the lifecycle finishes what its record owes before the newer release is taken
up, at a *safe point* (docs/semantics.md, "The supersede rule"):

* before any stage ran (the record is at ``cordon``, ``wait`` or ``drain``) nothing is owed: the
  newer release is taken up at once (the cordon and the drain are checked again); so it is
  before the cordon (``pre-cordon``: packages without an interrupt run first), once the stage
  pods running then have ended (awaited, whatever their package);
* a committed step whose package the newer release left as it was (the same spec digest) is
  finished: its remaining stages, then the committed interrupt, then its ``post-interrupt`` stage;
* a committed step whose package the newer release changed (another digest; also a step that
  comes after such a package) is *superseded*: its stage running now is awaited (never deleted,
  never started again, no second pod beside it) and nothing more of it runs — the recipe no
  longer describes what it was (its config, env, image);
* the committed interrupt is owed when it was requested (it is awaited, never requested again),
  or while a kept package that has an interrupt is still to finish, or once a stage of a
  superseded package that has one ran (its change needs it): it is then requested once;
* once it is done and the post-interrupt stages of the packages kept ran, the lifecycle is at the
  second safe point; so is a record at the readiness gate or the uncordon: the newer release is
  then planned from what the node really has (:func:`reconciler.plan.nodework.node_work`).

:func:`owed_work` says what is owed; :func:`after_owed` predicts the node's records once it is
done, from which the planner shows the newer release's steps. The lifecycle carries out the
first and plans the newer release from the node itself, with the same functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from reconciler.diff import config_digest, read_state
from reconciler.model.interrupts import interrupt_from_record
from reconciler.model.nodestate import (
    CommittedStep,
    ConfigDigest,
    InFlight,
    PackageState,
    config_key,
    dump_config_digests,
    dump_state,
    failure_key,
    inflight_key,
    package_digest,
    parse_config_digests,
    parse_model,
    release_digest,
    state_key,
)
from reconciler.model.observed import NodeInfo
from reconciler.model.plan import Step
from reconciler.model.recipe import Interrupt, Recipe
from reconciler.model.vocab import Action, PackageStatus, Phase, Stage
from reconciler.plan.nodework import NodeWork, node_work

#: The config digest recorded when a superseded step's ``config`` stage completes: it ran with a
#: configuration the recipe no longer describes, so what it applied is unknown; every key then
#: reads as changed and the newer release runs ``config`` with its own.
UNKNOWN_CONFIG = ConfigDigest(configMap={}, env="unknown", resources="unknown")

#: Record phases at which no stage of the committed release ran yet.
_BEFORE_STAGES = frozenset({Phase.CORDON, Phase.WAIT, Phase.DRAIN})


@dataclass(frozen=True)
class Progress:
    """Where a step is in its stages (not ``post-interrupt``) by the node's package state:
    ``index`` of the next stage to finish (``len(stages)``: done), its ``attempt`` (1-based) and
    whether it is recorded ``running`` (in progress: its pod may exist)."""

    index: int
    attempt: int = 1
    running: bool = False


def stage_version(action: str, stage: str, to: str | None, from_: str | None) -> str:
    """The version a stage of a step works on: the installed (old) one for the ``uninstall`` of a
    downgrade, the removed one for an uninstall, else the target."""
    if action == Action.UNINSTALL or (action == Action.DOWNGRADE and stage == Stage.UNINSTALL):
        return from_ or ""
    return to or ""


def stage_progress(package: str, action: str, stages: Sequence[str], to: str | None, from_: str | None,
                   state: Mapping[str, PackageState]) -> Progress:
    """The progress of a step through ``stages`` (without ``post-interrupt``) as the node's
    package ``state`` records it: the first stage whose entry (at the version that stage works
    on) is at that stage — the next one when it is complete, itself when not; a downgrade whose
    old version is already gone is past its ``uninstall``."""
    for i, stage in enumerate(stages):
        entry = state.get(f"{package}|{stage_version(action, stage, to, from_)}")
        if entry is None or entry.stage != stage:
            continue
        done = entry.state == PackageStatus.COMPLETE
        return Progress(i + 1 if done else i, entry.restarts + 1, entry.state == PackageStatus.IN_PROGRESS)
    if action == Action.DOWNGRADE and stages and stages[0] == Stage.UNINSTALL and f"{package}|{from_}" not in state:
        return Progress(1)
    return Progress(0)


@dataclass(frozen=True)
class Owed:
    """What a lifecycle of an older release still owes (:func:`owed_work`).

    ``release``: the committed release's recipe version; ``run``: the run that last wrote the
    record. ``phase``: where it resumes (``stages``, ``interrupt``, ``post-interrupt``), or
    ``uncordon`` when nothing is owed (the newer release is taken up at once). ``steps``: the
    committed steps still to run, each with its remaining stages (``post-interrupt`` last when it
    follows the interrupt), in the committed order; a superseded step appears only while a stage
    of it runs, with that one stage and no interrupt. ``superseded``: the packages whose committed
    steps the newer release replaced. ``awaited``: the packages whose steps are only awaited
    (their running stage ends, nothing of them starts): the superseded ones, or every one before
    the cordon. ``interrupt``: the committed interrupt still owed (None when done or not owed)."""

    release: str
    run: str
    phase: Phase
    steps: tuple[Step, ...]
    superseded: tuple[str, ...]
    interrupt: Interrupt | None
    awaited: tuple[str, ...] = ()

    @property
    def nothing(self) -> bool:
        """Nothing is owed: the newer release is taken up at once."""
        return self.phase is Phase.UNCORDON


def is_superseded(recipe: Recipe, record: InFlight | None) -> bool:
    """Whether ``record`` is the commitment of another release than ``recipe``'s (a record
    written before commitments existed — no ``steps`` — is resumed from the plan: never)."""
    return record is not None and record.steps is not None and record.release != release_digest(recipe)


def superseded_packages(recipe: Recipe, steps: Sequence[CommittedStep]) -> set[str]:
    """Packages of committed ``steps`` that ``recipe`` changed (another spec digest), and those
    that come after them (they cannot finish in this commitment either)."""
    out = {s.package for s in steps if s.spec != package_digest(recipe.packages.get(s.package))}
    grew = True
    while grew:
        grew = False
        for s in steps:
            if s.package not in out and any(a in out for a in s.after):
                out.add(s.package)
                grew = True
    return out


def _step(c: CommittedStep, stages: tuple[str, ...], interrupt: Interrupt | None) -> Step:
    return Step.model_validate({"package": c.package, "action": c.action, "from": c.from_, "to": c.to,
                                "stages": stages, "interrupt": interrupt, "after": c.after,
                                "reason": "owed by the lifecycle in flight"})


def owed_work(recipe: Recipe, record: InFlight, state: Mapping[str, PackageState]) -> Owed | None:
    """What ``record`` (a commitment of another release than ``recipe``'s,
    :func:`is_superseded`) still owes the node with package ``state``; None when it is not
    superseded (the lifecycle is resumed from the plan, as for the same release)."""
    if not is_superseded(recipe, record):
        return None
    committed = record.steps or ()
    gone = superseded_packages(recipe, committed)
    interrupt = interrupt_from_record(record.interrupt) if record.interrupt else None
    phase = record.phase
    if phase is Phase.PRE_CORDON:  # nothing owed but the stage pods running now (one per package)
        gone_all = {c.package for c in committed}
        running = [_step(c, (body[p.index],), None) for c in committed
                   if (body := tuple(s for s in c.stages if s != Stage.POST_INTERRUPT))
                   and (p := stage_progress(c.package, c.action, body, c.to, c.from_, state)).running
                   and p.index < len(body)]
        if not running:
            return Owed(record.recipeVersion, record.runId, Phase.UNCORDON, (), tuple(sorted(gone)), None)
        return Owed(record.recipeVersion, record.runId, Phase.STAGES, tuple(running), tuple(sorted(gone)), None,
                    tuple(sorted(gone_all)))
    if phase in _BEFORE_STAGES or (phase not in (Phase.STAGES, Phase.INTERRUPT, Phase.POST_INTERRUPT)):
        return Owed(record.recipeVersion, record.runId, Phase.UNCORDON, (), tuple(sorted(gone)), None)
    steps: list[Step] = []
    needs_interrupt = phase is Phase.INTERRUPT  # requested: it is awaited, whatever it was for
    for c in committed:
        if phase is Phase.POST_INTERRUPT and c.package in gone and c.interrupt and c.to:
            entry = state.get(f"{c.package}|{c.to}")
            if entry is not None and entry.stage == Stage.POST_INTERRUPT and entry.state == PackageStatus.IN_PROGRESS:
                steps.append(_step(c, (Stage.POST_INTERRUPT,), None))  # awaited: it runs now
            continue
        post = c.interrupt and interrupt is not None and c.package not in gone
        body = tuple(s for s in c.stages if s != Stage.POST_INTERRUPT)
        p = stage_progress(c.package, c.action, body, c.to, c.from_, state) if phase is Phase.STAGES \
            else Progress(len(body))
        if c.interrupt and (c.package not in gone or p.index > 0 or p.running):
            needs_interrupt = True  # a kept package with an interrupt, or a superseded one whose change ran
        if c.package in gone:
            if p.running and p.index < len(body):
                steps.append(_step(c, (body[p.index],), None))  # awaited: it runs now
            continue
        rest = body[p.index:]
        if post and c.to and _post_done(state.get(f"{c.package}|{c.to}")):
            post = False
        stages = (*rest, Stage.POST_INTERRUPT) if post else rest
        if stages:
            steps.append(_step(c, stages, interrupt if post else None))
    owed_interrupt = interrupt if needs_interrupt and phase in (Phase.STAGES, Phase.INTERRUPT) else None
    if not steps and owed_interrupt is None:
        return Owed(record.recipeVersion, record.runId, Phase.UNCORDON, (), tuple(sorted(gone)), None)
    return Owed(record.recipeVersion, record.runId, phase, tuple(steps), tuple(sorted(gone)), owed_interrupt,
                tuple(sorted(gone)))


def _post_done(entry: PackageState | None) -> bool:
    return entry is not None and entry.stage == Stage.POST_INTERRUPT and entry.state == PackageStatus.COMPLETE


def after_owed(recipe: Recipe, owed: Owed, state: Mapping[str, PackageState],
               digests: Mapping[str, ConfigDigest]) -> tuple[dict[str, PackageState], dict[str, ConfigDigest]]:
    """The node's package state and config digests once ``owed`` is done, every stage
    succeeding: what the lifecycle records as it carries it out (each stage complete; an
    ``upgrade`` replaces the package's other versions, an ``uninstall`` removes its entry; a
    ``config`` stage of a kept package records the recipe's config digest, of a superseded one
    :data:`UNKNOWN_CONFIG`; the interrupt marks the packages whose post-interrupt follows it)."""
    out = dict(state)
    dig = dict(digests)
    gone = set(owed.superseded)
    for s in owed.steps:
        for stage in s.stages:
            if stage == Stage.POST_INTERRUPT:
                continue
            _complete(out, dig, recipe, s, stage, superseded=s.package in gone)
    if owed.interrupt is not None or owed.phase is Phase.POST_INTERRUPT:
        for s in owed.steps:
            if s.stages and s.stages[-1] == Stage.POST_INTERRUPT and s.to:
                _mark(out, s.package, s.to, Stage.INTERRUPT)
    for s in owed.steps:
        if s.stages and s.stages[-1] == Stage.POST_INTERRUPT and s.to:
            _mark(out, s.package, s.to, Stage.POST_INTERRUPT)
    return settle(out, owed.superseded), dig


def settle(state: Mapping[str, PackageState], superseded: Sequence[str]) -> dict[str, PackageState]:
    """The package state the newer release is planned from at the safe point: a superseded
    package left at its ``interrupt`` or ``post-interrupt`` stage (the interrupt it owed ran; its
    post-interrupt stage, of a spec the recipe no longer describes, does not) reads as
    ``config/complete`` — its configuration applied and settled — so the newer release runs from
    its own first stage (``config`` for the same version with another configuration, ``upgrade``
    for a newer one), never a post-interrupt stage whose earlier stages did not run."""
    out = dict(state)
    for key, e in state.items():
        if e.name in superseded and e.stage in (Stage.INTERRUPT, Stage.POST_INTERRUPT) and not (
                e.stage == Stage.POST_INTERRUPT and e.state == PackageStatus.COMPLETE):
            out[key] = e.model_copy(update={"stage": Stage.CONFIG, "state": PackageStatus.COMPLETE, "restarts": 0})
    return out


def _mark(state: dict[str, PackageState], package: str, version: str, stage: str) -> None:
    key = f"{package}|{version}"
    old = state.get(key)
    state[key] = PackageState(name=package, version=version, image=old.image if old else "",
                              containerSHA=old.containerSHA if old else None, stage=stage,
                              state=PackageStatus.COMPLETE)


def _complete(state: dict[str, PackageState], digests: dict[str, ConfigDigest], recipe: Recipe, s: Step,
              stage: str, *, superseded: bool) -> None:
    version = stage_version(s.action, stage, s.to, s.from_)
    if stage == Stage.UNINSTALL:
        state.pop(f"{s.package}|{version}", None)
        digests.pop(s.package, None)
        return
    _mark(state, s.package, version, stage)
    if stage == Stage.UPGRADE:
        for k in [k for k in state if k.startswith(f"{s.package}|") and k != f"{s.package}|{version}"]:
            del state[k]
    pkg = recipe.packages.get(s.package)
    if stage == Stage.CONFIG and pkg is not None and pkg.version == version:
        digests[s.package] = UNKNOWN_CONFIG if superseded else config_digest(pkg)


def release_work(recipe: Recipe, info: NodeInfo,
                 deps: Mapping[str, Sequence[str]] | None = None) -> tuple[Owed, NodeWork] | None:
    """For a node whose lifecycle in flight is of an older release (its record is of this
    machine and the node is not being retried after a failure, which starts a new lifecycle):
    what the record owes, and ``recipe``'s work planned from the node's records as they will be
    once that is done (:func:`after_owed`). None for any other node (planned as usual).

    Raises:
        NodeStateError: the package-state annotation cannot be read.
    """
    ann = info.annotations
    if failure_key(recipe.name) in ann:
        return None
    record: InFlight | None = parse_model(InFlight, ann.get(inflight_key(recipe.name)))
    if record is None or not record.of_machine(info.uid):
        return None
    state, _source, _imported = read_state(recipe.name, ann, node=info.name)
    owed = owed_work(recipe, record, state)
    if owed is None:
        return None
    state2, digests2 = after_owed(recipe, owed, state, parse_config_digests(ann.get(config_key(recipe.name))))
    after = {k: v for k, v in ann.items() if k != inflight_key(recipe.name)}
    after[state_key(recipe.name)] = dump_state(state2)
    after[config_key(recipe.name)] = dump_config_digests(digests2)
    return owed, node_work(recipe, replace(info, annotations=after), deps)

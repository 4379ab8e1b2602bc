"""Pure helpers of the lifecycle's stage phases: a step's progress through its stages
(:class:`StageRun`), resuming it from the node's package state, and the stage pod it runs
(:func:`stage_spec`). No I/O, no clock (issue 12)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from reconciler.model.nodestate import RUNTIME_REQUIRED_TAINT_KEY, CommittedStep, PackageState, package_digest
from reconciler.model.plan import Step
from reconciler.model.recipe import Interrupt, Package, Recipe, parse_duration
from reconciler.model.selector import UNSCHEDULABLE_TAINT_KEY, Toleration
from reconciler.model.vocab import Action, PackageStatus, Stage
from reconciler.plan.owed import stage_progress, stage_version
from reconciler.ports import StageSpec


@dataclass
class StageRun:
    """One step's progress through its stages on the node. A downgrade's ``uninstall`` stage works on
    the installed (old) version's entry and image; every other stage on the step's target version.
    ``started``: UTC epoch seconds of the stage pod's start; ``retry_at`` and ``launched``: monotonic
    clock times (the next attempt; when this process created the current pod). ``seen``: this
    process saw the current attempt's pod exist (then its disappearance is a deletion by someone
    else, not a pod that was never created); ``deleted_by``: who was seen deleting it
    (``StageStatus.deleting``), named when it is gone."""

    step: Step
    stages: list[str]
    new_version: str
    new_pull: str
    old_version: str = ""
    old_pull: str = ""
    index: int = 0
    attempt: int = 1
    started: float | None = None
    retry_at: float | None = None
    done: bool = False
    running: bool = False
    launched: float | None = None
    seen: bool = False
    deleted_by: str = ""

    @property
    def _on_old(self) -> bool:
        return (
            self.step.action == Action.DOWNGRADE
            and self.index < len(self.stages)
            and self.stages[self.index] == Stage.UNINSTALL
        )

    @property
    def version(self) -> str:
        """Version the current stage works on."""
        return self.old_version if self._on_old else self.new_version

    @property
    def pull_ref(self) -> str:
        """Image the current stage pulls."""
        return self.old_pull if self._on_old else self.new_pull

    @property
    def key(self) -> str:
        """Node-state key (``name|version``) the current stage writes to."""
        return f"{self.step.package}|{self.version}"

    def copy(self) -> StageRun:
        """An independent copy (the step's memory is copied, never shared)."""
        return StageRun(self.step, self.stages, self.new_version, self.new_pull, self.old_version, self.old_pull,
                        self.index, self.attempt, self.started, self.retry_at, self.done, self.running, self.launched,
                        self.seen, self.deleted_by)


def pull_of(recipe: Recipe, state: Mapping[str, PackageState], package: str, version: str) -> str:
    """The image reference a stage of ``package`` at ``version`` pulls: the recipe's (by digest when
    pinned) for its own version, else the one recorded on the node for that version."""
    pkg = recipe.packages.get(package)
    if pkg is not None and pkg.version == version:
        return pkg.pull_ref
    old = state.get(f"{package}|{version}")
    if old and old.containerSHA:
        return f"{old.image}@{old.containerSHA}"
    return f"{old.image}:{version}" if old else f"{package}:{version}"


def build_runs(recipe: Recipe, state: Mapping[str, PackageState],
               steps: tuple[Step, ...] | list[Step]) -> list[StageRun]:
    """The stage runs of ``steps``, each resumed where the node's package ``state`` says it is:
    stages recorded complete are skipped; one recorded in progress may have a pod already (looked
    at before anything is started)."""
    runs = []
    for st in steps:
        version = (st.from_ or "") if st.action == Action.UNINSTALL else (st.to or "")
        old = (st.from_ or "") if st.action == Action.DOWNGRADE else ""
        stages = [s for s in st.stages if s != Stage.POST_INTERRUPT]
        run = StageRun(step=st, stages=stages, new_version=version,
                       new_pull=pull_of(recipe, state, st.package, version),
                       old_version=old, old_pull=pull_of(recipe, state, st.package, old) if old else "")
        p = stage_progress(st.package, st.action, stages, st.to, st.from_, state)  # the planner's own reading
        run.index, run.attempt, run.running = p.index, p.attempt, p.running
        if run.index >= len(stages):
            run.done = True
        runs.append(run)
    return runs


#: The tolerations every stage pod carries first (frozen models, made once).
_BASE_TOLERATIONS = (
    Toleration(key=UNSCHEDULABLE_TAINT_KEY, operator="Exists"),
    Toleration(key=RUNTIME_REQUIRED_TAINT_KEY, operator="Exists"),
)


def tolerations(recipe: Recipe) -> tuple[Toleration, ...]:
    """Tolerations of every stage pod: the cordon's and the runtime-required taints (ours, and the
    recipe's :meth:`~reconciler.model.recipe.Recipe.required_taints`), then the recipe's
    ``additionalTolerations``."""
    required = tuple(t for t in recipe.required_taints() if t not in _BASE_TOLERATIONS)
    return _BASE_TOLERATIONS + required + tuple(recipe.additionalTolerations)


#: Memo of :func:`stage_spec`: key (recipe identity, node, package, version, stage, image,
#: lifecycle, attempt, agent image, interrupt, rerun) -> (recipe, spec). The recipe is kept beside the
#: spec so its identity is never mistaken for a later object's recycled ``id``; the interrupt (a
#: small frozen model, parsed afresh from the node's record at each step) is keyed by value.
#: Bounded: cleared when it reaches :data:`_SPEC_MEMO_MAX` entries: one per package in flight on
#: each node of the batch (1,000 packages on 3 nodes are 3,000; a bound below the working set
#: empties the memo at every look, issue 36), each about a kilobyte.
_SPEC_MEMO: dict[tuple[object, ...], tuple[Recipe, StageSpec]] = {}
_SPEC_MEMO_MAX = 16384


def stage_spec(recipe: Recipe, node: str, run: StageRun, stage: str, *, lifecycle: str,
               agent_image: str | None, interrupt: Interrupt | None = None, rerun: int = 0) -> StageSpec:
    """The stage pod for ``stage`` of ``run`` on ``node``; the package's config, env, resources and
    grace period apply only when the stage works on the recipe's own version of the package.
    ``rerun``: how many times the package was restarted in the lifecycle (``InFlight.reruns``),
    part of the pod's name.

    Memoised (issue 17: a node's lifecycle asks for the same spec at every look at its running
    stage, about a tenth of a step's CPU): the answer depends only on the arguments, and the
    recipe and interrupt models are frozen, so a spec is shared, never rebuilt."""
    version = run.version
    key = (id(recipe), node, run.step.package, version, stage, run.pull_ref, lifecycle, run.attempt,
           agent_image, interrupt, rerun)
    hit = _SPEC_MEMO.get(key)
    if hit is not None and hit[0] is recipe:
        return hit[1]
    spec = _stage_spec(recipe, node, run, stage, lifecycle=lifecycle, agent_image=agent_image, interrupt=interrupt,
                       rerun=rerun)
    if len(_SPEC_MEMO) >= _SPEC_MEMO_MAX:
        _SPEC_MEMO.clear()
    _SPEC_MEMO[key] = (recipe, spec)
    return spec


def _stage_spec(recipe: Recipe, node: str, run: StageRun, stage: str, *, lifecycle: str,
                agent_image: str | None, interrupt: Interrupt | None, rerun: int) -> StageSpec:
    pkg: Package | None = recipe.packages.get(run.step.package)
    same = pkg is not None and pkg.version == run.version
    grace = None
    if same and pkg is not None and pkg.gracefulShutdown:
        grace = int(parse_duration(pkg.gracefulShutdown))
    return StageSpec(
        recipe=recipe.name,
        node=node,
        package=run.step.package,
        version=run.version,
        stage=stage,
        pull_ref=run.pull_ref,
        run_id=lifecycle,
        attempt=run.attempt,
        config_map=dict(pkg.configMap) if same and pkg is not None else {},
        env=pkg.env if same and pkg is not None else (),
        resources=pkg.resources if same and pkg is not None else None,
        grace_seconds=grace,
        interrupt=interrupt,
        tolerations=tolerations(recipe),
        agent_image=(pkg.agentImageOverride if same and pkg is not None else None) or agent_image,
        timeout_seconds=recipe.timeouts.stage,
        rerun=rerun,
    )


def owner_step(steps: tuple[Step, ...], interrupt: Interrupt) -> Step | None:
    """The step whose package runs the merged interrupt: one declaring that interrupt type, else
    one declaring any, else any step (first by package name)."""
    holders = [s for s in steps if s.interrupt is not None and s.interrupt.type == interrupt.type]
    pool = holders or [s for s in steps if s.interrupt is not None] or list(steps)
    return sorted(pool, key=lambda s: s.package)[0] if pool else None


def interrupt_packages(steps: tuple[Step, ...]) -> tuple[str, ...]:
    """Packages whose steps declare an interrupt (sorted)."""
    return tuple(sorted(s.package for s in steps if s.interrupt is not None))


def interrupt_spec(recipe: Recipe, node: str, steps: tuple[Step, ...], interrupt: Interrupt, *, lifecycle: str,
                   agent_image: str | None, owner_package: str = "", owner_version: str = "",
                   state: Mapping[str, PackageState] | None = None) -> StageSpec:
    """The stage pod that performs the merged ``interrupt``. ``owner_package``: the package recorded
    with the commitment (``InFlight.interruptOwner``); otherwise :func:`owner_step`.
    ``owner_version``: the version that package committed to (``InFlight.steps``; default: the
    recipe's), its image then the recorded one when the recipe is at another version (``state``)."""
    owner = owner_step(steps, interrupt)
    if owner_package and (owner is None or owner.package != owner_package):
        owner = next((s for s in steps if s.package == owner_package), None) or Step(
            package=owner_package, action=Action.RECONFIGURE, stages=(), reason="interrupt")
    pkg = recipe.packages.get(owner.package) if owner else None
    version = owner_version or (pkg.version if pkg else "")
    fake = StageRun(
        step=owner or Step(package="node", action=Action.RECONFIGURE, stages=(), reason="interrupt"),
        stages=[Stage.INTERRUPT],
        new_version=version,
        new_pull=pull_of(recipe, state or {}, owner.package, version) if owner and version else "",
    )
    return stage_spec(recipe, node, fake, Stage.INTERRUPT, lifecycle=lifecycle, agent_image=agent_image,
                      interrupt=interrupt)


def commitment(recipe: Recipe, steps: tuple[Step, ...] | list[Step]) -> tuple[CommittedStep, ...]:
    """What a lifecycle commits to for ``steps`` of ``recipe`` (``InFlight.steps``): per step the
    package, action, versions, stages, whether it has its own interrupt, its dependencies and the
    digest of the recipe's package (:func:`~reconciler.model.nodestate.package_digest`)."""
    return tuple(
        CommittedStep.model_validate({
            "package": s.package, "action": str(s.action), "from": s.from_, "to": s.to, "stages": s.stages,
            "interrupt": s.interrupt is not None, "after": s.after,
            "spec": package_digest(recipe.packages.get(s.package)),
        })
        for s in steps)


def commit_state(state: Mapping[str, PackageState], steps: tuple[Step, ...] | list[Step]) -> dict[str, PackageState]:
    """The package state a new commitment of ``steps`` starts from. The steps were planned from
    ``state``: each lists the stages still to run, so an entry that reads as progress through
    them predates the commitment — a configuration changed on a package recorded at
    ``config/complete`` plans ``config`` again — and is rewritten to the step's first stage in
    progress (NodeWright sets a changed package's entry to ``config/in_progress``), in the
    commitment's own write, so ``apply`` runs every stage ``plan`` showed."""
    out = dict(state)
    for s in steps:
        body = [x for x in s.stages if x != Stage.POST_INTERRUPT]
        if not body or stage_progress(s.package, s.action, body, s.to, s.from_, out).index == 0:
            continue
        key = f"{s.package}|{stage_version(s.action, body[0], s.to, s.from_)}"
        old = out.get(key)
        if old is not None:
            out[key] = old.model_copy(update={"stage": Stage(body[0]), "state": PackageStatus.IN_PROGRESS,
                                              "restarts": 0})
    return out

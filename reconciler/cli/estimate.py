"""Duration estimates from the simulator ``reconciler simulate`` uses, for ``plan`` (the PR
comment, ``plan --repo``, ``--report``).

A plan is estimated by applying it to a simulated copy of the observed fleet
(:class:`reconciler.adapters.sim.fleet.SimFleet` on its simulated clock, the same
:class:`reconciler.execute.rollout.Rollout` as ``apply``): batches, waits for protected pods,
evictions, PodDisruptionBudgets and reboots all count, so the figure is the simulator's, not a
sum of constants. What the simulator assumes, most specific first:

1. ``--stage-time DURATION`` / ``--reboot-time DURATION`` (Go durations: ``45s``, ``8m``);
2. the recipe's annotations :data:`~reconciler.report.estimate.STAGE_ANNOTATION` /
   :data:`~reconciler.report.estimate.REBOOT_ANNOTATION` (``metadata.annotations``);
3. ``--sim-config FILE`` (``stageSeconds``, ``rebootSeconds``; also pod start, reschedule, …);
4. the simulator's defaults (:class:`reconciler.adapters.sim.config.SimConfig`).

The :class:`~reconciler.report.estimate.Assumptions` of every estimate say which applied.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from reconciler.load.recipes import MAX_ESTIMATE_SECONDS, estimate_annotation, estimate_seconds
from reconciler.model.observed import ObservedFleet
from reconciler.model.plan import Plan
from reconciler.model.policy import DeploymentPolicy
from reconciler.model.recipe import Recipe
from reconciler.model.run import RunResult
from reconciler.report.estimate import REBOOT_ANNOTATION, STAGE_ANNOTATION, Assumptions, Estimate, estimate_from_run

#: Longest stage or reboot time accepted by the flags and annotations (one week).
MAX_ASSUMED = MAX_ESTIMATE_SECONDS


def _duration_arg(flag: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            return estimate_seconds(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return parse


def add_estimate_args(p: argparse.ArgumentParser) -> None:
    """``--stage-time`` and ``--reboot-time`` (assumptions of the simulated estimate)."""
    g = p.add_argument_group("duration estimate (simulated)")
    g.add_argument("--stage-time", type=_duration_arg("--stage-time"), default=None, metavar="DURATION",
                   help=f"time one stage takes, e.g. 45s (default: annotation {STAGE_ANNOTATION}, "
                        "--sim-config, or the simulator's 30s)")
    g.add_argument("--reboot-time", type=_duration_arg("--reboot-time"), default=None, metavar="DURATION",
                   help=f"time a reboot takes until Ready, e.g. 8m (default: annotation {REBOOT_ANNOTATION}, "
                        "--sim-config, or the simulator's 2m)")


def _annotation(inputs: Any, recipe: Recipe, key: str) -> float | None:
    """The Go duration of annotation ``key`` on ``recipe``'s document, in seconds
    (:func:`reconciler.load.recipes.estimate_annotation`; a recipe from
    :func:`reconciler.load.load_inputs` has had it checked at load already).

    Raises:
        InputError: not a duration (positioned at the annotation).
    """
    doc = inputs.recipe_docs.get(recipe.name) if inputs is not None else None
    return None if doc is None else estimate_annotation(doc, key)


def assumptions(recipe: Recipe, inputs: Any, args: argparse.Namespace, config: Any) -> tuple[Any, Assumptions]:
    """The simulator config for ``recipe`` and the :class:`Assumptions` it stands for
    (precedence in the module docstring). ``config``: the ``--sim-config`` SimConfig or None.

    Raises:
        InputError: a malformed annotation.
    """
    from reconciler.adapters.sim.config import SimConfig

    base = config if config is not None else SimConfig()
    base_source = f"--sim-config {args.sim_config}" if config is not None else "simulator defaults"
    stage_flag, reboot_flag = getattr(args, "stage_time", None), getattr(args, "reboot_time", None)
    stage_note = _annotation(inputs, recipe, STAGE_ANNOTATION)
    reboot_note = _annotation(inputs, recipe, REBOOT_ANNOTATION)
    sources: list[str] = []
    update: dict[str, Any] = {}
    for label, flag, note, fld in (("stage", stage_flag, stage_note, "stageSeconds"),
                                   ("reboot", reboot_flag, reboot_note, "rebootSeconds")):
        if flag is not None:
            update[fld] = float(flag)
            sources.append(f"{label}: --{label}-time")
        elif note is not None:
            update[fld] = float(note)
            sources.append(f"{label}: recipe annotation")
        else:
            sources.append(f"{label}: {base_source}")
    cfg = base.model_copy(update=update)
    plain = {x.split(": ", 1)[1] for x in sources}
    if len(plain) == 1:
        sources = [plain.pop()]
    if recipe.readinessGate is not None:
        sources.append("readiness gate: " + ("--sim-config validator" if cfg.validator is not None
                                             else "assumed to pass at once"))
    stage = cfg.stage_duration("apply")
    return cfg, Assumptions(stage, float(cfg.rebootSeconds), "; ".join(sources))


def simulate_recipes(steps: Sequence[tuple[Recipe, DeploymentPolicy]], fleet: ObservedFleet, config: Any = None,
                     only: Any = None, retry_failed: bool = False) -> list[tuple[Plan, RunResult]]:
    """Apply each ``(recipe, policy)`` of ``steps``, in order, to one simulated copy of ``fleet``
    (nothing else is touched; a later recipe sees what the earlier ones did), as ``reconciler
    simulate`` does: each plan is computed against the copy as it is then, with the simulated
    durations of ``config`` (default :class:`~reconciler.adapters.sim.config.SimConfig`) adjusted
    for the recipe (:meth:`~reconciler.adapters.sim.config.SimConfig.for_estimate`: a readiness gate
    passes at once). ``only``: the ``-l/--selector``; ``retry_failed``: ``--retry-failed``. Returns each
    recipe's plan and run.

    Raises:
        ReconcilerError: the simulated rollout could not run.
    """
    from reconciler.adapters.sim.config import SimConfig
    from reconciler.adapters.sim.fleet import SimFleet
    from reconciler.adapters.sim.fromobserved import objects_from_observed
    from reconciler.execute.rollout import Rollout
    from reconciler.observe.snapshot import observe
    from reconciler.plan.planner import compute_plan

    base = config or SimConfig()
    sim = SimFleet(objects_from_observed(fleet), base)
    out = []
    for recipe, policy in steps:
        sim.config = base.for_estimate(recipe)
        plan = compute_plan(recipe, policy, observe(sim), only=only, retry_failed=retry_failed)
        out.append((plan, Rollout(recipe, policy, plan, sim, sim, retry_failed=retry_failed).run()))
    return out


def simulate_plan(recipe: Recipe, policy: DeploymentPolicy, fleet: ObservedFleet, config: Any,
                  only: Any = None, retry_failed: bool = False) -> RunResult:
    """Apply ``recipe`` alone to a simulated copy of ``fleet`` (:func:`simulate_recipes` of one)."""
    return simulate_recipes([(recipe, policy)], fleet, config, only, retry_failed)[0][1]


def simulator(
    fleet: ObservedFleet, args: argparse.Namespace, *inputs: Any, keep: dict[str, Any] | None = None
) -> Callable[[Recipe, DeploymentPolicy, Plan], Estimate]:
    """An :data:`reconciler.report.compare.Estimator` simulating against ``fleet``; the recipe's
    annotations are looked up in the first of ``inputs`` that holds a recipe of that name.
    ``keep``: receives ``planHash → (RunResult, Assumptions)`` of every simulated plan (for
    ``--report``).

    Raises:
        InputError: the ``--sim-config`` file or an annotation is malformed (when called).
    """
    from reconciler.cli.clusters import load_sim_config

    cfg_path = getattr(args, "sim_config", None)
    config = load_sim_config(cfg_path) if cfg_path else None

    def estimate(recipe: Recipe, policy: DeploymentPolicy, plan: Plan) -> Estimate:
        owner = next((i for i in inputs if any(r is recipe for r in i.recipes)), None)
        if owner is None:
            owner = next((i for i in inputs if any(r.name == recipe.name for r in i.recipes)), None)
        cfg, assumed = assumptions(recipe, owner, args, config)
        run = simulate_plan(recipe, policy, fleet, cfg)
        if keep is not None:
            keep[plan.planHash] = (run, assumed)
        return estimate_from_run(run, assumed)

    return estimate

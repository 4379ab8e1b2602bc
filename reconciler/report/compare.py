"""What a change between two revisions of the recipes does to the fleet (pure).

``reconciler plan --repo PATH --base REV --head REV`` loads the recipes and policies at both
revisions (from git objects, :mod:`reconciler.adapters.git.repo`), observes the fleet once and hands
both :class:`~reconciler.load.Inputs` to :func:`compare_revisions`, which:

* selects the recipes the change touches (:func:`affected_recipes`): a recipe file or its
  policy's file changed, or the recipe/policy differs as loaded (e.g. an AICR manifest changed);
* plans each of them at both revisions against the **same** observed fleet
  (:func:`~reconciler.plan.planner.compute_plan`); a recipe only in head is planned against
  nothing at base; a recipe deleted in head becomes an *uninstall plan*
  (:func:`uninstall_recipe`: every package of it is uninstalled on the nodes that have it);
* describes the difference (:class:`RecipeChange`): packages added/removed/altered in the
  recipe, nodes whose planned work appears, disappears or changes (steps, interrupt, batch),
  and base → head totals (nodes changing, actions, reboots, batches, estimated duration).

The base plan is "what the fleet still needs to reach the base recipe" (empty when the fleet
has converged on it); the head plan is what merging the change would make the reconciler do.
Nothing here reads files, the clock or the network.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from reconciler.load import Inputs, policy_for
from reconciler.model.observed import ObservedFleet
from reconciler.model.plan import ACTIONS, NodePlan, Plan
from reconciler.model.policy import DeploymentPolicy
from reconciler.model.recipe import Recipe, Uninstall
from reconciler.plan.interrupts import describe
from reconciler.plan.planner import compute_plan
from reconciler.report.estimate import Estimate, human_duration, name_ranges, run_length
from reconciler.report.render import step_text
from reconciler.report.safetext import visible

#: Simulates a plan (recipe, its policy, the plan) and returns the estimate; the CLI passes
#: :func:`reconciler.cli.estimate.simulator` (``report`` cannot run the simulator itself).
Estimator = Callable[[Recipe, DeploymentPolicy, Plan], Estimate]

RecipeChangeKind = Literal["added", "removed", "modified", "unchanged"]
NodeChangeKind = Literal["added", "removed", "altered"]
PackageChangeKind = Literal["added", "removed", "version", "digest", "config", "interrupt", "other"]


# --------------------------------------------------------------------------------------------
# duration estimate


@dataclass(frozen=True)
class Durations:
    """Assumed times (seconds) of the rough, constant-based estimate used only when no
    simulator is given (:data:`Estimator`): one stage (each followed by its check), a cordon +
    drain, a reboot (until the node is Ready again), any other interrupt."""

    stage: float = 60.0
    drain: float = 120.0
    reboot: float = 600.0
    other_interrupt: float = 60.0


def node_seconds(node: NodePlan, d: Durations = Durations()) -> float:
    """Estimated seconds one node's plan takes: stages + drain (when cordoned) + interrupt."""
    t = d.stage * sum(len(s.stages) for s in node.steps)
    if node.cordon:
        t += d.drain
    if node.interrupt is not None:
        t += d.reboot if node.interrupt.type == "reboot" else d.other_interrupt
    return t


def estimate_seconds(plan: Plan | None, d: Durations = Durations()) -> float:
    """Estimated wall-clock seconds of a plan: batches of a compartment run one after another
    (a batch lasts as long as its slowest node), compartments run side by side."""
    if plan is None:
        return 0.0
    by_name = {n.name: n for n in plan.nodes}
    worst = 0.0
    for c in plan.compartments:
        total = sum(max((node_seconds(by_name[n], d) for n in b if n in by_name), default=0.0) for b in c.batches)
        worst = max(worst, total)
    return worst


# --------------------------------------------------------------------------------------------
# model


@dataclass(frozen=True)
class PackageDelta:
    """A package that differs between the base and head recipe: ``change`` added / removed /
    version / config / interrupt / other; ``from_``/``to`` versions (None when absent)."""

    name: str
    change: PackageChangeKind
    from_: str | None
    to: str | None
    detail: str = ""
    #: every package field that differs (``version``, ``containerSHA``, ``configMap``, …)
    fields: tuple[str, ...] = ()
    #: image digests (``containerSHA``) at base and head, when they differ
    digest_from: str | None = None
    digest_to: str | None = None

    @property
    def digest_changed(self) -> bool:
        """True when the pinned image digest differs between base and head."""
        return "containerSHA" in self.fields


@dataclass(frozen=True)
class NodeDelta:
    """A node whose planned work differs: ``added`` (work only in head), ``removed`` (work only
    in base), ``altered`` (both, but steps, interrupt, cordon or batch differ). Steps are in
    words (:func:`reconciler.report.render.step_text`)."""

    name: str
    change: NodeChangeKind
    compartment: str
    base_steps: tuple[str, ...] = ()
    head_steps: tuple[str, ...] = ()
    base_interrupt: str = "none"
    head_interrupt: str = "none"
    base_batch: int = 0
    head_batch: int = 0


@dataclass(frozen=True)
class Totals:
    """Plan totals compared base → head."""

    nodes: int = 0
    nodes_changing: int = 0
    actions: Mapping[str, int] = field(default_factory=dict)
    reboots: int = 0
    interrupts: int = 0
    cordons: int = 0
    evictions: int = 0
    batches: int = 0
    batch_sizes: tuple[str, ...] = ()
    seconds: float = 0.0

    @staticmethod
    def of(plan: Plan | None, d: Durations = Durations(), estimate: Estimate | None = None) -> Totals:
        """Totals of ``plan`` (all zero for None); ``seconds`` from ``estimate`` when given (the
        simulator's), else the rough constant-based :func:`estimate_seconds`."""
        if plan is None:
            return Totals()
        s = plan.summary
        return Totals(
            nodes=s.nodes,
            nodes_changing=s.nodesChanging,
            actions={a: getattr(s.actions, a) for a in ACTIONS},
            reboots=s.interrupts.reboot,
            interrupts=sum(n for _, n in s.interrupts),
            cordons=sum(1 for n in plan.nodes if n.cordon),
            evictions=sum(len(n.evict) - len(n.finished) for n in plan.nodes),  # finished pods: removed
            batches=s.batches,
            batch_sizes=tuple(
                f"{c.name}: {run_length(len(b) for b in c.batches) or 'none'}" for c in plan.compartments
            ),
            seconds=estimate.seconds if estimate is not None else estimate_seconds(plan, d),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "nodes": self.nodes,
            "nodesChanging": self.nodes_changing,
            "actions": dict(self.actions),
            "reboots": self.reboots,
            "interrupts": self.interrupts,
            "cordons": self.cordons,
            "evictions": self.evictions,
            "batches": self.batches,
            "batchSizes": list(self.batch_sizes),
            "estimatedSeconds": round(self.seconds),
        }


@dataclass(frozen=True)
class Risk:
    """Something a reviewer must see before merging: ``kind`` protected-pods / pdb-zero /
    drain-blocked / uninstall / downgrade / warning, and a one-line ``message``."""

    kind: str
    message: str


@dataclass(frozen=True)
class RecipeChange:
    """One recipe touched by the change, planned at both revisions.

    ``head_plan`` is what the head revision makes the reconciler do (the uninstall plan for a
    removed recipe); ``base_plan`` the same for the base revision (None for an added recipe).
    ``files`` are the changed repository paths that concern this recipe.
    """

    name: str
    change: RecipeChangeKind
    base_version: str
    head_version: str
    base_plan: Plan | None
    head_plan: Plan
    files: tuple[str, ...]
    packages: tuple[PackageDelta, ...]
    nodes: tuple[NodeDelta, ...]
    base: Totals
    head: Totals
    risks: tuple[Risk, ...]
    #: recipe fields (outside ``packages``) and policy fields that differ, as dotted names
    fields: tuple[str, ...] = ()
    #: risks of the base plan that the head plan no longer has
    removed_risks: tuple[Risk, ...] = ()
    #: the simulator's estimates (None without an :data:`Estimator`, or with no plan)
    base_estimate: Estimate | None = None
    head_estimate: Estimate | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (plans as their JSON contract)."""
        return {
            "recipe": self.name,
            "change": self.change,
            "baseVersion": self.base_version,
            "headVersion": self.head_version,
            "files": list(self.files),
            "packages": [
                {"name": p.name, "change": p.change, "from": p.from_, "to": p.to, "detail": p.detail,
                 "fields": list(p.fields), "digestFrom": p.digest_from, "digestTo": p.digest_to}
                for p in self.packages
            ],
            "fields": list(self.fields),
            "removedRisks": [{"kind": r.kind, "message": r.message} for r in self.removed_risks],
            "baseEstimate": self.base_estimate.to_dict() if self.base_estimate else None,
            "headEstimate": self.head_estimate.to_dict() if self.head_estimate else None,
            "nodes": [
                {
                    "name": n.name,
                    "change": n.change,
                    "compartment": n.compartment,
                    "baseSteps": list(n.base_steps),
                    "headSteps": list(n.head_steps),
                    "baseInterrupt": n.base_interrupt,
                    "headInterrupt": n.head_interrupt,
                    "baseBatch": n.base_batch,
                    "headBatch": n.head_batch,
                }
                for n in self.nodes
            ],
            "base": self.base.to_dict(),
            "head": self.head.to_dict(),
            "risks": [{"kind": r.kind, "message": r.message} for r in self.risks],
            "basePlan": self.base_plan.to_dict() if self.base_plan else None,
            "headPlan": self.head_plan.to_dict(),
        }


@dataclass(frozen=True)
class Comparison:
    """The whole comparison: revisions (full SHAs), every changed path, and the recipes touched
    (sorted by name)."""

    base_revision: str
    head_revision: str
    changed_files: tuple[str, ...]
    recipes: tuple[RecipeChange, ...]
    #: the revision ``--base`` named (full SHA); ``base_revision`` is the merge base of it and
    #: head, the commit a pull request is compared from ("" when the caller compared as given)
    requested_base: str = ""
    warnings: tuple[str, ...] = ()

    @property
    def from_merge_base(self) -> bool:
        """True when the base side is the merge base of the requested base and head."""
        return bool(self.requested_base)

    def to_dict(self) -> dict[str, Any]:
        """JSON form. ``baseRevision`` is the commit compared from; with a merge base,
        ``requestedBaseRevision`` is what ``--base`` named and ``comparedFrom`` is
        ``"merge-base"`` (else ``"base"``)."""
        doc: dict[str, Any] = {
            "baseRevision": self.base_revision,
            "headRevision": self.head_revision,
            "changedFiles": list(self.changed_files),
            "recipes": [r.to_dict() for r in self.recipes],
        }
        if self.requested_base:
            doc["requestedBaseRevision"] = self.requested_base
            doc["comparedFrom"] = "merge-base"
        if self.warnings:
            doc["warnings"] = list(self.warnings)
        return doc

    def base_note(self) -> str:
        """One sentence saying what the base side is ("" without a merge base)."""
        if not self.requested_base:
            return ""
        if self.requested_base == self.base_revision:
            return f"compared from the merge base {self.base_revision[:12]} (the base itself, an ancestor of head)"
        return (f"compared from the merge base {self.base_revision[:12]} of base {self.requested_base[:12]} and head "
                f"{self.head_revision[:12]}, as a pull request is: later changes on base are not shown")

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, two-space indent, trailing newline)."""
        return json.dumps(self.to_dict(), sort_keys=True, indent=2) + "\n"

    @property
    def pending(self) -> bool:
        """True when any touched recipe's head plan has work."""
        return any(r.head.nodes_changing for r in self.recipes)


# --------------------------------------------------------------------------------------------
# logic


def uninstall_recipe(recipe: Recipe) -> Recipe:
    """``recipe`` with every package marked ``uninstall: {enabled: true, apply: true}``: planned
    against a fleet, each package is uninstalled on the nodes that have it (and nothing happens
    on the others). Used for a recipe deleted in the head revision."""
    gone = Uninstall(enabled=True, apply=True)
    packages = {name: p.model_copy(update={"uninstall": gone}) for name, p in recipe.packages.items()}
    return recipe.model_copy(update={"packages": packages})


def _dump(model: Recipe | DeploymentPolicy | None) -> Any:
    return None if model is None else model.model_dump(mode="json", exclude={"source"})


def _policy(recipe: Recipe | None, inputs: Inputs) -> DeploymentPolicy | None:
    if recipe is None:
        return None
    return policy_for(recipe, inputs)


def _recipe(inputs: Inputs, name: str) -> Recipe | None:
    try:
        return inputs.recipe(name)
    except KeyError:
        return None


def affected_recipes(
    base: Inputs, head: Inputs, changed: Iterable[str], rel: Callable[[str], str] = lambda p: p
) -> dict[str, tuple[str, ...]]:
    """Recipes the change touches → the changed paths that concern each (sorted by name).

    A recipe is touched when it exists on one side only, when the file it (or its policy) was
    read from is among ``changed`` on either side, or when the recipe or its policy differs as
    loaded. ``rel`` maps a loaded ``source`` path to its repository path.

    Raises:
        InputError: a recipe names a policy that is not defined at that revision.
    """
    changed_set = set(changed)
    out: dict[str, tuple[str, ...]] = {}
    for name in sorted({r.name for r in base.recipes} | {r.name for r in head.recipes}):
        b, h = _recipe(base, name), _recipe(head, name)
        bp, hp = _policy(b, base), _policy(h, head)
        sources = {rel(x.source) for x in (b, h, bp, hp) if x is not None and x.source}
        hits = tuple(sorted(sources & changed_set))
        if b is None or h is None or hits or _dump(b) != _dump(h) or _dump(bp) != _dump(hp):
            out[name] = hits or tuple(sorted(sources))
    return out


def _changed_fields(a: Any, b: Any, prefix: str = "") -> list[str]:
    """Dotted names of the fields that differ between two JSON-shaped values (mappings are
    compared key by key two levels deep; anything else as a whole)."""
    if isinstance(a, dict) and isinstance(b, dict) and prefix.count(".") < 2:
        out: list[str] = []
        for k in sorted(set(a) | set(b), key=str):
            out += _changed_fields(a.get(k), b.get(k), f"{prefix}{k}.")
        return out
    return [] if a == b else [prefix.rstrip(".")]


def _package_deltas(base: Recipe | None, head: Recipe | None) -> list[PackageDelta]:
    bp = base.packages if base else {}
    hp = head.packages if head is not None else {}
    out: list[PackageDelta] = []
    for name in sorted(set(bp) | set(hp)):
        b, h = bp.get(name), hp.get(name)
        if b is None and h is not None:
            out.append(PackageDelta(name, "added", None, h.version, f"interrupt {describe(h.interrupt)}",
                                    digest_to=h.containerSHA))
        elif h is None and b is not None:
            out.append(PackageDelta(name, "removed", b.version, None, "uninstalled where present",
                                    digest_from=b.containerSHA))
        elif b is not None and h is not None and b != h:
            fields = tuple(sorted(k for k in type(b).model_fields if getattr(b, k) != getattr(h, k)))
            digests = (b.containerSHA, h.containerSHA) if "containerSHA" in fields else (None, None)
            notes: list[str] = []
            if "configMap" in fields:
                keys = sorted(
                    k for k in set(b.configMap) | set(h.configMap) if b.configMap.get(k) != h.configMap.get(k)
                )
                notes.append("configMap keys: " + ", ".join(keys))
            if "interrupt" in fields:
                notes.append(f"interrupt {describe(b.interrupt)} → {describe(h.interrupt)}")
            rest = [f for f in fields if f not in ("version", "containerSHA", "configMap", "interrupt")]
            if rest:
                notes.append("changed: " + ", ".join(rest))
            kind: PackageChangeKind
            if b.version != h.version:
                kind = "version"
            elif "configMap" in fields:
                kind = "config"
            elif "interrupt" in fields:
                kind = "interrupt"
            elif fields == ("containerSHA",):
                kind = "digest"
            else:
                kind = "other"
            out.append(PackageDelta(name, kind, b.version, h.version, "; ".join(notes), fields, *digests))
    return out


def _node_deltas(base: Plan | None, head: Plan) -> list[NodeDelta]:
    bn = {n.name: n for n in (base.nodes if base else ()) if n.has_work}
    hn = {n.name: n for n in head.nodes if n.has_work}
    out: list[NodeDelta] = []
    for name in sorted(set(bn) | set(hn)):
        b, h = bn.get(name), hn.get(name)
        bs = tuple(step_text(s) for s in b.steps) if b else ()
        hs = tuple(step_text(s) for s in h.steps) if h else ()
        bi = describe(b.interrupt) if b else "none"
        hi = describe(h.interrupt) if h else "none"
        comp = (h or b).compartment  # type: ignore[union-attr]
        if b is None:
            kind: NodeChangeKind = "added"
        elif h is None:
            kind = "removed"
        elif (bs, bi, b.cordon, b.batch, b.untaint) != (hs, hi, h.cordon, h.batch, h.untaint):
            kind = "altered"
        else:
            continue
        out.append(NodeDelta(name, kind, comp, bs, hs, bi, hi, b.batch if b else 0, h.batch if h else 0))
    return out


def group_nodes(nodes: Iterable[NodeDelta]) -> list[tuple[list[NodeDelta], NodeDelta]]:
    """Node deltas with identical work (change, steps and interrupt at both revisions) grouped,
    largest group first; each group with a representative."""
    groups: dict[tuple[object, ...], list[NodeDelta]] = {}
    for n in nodes:
        key = (n.change, n.base_steps, n.head_steps, n.base_interrupt, n.head_interrupt)
        groups.setdefault(key, []).append(n)
    out = [(g, g[0]) for g in groups.values()]
    out.sort(key=lambda x: (-len(x[0]), x[1].name))
    return out


def plan_risks(plan: Plan, *, removed: bool = False) -> list[Risk]:
    """What a reviewer must see first: protected pods waited on, PDBs allowing no disruption,
    drains that would refuse, downgrades, uninstalls of a removed recipe, and the planner's
    other warnings."""
    risks: list[Risk] = []
    waits = [n for n in plan.nodes if n.waitFor]
    if waits:
        pods = sorted({p for n in waits for p in n.waitFor})
        risks.append(
            Risk(
                "protected-pods",
                f"{len(waits)} node(s) wait for {len(pods)} protected pod(s) before draining: "
                + ", ".join(pods[:5])
                + (f" and {len(pods) - 5} more" if len(pods) > 5 else ""),
            )
        )
    zero: dict[str, list[str]] = {}
    for n in plan.nodes:
        for pdb, allowed in n.pdbs.items():
            if allowed <= 0:
                zero.setdefault(pdb, []).append(n.name)
    for pdb, nodes in sorted(zero.items()):
        risks.append(
            Risk(
                "pdb-zero",
                f"PodDisruptionBudget {pdb} allows 0 disruptions: draining {', '.join(nodes[:5])}"
                + (f" and {len(nodes) - 5} more" if len(nodes) > 5 else "")
                + " waits until it allows one",
            )
        )
    blocked = [n for n in plan.nodes if n.drainBlockers]
    if blocked:
        risks.append(
            Risk(
                "drain-blocked",
                f"{len(blocked)} node(s) cannot be drained as configured: "
                + "; ".join(f"{n.name}: {n.drainBlockers[0]}" for n in blocked[:3]),
            )
        )
    downs = sorted({s.package for n in plan.nodes for s in n.steps if s.action == "downgrade"})
    if downs:
        risks.append(Risk("downgrade", f"downgrade of {', '.join(downs)} (uninstall, then install the older version)"))
    if removed:
        n_un = sum(1 for n in plan.nodes if any(s.action == "uninstall" for s in n.steps))
        risks.append(Risk("uninstall", f"recipe removed: its packages are uninstalled from {n_un} node(s)"))
    # per-node planner warnings already summed up above, and the rest grouped by their text
    covered = ("allows 0 disruptions", "waits for protected pods", "drain would be refused")
    grouped: dict[str, list[str]] = {}
    for w in plan.warnings:
        if any(c in w for c in covered):
            continue
        m = re.fullmatch(r"node (\S+?)(:? .*)", w, flags=re.S)
        key, who = (m.group(2), m.group(1)) if m else (w, "")
        grouped.setdefault(key, []).append(who)
    for key, who in grouped.items():
        names = [n for n in who if n]
        if len(names) > 1:
            risks.append(Risk("warning", f"{len(names)} nodes ({name_ranges(names, 120)}){key}"))
        else:
            risks.append(Risk("warning", f"node {names[0]}{key}" if names else key))
    return risks


#: Recipe attributes not reported as changed fields (packages have their own rows; the
#: recipe version is in the verdict line; origin is the input kind)
_NOT_FIELDS = ("packages", "name", "version", "origin")


def compare_recipe(
    name: str,
    base_inputs: Inputs,
    head_inputs: Inputs,
    fleet: ObservedFleet,
    *,
    base_revision: str = "",
    head_revision: str = "",
    files: tuple[str, ...] = (),
    durations: Durations = Durations(),
    estimator: Estimator | None = None,
) -> RecipeChange:
    """Plan recipe ``name`` at both revisions against ``fleet`` and describe the difference.

    With ``estimator`` (the simulator, :data:`Estimator`) every plan with work is simulated and
    the totals' ``seconds`` are the simulated makespan; without, the rough constant-based
    :func:`estimate_seconds` (``durations``).

    Raises:
        KeyError: the recipe exists at neither revision.
        InputError: its policy is not defined at a revision.
    """
    b, h = _recipe(base_inputs, name), _recipe(head_inputs, name)
    if b is None and h is None:
        raise KeyError(name)
    base_plan = compute_plan(b, policy_for(b, base_inputs), fleet, revision=base_revision) if b else None
    if h is not None:
        head_plan = compute_plan(h, policy_for(h, head_inputs), fleet, revision=head_revision)
        kind: RecipeChangeKind = "added" if b is None else ("modified" if _dump(b) != _dump(h) else "unchanged")
        if (
            kind == "unchanged"
            and b is not None
            and _dump(policy_for(b, base_inputs)) != _dump(policy_for(h, head_inputs))
        ):
            kind = "modified"
    else:
        assert b is not None
        head_plan = compute_plan(uninstall_recipe(b), policy_for(b, base_inputs), fleet, revision=head_revision)
        kind = "removed"
    base_est = head_est = None
    if estimator is not None:
        if b is not None and base_plan is not None and base_plan.summary.nodesChanging:
            base_est = estimator(b, policy_for(b, base_inputs), base_plan)
        if head_plan.summary.nodesChanging:
            run_recipe = h if h is not None else uninstall_recipe(b)  # type: ignore[arg-type]
            run_policy = policy_for(h, head_inputs) if h is not None else policy_for(b, base_inputs)  # type: ignore[arg-type]
            head_est = estimator(run_recipe, run_policy, head_plan)
    base_risks = plan_risks(base_plan) if base_plan is not None else []
    head_risks = plan_risks(head_plan, removed=kind == "removed")
    still = {(r.kind, r.message) for r in head_risks}
    recipe_fields = [f"spec.{f}" for f in _changed_fields(
        {k: v for k, v in (_dump(b) or {}).items() if k not in _NOT_FIELDS},
        {k: v for k, v in (_dump(h) or {}).items() if k not in _NOT_FIELDS},
    )] if b is not None and h is not None else []
    policy_fields = [f"policy.{f}" for f in _changed_fields(
        _dump(policy_for(b, base_inputs)) or {}, _dump(policy_for(h, head_inputs)) or {}
    )] if b is not None and h is not None else []
    return RecipeChange(
        name=name,
        change=kind,
        base_version=b.version if b else "",
        head_version=h.version if h else "",
        base_plan=base_plan,
        head_plan=head_plan,
        files=files,
        packages=tuple(_package_deltas(b, h)),
        nodes=tuple(_node_deltas(base_plan, head_plan)),
        base=Totals.of(base_plan, durations, base_est),
        head=Totals.of(head_plan, durations, head_est),
        risks=tuple(head_risks),
        fields=tuple(recipe_fields + policy_fields),
        removed_risks=tuple(r for r in base_risks if (r.kind, r.message) not in still),
        base_estimate=base_est,
        head_estimate=head_est,
    )


def compare_revisions(
    base_inputs: Inputs,
    head_inputs: Inputs,
    fleet: ObservedFleet,
    *,
    changed_files: Iterable[str],
    base_revision: str,
    head_revision: str,
    rel: Callable[[str], str] = lambda p: p,
    only: Iterable[str] = (),
    durations: Durations = Durations(),
    requested_base: str = "",
    warnings: Iterable[str] = (),
    estimator: Estimator | None = None,
) -> Comparison:
    """Compare every recipe the change touches (see the module docstring).

    ``changed_files``: repository paths changed between the revisions; ``rel`` maps a loaded
    ``source`` path to a repository path; ``only``: restrict to these recipe names;
    ``requested_base``: the revision ``--base`` named when ``base_revision`` is its merge base
    with head; ``warnings``: notes about the revisions, kept in every output; ``estimator``:
    the simulator for the duration estimates (see :func:`compare_recipe`).

    Raises:
        InputError: a recipe's policy is missing at one of the revisions.
    """
    changed = tuple(sorted(set(changed_files)))
    touched = affected_recipes(base_inputs, head_inputs, changed, rel)
    wanted = set(only)
    recipes = tuple(
        compare_recipe(
            name,
            base_inputs,
            head_inputs,
            fleet,
            base_revision=base_revision,
            head_revision=head_revision,
            files=files,
            durations=durations,
            estimator=estimator,
        )
        for name, files in touched.items()
        if not wanted or name in wanted
    )
    return Comparison(base_revision, head_revision, changed, recipes, requested_base, tuple(warnings))


# --------------------------------------------------------------------------------------------
# text


def _delta(a: float, b: float) -> str:
    d = b - a
    return "±0" if d == 0 else (f"+{d:g}" if d > 0 else f"{d:g}")


def _actions(actions: Mapping[str, int]) -> str:
    parts = [f"{v} {k}" for k, v in actions.items() if v]
    return ", ".join(parts) or "none"


#: Nodes listed per recipe in the text report.
_TEXT_NODES = 20


def render_comparison_text(cmp: Comparison) -> str:
    """Plain-text report for the terminal (no colour, no markup)."""
    lines = [f"Change {cmp.base_revision[:12]} → {cmp.head_revision[:12]}: {len(cmp.changed_files)} file(s) changed"]
    if cmp.base_note():
        lines.append(f"({cmp.base_note()})")
    lines += [f"warning: {w}" for w in cmp.warnings]
    if not cmp.recipes:
        lines.append("No recipe or policy is affected by this change.")
    for r in cmp.recipes:
        same = r.base_version == r.head_version
        ver = (r.head_version or "-") if same else f"{r.base_version or '-'} → {r.head_version or '-'}"
        lines.append("")
        lines.append(f"Recipe {r.name} ({r.change}, {ver}); files: {', '.join(r.files) or '-'}")
        b, h = r.base, r.head

        def cmp_line(label: str, a: object, z: object) -> str:
            return f"  {label:<16} {z}" + (" (unchanged)" if a == z else f" (base: {a})")

        lines.append(cmp_line("nodes changing", b.nodes_changing, h.nodes_changing) + f" of {h.nodes or b.nodes}")
        lines.append(cmp_line("actions", _actions(b.actions), _actions(h.actions)))
        lines.append(cmp_line("reboots", b.reboots, h.reboots))
        lines.append(cmp_line("interrupts", b.interrupts, h.interrupts))
        lines.append(cmp_line("batches", b.batches, h.batches) + f"; {'; '.join(h.batch_sizes) or '-'}")
        lines.append(cmp_line("est. duration", human_duration(b.seconds), human_duration(h.seconds)))
        est = r.head_estimate
        if est is not None:
            for c in est.compartments:
                lines.append(f"    {c.name}: {c.nodes} node(s), batches {run_length(c.batch_sizes) or '-'}, "
                             f"{human_duration(c.seconds)} ({est.assumptions.text()})")
            lines.append(f"    simulated ({est.assumptions.source}); result {est.result}")
        for f in r.fields:
            lines.append(f"  field {f} changed")
        groups = group_nodes(r.nodes)
        for group, n in groups[:_TEXT_NODES]:
            who = n.name if len(group) == 1 else f"{len(group)} nodes ({name_ranges([x.name for x in group], 160)})"
            if n.change == "added":
                steps = "; ".join(n.head_steps) or "-"
                where = f"{n.compartment} #{n.head_batch}" if len(group) == 1 else \
                    ", ".join(sorted({x.compartment for x in group}))
                lines.append(f"  + {who} [{where}] {steps}; interrupt {n.head_interrupt}")
            elif n.change == "removed":
                lines.append(f"  - {who} no longer change (was: {'; '.join(n.base_steps) or '-'})")
            else:
                intr = n.head_interrupt if n.base_interrupt == n.head_interrupt else \
                    f"{n.base_interrupt} → {n.head_interrupt}"
                lines.append(f"  ~ {who}: {'; '.join(n.base_steps) or '-'} → {'; '.join(n.head_steps) or '-'}; "
                             f"interrupt {intr}")
        if len(groups) > _TEXT_NODES:
            lines.append(f"  … and {len(groups) - _TEXT_NODES} more group(s) of nodes (-o json for all)")
        for risk in r.risks:
            lines.append(f"  ! {risk.message}")
        for risk in r.removed_risks:
            lines.append(f"  resolved: {risk.message}")
    return "\n".join(visible(line) for line in lines) + "\n"

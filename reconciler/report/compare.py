"""What a change between two revisions of the recipes does to the fleet (pure).

``reconciler plan --repo PATH --base REV --head REV`` loads the recipes and policies at both
revisions (from git objects, :mod:`reconciler.adapters.git`), observes the fleet once and hands
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
from reconciler.report.render import step_text
from reconciler.report.safetext import visible

RecipeChangeKind = Literal["added", "removed", "modified", "unchanged"]
NodeChangeKind = Literal["added", "removed", "altered"]
PackageChangeKind = Literal["added", "removed", "version", "config", "interrupt", "other"]


# --------------------------------------------------------------------------------------------
# duration estimate


@dataclass(frozen=True)
class Durations:
    """Assumed times (seconds) for the duration estimate: one stage (each followed by its
    check), a cordon + drain, a reboot (until the node is Ready again), any other interrupt."""

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


def human_duration(seconds: float) -> str:
    """``0 s``, ``45 s``, ``12 min``, ``2 h 10 min``."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    m = round(s / 60)
    if m < 60:
        return f"{m} min"
    h, m = divmod(m, 60)
    return f"{h} h {m} min" if m else f"{h} h"


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
    def of(plan: Plan | None, d: Durations = Durations()) -> Totals:
        """Totals of ``plan`` (all zero for None)."""
        if plan is None:
            return Totals()
        s = plan.summary
        intr = s.get("interrupts", {})
        return Totals(
            nodes=int(s.get("nodes", 0)),
            nodes_changing=int(s.get("nodesChanging", 0)),
            actions={a: int(s.get("actions", {}).get(a, 0)) for a in ACTIONS},
            reboots=int(intr.get("reboot", 0)),
            interrupts=sum(int(v) for v in intr.values()),
            cordons=sum(1 for n in plan.nodes if n.cordon),
            evictions=sum(len(n.evict) for n in plan.nodes),
            batches=int(s.get("batches", 0)),
            batch_sizes=tuple(
                f"{c.name}: {', '.join(str(len(b)) for b in c.batches) or 'none'}" for c in plan.compartments
            ),
            seconds=estimate_seconds(plan, d),
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

    def to_dict(self) -> dict[str, Any]:
        """JSON form (plans as their JSON contract)."""
        return {
            "recipe": self.name,
            "change": self.change,
            "baseVersion": self.base_version,
            "headVersion": self.head_version,
            "files": list(self.files),
            "packages": [
                {"name": p.name, "change": p.change, "from": p.from_, "to": p.to, "detail": p.detail}
                for p in self.packages
            ],
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


def _package_deltas(base: Recipe | None, head: Recipe | None) -> list[PackageDelta]:
    bp = base.packages if base else {}
    hp = head.packages if head is not None else {}
    out: list[PackageDelta] = []
    for name in sorted(set(bp) | set(hp)):
        b, h = bp.get(name), hp.get(name)
        if b is None and h is not None:
            out.append(PackageDelta(name, "added", None, h.version, f"interrupt {describe(h.interrupt)}"))
        elif h is None and b is not None:
            out.append(PackageDelta(name, "removed", b.version, None, "uninstalled where present"))
        elif b is not None and h is not None and b != h:
            if b.version != h.version:
                out.append(PackageDelta(name, "version", b.version, h.version))
            elif b.configMap != h.configMap:
                keys = sorted(
                    k for k in set(b.configMap) | set(h.configMap) if b.configMap.get(k) != h.configMap.get(k)
                )
                out.append(PackageDelta(name, "config", b.version, h.version, "configMap keys: " + ", ".join(keys)))
            elif b.interrupt != h.interrupt:
                detail = f"interrupt {describe(b.interrupt)} → {describe(h.interrupt)}"
                out.append(PackageDelta(name, "interrupt", b.version, h.version, detail))
            else:
                fields = sorted(k for k in type(b).model_fields if getattr(b, k) != getattr(h, k))
                out.append(PackageDelta(name, "other", b.version, h.version, "changed: " + ", ".join(fields)))
    return out


def _has_work(n: NodePlan) -> bool:
    return bool(n.steps or n.interrupt is not None or n.batch > 0 or n.untaint)


def _node_deltas(base: Plan | None, head: Plan) -> list[NodeDelta]:
    bn = {n.name: n for n in (base.nodes if base else ()) if _has_work(n)}
    hn = {n.name: n for n in head.nodes if _has_work(n)}
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
    covered = ("allows 0 disruptions",)
    risks.extend(Risk("warning", w) for w in plan.warnings if not any(c in w for c in covered))
    return risks


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
) -> RecipeChange:
    """Plan recipe ``name`` at both revisions against ``fleet`` and describe the difference.

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
        base=Totals.of(base_plan, durations),
        head=Totals.of(head_plan, durations),
        risks=tuple(plan_risks(head_plan, removed=kind == "removed")),
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
) -> Comparison:
    """Compare every recipe the change touches (see the module docstring).

    ``changed_files``: repository paths changed between the revisions; ``rel`` maps a loaded
    ``source`` path to a repository path; ``only``: restrict to these recipe names;
    ``requested_base``: the revision ``--base`` named when ``base_revision`` is its merge base
    with head; ``warnings``: notes about the revisions, kept in every output.

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
        ver = f"{r.base_version or '-'} → {r.head_version or '-'}"
        lines.append("")
        lines.append(f"Recipe {r.name} ({r.change}, {ver}); files: {', '.join(r.files) or '-'}")
        b, h = r.base, r.head
        nd = _delta(b.nodes_changing, h.nodes_changing)
        lines.append(
            f"  nodes changing   {b.nodes_changing} → {h.nodes_changing} ({nd}) of {h.nodes or b.nodes} selected"
        )
        lines.append(f"  actions          {_actions(b.actions)} → {_actions(h.actions)}")
        lines.append(f"  reboots          {b.reboots} → {h.reboots} ({_delta(b.reboots, h.reboots)})")
        lines.append(f"  interrupts       {b.interrupts} → {h.interrupts}")
        lines.append(f"  batches          {b.batches} → {h.batches} ({'; '.join(h.batch_sizes) or '-'})")
        lines.append(f"  est. duration    {human_duration(b.seconds)} → {human_duration(h.seconds)}")
        for p in r.packages:
            frm, to = p.from_ or "-", p.to or "-"
            lines.append(f"  package {p.name}: {p.change} {frm} → {to}" + (f" ({p.detail})" if p.detail else ""))
        for n in r.nodes[:_TEXT_NODES]:
            if n.change == "added":
                steps = "; ".join(n.head_steps) or "-"
                lines.append(f"  + {n.name} [{n.compartment} #{n.head_batch}] {steps}; interrupt {n.head_interrupt}")
            elif n.change == "removed":
                lines.append(f"  - {n.name} no longer changes (was: {'; '.join(n.base_steps) or '-'})")
            else:
                lines.append(
                    f"  ~ {n.name}: {'; '.join(n.base_steps) or '-'} → {'; '.join(n.head_steps) or '-'}; "
                    f"interrupt {n.base_interrupt} → {n.head_interrupt}; batch {n.base_batch} → {n.head_batch}"
                )
        if len(r.nodes) > _TEXT_NODES:
            lines.append(f"  … and {len(r.nodes) - _TEXT_NODES} more node(s) (-o json for all)")
        for risk in r.risks:
            lines.append(f"  ! {risk.message}")
    return "\n".join(visible(line) for line in lines) + "\n"

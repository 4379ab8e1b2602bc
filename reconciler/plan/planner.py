"""The planner: one recipe × one policy × one observed fleet → a :class:`~reconciler.model.plan.Plan` (pure).

Deterministic: no clock, no randomness, no I/O; the same inputs give byte-identical
``Plan.to_json()`` and the same ``planHash``.

Per selected node (nodes not matching ``recipe.nodeSelector`` are untouched and absent):

* **steps** from :func:`reconciler.diff.diff_node`, ordered so each package comes after its own
  changing dependencies (``after``); uninstalls come first, a package being uninstalled after
  the packages that depend on it (reverse ``dependsOn`` order; for packages no longer in the
  recipe no dependencies are known, so by name); among the rest, downgrades are taken first
  whenever their dependencies allow, then by name (decision (g): each package as soon as it can).
* **interrupt**: the merge of every step's interrupt and of the interrupt the node's ``InFlight``
  record still owes (:mod:`reconciler.model.interrupts`).
* **cordon** — decision: a node is cordoned and drained *exactly when it has an interrupt*
  (``noop`` included), as NodeWright's interrupt flow does (semantics §2.5); steps without an
  interrupt run on a schedulable node — on a node that also has steps with one, before its cordon
  (:func:`~reconciler.plan.nodework.free_steps`; the node's note names them). Only then are
  ``waitFor``, ``evict``, ``drainBlockers`` and ``pdbs`` computed (a node that is not drained
  waits for nothing and evicts nothing).
* **waitFor**: Running/Pending pods matching ``podNonInterruptLabels`` (an empty selector means
  "never wait", as in NodeWright). They are never evicted, whatever the drain flags.
* **evict / drainBlockers**: :func:`classify_drain` — the executor's own pure filter chain
  (:func:`reconciler.plan.drain.classify_pods`), so the plan shows exactly what ``apply`` will
  do: ``kubectl drain``'s filter classes with the recipe's ``drain`` options
  (drain-and-scenarios.md §1.2): our own stage pods are skipped, DaemonSet-managed pods are left
  running with ``ignoreDaemonSets`` (and block otherwise; an orphaned DaemonSet cannot be seen
  offline, so every DaemonSet-owned pod is treated as live), mirror pods are skipped, finished
  pods are removed, emptyDir pods need ``deleteEmptyDirData``, pods without a controller need
  ``force``. **pdbs**: PodDisruptionBudgets covering evicted Running pods, with their
  ``disruptionsAllowed``.
* **untaint**: the recipe is ``runtimeRequired``, the node carries
  runtime-required taint (:meth:`~reconciler.model.recipe.Recipe.is_required_taint`: ours or
  NodeWright's by default) and has no steps and no interrupt.

A node *has work* when it has steps, an interrupt, an ``InFlight`` record or our cordon (the last
two: an unfinished lifecycle to finish or a cordon to release) — unless it failed in an earlier run
with the same inputs (:func:`~reconciler.model.nodestate.not_retried`, the rollout's own rule):
then, without ``retry_failed``, it is left failed as ``apply`` leaves it (``notRetried``). Nodes
with work are placed in batches per compartment (:mod:`reconciler.plan.batching`), in the order:
``InFlight`` record or our cordon first, then nodes already unschedulable (cordoned by someone else
or by another recipe: they add nothing to the compartment's disruption, so with the budget used up
they are the only nodes a rollout can start), then node ``created`` ascending, then name. A
compartment's ``matched`` and budget ceiling count every selected node assigned to it; batches are
predicted over its nodes with work, assuming every node succeeds. Nodes cordoned by someone else are
reported in a warning (they count against the budget at run time, decision (a)); the prediction does
not subtract them.

**planHash** = sha256 (hex) of a canonical JSON document (sorted keys, no whitespace) of::

    {"v": 1,
     "recipe": recipe.model_dump(mode="json") without "source",
     "policy": policy.model_dump(mode="json") without "source",
     "nodes": [per selected node, by name: {name, labels, unschedulable, taints, created,
               annotations: only this recipe's state/config/inflight/cordon keys and the legacy
               nodeState keys, waitFor/evict as "ns/name@uid", drainBlockers}]}

With ``-l/--selector`` (``compute_plan(only=...)``) the selector is one more entry of ``nodes``,
``{"name": "", "onlyNodes": ...}`` (first: no node has an empty name), so a plan of a subset
never has the hash of the plan of every node. A node left failed (``notRetried``: it failed in an
earlier run with the same inputs and ``retry_failed`` is not given) has ``"notRetried": true`` in
its entry, so a plan made with ``--retry-failed`` never has the hash of one made without it when
the flag changes what the plan does (and has it when no node is left failed).

Not hashed: file paths (``source``), the revision label, resourceVersions, bootIDs, and volatile
status the plan only displays — PodDisruptionBudget ``disruptionsAllowed`` and node Ready (they
change by the minute; ``apply`` re-reads them and reacts). So a plan reviewed in CI and re-made by
``apply --plan`` from another checkout of the same inputs has the same hash, while any change to
what the plan would *do* (steps, order, batches, pods to wait for or evict) changes it.

``summary`` = ``{nodes, nodesChanging, actions: {install, upgrade, downgrade, reconfigure,
uninstall} (counted per step), interrupts: {reboot, service, restartAllServices, noop}
(counted per node), batches, untaint, notRetried}``; ``nodesChanging`` counts nodes with work,
``notRetried`` the nodes left failed (not retried by a run with the same inputs). With
``-l/--selector`` also ``selector: {selector, nodes, leftOut}``: its kubectl text, how many selected
nodes it picks and how many selected nodes with work (or a taint to remove) it leaves out.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from reconciler.diff import NodeDiff, diff_node
from reconciler.errors import InputError
from reconciler.jsonsafe import dumps_sorted_bytes
from reconciler.model.disruption import EvictionAnswer, eviction_answer
from reconciler.model.graph import find_cycle
from reconciler.model.interrupts import merge_interrupts
from reconciler.model.nodestate import (
    IGNORE_LABEL,
    LEGACY_PREFIXES,
    RUNTIME_REQUIRED_TAINT_KEY,
    FailureRecord,
    InFlight,
    config_key,
    cordon_claims,
    cordon_key,
    failure_key,
    holds_claim,
    inflight_key,
    inputs_digest,
    is_ignored,
    not_retried,
    not_retried_message,
    of_another_machine,
    parse_model,
    state_key,
)
from reconciler.model.observed import NodeInfo, ObservedFleet, PodInfo
from reconciler.model.plan import (
    ActionCounts,
    CompartmentPlan,
    InterruptCounts,
    NodePlan,
    OutOfScopeNode,
    Plan,
    PlanSummary,
    RecipeRef,
    SelectorScope,
    Step,
)
from reconciler.model.policy import DEFAULT_COMPARTMENT, DeploymentPolicy
from reconciler.model.recipe import DrainOptions, Interrupt, Recipe
from reconciler.model.selector import LabelSelector
from reconciler.plan.batching import (
    assign_compartments,
    ceiling,
    compartment_spec,
    halt_rule,
    predict_batches,
    resume_state,
)
from reconciler.plan.drain import classify_pods
from reconciler.plan.nodework import free_steps, order_steps
from reconciler.plan.owed import release_work
from reconciler.plan.taints import is_new_node

#: Hash document version: bump when the hashed document's shape changes.
HASH_VERSION = 1

#: How many names a warning lists before it says "and N more".
_LIST_MAX = 10


# --------------------------------------------------------------------------------------------
# drain classification


@dataclass(frozen=True)
class DrainView:
    """What a drain of one node would do (drain-and-scenarios.md §1.2, S08, S09).

    ``wait``: protected Running/Pending pods (``podNonInterruptLabels``) the node waits for; never
    evicted. ``evict``: pods the drain removes (evicted, or deleted when finished), by
    namespace/name. ``blockers``: pods that make the drain refuse (all or nothing) with the
    reason. ``lossy``: evicted pods the plan warns about (bare pods under ``force``, emptyDir data
    deleted under ``deleteEmptyDirData``).
    """

    wait: tuple[PodInfo, ...] = ()
    evict: tuple[PodInfo, ...] = ()
    blockers: tuple[tuple[PodInfo, str], ...] = ()
    lossy: tuple[tuple[PodInfo, str], ...] = ()


def classify_drain(pods: Sequence[PodInfo], drain: DrainOptions, protect: LabelSelector | None) -> DrainView:
    """Classify the pods of a node the way the executor's drain will (the same pure filter chain,
    :func:`reconciler.plan.drain.classify_pods`: ``kubectl drain``'s classes with ``drain``'s
    flags). Offline, every DaemonSet-owned pod is treated as live (an orphan cannot be told
    apart), and terminating pods are not aged (no clock)."""
    cls = classify_pods(pods, drain, protect)
    evict = tuple(sorted(cls.to_remove, key=lambda p: (p.namespace, p.name)))
    lossy: list[tuple[PodInfo, str]] = []
    for p in evict:
        if p.finished:
            continue
        if p.emptydir:
            lossy.append((p, "emptyDir data will be deleted (drain.deleteEmptyDirData)"))
        if p.controller is None:
            lossy.append((p, "bare pod will be deleted and not recreated (drain.force)"))
    return DrainView(tuple(cls.protected), evict, tuple(cls.blockers), tuple(lossy))


# --------------------------------------------------------------------------------------------
# per node


@dataclass
class _Draft:
    info: NodeInfo
    diff: NodeDiff
    steps: list[Step]
    interrupt: Interrupt | None
    drain: DrainView
    pdbs: dict[str, int]
    untaint: bool
    has_work: bool
    note: str
    hash_part: dict[str, Any] = field(default_factory=dict)
    not_retried: FailureRecord | None = None
    owed: tuple[Step, ...] = ()
    owed_interrupt: Interrupt | None = None
    owed_release: str = ""

    def clear(self) -> None:
        """No work for this run (left as it is, or left failed)."""
        self.steps, self.interrupt, self.untaint, self.has_work = [], None, False, False
        self.drain, self.pdbs = DrainView(), {}
        self.owed, self.owed_interrupt, self.owed_release = (), None, ""

    @property
    def first(self) -> bool:
        return self.diff.inflight is not None or self.diff.cordoned_by_us


def _names(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_LIST_MAX])
    return shown + (f" and {len(items) - _LIST_MAX} more" if len(items) > _LIST_MAX else "")


def _pod_id(p: PodInfo) -> str:
    return f"{p.ref}@{p.uid}"


@cache
def _relevant_keys(recipe: str) -> tuple[str, ...]:
    return (state_key(recipe), config_key(recipe), inflight_key(recipe), cordon_key(recipe),
            *(f"{p}/nodeState_{recipe}" for p in LEGACY_PREFIXES))


@cache
def _diff_keys(recipe: str) -> tuple[str, ...]:
    return (state_key(recipe), config_key(recipe), inflight_key(recipe), failure_key(recipe), cordon_key(recipe),
            *(f"{p}/nodeState_{recipe}" for p in LEGACY_PREFIXES))


def _relevant_annotations(recipe: str, ann: Mapping[str, str]) -> dict[str, str]:
    return {k: ann[k] for k in _relevant_keys(recipe) if k in ann}


def _diff_key(recipe: str, ann: Mapping[str, str]) -> tuple[str | None, ...]:
    """The annotations a node's diff depends on (with the recipe, which is fixed per plan)."""
    get = ann.get
    return tuple([get(k) for k in _diff_keys(recipe)])


def _for_node(d: NodeDiff, name: str) -> NodeDiff:
    """``dataclasses.replace(d, node=name)`` without re-running ``__init__`` (a frozen dataclass
    without slots or ``__post_init__``: its fields are its ``__dict__``); once per node that
    shares a recorded state with an earlier one."""
    out = object.__new__(NodeDiff)
    out.__dict__.update(d.__dict__)
    out.__dict__["node"] = name
    return out


def _plan_node(
    recipe: Recipe,
    fleet: ObservedFleet,
    info: NodeInfo,
    deps: Mapping[str, Sequence[str]],
    warnings: list[str],
    memo: dict[tuple[str | None, ...], tuple[NodeDiff, list[Step]]] | None = None,
) -> _Draft:
    # fleets repeat the same recorded state on many nodes: diff and order each distinct state once
    key = _diff_key(recipe.name, info.annotations) if memo is not None else None
    if key is not None and (key[2] is not None or key[4] is not None):
        key = (*key, info.uid)  # records that name a machine: whether they are void depends on the node's UID
    hit = memo.get(key) if memo is not None and key is not None else None
    if hit is not None:
        d, steps = _for_node(hit[0], info.name), hit[1]
    else:
        d = diff_node(recipe, info)
        steps = order_steps(d.changes, deps)
        if memo is not None and key is not None and not d.state_error:
            memo[key] = (d, steps)
    for problem in d.problems:
        warnings.append(f"node {info.name}: {problem}")
    if d.state_error:
        warnings.append(f"node {info.name} skipped: {d.state_error}")
    # a node whose state cannot be read is skipped entirely, even an interrupt its InFlight owes
    intr = None if d.state_error else merge_interrupts([*(s.interrupt for s in steps), d.owed_interrupt])
    rel = None if d.state_error or d.void else release_work(recipe, info, deps)
    if rel is not None:  # a lifecycle of an older release: what it owes, then the recipe's release
        work = rel[1]
        steps, intr = list(work.steps), work.interrupt
    cordon = intr is not None or (rel is not None and rel[0].interrupt is not None)
    view = DrainView()
    pdbs: dict[str, int] = {}
    if cordon:
        view = classify_drain(fleet.pods_on(info.name), recipe.drain, recipe.podNonInterruptLabels)
        for p in view.evict:
            terminating = p.deletion_ts is not None
            if terminating or p.phase in ("Pending", "Succeeded", "Failed"):
                continue  # deleted without a budget check (the Eviction API's canIgnorePDB)
            covering = fleet.pdbs_for(p)
            for b in covering:
                pdbs[b.ref] = b.disruptions_allowed
            answer = eviction_answer(p.phase, terminating, p.ready, covering)
            if answer is EvictionAnswer.REFUSED:
                b = covering[0]
                why = (f"allows 0 disruptions and {p.ref} is not Ready (unhealthyPodEvictionPolicy "
                       f"{b.unhealthy_pod_eviction_policy.value}: {b.current_healthy} of {b.desired_healthy} "
                       "desired healthy)" if not p.ready else "allows 0 disruptions")
                warnings.append(
                    f"node {info.name}: PodDisruptionBudget {b.ref} {why}; evicting "
                    f"{p.ref} is refused (429) until it allows one, or the drain times out"
                )
            elif answer is EvictionAnswer.MULTIPLE_BUDGETS:
                warnings.append(
                    f"node {info.name}: pod {p.ref} is selected by {len(covering)} PodDisruptionBudgets "
                    f"({', '.join(b.ref for b in covering)}); the Eviction API refuses it (HTTP 500)"
                )
        if view.blockers:
            warnings.append(
                f"node {info.name}: drain would be refused (nothing is evicted): "
                + "; ".join(f"{p.ref} {why}" for p, why in view.blockers)
            )
        if view.wait:
            warnings.append(
                f"node {info.name}: waits for protected pods (podNonInterruptLabels) before draining: "
                + _names([p.ref for p in view.wait])
            )
        for p, why in view.lossy:
            warnings.append(f"node {info.name}: {p.ref}: {why}")
    tainted = any(recipe.is_required_taint(t) for t in info.taints)
    untaint = recipe.runtimeRequired and tainted and not steps and intr is None and not d.state_error
    has_work = not d.state_error and (bool(steps) or intr is not None or d.inflight is not None or d.cordoned_by_us)
    notes: list[str] = []
    if d.state_error:
        notes.append("state annotation malformed: node skipped")
    if d.void:
        notes.append("records of another machine under this name (another UID) are void: planned from scratch")
    if d.imported:
        notes.append(f"state imported from {d.state_source}")
    if rel is not None:
        o = rel[0]
        notes.append(f"finishes what run {o.run}'s lifecycle of release {o.release or '?'} owes (at phase "
                     f"{d.inflight.phase if d.inflight else '?'}; superseded: {', '.join(o.superseded) or 'none'}), "
                     f"then release {recipe.version}")
    elif d.inflight is not None:
        notes.append(f"resumes run {d.inflight.runId} at phase {d.inflight.phase}")
    free = [s.package for s in free_steps(steps)] if intr is not None else []
    if free and len(free) < len(steps):
        notes.append(f"without an interrupt, {', '.join(free)} run before the cordon")
    if d.cordoned_by_us and not steps and intr is None:
        notes.append("our cordon is released")
    if d.failure is not None:
        notes.append(f"failed in run {d.failure.runId}: {d.failure.reason}")
    if untaint:
        notes.append("complete: runtime-required taint is removed")
    if not has_work and not d.state_error:
        notes.append("up to date")
    if has_work and info.ready is not True:
        warnings.append(f"node {info.name} is not Ready: apply waits for it up to timeouts.nodeReady "
                        f"({recipe.timeouts.nodeReady} s from its last Ready transition), then leaves it waiting")
    if info.unschedulable and not d.cordoned_by_us:
        others = cordon_claims(info.annotations, recipe.name, info.uid)
        who = f"by recipe(s) {', '.join(others)}" if others else "by someone else"
        warnings.append(
            f"node {info.name} is already cordoned {who}: it counts against its compartment's budget while "
            "cordoned, goes first (it adds no disruption) and stays cordoned after this recipe's rollout"
        )
    if d.cordoned_by_us and not info.unschedulable:
        warnings.append(
            f"node {info.name}: our cordon record is present but the node is schedulable (uncordoned by someone else?)"
        )
    draft = _Draft(info, d, steps, intr, view, pdbs, untaint, has_work, "; ".join(notes))
    if rel is not None:
        draft.owed, draft.owed_interrupt, draft.owed_release = rel[0].steps, rel[0].interrupt, rel[0].release
    draft.hash_part = {
        "name": info.name,
        "labels": dict(info.labels),
        "unschedulable": info.unschedulable,
        "taints": sorted(str(t) for t in info.taints),
        "created": info.created,
        "annotations": _relevant_annotations(recipe.name, info.annotations),
        "waitFor": [_pod_id(p) for p in view.wait],
        "evict": [_pod_id(p) for p in view.evict],
        "drainBlockers": [f"{_pod_id(p)}: {why}" for p, why in view.blockers],
    }
    return draft


# --------------------------------------------------------------------------------------------
# recipe-level checks


def _recipe_warnings(recipe: Recipe) -> list[str]:
    out = []
    removing = {n for n, p in recipe.packages.items() if p.uninstall is not None and p.uninstall.apply}
    for name, pkg in sorted(recipe.packages.items()):
        if name in removing:
            continue
        gone = sorted(d for d in pkg.dependsOn if d in removing)
        if gone:
            out.append(f"package {name} depends on {', '.join(gone)}, which uninstall.apply removes")
    return out


def _digest(doc: Any) -> str:
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _canonical(doc: Any) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)


def _canonical_part(part: Mapping[str, Any]) -> bytes:
    """``_canonical(part).encode()`` for one node's hash part (written here: strings, booleans,
    ``created`` a float, lists and dicts of strings), through orjson
    (:func:`reconciler.jsonsafe.dumps_sorted_bytes`; the annotation values are large escaped strings)
    unless ``created`` is a float ``repr`` writes with an exponent."""
    created = part.get("created")
    if type(created) is float and created and not 1e-4 <= abs(created) < 1e16:
        return _canonical(part).encode()
    return dumps_sorted_bytes(part)


def plan_hash(recipe: Recipe, policy: DeploymentPolicy, node_parts: Sequence[Mapping[str, Any]]) -> str:
    """sha256 hex of the canonical hash document (see the module docstring).

    The document is hashed as it is written, node by node, so a large fleet never holds its
    whole JSON text in memory; the bytes hashed are exactly ``json.dumps`` (sorted keys, no
    spaces) of ``{"nodes": [...], "policy": ..., "recipe": ..., "v": ...}``.
    """
    h = hashlib.sha256(b'{"nodes":[')
    for i, part in enumerate(sorted(node_parts, key=lambda n: str(n["name"]))):
        if i:
            h.update(b",")
        h.update(_canonical_part(part))
    h.update(b'],"policy":')
    h.update(_canonical(policy.model_dump(mode="json", exclude={"source"})).encode())
    h.update(b',"recipe":')
    h.update(_canonical(recipe.digest_dump()).encode())
    h.update(f',"v":{_canonical(HASH_VERSION)}}}'.encode())
    return h.hexdigest()


# --------------------------------------------------------------------------------------------
# the plan


def _drop_node_warnings(warnings: list[str], names: set[str]) -> None:
    """Remove the per-node warnings (``node NAME …``) of ``names``: nodes this run leaves alone."""
    if names:
        warnings[:] = [w for w in warnings
                       if not (w.startswith("node ") and w[5:].split(":")[0].split(" ")[0] in names)]


def compute_plan(recipe: Recipe, policy: DeploymentPolicy, fleet: ObservedFleet, *, revision: str = "",
                 only: LabelSelector | None = None, retry_failed: bool = False) -> Plan:
    """Plan ``recipe`` under ``policy`` against the observed ``fleet`` (see the module docstring).

    ``revision`` is a label of where the inputs came from (e.g. a git SHA); it is recorded in the
    plan but not hashed. ``only`` (``-l/--selector`` of ``plan``/``apply``, kubectl's habit): only
    selected nodes whose labels also match it get work; every other selected node stays in its
    compartment — counted in ``matched``, in the budget ceiling and (at run time) when unavailable
    — but is left exactly as it is for this run (no batch, no step, its cordon or in-flight record
    kept), and a warning says how many. The selector is part of the plan hash, so ``plan -l`` and
    ``apply -l`` with the same selector agree and a plan approved for a subset never matches a
    run over all nodes (``apply --plan``).

    A node with work that failed in an earlier run with the same inputs is left failed, as
    ``apply`` leaves it (:func:`~reconciler.model.nodestate.not_retried`): no step, no interrupt,
    no batch, not counted in ``nodesChanging`` but in ``notRetried``, its failure record in
    ``NodePlan.notRetried`` and a warning naming it — unless ``retry_failed`` (``--retry-failed``),
    which plans it as any other node. Such a node's hash part carries ``"notRetried": true``, so a
    plan made with ``--retry-failed`` is applied only with it, and the other way round, while a
    fleet with no such node keeps its hash whatever the flag.

    Raises:
        InputError: the recipe's ``dependsOn`` has a cycle (the message names it).
    """
    deps = {name: sorted(p.dependsOn) for name, p in recipe.packages.items()}
    cycle = find_cycle(deps)
    if cycle:
        raise InputError(
            f"recipe {recipe.name}: dependsOn cycle: {' -> '.join(cycle)}",
            field=f"spec.packages.{cycle[0]}.dependsOn",
        )
    warnings = _recipe_warnings(recipe)
    matching = sorted((n for n in fleet.nodes.values() if recipe.nodeSelector.matches(n.labels)), key=lambda n: n.name)
    if not matching:
        warnings.append(f"recipe {recipe.name}: nodeSelector matches no nodes; nothing to do")
    ignored = [n.name for n in matching if is_ignored(n.labels)]
    if ignored:
        warnings.append(f"{len(ignored)} node(s) are labelled {IGNORE_LABEL}=true and left alone: {_names(ignored)}")
    selected = [n for n in matching if not is_ignored(n.labels)]
    out_of_scope = out_of_scope_nodes(recipe, fleet, {n.name for n in selected})
    for o in out_of_scope:
        if o.owes:
            warnings.append(f"node {o.name} {o.reason} but owes a {o.owes} of recipe {recipe.name} from a lifecycle "
                            "in flight: it stays cordoned with its record until it is back in scope (then the "
                            "interrupt runs) or `reconciler node reset --force`")
        else:
            warnings.append(f"node {o.name} {o.reason} and still holds records of recipe {recipe.name}"
                            f"{' (our cordon)' if o.holdsCordon else ''}: apply releases it")
    if recipe.runtimeRequired and recipe.autoTaintNewNodes:
        fresh = [n.name for n in selected if is_new_node(n)]
        if fresh:
            warnings.append(
                f"apply will taint {len(fresh)} node(s) {RUNTIME_REQUIRED_TAINT_KEY}:NoSchedule first "
                f"(autoTaintNewNodes: they carry none of our records yet) until every runtime-required "
                f"recipe is complete on them: {_names(fresh)}"
            )
    memo: dict[tuple[str | None, ...], tuple[NodeDiff, list[Step]]] = {}
    drafts = [_plan_node(recipe, fleet, n, deps, warnings, memo) for n in selected]
    narrowed: SelectorScope | None = None
    if only is not None:
        sel = only.kubectl_text()
        outside = [d for d in drafts if not only.matches(d.info.labels)]
        # the per-node warnings of nodes left alone do not concern this run
        _drop_node_warnings(warnings, {d.info.name for d in outside})
        held = [d.info.name for d in outside if d.has_work or d.untaint]
        narrowed = SelectorScope(selector=sel, nodes=len(drafts) - len(outside), leftOut=len(held))
        if held:
            warnings.append(f"{len(held)} selected node(s) with work do not match -l {sel} and are left as they are "
                            f"for this run (still counted in their compartment): {_names(held)}")
        for d in outside:
            d.clear()
            d.note = (d.note + "; " if d.note else "") + f"outside -l {sel}: left as it is"

    # failed earlier with these very inputs: apply leaves them failed (the rollout's own rule)
    inputs = inputs_digest(recipe, policy)
    failed: list[str] = []
    for d in drafts:
        rec = not_retried(d.info, recipe.name, inputs, retry_failed=retry_failed) if d.has_work else None
        if rec is None:
            continue
        failed.append(d.info.name)
        d.clear()
        d.not_retried, d.note = rec, not_retried_message(rec, recipe.name, d.info.name)
        d.hash_part["notRetried"] = True
    if failed:
        _drop_node_warnings(warnings, set(failed))  # about a lifecycle that does not run
        warnings.append(f"{len(failed)} node(s) failed in an earlier run with these same inputs and are left failed: "
                        f"apply does not retry them (use --retry-failed): {_names(failed)}")

    # aggregated per-package notices
    imported = [d.info.name for d in drafts if d.diff.imported]
    if imported:
        warnings.append(
            f"{len(imported)} node(s) have state imported from NodeWright/Skyhook annotations (config "
            f"digests unknown, configuration treated as unchanged): {_names(imported)}"
        )
    markers: dict[str, list[str]] = {}
    for d in drafts:
        for c in d.diff.changes:
            if c.package not in recipe.packages and not c.changing:
                markers.setdefault(c.package, []).append(d.info.name)
    for pkg_name, nodes in sorted(markers.items()):
        warnings.append(
            f"package {pkg_name} is not in the recipe any more: {len(nodes)} node(s) keep its entry as a marker and "
            f"nothing is uninstalled (to remove it from the hosts, keep it in the recipe with uninstall: {{enabled: "
            f"true, apply: true}} until no node records it): {_names(nodes)}"
        )
    sha: dict[str, list[str]] = {}
    for d in drafts:
        for c in d.diff.changes:
            if c.sha_mismatch:
                sha.setdefault(c.package, []).append(d.info.name)
    for pkg_name, nodes in sorted(sha.items()):
        pkg = recipe.packages[pkg_name]
        warnings.append(
            f"package {pkg_name} {pkg.version}: {len(nodes)} node(s) applied another containerSHA than the "
            f"recipe's {pkg.containerSHA}; the same version is not re-run (bump the version): {_names(nodes)}"
        )

    # compartments and batches
    assignment = assign_compartments(policy, [d.info for d in drafts])
    warnings.extend(empty_compartment_warnings(policy, [d.info for d in drafts], assignment))
    order = [c.name for c in policy.compartments] + [DEFAULT_COMPARTMENT]
    batch_of: dict[str, int] = {}
    compartments: list[CompartmentPlan] = []
    for cname in order:
        members = [d for d in drafts if assignment[d.info.name] == cname]
        if not members:
            continue
        budget, strategy = compartment_spec(policy, cname)
        ceil = ceiling(budget, len(members))
        if budget.rounds_up(len(members)):
            warnings.append(
                f"compartment {cname}: budget {budget.percent}% of {len(members)} node(s) rounds down to 0; "
                "the ceiling is raised to 1 node (decision (i))"
            )
        work = sorted(
            (d for d in members if d.has_work),
            # already unschedulable (cordoned by someone else or another recipe) before the rest: such
            # a node adds nothing to the compartment's disruption, so when the budget is used up the
            # rollout can start only those (execute/rollout.py ``_step_compartment``); the plan says so
            key=lambda d: (0 if d.first else 1 if d.info.unschedulable else 2, d.info.created, d.info.name),
        )
        batches = predict_batches(strategy, ceil, [d.info.name for d in work])
        for i, names in enumerate(batches, start=1):
            for n in names:
                batch_of[n] = i
        rule = halt_rule(strategy)
        left_failed = [d.info.name for d in members if d.not_retried is not None]
        if work and resume_state(strategy, len(work) + len(left_failed), len(left_failed)).should_stop:
            warnings.append(f"compartment {cname} is halted: {len(left_failed)} of its node(s) failed in an earlier "
                            f"run with these same inputs ({_names(left_failed)}); apply starts none of its "
                            f"{len(work)} node(s) to change (lifecycles in flight excepted) until they are "
                            "retried (--retry-failed, reset, package rerun), left out (node ignore) or the recipe "
                            "changes")
        if rule.off and len(batches) > 1:
            warnings.append(f"compartment {cname}: nothing halts it (policy {policy.name} sets failureThreshold: "
                            f"never): a package that fails on every node is tried on all {len(work)} node(s) "
                            "to change")
        compartments.append(
            CompartmentPlan(
                name=cname,
                strategy=strategy.kind if strategy is not None else "none",
                ceiling=ceil,
                matched=len(members),
                batches=tuple(tuple(b) for b in batches),
                halt=rule,
            )
        )

    node_plans = tuple(
        NodePlan(
            name=d.info.name,
            compartment=assignment[d.info.name],
            batch=batch_of.get(d.info.name, 0),
            steps=tuple(d.steps),
            interrupt=d.interrupt,
            cordon=d.interrupt is not None or d.owed_interrupt is not None,
            waitFor=tuple(p.ref for p in d.drain.wait),
            evict=tuple(p.ref for p in d.drain.evict),
            finished=tuple(p.ref for p in d.drain.evict if p.finished),
            pdbs=d.pdbs,
            drainBlockers=tuple(f"{p.ref}: {why}" for p, why in d.drain.blockers),
            untaint=d.untaint,
            imported=d.diff.imported,
            note=d.note,
            notRetried=d.not_retried,
            owed=d.owed,
            owedInterrupt=d.owed_interrupt,
            owedRelease=d.owed_release,
        )
        for d in drafts
    )
    actions = Counter(s.action for np_ in node_plans for s in (*np_.owed, *np_.steps))
    interrupts = Counter(i.type for np_ in node_plans for i in (np_.owedInterrupt, np_.interrupt) if i is not None)
    summary = PlanSummary(
        nodes=len(selected),
        nodesChanging=sum(1 for d in drafts if d.has_work),
        actions=ActionCounts(**{str(a): n for a, n in actions.items()}),
        interrupts=InterruptCounts(**{str(t): n for t, n in interrupts.items()}),
        batches=sum(len(c.batches) for c in compartments),
        untaint=sum(1 for d in drafts if d.untaint),
        notRetried=len(failed),
        selector=narrowed,
    )
    released = [{"name": o.name, "outOfScope": o.reason, "cordon": o.holdsCordon, "owes": o.owes}
                for o in out_of_scope]
    return Plan(
        planHash=plan_hash(recipe, policy, [d.hash_part for d in drafts] + released
                           + ([{"name": "", "onlyNodes": only.canonical()}] if only is not None else [])),
        outOfScope=tuple(out_of_scope),
        recipe=RecipeRef(name=recipe.name, version=recipe.version),
        policy=policy.name,
        revision=revision,
        summary=summary,
        compartments=tuple(compartments),
        nodes=node_plans,
        warnings=tuple(warnings),
        readinessGate=recipe.readinessGate,
    )


def empty_compartment_warnings(policy: DeploymentPolicy, nodes: Sequence[NodeInfo],
                               assignment: Mapping[str, str]) -> list[str]:
    """One warning per named compartment of ``policy`` that gets none of ``nodes`` (the recipe's
    selected nodes, placed by ``assignment``): a compartment that silently drops out of the plan
    is more likely a selector typo, or a compartment shadowed by an overlapping one, than
    intended. A shadowed compartment's warning names the compartments that took its nodes (a node
    matching several goes to the safest strategy, then the smaller ceiling, then the name:
    :func:`~reconciler.plan.batching.assign_compartments`). None when no node is selected (the
    recipe's own warning says so)."""
    if not nodes:
        return []
    used = set(assignment.values())
    out: list[str] = []
    for c in policy.compartments:
        if c.name in used:
            continue
        sel = c.selector.kubectl_text() or "(everything)"
        matching = [n.name for n in nodes if c.selector.matches(n.labels)]
        if not matching:
            out.append(f"compartment {c.name}: its selector {sel} matches none of the {len(nodes)} node(s) the "
                       "recipe selects: it gets no node and its budget and strategy apply to nothing (a typo in the "
                       "selector, or nodes not labelled yet?)")
            continue
        took = sorted({assignment[n] for n in matching})
        out.append(f"compartment {c.name}: its selector {sel} matches {len(matching)} selected node(s), but each "
                   f"is placed in {', '.join(f'compartment {t}' for t in took)} (a node matching several compartments "
                   "goes to the safest strategy — fixed, linear, exponential —, then the smaller budget ceiling, then "
                   "the name): it gets no node and its budget and strategy apply to nothing")
    return out


def out_of_scope_nodes(recipe: Recipe, fleet: ObservedFleet, selected: set[str]) -> list[OutOfScopeNode]:
    """Nodes not in ``selected`` that hold records of ``recipe`` (its cordon claim or in-flight
    record), in name order, with what they still owe (issue 12's scope rules): an interrupt is owed
    when the in-flight record carries one and the lifecycle reached its stages (conservative: the
    drain was done and a stage may have run; a lost reboot is worse than a node held cordoned)."""
    out: list[OutOfScopeNode] = []
    for n in sorted(fleet.nodes.values(), key=lambda n: n.name):
        if n.name in selected:
            continue
        if of_another_machine(n.annotations, recipe.name, n.uid):
            continue  # another machine's records: void, nothing of this node to release or finish
        holds = holds_claim(n.annotations, recipe.name, n.uid)
        fl = parse_model(InFlight, n.annotations.get(inflight_key(recipe.name)))
        if not holds and fl is None:
            continue
        reason = (f"is labelled {IGNORE_LABEL}=true" if recipe.nodeSelector.matches(n.labels)
                  else "no longer matches the recipe's nodeSelector")
        out.append(OutOfScopeNode(name=n.name, reason=reason, holdsCordon=holds, owes=fl.owes if fl else ""))
    return out


__all__ = ["DrainView", "classify_drain", "compute_plan", "empty_compartment_warnings", "order_steps",
           "out_of_scope_nodes", "plan_hash"]


def locked_refusals(plan: Plan, recipe: Recipe) -> list[str]:
    """What locked mode (``apply`` default) refuses to do: downgrade a package that does not ship
    uninstall steps (``uninstall.enabled`` unset), since its old version cannot be removed cleanly
    first (NodeWright keeps the old entry as a "not cleanly removed" marker, semantics §2.3).
    Returns one message per package, naming the nodes (at most 5)."""
    nodes: dict[str, list[str]] = {}
    for n in plan.nodes:
        for s in n.steps:
            pkg = recipe.packages.get(s.package)
            if s.action == "downgrade" and (pkg is None or pkg.uninstall is None or not pkg.uninstall.enabled):
                nodes.setdefault(f"{s.package} {s.from_} -> {s.to}", []).append(n.name)
    out = []
    for what, names in sorted(nodes.items()):
        more = f" and {len(names) - 5} more" if len(names) > 5 else ""
        out.append(
            f"recipe {recipe.name}: downgrade {what} on {', '.join(names[:5])}{more} refused in locked mode: the "
            "package does not ship uninstall steps (set uninstall.enabled: true if it does, or use --no-locked)"
        )
    return out

"""Node operations as pure ``NodeInfo → NodePatch`` functions (semantics-nodewright.md §4, with our
differences):

* :func:`ignore_patch`: label :data:`IGNORE_LABEL` = ``"true"`` (or removed). The planner and the
  rollout must skip ignored nodes (NodeWright: status ``blocked``).
* :func:`reset_patch` (``node reset``, and ``reset`` on every node): remove this recipe's state,
  config digests, in-flight and failure records, status label/annotation and cordon record, and
  **uncordon the node when this recipe holds the cordon** (NodeWright's reset leaves the node
  cordoned). A cordon someone else placed stays (decision (c)). When NodeWright/Skyhook state for
  the same name is still on the node, our state annotation is set to ``{}`` instead of removed:
  an empty state of ours wins over the old one, so the next plan starts from scratch rather than
  importing the old state again.
* :func:`rerun_patch` (``package rerun``): rewrite the package's entry to ``<stage>``/``in_progress``
  (or delete it: the package restarts from ``apply``) and drop the node's failure record, so the
  next ``apply`` runs it even with unchanged inputs. When the node holds an in-flight record (a
  failed lifecycle keeps it, with our cordon and the interrupt it owes), that lifecycle is resumed
  by the next ``apply``; the same write counts the package as restarted in it
  (``InFlight.reruns``), which renames the package's stage pods, so the stage really runs again
  instead of its earlier (failed) pods being read back — after a crash of that apply too, the
  count being on the node. Refused while a lifecycle is in flight on the node unless forced, and
  always when the lifecycle is past the stages the rerun needs (its interrupt reached: the rerun
  would be skipped by it).
* :func:`reset_package_patch` (``reset --package``): the same for forgetting one package's state.

Refusals say whether the node's lifecycle *failed* (a failure record) or is in flight, and name
the way on that works: ``apply --retry-failed`` for a failed node, ``package rerun … --force`` when
the failed lifecycle can still run the package's stages.
"""

from __future__ import annotations

from reconciler.errors import InputError, shown
from reconciler.model.nodestate import (
    IGNORE_LABEL,
    LEGACY_PREFIXES,
    PREFIX,
    RECONCILE_REQUEST_KEY,
    FailureRecord,
    InFlight,
    NodeStateError,
    PackageState,
    condition_type,
    config_key,
    cordon_key,
    dump_model,
    dump_state,
    failure_key,
    failure_of,
    inflight_key,
    next_request,
    parse_model,
    parse_state,
    state_key,
    status_key,
    validate_key,
)
from reconciler.model.observed import NodeInfo
from reconciler.model.vocab import Phase
from reconciler.ops.patches import NodePatch, NodeRefused

#: Node label that takes a node out of every recipe's rollout (user-set; value ``"true"``).
#: Stages ``package rerun --stage`` accepts (as ``kubectl skyhook package rerun``).
RERUN_STAGES = ("apply", "config", "interrupt", "post-interrupt")


def is_ignored(node: NodeInfo) -> bool:
    """Whether the node carries ``IGNORE_LABEL=true``."""
    return node.labels.get(IGNORE_LABEL) == "true"


def recipe_annotation_keys(recipe: str) -> tuple[str, ...]:
    """Every annotation key the reconciler keeps for ``recipe`` on a node."""
    return (state_key(recipe), config_key(recipe), inflight_key(recipe), failure_key(recipe),
            status_key(recipe), cordon_key(recipe), validate_key(recipe))


def recipes_on(node: NodeInfo) -> list[str]:
    """Recipes with any record of ours on the node (from the annotation names), sorted."""
    out: set[str] = set()
    for k in node.annotations:
        if not k.startswith(f"{PREFIX}/"):
            continue
        rest = k[len(PREFIX) + 1:]
        for kind in ("nodeState_", "config_", "inflight_", "failure_", "status_", "cordon_"):
            if rest.startswith(kind) and len(rest) > len(kind):
                out.add(rest[len(kind):])
    return sorted(out)


def _failed_words(f: FailureRecord) -> str:
    """``<reason> of <package> <stage>, run <id>``: what a refusal says of a failed lifecycle."""
    where = " ".join(x for x in (f.package, f.stage) if x)
    return f"{f.reason}{f' at {where}' if where else ''}, run {f.runId}"


def _inflight_warning(node: NodeInfo, recipe: str) -> tuple[str, ...]:
    rec = parse_model(InFlight, node.annotations.get(inflight_key(recipe)))
    if rec is None:
        return ()
    failed = failure_of(node.annotations, recipe)
    if failed is not None:
        return (f"node {node.name}: the lifecycle of recipe {recipe} failed ({_failed_words(failed)}); its in-flight "
                f"record (run {rec.runId}, phase {rec.phase}) is kept: a run retrying the node now (`apply "
                "--retry-failed`) keeps acting on it",)
    return (f"node {node.name}: a lifecycle of recipe {recipe} is in flight (run {rec.runId}, phase {rec.phase}); "
            "if that run is still active it keeps acting on the node",)


def _request_words(rec: InFlight) -> str:
    """When the owed interrupt of ``rec`` was requested, in words."""
    if rec.requestedAt:
        return f"requested at {rec.requestedAt}, not confirmed yet"
    if rec.requestedAt is not None:
        return "requested at an unknown time, not confirmed yet"
    return "not requested yet, owed since stages of the lifecycle ran or may have run"


#: Lifecycle phases past the package stages: a lifecycle resumed there runs the interrupt and the
#: post-interrupt stages only (apply, config, upgrade and uninstall are behind it).
_PAST_THE_STAGES = frozenset({Phase.INTERRUPT, Phase.POST_INTERRUPT})


def past_the_stages(rec: InFlight, stage: str | None) -> bool:
    """Whether a lifecycle in flight as ``rec`` says would skip a restart of a package at ``stage``
    (None: from its first stage): it is at its interrupt or after it, and the stage comes before
    (``post-interrupt`` is still ahead; so is ``interrupt`` while the lifecycle is at it). Pure."""
    if rec.phase not in _PAST_THE_STAGES:
        return False
    if stage == "post-interrupt":
        return False
    return not (stage == "interrupt" and rec.phase is Phase.INTERRUPT)


def _refuse_restart(node: NodeInfo, recipe: str, package: str, stage: str | None, rec: InFlight | None,
                    *, force: bool, act: str) -> None:
    """Why a restart of ``package`` (``package rerun`` / ``reset --package``, ``act`` saying which
    in words) on a node whose lifecycle of ``recipe`` holds the in-flight record ``rec`` is
    refused, if it is.

    Raises:
        InputError: the lifecycle is past the stages the restart needs (even with ``force``: it
            would be skipped); or, without ``force``, a lifecycle is in flight or failed.
    """
    failed = failure_of(node.annotations, recipe)
    what = f"{package}'s {stage}" if stage else package
    if rec is not None and past_the_stages(rec, stage):
        owes = f"; its {rec.owes} {_request_words(rec)}" if rec.owes else ""
        state = f"failed ({_failed_words(failed)})" if failed is not None else f"is in flight (run {rec.runId})"
        finish = "`reconciler apply --retry-failed`" if failed is not None else "`reconciler apply`"
        raise InputError(
            f"node {node.name}: the lifecycle of recipe {recipe} {state} and is past the stages of {what} "
            f"(phase {rec.phase}{owes}): resumed, it would not run them again; let it finish first ({finish}), "
            f"then {act}, or start the node over with `reconciler node reset {node.name} --recipe {recipe}"
            + (f" --force` (it drops the {rec.owes} owed)" if rec.owes else "`")
        )
    if force:
        return
    if failed is not None:
        phase = f"; phase {rec.phase}" if rec is not None else ""
        raise InputError(
            f"node {node.name}: the lifecycle of recipe {recipe} failed ({_failed_words(failed)}{phase}) and still "
            f"holds the node: pass --force to {act} (the next `reconciler apply` resumes the lifecycle "
            f"and runs {package} again, in stage pods of a new name), or retry the whole node with "
            "`reconciler apply --retry-failed`"
        )
    who = f"run {rec.runId}, phase {rec.phase}" if rec is not None else "unreadable record"
    raise InputError(
        f"node {node.name}: a lifecycle of recipe {recipe} is in flight ({who}); let it finish (`reconciler apply` "
        f"resumes it when its run stopped) and {act} then, or pass --force (a run still active keeps "
        "acting on the node)"
    )


def _restarted(node: NodeInfo, recipe: str, package: str, rec: InFlight | None,
               ann: dict[str, str | None]) -> str:
    """Count ``package`` as restarted in the lifecycle of ``rec`` (``InFlight.reruns``, in ``ann``,
    the verb's one write) so the next apply names its stage pods anew; the words for the summary
    ("" without an in-flight record: the next apply starts a new lifecycle, whose pods are new)."""
    if rec is None:
        return ""
    new = rec.with_rerun(package)
    ann[inflight_key(recipe)] = dump_model(new)
    which = "failed lifecycle" if failure_key(recipe) in node.annotations else "lifecycle in flight"
    return (f"; the {which} (run {rec.runId}, phase {rec.phase}) resumes with {package} restarted "
            f"(rerun {new.rerun_of(package)}: new stage pod names)")


def ignore_patch(node: NodeInfo, ignore: bool) -> NodePatch | None:
    """Set (``ignore``) or remove the ignore label; None when already so."""
    if is_ignored(node) == ignore and (ignore or IGNORE_LABEL not in node.labels):
        return None
    return NodePatch(
        node.name,
        labels={IGNORE_LABEL: "true" if ignore else None},
        resource_version=node.resource_version,
        summary="ignore: every recipe skips this node" if ignore else "unignore: recipes may work on this node again",
    )


def owed_interrupt(node: NodeInfo, recipe: str) -> str:
    """The interrupt type a lifecycle of ``recipe`` in flight on ``node`` still owes ("" when none;
    :attr:`reconciler.model.nodestate.InFlight.owes`)."""
    rec = parse_model(InFlight, node.annotations.get(inflight_key(recipe)))
    return rec.owes if rec is not None else ""


def reset_patch(node: NodeInfo, recipe: str, *, force: bool = False) -> NodePatch | None:
    """Remove every record of ``recipe`` from the node and release our cordon (see module doc);
    None when the node holds nothing of ``recipe``.

    Raises:
        NodeRefused: the node still owes an interrupt (a pending reboot or service restart) and
            ``force`` is not set: resetting it would lose the interrupt (issue 12's scope rules);
            a reset of many nodes goes on with the others (issue 34).
    """
    owed = owed_interrupt(node, recipe)
    if owed and not force:
        rec = parse_model(InFlight, node.annotations.get(inflight_key(recipe)))
        raise NodeRefused(node.name, _owed_refusal(node, recipe, rec, owed))
    ann: dict[str, str | None] = {k: None for k in recipe_annotation_keys(recipe) if k in node.annotations}
    legacy = [f"{p}/nodeState_{recipe}" for p in LEGACY_PREFIXES if f"{p}/nodeState_{recipe}" in node.annotations]
    if legacy and node.annotations.get(state_key(recipe)) == "{}":
        ann.pop(state_key(recipe), None)  # already reset: keep the empty state that blocks the import
    elif legacy:
        ann[state_key(recipe)] = "{}"
    labels: dict[str, str | None] = {status_key(recipe): None} if status_key(recipe) in node.labels else {}
    ours = cordon_key(recipe) in node.annotations
    uncordon = ours and node.unschedulable
    mine = (condition_type(recipe, "Erroring"), condition_type(recipe, "NotReady"))
    conditions = tuple(c.type for c in node.conditions if c.type in mine)
    if not ann and not labels and not conditions:
        return None
    parts = [f"remove the records of recipe {recipe}"]
    if ann.get(state_key(recipe)) == "{}":
        parts.append(f"state set to {{}} so {', '.join(legacy)} is not imported again")
    if uncordon:
        parts.append("uncordon (the cordon is ours)")
    elif node.unschedulable:
        parts.append("stays cordoned (cordoned by someone else)")
    if conditions:
        parts.append(f"remove the node condition(s) {', '.join(conditions)}")
    if state_key(recipe) in ann and ann[state_key(recipe)] is None:
        # no reconcileRequest left behind: a running controller takes the state record's removal
        # as the request (controller.triggers.records_removed); an earlier verb's request goes too
        if RECONCILE_REQUEST_KEY in node.annotations:
            ann[RECONCILE_REQUEST_KEY] = None
    else:  # only NodeWright's records (state set to {}, not removed): ask as the other verbs do
        ann[RECONCILE_REQUEST_KEY] = next_request(node.annotations, node.resource_version)
    return NodePatch(
        node.name,
        annotations=ann,
        labels=labels,
        unschedulable=False if uncordon else None,
        resource_version=node.resource_version,
        remove_conditions=conditions,
        summary="; ".join(parts),
        warnings=_inflight_warning(node, recipe) + (
            (f"node {node.name}: the {owed} it owes is dropped (--force)",) if owed else ()),
    )


def _owed_refusal(node: NodeInfo, recipe: str, rec: InFlight, owed: str) -> str:
    """Why ``reset`` refuses a node whose lifecycle ``rec`` still owes the interrupt ``owed``, and
    the ways on that work: a failed lifecycle is not finished by a plain ``apply`` (same inputs:
    not retried), so it is pointed to ``apply --retry-failed`` or, while the lifecycle can still
    run the failed package's stages, ``package rerun … --force``."""
    head = f"(phase {rec.phase}; {_request_words(rec)})"
    tail = ("resetting now would lose it and release a node whose change is not complete: ")
    failed = failure_of(node.annotations, recipe)
    if failed is None:
        return (f"node {node.name}: recipe {recipe} still owes a {owed} {head}; {tail}let the lifecycle finish "
                "(`reconciler apply` resumes it), or pass --force")
    ways = "retry the node with `reconciler apply --retry-failed`"
    if failed.package and not past_the_stages(rec, None):
        ways += (f", or run {failed.package} again with `reconciler package rerun {failed.package} --recipe {recipe} "
                 f"--node {node.name} --force` and then `reconciler apply`")
    return (f"node {node.name}: the lifecycle of recipe {recipe} failed ({_failed_words(failed)}) and still owes a "
            f"{owed} {head}; {tail}{ways}; or pass --force to reset it anyway")


def rerun_patch(
    node: NodeInfo,
    recipe: str,
    package: str,
    stage: str | None = None,
    version: str | None = None,
    *,
    force: bool = False,
) -> NodePatch | None:
    """Re-run ``package`` on the node (see module doc); None when the node has no entry for it.

    Raises:
        InputError: unknown stage; no state of ours (NodeWright state not imported yet); an
            unreadable state annotation; several versions recorded and no ``version`` given; a
            lifecycle in flight (or failed) on the node without ``force``; a lifecycle past the
            stages the rerun needs (:func:`past_the_stages`), even with ``force``.
    """
    if stage is not None and stage not in RERUN_STAGES:
        raise InputError(f"--stage {shown(stage)}: expected one of {', '.join(RERUN_STAGES)}")
    key = state_key(recipe)
    if key not in node.annotations:
        legacy = [f"{p}/nodeState_{recipe}" for p in LEGACY_PREFIXES if f"{p}/nodeState_{recipe}" in node.annotations]
        if legacy:
            raise InputError(f"node {node.name}: only {legacy[0]} is recorded; run `reconciler import` first")
        return None
    try:
        state = parse_state(node.annotations[key], node=node.name, key=key)
    except NodeStateError as e:
        raise InputError(f"{e}; use `reconciler node reset` to start the node over") from None
    entries = [e for e in state.values() if e.name == package and (version is None or e.version == version)]
    if not entries:
        return None
    if len(entries) > 1:
        raise InputError(f"node {node.name}: package {package} is recorded at versions "
                         f"{', '.join(sorted(e.version for e in entries))}; choose one with --version")
    rec = parse_model(InFlight, node.annotations.get(inflight_key(recipe)))
    if inflight_key(recipe) in node.annotations:
        _refuse_restart(node, recipe, package, stage, rec, force=force,
                        act=f"rerun {package}" + (f" from {stage}" if stage else ""))
    entry = entries[0]
    new = dict(state)
    if stage is None:
        del new[entry.key]
        what = f"delete entry {entry.key} (restarts from apply)"
    else:
        # a fresh set of attempts (its earlier ones may have used them all)
        new[entry.key] = PackageState.model_validate({**entry.model_dump(), "stage": stage, "state": "in_progress",
                                                      "restarts": 0})
        what = f"entry {entry.key} {entry.stage}/{entry.state} -> {stage}/in_progress"
    ann: dict[str, str | None] = {key: dump_state(new)}
    if failure_key(recipe) in node.annotations:
        ann[failure_key(recipe)] = None
        f = failure_of(node.annotations, recipe)
        what += f"; failure record ({f.reason if f else 'unreadable'}) removed so the next apply retries"
    what += _restarted(node, recipe, package, rec, ann)
    ann[RECONCILE_REQUEST_KEY] = next_request(node.annotations, node.resource_version)
    return NodePatch(node.name, annotations=ann, resource_version=node.resource_version, summary=what,
                     warnings=_inflight_warning(node, recipe))


def reset_package_patch(node: NodeInfo, recipe: str, package: str, *, force: bool = False) -> NodePatch | None:
    """``reset RECIPE --package PKG``: forget one package's state only — every recorded version of
    ``package`` is removed from the recipe's state annotation, and the failure record when it is
    about that package; the recipe's other packages, config digests, cordon and status stay. The
    next ``apply`` runs ``package`` from its first stage (a lifecycle in flight on the node resumes
    with the package restarted: ``InFlight.reruns``). None when the node records no entry of it.

    Raises:
        InputError: an unreadable state annotation; a lifecycle of the recipe in flight (or
            failed) on the node without ``force`` (the running step would write the entry back); a
            lifecycle past the package's stages (:func:`past_the_stages`), even with ``force``.
    """
    key = state_key(recipe)
    if key not in node.annotations:
        return None
    try:
        state = parse_state(node.annotations[key], node=node.name, key=key)
    except NodeStateError as e:
        raise InputError(f"{e}; use `reconciler reset {recipe}` to start the node over") from None
    gone = sorted(k for k, e in state.items() if e.name == package)
    if not gone:
        return None
    rec = parse_model(InFlight, node.annotations.get(inflight_key(recipe)))
    if inflight_key(recipe) in node.annotations:
        _refuse_restart(node, recipe, package, None, rec, force=force, act=f"forget the state of {package}")
    ann: dict[str, str | None] = {key: dump_state({k: e for k, e in state.items() if k not in gone})}
    what = f"remove {', '.join(gone)} from the state of {recipe}"
    f = failure_of(node.annotations, recipe)
    if f is not None and f.package == package:
        ann[failure_key(recipe)] = None
        what += f"; failure record ({f.reason}) removed"
    what += _restarted(node, recipe, package, rec, ann)
    ann[RECONCILE_REQUEST_KEY] = next_request(node.annotations, node.resource_version)
    return NodePatch(node.name, annotations=ann, resource_version=node.resource_version, summary=what,
                     warnings=_inflight_warning(node, recipe))

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
  next ``apply`` runs it even with unchanged inputs. Refused while a lifecycle is in flight on the
  node unless forced.
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
    config_key,
    cordon_key,
    dump_state,
    failure_key,
    inflight_key,
    next_request,
    parse_model,
    parse_state,
    state_key,
    status_key,
)
from reconciler.model.observed import NodeInfo
from reconciler.ops.patches import NodePatch

#: Node label that takes a node out of every recipe's rollout (user-set; value ``"true"``).
#: Stages ``package rerun --stage`` accepts (as ``kubectl skyhook package rerun``).
RERUN_STAGES = ("apply", "config", "interrupt", "post-interrupt")


def is_ignored(node: NodeInfo) -> bool:
    """Whether the node carries ``IGNORE_LABEL=true``."""
    return node.labels.get(IGNORE_LABEL) == "true"


def recipe_annotation_keys(recipe: str) -> tuple[str, ...]:
    """Every annotation key the reconciler keeps for ``recipe`` on a node."""
    return (state_key(recipe), config_key(recipe), inflight_key(recipe), failure_key(recipe),
            status_key(recipe), cordon_key(recipe))


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


def _inflight_warning(node: NodeInfo, recipe: str) -> tuple[str, ...]:
    rec = parse_model(InFlight, node.annotations.get(inflight_key(recipe)))
    if rec is None:
        return ()
    return (f"node {node.name}: a lifecycle of recipe {recipe} is in flight (run {rec.runId}, phase {rec.phase}); "
            "if that run is still active it keeps acting on the node",)


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
        InputError: the node still owes an interrupt (a pending reboot or service restart) and
            ``force`` is not set: resetting it would lose the interrupt (issue 12's scope rules).
    """
    owed = owed_interrupt(node, recipe)
    if owed and not force:
        rec = parse_model(InFlight, node.annotations.get(inflight_key(recipe)))
        when = f", requested at {rec.requestedAt}" if rec is not None and rec.requestedAt else ""
        raise InputError(
            f"node {node.name}: recipe {recipe} still owes a {owed} (phase {rec.phase if rec else '?'}{when}); "
            "resetting now would lose it and release a node whose change is not complete: let the lifecycle "
            "finish (`reconciler apply`), or pass --force"
        )
    ann: dict[str, str | None] = {k: None for k in recipe_annotation_keys(recipe) if k in node.annotations}
    legacy = [f"{p}/nodeState_{recipe}" for p in LEGACY_PREFIXES if f"{p}/nodeState_{recipe}" in node.annotations]
    if legacy and node.annotations.get(state_key(recipe)) == "{}":
        ann.pop(state_key(recipe), None)  # already reset: keep the empty state that blocks the import
    elif legacy:
        ann[state_key(recipe)] = "{}"
    labels: dict[str, str | None] = {status_key(recipe): None} if status_key(recipe) in node.labels else {}
    ours = cordon_key(recipe) in node.annotations
    uncordon = ours and node.unschedulable
    if not ann and not labels:
        return None
    parts = [f"remove the records of recipe {recipe}"]
    if ann.get(state_key(recipe)) == "{}":
        parts.append(f"state set to {{}} so {', '.join(legacy)} is not imported again")
    if uncordon:
        parts.append("uncordon (the cordon is ours)")
    elif node.unschedulable:
        parts.append("stays cordoned (cordoned by someone else)")
    ann[RECONCILE_REQUEST_KEY] = next_request(node.annotations, node.resource_version)
    return NodePatch(
        node.name,
        annotations=ann,
        labels=labels,
        unschedulable=False if uncordon else None,
        resource_version=node.resource_version,
        summary="; ".join(parts),
        warnings=_inflight_warning(node, recipe) + (
            (f"node {node.name}: the {owed} it owes is dropped (--force)",) if owed else ()),
    )


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
            lifecycle in flight without ``force``.
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
    if inflight_key(recipe) in node.annotations and not force:
        rec = parse_model(InFlight, node.annotations[inflight_key(recipe)])
        who = f"run {rec.runId}, phase {rec.phase}" if rec else "unreadable record"
        raise InputError(f"node {node.name}: a lifecycle of recipe {recipe} is in flight ({who}); wait for it, "
                         "use `reconciler node reset`, or pass --force")
    entry = entries[0]
    new = dict(state)
    if stage is None:
        del new[entry.key]
        what = f"delete entry {entry.key} (restarts from apply)"
    else:
        new[entry.key] = PackageState.model_validate({**entry.model_dump(), "stage": stage, "state": "in_progress"})
        what = f"entry {entry.key} {entry.stage}/{entry.state} -> {stage}/in_progress"
    ann: dict[str, str | None] = {key: dump_state(new)}
    if failure_key(recipe) in node.annotations:
        ann[failure_key(recipe)] = None
        f = parse_model(FailureRecord, node.annotations[failure_key(recipe)])
        what += f"; failure record ({f.reason if f else 'unreadable'}) removed so the next apply retries"
    ann[RECONCILE_REQUEST_KEY] = next_request(node.annotations, node.resource_version)
    return NodePatch(node.name, annotations=ann, resource_version=node.resource_version, summary=what,
                     warnings=_inflight_warning(node, recipe))


def reset_package_patch(node: NodeInfo, recipe: str, package: str, *, force: bool = False) -> NodePatch | None:
    """``reset RECIPE --package PKG``: forget one package's state only — every recorded version of
    ``package`` is removed from the recipe's state annotation, and the failure record when it is
    about that package; the recipe's other packages, config digests, cordon and status stay. The
    next ``apply`` runs ``package`` from its first stage. None when the node records no entry of it.

    Raises:
        InputError: an unreadable state annotation; a lifecycle of the recipe in flight on the
            node without ``force`` (the running step would write the entry back).
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
    if inflight_key(recipe) in node.annotations and not force:
        rec = parse_model(InFlight, node.annotations[inflight_key(recipe)])
        who = f"run {rec.runId}, phase {rec.phase}" if rec else "unreadable record"
        raise InputError(f"node {node.name}: a lifecycle of recipe {recipe} is in flight ({who}); wait for it "
                         "or pass --force")
    ann: dict[str, str | None] = {key: dump_state({k: e for k, e in state.items() if k not in gone})}
    what = f"remove {', '.join(gone)} from the state of {recipe}"
    f = parse_model(FailureRecord, node.annotations.get(failure_key(recipe)))
    if f is not None and f.package == package:
        ann[failure_key(recipe)] = None
        what += f"; failure record ({f.reason}) removed"
    ann[RECONCILE_REQUEST_KEY] = next_request(node.annotations, node.resource_version)
    return NodePatch(node.name, annotations=ann, resource_version=node.resource_version, summary=what,
                     warnings=_inflight_warning(node, recipe))

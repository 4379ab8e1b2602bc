"""Prometheus metrics of a rollout, in the text exposition format (version 0.0.4).

Written as a file for the node-exporter textfile collector (:func:`write_textfile`, atomic: a
temporary file in the same directory, fsync, rename, :mod:`reconciler.fileio.writing`; name it
``*.prom``) and/or pushed to a
Pushgateway (:func:`reconciler.adapters.metrics.pushgateway.push`, HTTP PUT of one group per recipe; the
network I/O lives in that adapter, :func:`reconciler.adapters.metrics.pushgateway.export` does both).
Built by :func:`rollout_metrics` from a :class:`~reconciler.model.run.RunResult` (after ``apply``) and/or a
:class:`~reconciler.model.plan.Plan` (``reconciler metrics``, no run), plus the node records.

Metrics (all gauges; names follow NodeWright's ``skyhook_*`` set, semantics-nodewright.md §5.1,
with our prefix). Compartment series carry ``recipe``, ``policy``, ``compartment``, ``strategy``:

==============================================  ==============================================
``node_reconciler_rollout_matched_nodes``       selected nodes in the compartment
``node_reconciler_rollout_ceiling``             budget ceiling (nodes disrupted at once)
``node_reconciler_rollout_in_progress``         nodes with a lifecycle in flight (record on node)
``node_reconciler_rollout_completed``           nodes with nothing left to do
``node_reconciler_rollout_failed``              nodes with a failure record
``node_reconciler_rollout_blocked``             nodes whose status is ``blocked``
``node_reconciler_rollout_progress_percent``    completed × 100 / matched
``node_reconciler_rollout_current_batch``       number of the last batch started (run only)
``node_reconciler_rollout_halted``              1 when the compartment halted (run only)
``node_reconciler_rollout_max_disrupted``       most nodes held disrupted at once (run only)
``node_reconciler_node_target_count``           selected nodes of the recipe
``node_reconciler_node_status_count``           nodes per recorded status (``none``: no status)
``node_reconciler_package_state_count``         nodes per package, version and state
``node_reconciler_package_stage_count``         nodes per package, version and stage
``node_reconciler_package_restarts_count``      summed restarts per package and version
``node_reconciler_run_result``                  1 for the run's result (succeeded/failed/halted)
``node_reconciler_run_nodes``                   nodes per outcome of the run
``node_reconciler_run_duration_seconds``        duration of the run
``node_reconciler_last_update_timestamp_seconds``  when these metrics were computed
``node_reconciler_recipe_paused`` / ``_disabled``  control switches (``reconciler pause``/``disable``)
==============================================  ==============================================

Series whose value is unknown (current batch without a run) are left out rather than reported as 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from reconciler.errors import ReconcilerError
from reconciler.fileio.writing import Output, prepare_output
from reconciler.model.nodestate import (
    NodeStateError,
    PackageState,
    failure_key,
    inflight_key,
    parse_state,
    recorded_status,
    state_key,
)
from reconciler.model.observed import NodeInfo
from reconciler.model.plan import Plan
from reconciler.model.run import RunResult
from reconciler.model.vocab import NodeResult, NodeStatus, RunVerdict

PREFIX = "node_reconciler_"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
RESULTS = tuple(str(v) for v in RunVerdict)

_HELP: dict[str, str] = {
    "rollout_matched_nodes": "Selected nodes in the compartment.",
    "rollout_ceiling": "Budget ceiling: nodes the compartment may disrupt at once.",
    "rollout_in_progress": "Nodes with a lifecycle in flight for the recipe.",
    "rollout_completed": "Nodes of the compartment with nothing left to do.",
    "rollout_failed": "Nodes of the compartment with a failure record.",
    "rollout_blocked": "Nodes of the compartment whose status is blocked.",
    "rollout_progress_percent": "Completed nodes as a percentage of matched nodes.",
    "rollout_current_batch": "Number of the last batch started in the compartment.",
    "rollout_halted": "1 when the compartment halted (failure threshold or budget).",
    "rollout_max_disrupted": "Most nodes held disrupted at once in the compartment during the run.",
    "node_target_count": "Nodes selected by the recipe.",
    "node_status_count": "Nodes per recorded status of the recipe (none: no status recorded).",
    "package_state_count": "Nodes per package, version and state.",
    "package_stage_count": "Nodes per package, version and stage.",
    "package_restarts_count": "Summed stage restarts per package and version.",
    "run_result": "1 for the result of the last run of the recipe.",
    "run_nodes": "Nodes per outcome of the last run.",
    "run_duration_seconds": "Duration of the last run in seconds.",
    "last_update_timestamp_seconds": "Unix time when these metrics were computed.",
    "recipe_paused": "1 when the recipe is paused (reconciler pause).",
    "recipe_disabled": "1 when the recipe is disabled (reconciler disable).",
}


class MetricsError(ReconcilerError):
    """The metrics could not be written or pushed."""


@dataclass
class Family:
    """One metric family: name, help and samples ``labels → value``."""

    name: str
    help: str
    type: str = "gauge"
    samples: dict[tuple[tuple[str, str], ...], float] = field(default_factory=dict)


@dataclass
class MetricSet:
    """Metric families by name; :meth:`render` gives the exposition text (sorted, deterministic)."""

    families: dict[str, Family] = field(default_factory=dict)

    def set(self, short: str, labels: Mapping[str, str], value: float) -> None:
        """Set the sample of family ``node_reconciler_<short>`` with ``labels``."""
        name = PREFIX + short
        fam = self.families.get(name)
        if fam is None:
            fam = self.families[name] = Family(name, _HELP.get(short, short))
        fam.samples[tuple(sorted(labels.items()))] = float(value)

    def update(self, other: MetricSet) -> None:
        """Add every sample of ``other`` (same name and labels: ``other`` wins)."""
        for name, fam in other.families.items():
            mine = self.families.setdefault(name, Family(name, fam.help, fam.type))
            mine.samples.update(fam.samples)

    def value(self, short: str, **labels: str) -> float | None:
        """The sample of ``node_reconciler_<short>`` whose labels include ``labels`` (first match), or None."""
        fam = self.families.get(PREFIX + short)
        if fam is None:
            return None
        for key, v in sorted(fam.samples.items()):
            d = dict(key)
            if all(d.get(k) == want for k, want in labels.items()):
                return v
        return None

    def render(self) -> str:
        """Prometheus text exposition format 0.0.4."""
        lines: list[str] = []
        for name in sorted(self.families):
            fam = self.families[name]
            lines.append(f"# HELP {name} {_escape_help(fam.help)}")
            lines.append(f"# TYPE {name} {fam.type}")
            for key in sorted(fam.samples):
                lab = ",".join(f'{k}="{_escape_label(v)}"' for k, v in key)
                lines.append(f"{name}{{{lab}}} {_fmt(fam.samples[key])}" if lab else f"{name} {_fmt(fam.samples[key])}")
        return "\n".join(lines) + ("\n" if lines else "")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _fmt(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return str(int(v)) if v.is_integer() and abs(v) < 2**53 else repr(v)


def _state(node: NodeInfo, recipe: str) -> dict[str, PackageState]:
    try:
        return parse_state(node.annotations.get(state_key(recipe)), node=node.name)
    except NodeStateError:
        return {}


def rollout_metrics(
    recipe: str,
    nodes: Sequence[NodeInfo],
    *,
    result: RunResult | None = None,
    plan: Plan | None = None,
    policy: str = "",
    paused: bool | None = None,
    disabled: bool | None = None,
    now: float | None = None,
) -> MetricSet:
    """The metrics of ``recipe`` (see the module doc).

    The recipe's nodes and their compartments come from ``result`` (its node outcomes) or else
    ``plan``; without either, only package and status counts over nodes carrying the recipe's
    state are produced. ``nodes`` are the current node objects (their records give in progress,
    failed, blocked, statuses and package states). ``paused``/``disabled`` None: not reported.
    """
    ms = MetricSet()
    by_name = {n.name: n for n in nodes}
    comp_of: dict[str, str] = {}
    if result is not None:
        comp_of = {o.name: o.compartment for o in result.nodes}
    elif plan is not None:
        comp_of = {n.name: n.compartment for n in plan.nodes}
    targets = list(comp_of) if (result is not None or plan is not None) else [
        n.name for n in nodes if state_key(recipe) in n.annotations]
    base = {"recipe": recipe}
    policy = policy or (plan.policy if plan is not None else "")

    # compartments
    docs = {c["name"]: c for c in result.compartments} if result is not None else {}
    plans = {c.name: c for c in plan.compartments} if plan is not None else {}
    outcome = {o.name: o.state for o in result.nodes} if result is not None else {}
    has_work = {n.name: n.batch > 0 for n in plan.nodes} if plan is not None else {}
    for comp in sorted(set(comp_of.values()) | set(docs) | set(plans)):
        members = [n for n, c in comp_of.items() if c == comp]
        doc, cp = docs.get(comp, {}), plans.get(comp)
        strategy = str(doc.get("strategy") or (cp.strategy if cp is not None else "") or "unknown")
        labels = {**base, "policy": policy or "legacy", "compartment": comp, "strategy": strategy}
        matched = cp.matched if cp is not None else len(members)
        ceiling = cp.ceiling if cp is not None else int(doc.get("ceiling", 0))
        untouched = set(doc.get("untouched") or ())
        in_progress = failed = blocked = completed = 0
        for name in members:
            node = by_name.get(name)
            ann = node.annotations if node is not None else {}
            flying = inflight_key(recipe) in ann
            broken = failure_key(recipe) in ann
            in_progress += flying
            failed += broken
            recorded = recorded_status(node.labels, ann, recipe) if node is not None else ""
            blocked += recorded == NodeStatus.BLOCKED
            if flying or broken or node is None:
                continue
            if result is not None:
                out = outcome.get(name)
                completed += out == NodeResult.COMPLETE or (out == NodeResult.UNTOUCHED and name not in untouched
                                                   and recorded != NodeStatus.BLOCKED)
            else:
                completed += not has_work.get(name, True)
        ms.set("rollout_matched_nodes", labels, matched)
        ms.set("rollout_ceiling", labels, ceiling)
        ms.set("rollout_in_progress", labels, in_progress)
        ms.set("rollout_completed", labels, completed)
        ms.set("rollout_failed", labels, failed)
        ms.set("rollout_blocked", labels, blocked)
        ms.set("rollout_progress_percent", labels, round(completed * 100 / matched, 2) if matched else 100)
        if result is not None and doc:
            ms.set("rollout_current_batch", labels, len(doc.get("batches") or ()))
            ms.set("rollout_halted", labels, 1 if doc.get("halted") else 0)
            ms.set("rollout_max_disrupted", labels, int(doc.get("maxDisrupted", 0)))

    # nodes and packages
    ms.set("node_target_count", base, len(targets))
    statuses: dict[str, int] = {}
    states: dict[tuple[str, str, str], int] = {}
    stages: dict[tuple[str, str, str], int] = {}
    restarts: dict[tuple[str, str], int] = {}
    for name in targets:
        node = by_name.get(name)
        if node is None:
            continue
        st = recorded_status(node.labels, node.annotations, recipe) or "none"
        statuses[st] = statuses.get(st, 0) + 1
        for e in _state(node, recipe).values():
            states[(e.name, e.version, e.state)] = states.get((e.name, e.version, e.state), 0) + 1
            stages[(e.name, e.version, e.stage)] = stages.get((e.name, e.version, e.stage), 0) + 1
            restarts[(e.name, e.version)] = restarts.get((e.name, e.version), 0) + e.restarts
    for st, count in statuses.items():
        ms.set("node_status_count", {**base, "status": st}, count)
    for (pkg, ver, state), count in states.items():
        ms.set("package_state_count", {**base, "package": pkg, "version": ver, "state": state}, count)
    for (pkg, ver, stage), count in stages.items():
        ms.set("package_stage_count", {**base, "package": pkg, "version": ver, "stage": stage}, count)
    for (pkg, ver), count in restarts.items():
        ms.set("package_restarts_count", {**base, "package": pkg, "version": ver}, count)

    # run
    if result is not None:
        for r in RESULTS:
            ms.set("run_result", {**base, "result": r}, 1 if result.result == r else 0)
        counts: dict[str, int] = {}
        for o in result.nodes:
            counts[o.state] = counts.get(o.state, 0) + 1
        for state, count in counts.items():
            ms.set("run_nodes", {**base, "outcome": state}, count)
        ms.set("run_duration_seconds", base, round(result.duration, 3))
    if paused is not None:
        ms.set("recipe_paused", base, 1 if paused else 0)
    if disabled is not None:
        ms.set("recipe_disabled", base, 1 if disabled else 0)
    if now is not None:
        ms.set("last_update_timestamp_seconds", base, round(now, 3))
    return ms


def write_textfile(path: str | Output, text: str) -> None:
    """Write ``text`` to ``path`` through the one output writer (:mod:`reconciler.fileio.writing`:
    a regular file replaced atomically, so the textfile collector never reads a partial file; a
    device or FIFO written in place). ``path``: the ``--metrics-file`` output checked before any
    work, or a path checked now.

    Raises:
        InputError: ``path`` cannot be written (checked now: its directory is missing, ...).
        OutputError: the write failed (the file is left as it was).
    """
    out = path if isinstance(path, Output) else prepare_output("--metrics-file", path)
    try:
        out.write(text)
    finally:
        if out is not path:
            out.close()


def run_metrics(
    results: Iterable[RunResult],
    nodes: Sequence[NodeInfo],
    *,
    policies: Mapping[str, str] | None = None,
    now: float | None = None,
    controls: Mapping[str, tuple[bool, bool]] | None = None,
) -> dict[str, MetricSet]:
    """Metrics of the runs of one ``apply`` (one set per recipe), from the results and the nodes
    read after the run. ``controls``: recipe → (paused, disabled)."""
    out: dict[str, MetricSet] = {}
    for r in results:
        pd = (controls or {}).get(r.recipe)
        out[r.recipe] = rollout_metrics(r.recipe, nodes, result=r, policy=(policies or {}).get(r.recipe, ""),
                                        paused=pd[0] if pd else None, disabled=pd[1] if pd else None, now=now)
    return out

"""The in-cluster status object of a recipe's rollout (pure): ``NodeRecipeRollout``.

Group/version ``reconciler.nodewright.dev/v1alpha1``, **cluster-scoped** (a recipe selects nodes
of the whole cluster, as NodeWright's ``Skyhook`` is cluster-scoped), one object per recipe named
after it. The CRD is ``charts/node-reconciler/crds/nodereciperollouts.yaml`` (status subresource: writing
``spec`` bumps ``metadata.generation``, writing ``status`` does not).

``spec`` (written by ``apply`` when it starts a run): ``{recipe, version, revision, planHash,
paused}``. A new revision or plan bumps the generation; until the first status write of that run,
``status.observedGeneration`` is behind and kstatus says InProgress (LatestGenerationNotObserved).

``status`` follows kstatus (gitops-conventions.md §3.2) so Flux ``healthChecks``/``wait`` and
``kstatus``-based tools work without custom code, and carries a ``phase`` enum for Argo CD's Lua
health check (``examples/argocd``):

=============  =============  ===================  ==============  ======================
phase          Ready          Reconciling          Stalled         kstatus / Argo CD
=============  =============  ===================  ==============  ======================
Progressing    False          True (Progressing)   False           InProgress / Progressing
Complete       True           False                False           Current / Healthy
Failed         False          False                True            Failed / Degraded
Halted         False          False                True            Failed / Degraded
Waiting        False          True (WaitingFor-    False           InProgress / Progressing
                              Recipe)
Paused         False          False                False           InProgress / Suspended
=============  =============  ===================  ==============  ======================

``Waiting``: the run ended with nothing failed, but nodes did not start because an earlier recipe
(by priority, NodeWright ``sequencing``) is not complete on them — a later run takes them up, so
this is not Stalled; ``summary`` names the recipes waited for.

``status.observedGeneration`` is written from the first write on (Flux issues #387/#4346: a
status without it, or with only Ready, would be "Current" at once). ``summary`` is NodeWright's
``Ready`` message shape: ``"<complete>/<total> nodes complete, 1 failed, 2 in progress"``.
Condition ``lastTransitionTime`` changes only when the condition's status changes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from reconciler.model.plan import Plan
from reconciler.model.run import Event, RunResult
from reconciler.model.vocab import EventKind, NodeResult, RunVerdict
from reconciler.report.gitstatus import summary_text

GROUP = "reconciler.nodewright.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "NodeRecipeRollout"
PLURAL = "nodereciperollouts"

Phase = Literal["Progressing", "Complete", "Failed", "Halted", "Waiting", "Paused"]
NodeProgress = Literal["pending", "inProgress", "complete", "failed", "blocked", "removed"]

#: Failures listed in the status (the rest are counted).
MAX_FAILURES = 20

_START = {
    EventKind.CORDON,
    EventKind.WAIT,
    EventKind.EVICT,
    EventKind.EVICT_REFUSED,
    EventKind.DRAINED,
    EventKind.STAGE_START,
    EventKind.STAGE_END,
    EventKind.STAGE_RETRY,
    EventKind.INTERRUPT,
    EventKind.REBOOTED,
    EventKind.UNCORDON,
    EventKind.RESUME,
    EventKind.GATE,
    EventKind.GATE_PASSED,
}
_END: dict[str, NodeProgress] = {
    EventKind.COMPLETE: "complete",
    EventKind.FAILED: "failed",
    EventKind.BLOCKED: "blocked",
    EventKind.REMOVED: "removed",
    EventKind.LEFT: "pending",
}


@dataclass
class RolloutProgress:
    """Per-node progress of one run of ``plan``, fed by the rollout's timeline events
    (:meth:`on_event`) and settled by its result (:meth:`finish`).

    Nodes without work start ``complete`` (already up to date), nodes with work ``pending``.
    """

    plan: Plan
    run_id: str = ""
    nodes: dict[str, NodeProgress] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    waiting: dict[str, str] = field(default_factory=dict)  # node → why it did not start (settled by finish)
    halted: list[str] = field(default_factory=list)
    finished: bool = False
    result: str = ""

    def __post_init__(self) -> None:
        if not self.nodes:
            self.nodes = {n.name: ("pending" if n.has_work else "complete") for n in self.plan.nodes}

    def on_event(self, ev: Event) -> bool:
        """Apply one timeline event; True when the counts or halted compartments changed."""
        before = (self.counts(), tuple(self.halted))
        if ev.event == EventKind.HALTED:
            if ev.node not in self.halted:
                self.halted.append(ev.node)
        elif ev.node in self.nodes:
            if ev.event in _END:
                self.nodes[ev.node] = _END[ev.event]
                if ev.event in (EventKind.FAILED, EventKind.BLOCKED) and ev.detail:
                    self.messages[ev.node] = ev.detail
            elif ev.event in _START and self.nodes[ev.node] == "pending":
                self.nodes[ev.node] = "inProgress"
        return (self.counts(), tuple(self.halted)) != before

    def finish(self, result: RunResult) -> None:
        """Settle every node from the run's result document."""
        self.run_id = result.run_id
        for n in result.nodes:
            if n.name not in self.nodes:
                continue
            # "untouched" with nothing to do stays complete (up to date); otherwise not done yet
            fallback: NodeProgress = "complete" if self.nodes[n.name] == "complete" else "pending"
            state: NodeProgress = {
                "complete": "complete",
                "failed": "failed",
                "blocked": "blocked",
                "removed": "removed",
            }.get(n.state, fallback)  # type: ignore[assignment]
            self.nodes[n.name] = state
            if n.state == NodeResult.WAITING:
                self.waiting[n.name] = n.message
            if n.state in (NodeResult.FAILED, NodeResult.BLOCKED):
                stage = f" at {n.failed_stage}" if n.failed_stage else ""
                self.messages[n.name] = f"{n.state}{stage}: {n.message}".strip()
        self.halted = sorted({c.name for c in result.compartments if c.halted} | set(self.halted))
        self.finished = True
        self.result = result.result

    def counts(self) -> dict[str, int]:
        """``{total, complete, inProgress, pending, failed, blocked, removed}``."""
        out = {
            "total": len(self.nodes),
            "complete": 0,
            "inProgress": 0,
            "pending": 0,
            "failed": 0,
            "blocked": 0,
            "removed": 0,
        }
        for s in self.nodes.values():
            out[s] += 1
        return out

    def phase(self, *, paused: bool = False) -> Phase:
        """Progressing until finished; then Complete, Failed (a node failed or stayed blocked),
        Halted (a compartment stopped) or Waiting (the run's verdict: nodes wait for an earlier
        recipe, nothing failed); ``paused`` wins while not finished."""
        if not self.finished:
            return "Paused" if paused else "Progressing"
        if self.halted or self.result == RunVerdict.HALTED:
            return "Halted"
        c = self.counts()
        if c["failed"] or c["blocked"] or self.result == RunVerdict.FAILED:
            return "Failed"
        if self.result == RunVerdict.WAITING:
            return "Waiting"
        return "Complete" if c["pending"] == 0 and c["inProgress"] == 0 else "Progressing"


def waiting_text(waiting: Mapping[str, str]) -> str:
    """``waiting`` (node → its reason, as :func:`reconciler.execute.sequencing.waiting_nodes`
    gives it) in one line, most nodes first, e.g. ``"3 nodes waiting for recipe a (priority 1);
    2 nodes waiting for recipe b to complete on every node (sequencing: all)"``; ``""`` for none."""
    parts = []
    for why, n in sorted(Counter(waiting.values()).items(), key=lambda kv: (-kv[1], kv[0])):
        text = why.removeprefix("waiting ").removesuffix(" on this node")
        parts.append(f"{n} node{'s' if n != 1 else ''} waiting {text}")
    return "; ".join(parts)


def rollout_spec(plan: Plan, *, revision: str = "", paused: bool = False) -> dict[str, Any]:
    """The object's ``spec`` for a run of ``plan``."""
    return {
        "recipe": plan.recipe.name,
        "version": plan.recipe.version,
        "revision": revision or plan.revision,
        "planHash": plan.planHash,
        "paused": paused,
    }


def new_object(plan: Plan, *, revision: str = "", labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A complete ``NodeRecipeRollout`` (without status) for ``plan``."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": plan.recipe.name,
            "labels": {"app.kubernetes.io/managed-by": "node-reconciler", **(labels or {})},
        },
        "spec": rollout_spec(plan, revision=revision),
    }


def _condition(
    type_: str,
    status: str,
    reason: str,
    message: str,
    generation: int,
    now: str,
    previous: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    prev = previous.get(type_)
    since = prev.get("lastTransitionTime") if prev and prev.get("status") == status else None
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": since or now,
    }


def kstatus_conditions(
    ready: tuple[str, str, str],
    reconciling: tuple[str, str, str],
    stalled: tuple[str, str, str],
    *,
    generation: int,
    now: str,
    previous: Iterable[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """The ``Ready``, ``Reconciling`` and ``Stalled`` conditions, each given as ``(status, reason,
    message)``, at ``generation``; ``lastTransitionTime`` is kept from ``previous`` when a
    condition's status did not change, else ``now`` (kstatus conventions, gitops-conventions.md §3.2)."""
    prev = {str(c.get("type")): c for c in previous}
    return [
        _condition(t, s, r, m, generation, now, prev)
        for t, (s, r, m) in (("Ready", ready), ("Reconciling", reconciling), ("Stalled", stalled))
    ]


def rollout_status(
    progress: RolloutProgress,
    *,
    generation: int,
    now: str,
    previous: Iterable[Mapping[str, Any]] = (),
    paused: bool = False,
) -> dict[str, Any]:
    """The ``status`` of the object for ``progress`` at ``generation``.

    ``now``: RFC 3339 time for new condition transitions; ``previous``: the conditions currently
    on the object (their ``lastTransitionTime`` is kept when the status did not change).
    """
    counts = progress.counts()
    phase = progress.phase(paused=paused)
    summary = summary_text(counts)
    prev = {str(c.get("type")): c for c in previous}
    failing = [n for n, s in sorted(progress.nodes.items()) if s in ("failed", "blocked")]
    if phase == "Complete":
        ready = ("True", "Succeeded", summary)
        reconciling = ("False", "Succeeded", "rollout finished")
        stalled = ("False", "Succeeded", "")
    elif phase in ("Failed", "Halted"):
        why = "CompartmentHalted" if phase == "Halted" else "NodeFailed"
        detail = summary
        if progress.halted:
            detail += f"; halted compartment(s): {', '.join(progress.halted)}"
        if failing:
            more = f" and {len(failing) - 10} more" if len(failing) > 10 else ""
            detail += f"; failed: {', '.join(failing[:10])}{more}"
        ready = ("False", why, detail)
        reconciling = ("False", why, "rollout stopped")
        stalled = ("True", why, detail)
    elif phase == "Waiting":
        summary = f"{summary}; {waiting_text(progress.waiting)}"
        ready = ("False", "WaitingForRecipe", summary)
        reconciling = ("True", "WaitingForRecipe", summary)
        stalled = ("False", "WaitingForRecipe", "")
    elif phase == "Paused":
        ready = ("False", "Paused", summary)
        reconciling = ("False", "Paused", "rollout paused (spec.paused)")
        stalled = ("False", "Paused", "")
    else:
        ready = ("False", "Progressing", summary)
        reconciling = ("True", "Progressing", summary)
        stalled = ("False", "Progressing", "")
    conditions = [
        _condition(t, s, r, m, generation, now, prev)
        for t, (s, r, m) in (("Ready", ready), ("Reconciling", reconciling), ("Stalled", stalled))
    ]
    failures = [
        {"node": n, "message": progress.messages.get(n, progress.nodes[n])[:500]} for n in failing[:MAX_FAILURES]
    ]
    return {
        "observedGeneration": generation,
        "phase": phase,
        "summary": summary,
        "nodes": counts,
        "recipe": progress.plan.recipe.name,
        "recipeVersion": progress.plan.recipe.version,
        "revision": progress.plan.revision,
        "planHash": progress.plan.planHash,
        "runId": progress.run_id,
        "haltedCompartments": list(progress.halted),
        "failures": failures,
        "failuresOmitted": max(0, len(failing) - MAX_FAILURES),
        "conditions": conditions,
    }

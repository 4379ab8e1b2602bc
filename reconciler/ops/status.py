"""What the nodes record, per node (``reconciler status``, :meth:`reconciler.session.Session.status`):
typed records read from a node's annotations, pure, with their JSON form."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from reconciler.model.nodestate import (
    PREFIX,
    FailureRecord,
    InFlight,
    NodeStateError,
    cordon_key,
    failure_of,
    inflight_key,
    parse_model,
    parse_state,
)
from reconciler.model.observed import NodeInfo
from reconciler.model.vocab import PackageStatus as EntryState
from reconciler.model.vocab import Phase

STATE_PREFIX = f"{PREFIX}/nodeState_"
_CORDON_PREFIX = f"{PREFIX}/cordon_"


@dataclass(frozen=True)
class PackageStatus:
    """One package as a recipe's state annotation records it on a node."""

    recipe: str
    name: str
    version: str
    stage: str
    state: str
    restarts: int

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``status -o json``)."""
        return {"recipe": self.recipe, "name": self.name, "version": self.version, "stage": self.stage,
                "state": self.state, "restarts": self.restarts}


@dataclass(frozen=True)
class FailureStatus:
    """A recipe's failure on a node: its failure record, or (``record`` None) a state annotation
    that cannot be read (``reason`` MalformedNodeState)."""

    recipe: str
    reason: str
    message: str
    record: FailureRecord | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form: the failure record's fields with the recipe."""
        if self.record is not None:
            return {"recipe": self.recipe, **self.record.model_dump(exclude_none=True)}
        return {"recipe": self.recipe, "reason": self.reason, "message": self.message}


@dataclass(frozen=True)
class GateStatus:
    """A recipe whose lifecycle holds the node at its readiness gate since ``since`` (RFC 3339, UTC;
    None when unknown)."""

    recipe: str
    since: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"recipe": self.recipe, "since": self.since}


@dataclass(frozen=True)
class NodeStatus:
    """One node's recorded state: the recipes with records on it, their packages, failures and
    readiness gates; ``cordoned_by_us``: a recipe's cordon claim is on it."""

    name: str
    unschedulable: bool
    cordoned_by_us: bool
    recipes: tuple[str, ...]
    packages: tuple[PackageStatus, ...]
    failures: tuple[FailureStatus, ...]
    readiness_gates: tuple[GateStatus, ...]
    #: recipes with an in-flight record on the node (a lifecycle started and not ended)
    inflight: tuple[str, ...] = ()
    #: recipes whose cordon claim the node carries
    claims: tuple[str, ...] = ()

    def state_of(self, recipe: str) -> RecipeState:
        """Where ``recipe`` stands on this node (:class:`RecipeState`): failed when it has a
        failure record (whatever its packages' entries say: a node that failed at its reboot keeps
        ``interrupt/in_progress``), waiting at the readiness gate, in progress while a lifecycle is
        in flight or an entry is not complete, else complete."""
        if any(f.recipe == recipe for f in self.failures):
            return RecipeState.FAILED
        if any(g.recipe == recipe for g in self.readiness_gates):
            return RecipeState.WAITING
        entries = [p for p in self.packages if p.recipe == recipe]
        if recipe in self.inflight or any(p.state != EntryState.COMPLETE for p in entries):
            return RecipeState.IN_PROGRESS
        return RecipeState.COMPLETE if entries else RecipeState.IN_PROGRESS

    def to_dict(self) -> dict[str, Any]:
        """The status document of ``status -o json``: ``{name, unschedulable, cordonedByUs,
        recipes, packages, failures, readinessGate}``."""
        return {"name": self.name, "unschedulable": self.unschedulable, "cordonedByUs": self.cordoned_by_us,
                "recipes": list(self.recipes), "packages": [p.to_dict() for p in self.packages],
                "failures": [f.to_dict() for f in self.failures],
                "readinessGate": [g.to_dict() for g in self.readiness_gates]}


class RecipeState(StrEnum):
    """Where a recipe stands on one node, as the fleet summary counts it (:meth:`NodeStatus.state_of`)."""

    COMPLETE = "complete"
    IN_PROGRESS = "in progress"
    WAITING = "at gate"  # waiting at the readiness gate
    FAILED = "failed"


@dataclass(frozen=True)
class RecipeSummary:
    """One recipe across the nodes that record it: node counts by :class:`RecipeState`, and the
    nodes it holds cordoned (its cordon claim on a node that is unschedulable)."""

    recipe: str
    nodes: int
    counts: dict[RecipeState, int]
    cordoned_by_us: int

    def count(self, state: RecipeState) -> int:
        """Nodes of the recipe in ``state`` (0 when none)."""
        return self.counts.get(state, 0)


def summarize(statuses: Sequence[NodeStatus]) -> list[RecipeSummary]:
    """Per recipe (sorted by name), the nodes recording it counted by :class:`RecipeState`, and
    the unschedulable ones carrying its cordon claim."""
    counts: dict[str, Counter[RecipeState]] = {}
    held: Counter[str] = Counter()
    for st in statuses:
        for r in st.recipes:
            counts.setdefault(r, Counter())[st.state_of(r)] += 1
            held[r] += r in st.claims and st.unschedulable
    return [RecipeSummary(r, c.total(), dict(c), held[r]) for r, c in sorted(counts.items())]


def node_status(node: NodeInfo, recipe: str | None = None) -> NodeStatus:
    """The recorded state of ``node`` (only ``recipe``'s when given)."""
    recipes = sorted(k[len(STATE_PREFIX):] for k in node.annotations if k.startswith(STATE_PREFIX))
    recipes += sorted(k[len(_CORDON_PREFIX):] for k in node.annotations
                      if k.startswith(_CORDON_PREFIX) and k[len(_CORDON_PREFIX):] not in recipes)
    if recipe:
        recipes = [r for r in recipes if r == recipe]
    packages: list[PackageStatus] = []
    failures: list[FailureStatus] = []
    gates: list[GateStatus] = []
    flying: list[str] = []
    for r in recipes:
        try:
            state = parse_state(node.annotations.get(STATE_PREFIX + r), node=node.name, key=STATE_PREFIX + r)
        except NodeStateError as e:
            failures.append(FailureStatus(r, "MalformedNodeState", str(e)))
            state = {}
        for key in sorted(state):
            e2 = state[key]
            packages.append(PackageStatus(r, e2.name, e2.version, e2.stage, e2.state, e2.restarts))
        f = failure_of(node.annotations, r)
        if f is not None:
            failures.append(FailureStatus(r, f.reason, f.message, f))
        fl = parse_model(InFlight, node.annotations.get(inflight_key(r)))
        if fl is not None:
            flying.append(r)
        if fl is not None and fl.phase is Phase.READINESS_GATE:
            gates.append(GateStatus(r, fl.timers.get(Phase.READINESS_GATE, fl.since)))
    claims = tuple(r for r in recipes if cordon_key(r) in node.annotations)
    return NodeStatus(node.name, node.unschedulable, bool(claims), tuple(recipes), tuple(packages),
                      tuple(failures), tuple(gates), tuple(flying), claims)

"""The plan: what will change, on which node, in which order, batch and compartment.

Produced by :func:`reconciler.plan.planner.compute_plan` (pure), rendered by ``report.render``, and
carried out by ``execute``. Its JSON form (``Plan.to_json``) is a stable contract (issue #2 §6):
same inputs → byte-identical JSON and the same ``planHash``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from reconciler.jsonsafe import dumps_sorted
from reconciler.model.base import Frozen
from reconciler.model.nodestate import FailureRecord
from reconciler.model.recipe import Interrupt, ReadinessGate
from reconciler.model.vocab import Action

ACTIONS: tuple[Action, ...] = tuple(Action)


class Step(Frozen):
    """One package's change on one node.

    ``stages`` are the non-interrupt stages this step runs, in order (each followed by its check),
    e.g. ``["apply", "config"]`` for an install, ``["upgrade", "config"]``, ``["config"]`` for a
    reconfigure, ``["uninstall"]``. ``interrupt`` is this package's effective interrupt (its
    ``interrupt``, or for a config-only change the ``configInterrupts`` matching ``changedKeys``).
    ``after`` lists packages (names) whose steps must complete first on this node.
    ``restartOnly``: env/resources changed, config did not — the stage is restarted, no interrupt.
    """

    package: str
    action: Action
    from_: str | None = Field(default=None, alias="from")
    to: str | None = None
    stages: tuple[str, ...]
    reason: str
    interrupt: Interrupt | None = None
    changedKeys: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    restartOnly: bool = False


class NodePlan(Frozen):
    """All work for one node.

    ``interrupt`` is the merged interrupt (reboot > restartAllServices > service > noop; service
    lists unioned), run once after every step's stages; ``cordon`` says whether the node is
    cordoned and drained first (an interrupt is present, or a drain is required). ``waitFor`` are
    protected pods (podNonInterruptLabels) the node waits on; ``evict`` the pods a drain evicts;
    ``finished``: those of ``evict`` that have finished (Succeeded/Failed): the Eviction API deletes
    them without a budget check, and they are reported as removed, not evicted (as ``apply``
    counts them); ``pdbs`` the PodDisruptionBudgets covering them (``ns/name: disruptionsAllowed``);
    ``drainBlockers`` pods a drain would refuse with the reason (kubectl filter classes).
    ``batch`` is 1-based within the compartment; 0 when the node has nothing to do.
    ``notRetried``: the node failed in an earlier run with the same inputs and ``apply`` leaves it
    failed (:func:`~reconciler.model.nodestate.not_retried`; ``--retry-failed`` retries it): its
    failure record; the node then has no steps, no interrupt and no batch, and is not counted as
    changing. None otherwise.
    ``owed``, ``owedInterrupt``, ``owedRelease``: the node's lifecycle in flight is of an older
    release (``owedRelease``, its recipe version): ``apply`` first finishes what its record owes —
    these steps (a step of a package the recipe changed only while its stage runs) and this
    interrupt (:func:`reconciler.plan.owed.owed_work`) — and then runs ``steps`` and
    ``interrupt``, planned from what the node will record by then. Empty otherwise.
    """

    name: str
    compartment: str
    batch: int
    steps: tuple[Step, ...]
    interrupt: Interrupt | None = None
    cordon: bool = False
    waitFor: tuple[str, ...] = ()
    evict: tuple[str, ...] = ()
    finished: tuple[str, ...] = ()
    pdbs: dict[str, int] = Field(default_factory=dict)
    drainBlockers: tuple[str, ...] = ()
    untaint: bool = False
    imported: bool = False
    note: str = ""
    notRetried: FailureRecord | None = None
    owed: tuple[Step, ...] = ()
    owedInterrupt: Interrupt | None = None
    owedRelease: str = ""

    @property
    def has_work(self) -> bool:
        """The node is not up to date: the run has something to do on it (steps, an interrupt —
        owed ones included —, a batch, or the runtime-required taint to remove), or it is left
        failed (``notRetried``: the run reports it failed and does not touch it). False: up to
        date (a run leaves it ``untouched`` and every report counts it complete)."""
        return bool(self.steps or self.interrupt is not None or self.batch > 0 or self.untaint
                    or self.notRetried is not None or self.owed or self.owedInterrupt is not None)


class HaltRule(Frozen):
    """When a rollout halts a compartment (:func:`reconciler.plan.batching.halt_rule` makes it).

    It halts once ``failureThreshold`` consecutive batches failed while under ``safetyLimit``
    percent of its nodes are done (a batch fails when under ``batchThreshold`` percent of its
    nodes succeeded); ``"never"``: nothing halts it. ``default``: the policy set no
    ``failureThreshold`` (or the compartment has no strategy) and the safe default applies: 1, at
    any progress (``safetyLimit`` 100).
    """

    failureThreshold: int | Literal["never"]
    safetyLimit: int
    batchThreshold: int
    default: bool = False

    @property
    def off(self) -> bool:
        """Nothing halts the compartment (``failureThreshold: never``)."""
        return self.failureThreshold == "never"

    def describe(self) -> str:
        """The rule in words, as ``plan``, the PR comment and a halted run state it, e.g. "halts after
        the first failed batch (a batch fails when one of its nodes fails; default: no
        failureThreshold)"."""
        if self.failureThreshold == "never":
            return "never halts (failureThreshold: never): a failing package can reach every node"
        n = self.failureThreshold
        first = "the first failed batch" if n == 1 else f"{n} consecutive failed batches"
        when = "" if self.safetyLimit >= 100 else f" while under {self.safetyLimit} % of its nodes are done"
        fails = ("one of its nodes fails" if self.batchThreshold >= 100
                 else f"under {self.batchThreshold} % of its nodes succeed")
        return f"halts after {first}{when} (a batch fails when {fails}" + (
            "; default: no failureThreshold)" if self.default else ")")


class CompartmentPlan(Frozen):
    """Predicted batches of one compartment (node names in order; all nodes assumed to succeed) and
    ``halt``: when the rollout halts it."""

    name: str
    strategy: str
    ceiling: int
    matched: int
    batches: tuple[tuple[str, ...], ...]
    halt: HaltRule


class ActionCounts(Frozen):
    """Steps per :class:`~reconciler.model.vocab.Action` over every node of a plan."""

    install: int = 0
    upgrade: int = 0
    downgrade: int = 0
    reconfigure: int = 0
    uninstall: int = 0


class InterruptCounts(Frozen):
    """Nodes per merged interrupt type (:class:`~reconciler.model.vocab.InterruptType`), in the
    order the renderers list them."""

    reboot: int = 0
    restartAllServices: int = 0
    service: int = 0
    noop: int = 0


class SelectorScope(Frozen):
    """What ``-l/--selector`` narrowed a plan to: the selector's kubectl text, the ``nodes`` it
    picks of those the recipe selects, and the nodes with work it leaves out (``leftOut``)."""

    selector: str
    nodes: int
    leftOut: int


class PlanSummary(Frozen):
    """A plan's counts: the ``nodes`` the recipe selects, ``nodesChanging`` (with work), steps by
    action, nodes by interrupt type, ``batches`` over all compartments, nodes whose
    runtime-required taint is removed (``untaint``), nodes left failed (``notRetried``) and, with
    ``-l``, its :class:`SelectorScope` (absent from the JSON form without one)."""

    nodes: int
    nodesChanging: int
    actions: ActionCounts
    interrupts: InterruptCounts
    batches: int
    untaint: int
    notRetried: int
    selector: SelectorScope | None = None


class RecipeRef(Frozen):
    """The recipe a plan is for."""

    name: str
    version: str


class OutOfScopeNode(Frozen):
    """A node the recipe no longer selects (it left the nodeSelector, or is labelled ignore) that
    still holds records of this recipe from a lifecycle in flight. ``holdsCordon``: our cordon
    claim is on it. ``owes``: the interrupt type it still owes ("" when none): such a node keeps
    its cordon and its record until it is back in scope (the lifecycle then resumes and runs the
    interrupt) or is reset with ``--force``; a node that owes nothing is released by ``apply``."""

    name: str
    reason: str
    holdsCordon: bool = False
    owes: str = ""


class Plan(Frozen):
    """A complete, deterministic plan for one recipe against one observed fleet. ``outOfScope``:
    nodes outside the selection that still hold this recipe's records (:class:`OutOfScopeNode`).
    ``readinessGate``: the recipe's gate (every node with work is held after its packages until
    the external validator passes it), None without one."""

    planHash: str
    recipe: RecipeRef
    policy: str
    revision: str = ""
    summary: PlanSummary
    compartments: tuple[CompartmentPlan, ...]
    nodes: tuple[NodePlan, ...]
    warnings: tuple[str, ...] = ()
    outOfScope: tuple[OutOfScopeNode, ...] = ()
    readinessGate: ReadinessGate | None = None

    def node(self, name: str) -> NodePlan | None:
        """The plan of node ``name``, if it has one."""
        for n in self.nodes:
            if n.name == name:
                return n
        return None

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract as a plain dict (aliases used: ``from``; ``readinessGate`` and
        ``summary.selector`` only when set, so plans without them keep the contract's shape)."""
        exclude: dict[str, Any] = {"readinessGate": True} if self.readinessGate is None else {}
        if self.summary.selector is None:
            exclude["summary"] = {"selector"}
        return self.model_dump(mode="json", by_alias=True, exclude=exclude or None)

    def to_json(self) -> str:
        """Canonical JSON: sorted keys, two-space indent, trailing newline; non-ASCII characters
        and DEL as ``\\uXXXX`` escapes (``json.dumps(..., sort_keys=True, indent=2)``)."""
        return canonical_json(self.to_dict())


def canonical_json(doc: Any) -> str:
    """``json.dumps(doc, sort_keys=True, indent=2) + "\\n"`` (through orjson:
    :func:`reconciler.jsonsafe.dumps_sorted`)."""
    return dumps_sorted(doc, indent=True) + "\n"

"""DeploymentPolicy: compartments, budgets and batch strategies (NodeWright shape).

Rules from semantics-nodewright.md §1.2 with our decisions (a) and (i): the budget ceiling caps
concurrency; a zero budget is rejected; a positive percent that rounds to 0 gives a ceiling of 1.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from reconciler.model.base import Frozen, StrictBool, StrictInt
from reconciler.model.selector import LabelSelector, check_selector

DEFAULT_COMPARTMENT = "__default__"
_PRINTABLE = re.compile(r"[^\x00-\x20\x7f-\x9f]+")

#: Upper bound of every node count in a policy (budget counts, batch sizes, deltas): ten times the
#: largest Kubernetes clusters that exist (~65,000 nodes), so a typo or a 20-digit number is an
#: error at load instead of a number that overflows something later.
MAX_NODE_COUNT = 1_000_000


class Budget(Frozen):
    """Interruption budget: exactly one of ``percent`` (1-100, of the compartment's matched nodes)
    or ``count`` (≥1 nodes)."""

    percent: StrictInt | None = Field(
        default=None,
        description="Percent (1-100) of the compartment's matched nodes disrupted at once, rounded down but at least "
                    "1; excludes count."
    )
    count: StrictInt | None = Field(
        default=None, le=MAX_NODE_COUNT,
        description="Number of nodes disrupted at once (at least 1); excludes percent."
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> Budget:
        if (self.percent is None) == (self.count is None):
            raise ValueError("budget needs exactly one of percent or count")
        if self.percent is not None and self.percent > 100:
            raise ValueError(f"budget.percent {self.percent} must be 1-100 (a percentage of the compartment's nodes)")
        if self.percent is not None and self.percent < 1:
            raise ValueError(
                f"budget.percent {self.percent} must be 1-100 (0 would never let a node move: "
                "a policy that can never finish)"
            )
        if self.count is not None and self.count < 1:
            raise ValueError(
                f"budget.count {self.count} must be at least 1 (0 would never let a node move: "
                "a policy that can never finish)"
            )
        return self

    def ceiling(self, matched: int) -> int:
        """Nodes that may be disrupted at once among ``matched`` nodes.

        ``count`` → count; ``percent`` → ``max(1, floor(matched × percent / 100))``; 0 when
        nothing matches (NodeWright ``CalculateCeiling``, semantics §1.2.2).
        """
        if matched <= 0:
            return 0
        if self.count is not None:
            return self.count
        assert self.percent is not None
        return max(1, matched * self.percent // 100)

    def rounds_up(self, matched: int) -> bool:
        """True when a percent budget rounded down to 0 nodes and was raised to 1 (plan warns)."""
        return self.percent is not None and matched > 0 and matched * self.percent // 100 == 0


class StrategyParams(Frozen):
    """Parameters shared by all strategies (semantics §1.2 table).

    ``batchThreshold``: success percent a batch needs to pass (1-100). ``failureThreshold``:
    consecutive failed batches that halt the compartment while progress is below ``safetyLimit``
    percent; unset: the first failed batch halts it, at any progress (issue 34: safe by default;
    NodeWright's unset means never, :func:`reconciler.plan.batching.halt_rule`); ``"never"``:
    nothing halts it (NodeWright's default, written out). ``safetyLimit``: progress percent below
    which failures shrink batches and count toward an explicit ``failureThreshold``.
    """

    initialBatch: StrictInt = Field(default=1, ge=1, le=MAX_NODE_COUNT, description="Nodes in the first batch.")
    batchThreshold: StrictInt = Field(
        default=100, ge=1, le=100,
        description="Percent of a batch's nodes that must succeed for the batch to pass (1-100)."
    )
    failureThreshold: Annotated[StrictInt, Field(ge=1, le=MAX_NODE_COUNT)] | Literal["never"] | None = Field(
        default=None,
        description="Consecutive failed batches that halt the compartment while progress is below safetyLimit; unset: "
                    "the first failed batch halts it, at any progress; never: nothing halts it (NodeWright's default)."
    )
    safetyLimit: StrictInt = Field(
        default=50, ge=1, le=100,
        description="Progress percent (1-100) below which a failed batch shrinks the next one and counts toward "
                    "failureThreshold."
    )


    @field_validator("failureThreshold", mode="before")
    @classmethod
    def _threshold_or_never(cls, v: object) -> object:
        """One clear error for a value that is neither 1..MAX_NODE_COUNT nor ``never`` (instead of
        one per member of the union)."""
        if v is None or v == "never" or (type(v) is int and 1 <= v <= MAX_NODE_COUNT):
            return v
        raise ValueError(f"failureThreshold must be a number of batches from 1 to {MAX_NODE_COUNT}, or never "
                         f"(unset: 1, the first failed batch halts); got {repr(v)[:40]}")


class FixedParams(StrategyParams):
    """Fixed batches of ``initialBatch`` nodes."""


class LinearParams(StrategyParams):
    """Batches grow by ``delta`` after a good batch, shrink by it after a failed one."""

    delta: StrictInt = Field(
        default=1, ge=1, le=MAX_NODE_COUNT,
        description="Nodes added to the batch size after a good batch, removed after a failed one."
    )


class ExponentialParams(StrategyParams):
    """Batches multiply by ``growthFactor`` after a good batch, divide after a failed one."""

    growthFactor: StrictInt = Field(
        default=2, ge=2, le=1000,  # ×1000 per batch already reaches any fleet in 2
        description="Factor the batch size is multiplied by after a good batch, divided by after a failed one "
                    "(2 to 1000)."
    )


class Strategy(Frozen):
    """Exactly one of ``fixed``, ``linear`` or ``exponential``."""

    fixed: FixedParams | None = Field(default=None, description="Every batch has initialBatch nodes.")
    linear: LinearParams | None = Field(default=None, description="Batches grow by delta after each good batch.")
    exponential: ExponentialParams | None = Field(
        default=None,
        description="Batches multiply by growthFactor after each good batch."
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> Strategy:
        n = sum(x is not None for x in (self.fixed, self.linear, self.exponential))
        if n != 1:
            raise ValueError("strategy needs exactly one of fixed, linear or exponential")
        return self

    @property
    def kind(self) -> Literal["fixed", "linear", "exponential"]:
        """The strategy's name."""
        if self.fixed is not None:
            return "fixed"
        if self.linear is not None:
            return "linear"
        return "exponential"

    @property
    def params(self) -> StrategyParams:
        """The parameters of whichever strategy is set."""
        p = self.fixed or self.linear or self.exponential
        assert p is not None
        return p


#: Overlap tie-break order: safer strategies win (semantics §1.2.1).
STRATEGY_SAFETY = {"fixed": 0, "linear": 1, "exponential": 2, "unknown": 3}


class DefaultCompartment(Frozen):
    """The compartment for selected nodes that match no named compartment."""

    budget: Budget = Field(description="Nodes of the default compartment disrupted at once.")
    strategy: Strategy | None = Field(
        default=None,
        description="Batch strategy of the default compartment; unset: every batch as large as the budget "
                    "allows, halted at the first batch in which a node fails."
    )


class Compartment(Frozen):
    """A named group of nodes (by ``selector``) with its own budget and optional strategy.

    ``name``: 1-253 characters, no whitespace or control characters (it is printed, recorded in
    batch state and used as a metric label)."""

    name: str = Field(
        min_length=1, max_length=253,
        description="Compartment name (1-253 characters, no whitespace); printed, recorded in batch state and a metric "
                    "label."
    )
    selector: LabelSelector = Field(description="The nodes of this compartment (among the recipe's nodes).")
    budget: Budget = Field(description="Nodes of this compartment disrupted at once.")
    strategy: Strategy | None = Field(
        default=None,
        description="Batch strategy of this compartment; unset: every batch as large as the budget allows, "
                    "halted at the first batch in which a node fails."
    )

    @field_validator("selector")
    @classmethod
    def _selector_labels(cls, v: LabelSelector) -> LabelSelector:
        return check_selector(v)

    @field_validator("name")
    @classmethod
    def _printable(cls, v: str) -> str:
        if not _PRINTABLE.fullmatch(v):
            raise ValueError(f"compartment name {v[:80]!r} may not hold whitespace or control characters")
        return v

    @model_validator(mode="after")
    def _not_reserved(self) -> Compartment:
        if self.name == DEFAULT_COMPARTMENT:
            raise ValueError(f"compartment name {DEFAULT_COMPARTMENT!r} is reserved")
        return self


class DeploymentPolicy(Frozen):
    """Compartments plus a default, as NodeWright's ``DeploymentPolicy`` spec.

    ``source`` is the file it was read from (for messages).
    """

    name: str = Field(description="Policy name (metadata.name), as a recipe's deploymentPolicy names it.")
    source: str = Field(default="", description="The file it was read from, for messages (set by the loader).")
    resetBatchStateOnCompletion: StrictBool = Field(
        default=True,
        description="Start the batches from initialBatch again when a rollout completes."
    )
    default: DefaultCompartment = Field(
        description="The compartment of selected nodes that match no named compartment."
    )
    compartments: tuple[Compartment, ...] = Field(
        default=(),
        description="Named groups of nodes, each with its own budget and strategy; a node in several takes the safest "
                    "strategy."
    )

    @model_validator(mode="after")
    def _unique(self) -> DeploymentPolicy:
        seen: dict[str, str] = {}
        sels: dict[str, str] = {}
        for c in self.compartments:
            if c.name in seen:
                raise ValueError(f"compartment name {c.name!r} is used twice")
            seen[c.name] = c.name
            key = c.selector.canonical()
            if key in sels:
                raise ValueError(
                    f"compartments {sels[key]!r} and {c.name!r} have identical selectors; "
                    "a node could never be placed deterministically"
                )
            sels[key] = c.name
        return self

    @classmethod
    def legacy(cls, name: str, budget: Budget | None) -> DeploymentPolicy:
        """The synthetic policy of a recipe without ``deploymentPolicy`` (semantics §1.2.6):
        one ``__default__`` compartment, budget default 100 %, fixed batches of the ceiling."""
        b = budget or Budget(percent=100)
        return cls(name=name, default=DefaultCompartment(budget=b, strategy=None))

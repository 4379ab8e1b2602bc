"""Public helpers for tests: builders of recipes, policies, nodes, pods and fleets.

See :mod:`reconciler.testing.builders`.
"""

from reconciler.testing.builders import (
    as_interrupt,
    as_selector,
    budget,
    compartment,
    complete_entry,
    entry,
    fleet,
    inflight,
    node,
    package,
    pdb,
    pod,
    policy,
    recipe,
    state_annotations,
    strategy,
)

__all__ = [
    "as_interrupt",
    "as_selector",
    "budget",
    "compartment",
    "complete_entry",
    "entry",
    "fleet",
    "inflight",
    "node",
    "package",
    "pdb",
    "pod",
    "policy",
    "recipe",
    "state_annotations",
    "strategy",
]

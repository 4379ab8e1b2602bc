"""Interrupt merging: one interrupt per node, whatever the number of packages asking for one (pure).

A node runs at most one interrupt per lifecycle, after every step's stages and before the
``post-interrupt`` stages. NodeWright merges the effective interrupts of the packages running
together by priority (``fudgeInterruptWithPriority``/``mergeInterrupt``, semantics §2.5 step 5):
``reboot`` > ``restartAllServices`` > ``service`` > ``noop``; equal-priority ``service``
interrupts are merged by taking the union of their services, sorted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from reconciler.model.recipe import INTERRUPT_PRIORITY, Interrupt


def merge_interrupts(interrupts: Iterable[Interrupt | None]) -> Interrupt | None:
    """Merge interrupts into the single one the node runs.

    The highest-priority type wins (reboot > restartAllServices > service > noop, semantics §2.5);
    when the winner is ``service``, the result restarts the union of every ``service`` interrupt's
    units, sorted and de-duplicated. ``None`` entries are ignored.

    Returns:
        The merged interrupt, or None when no interrupt was given.
    """
    present = [i for i in interrupts if i is not None]
    if not present:
        return None
    top = max(INTERRUPT_PRIORITY[i.type] for i in present)
    winner = next(i for i in present if INTERRUPT_PRIORITY[i.type] == top)
    if winner.type != "service":
        return Interrupt(type=winner.type)
    services = sorted({s for i in present if i.type == "service" for s in i.services})
    return Interrupt(type="service", services=tuple(services))


def interrupt_from_record(raw: Mapping[str, Any] | None) -> Interrupt | None:
    """Read the ``{type, services}`` interrupt stored in an ``InFlight`` record.

    Returns:
        The interrupt, or None when ``raw`` is None/empty or not a valid interrupt (the planner
        then warns; a record it cannot read never invents an interrupt).
    """
    if not raw:
        return None
    try:
        return Interrupt.model_validate(dict(raw))
    except ValidationError:
        return None


def describe(interrupt: Interrupt | None) -> str:
    """Short human form: ``reboot``, ``service(containerd,kubelet)``, ``-`` for none."""
    if interrupt is None:
        return "-"
    if interrupt.type == "service":
        return f"service({','.join(interrupt.services)})"
    return interrupt.type

"""Re-export of :mod:`reconciler.model.interrupts` (moved there so ``diff``, below ``plan`` in the
layer order of docs/architecture-layers.md, can use it). Import from ``reconciler.model.interrupts``."""

from reconciler.model.interrupts import describe, interrupt_from_record, merge_interrupts

__all__ = ["describe", "interrupt_from_record", "merge_interrupts"]

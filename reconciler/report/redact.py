"""The redaction function, where the renderers and adapters have always imported it from; it lives
in :mod:`reconciler.model.redact` so that the models can mask the cluster text they hold (a stage's
log tail in a failure record) when they are built."""

from reconciler.model.redact import MASK, redact, redact_url

__all__ = ["MASK", "redact", "redact_url"]

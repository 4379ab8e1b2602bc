"""Common pydantic base classes for models read from or written to files."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """Frozen model that rejects unknown fields (a typo in a recipe is an error, not silence)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class FrozenLoose(BaseModel):
    """Frozen model that ignores unknown fields: for Kubernetes objects read from a cluster dump."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

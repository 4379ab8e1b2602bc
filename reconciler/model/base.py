"""Common pydantic base classes for models read from or written to files."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Strict

#: Numbers and booleans of files people write, taken only as themselves: YAML's ``true`` is not
#: the integer 1, ``"900"`` not 900 and ``"yes"`` not True (pydantic's lax mode would take them
#: silently). A float field still takes an integer (``30`` for 30.0).
StrictInt = Annotated[int, Strict()]
StrictBool = Annotated[bool, Strict()]
StrictFloat = Annotated[float, Strict()]


class Frozen(BaseModel):
    """Frozen model that rejects unknown fields (a typo in a recipe is an error, not silence)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class FrozenLoose(BaseModel):
    """Frozen model that ignores unknown fields: for Kubernetes objects read from a cluster dump."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

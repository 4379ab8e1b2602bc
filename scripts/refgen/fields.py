"""docs/reference/recipe.md and policy.md from the pydantic models' field descriptions."""

from __future__ import annotations

import enum
import types
import typing

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from reconciler.load import policies as policy_loader
from reconciler.load import recipes as recipe_loader
from reconciler.model.policy import DeploymentPolicy
from reconciler.model.recipe import Package, Recipe
from refgen.common import GENERATED, _code, _md_keep_code


def _models_in(annotation: object) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (``X | None``, ``tuple[X, ...]``, ``dict[str, X]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def type_text(annotation: object) -> str:
    """A field's type in the words of a YAML document: string, integer, boolean, number, list of X,
    map of string to X, one of `a`, `b`; a model is an object (its fields follow)."""
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin is typing.Annotated:
        return type_text(args[0])
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_text(a) for a in args)
    if origin is typing.Literal:
        return "one of " + ", ".join(_code(a) for a in typing.get_args(annotation))
    if origin is tuple:
        return f"list of {type_text(args[0])}"
    if origin is dict:
        return f"map of string to {type_text(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "one of " + ", ".join(_code(m.value) for m in annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "object"
    return {str: "string", int: "integer", bool: "boolean", float: "number"}.get(annotation, str(annotation))  # type: ignore[call-overload]


def default_text(field: typing.Any) -> str:
    """The default as a document would spell it; "required" when there is none."""
    if field.is_required():
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default
    if value is PydanticUndefined or value is None:
        return "unset"
    if isinstance(value, BaseModel):
        return "the defaults of its fields"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, tuple | list):
        return "`[]`" if not value else f"`{list(value)}`"
    if isinstance(value, dict):
        return "`{}`" if not value else f"`{value}`"
    return _code(value)


def field_sections(path: str, model: type[BaseModel], only: tuple[str, ...] | None = None,
                   skip: tuple[str, ...] = ()) -> list[str]:
    """A section per model reached from ``model`` (breadth first): one list item per field, then
    the sections of the fields that are objects."""
    lines: list[str] = []
    queue: list[tuple[str, type[BaseModel], tuple[str, ...] | None, tuple[str, ...]]] = [(path, model, only, skip)]
    while queue:
        where, current, keep, drop = queue.pop(0)
        doc = " ".join((current.__doc__ or "").strip().split("\n\n")[0].split()).replace("``", "`")
        lines += [f"## `{where}`", "", _md_keep_code(doc), ""]
        names = [n for n in (keep or tuple(current.model_fields)) if n not in drop]
        for name in names:
            field = current.model_fields[name]
            lines.append(f"- **`{name}`** ({type_text(field.annotation)}; {default_text(field)}): "
                         f"{_md_keep_code(field.description or '')}")
            for sub in _models_in(field.annotation):
                origin = typing.get_origin(field.annotation)
                inner = f"{where}.{name}"
                if origin is dict or (origin in (typing.Union, types.UnionType) and any(
                        typing.get_origin(a) is dict for a in typing.get_args(field.annotation))):
                    inner += ".<key>"
                elif origin is tuple:
                    inner += "[]"
                queue.append((inner, sub, None, ("name",) if sub is Package else ()))
        lines.append("")
    return lines


def recipe_page() -> str:
    """docs/reference/recipe.md."""
    lines = [GENERATED, "# Recipe fields", "",
             "Every field of a `reconciler.nodewright.dev/v1alpha1 NodeRecipe`: `metadata.name` and the "
             "`spec` below; a recipe file and the object in the cluster are the same document. Files "
             "that give the release in `metadata.version` are read with a warning for now "
             "(`reconciler convert --write` moves it to `spec.version`). NodeWright and Skyhook resources "
             "are read into the same fields. The same descriptions are in the NodeRecipe CRD, so "
             "`kubectl explain noderecipe.spec.packages` prints them. A worked example: "
             "[write a recipe](../how-to/write-recipe.md); the checks beyond types: [inputs](inputs.md).", ""]
    lines += ["## `metadata`", "",
              f"- **`name`** (string; required): {_md_keep_code(Recipe.model_fields['name'].description or '')}",
              ""]
    lines += field_sections("spec", Recipe, only=recipe_loader.SPEC_FIELDS)
    return "\n".join(lines).rstrip() + "\n"


def policy_page() -> str:
    """docs/reference/policy.md."""
    lines = [GENERATED, "# Policy fields", "",
             "Every field of a `DeploymentPolicy` (`reconciler.nodewright.dev/v1alpha1`, or NodeWright's "
             "and Skyhook's groups): `metadata.name`, which a recipe's `deploymentPolicy` names, and the "
             "`spec` below. A recipe without a policy gets one compartment from its `interruptionBudget`.", ""]
    lines += field_sections("spec", DeploymentPolicy, only=policy_loader.SPEC_FIELDS)
    return "\n".join(lines).rstrip() + "\n"

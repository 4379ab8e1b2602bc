"""The NodeRecipe CustomResourceDefinition, generated from the recipe model, and the check of a
recipe document against its schema (what the API server would refuse).

:func:`noderecipe_crd` is what ``charts/node-reconciler/crds/noderecipes.yaml`` holds
(scripts/gen-crds writes it; tests/deploy/test_chart.py fails when the file differs): its ``spec``
schema is :class:`~reconciler.model.recipe.Recipe`'s fields limited to
:data:`~reconciler.load.recipes.SPEC_FIELDS`, so the cluster accepts exactly the documents
``reconciler validate`` reads (the loader still checks what a schema cannot: versions, digests,
dependencies, durations).

Conversion of pydantic's JSON schema to a structural OpenAPI v3 schema (Kubernetes CRD rules,
https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#specifying-a-structural-schema):
``$ref`` inlined; ``X | None`` → X with ``nullable: true``; ``Literal`` → ``enum``; ``dict[str, X]``
→ ``additionalProperties``; titles, defaults (the loader applies them, the API server must not
rewrite the document) and ``additionalProperties: false`` (pruning and strict field validation do
that job) removed; a field's description is its pydantic ``Field(description=...)`` (every field
has one: tests/unit/docs/test_reference.py), else the first paragraph of its model's docstring, so
``kubectl explain noderecipe.spec.packages`` says what each field means.

:func:`schema_problems` checks a document as the API server does a NodeRecipe written with strict
field validation (``kubectl apply``'s default since 1.27): the structural schema above, unknown
fields refused where a schema lists properties, ``metadata`` only ObjectMeta's fields. It is ours
(about 60 lines) rather than ``jsonschema``'s: a structural schema is not JSON Schema (``nullable``,
``x-kubernetes-int-or-string``, ``x-kubernetes-preserve-unknown-fields``, pruning) and would need
translating first, and the image installs every wheel from a pinned lock (``jsonschema`` would add
four, one compiled); tests/unit/load/test_crd.py checks it agrees with ``jsonschema`` on the
translated schema.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from reconciler.errors import InputError
from reconciler.load.recipes import SERVER_METADATA, SPEC_FIELDS
from reconciler.load.yamlsafe import PathKey, YamlDoc
from reconciler.model.recipe import Package, Recipe

GROUP = "reconciler.nodewright.dev"
#: ObjectMeta fields a manifest sets (k8s.io/apimachinery ``ObjectMeta``); with
#: :data:`~reconciler.load.recipes.SERVER_METADATA` every field the API server accepts in ``metadata``.
USER_METADATA = ("name", "labels", "annotations")


def _first_sentence(text: str | None) -> str | None:
    if not text:
        return None
    para = " ".join(text.strip().split("\n\n")[0].split())
    return para.replace("``", "")


def structural(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Convert one pydantic JSON-schema node (see the module docstring)."""
    own = _first_sentence(schema.get("description"))
    if "$ref" in schema or "anyOf" in schema:
        out = _referenced(schema, defs)
        if own:
            out["description"] = own
        return out
    return _plain(schema, defs)


def _referenced(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A ``$ref`` or ``anyOf`` node: the target's schema (its description is the target model's,
    which :func:`structural` replaces by the field's own when it has one)."""
    if "$ref" in schema:
        return structural(defs[schema["$ref"].split("/")[-1]], defs)
    alts = [a for a in schema["anyOf"] if a.get("type") != "null"]
    nullable = len(alts) < len(schema["anyOf"])
    if len(alts) == 1:
        out = structural(alts[0], defs)
    elif {a.get("type") for a in alts} == {"integer", "string"}:
        out = {"x-kubernetes-int-or-string": True}
    else:
        out = {"x-kubernetes-preserve-unknown-fields": True}
    if nullable:
        out["nullable"] = True
    return out


def _plain(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "type" in schema:
        out["type"] = schema["type"]
    if "enum" in schema:
        out["enum"] = list(schema["enum"])
    if "const" in schema:
        out["enum"] = [schema["const"]]
    for k in ("minimum", "maximum", "minLength", "maxLength", "pattern", "minItems", "maxItems"):
        if k in schema:
            out[k] = schema[k]
    if schema.get("type") == "object" or "properties" in schema:
        out["type"] = "object"
        if "properties" in schema:
            out["properties"] = {k: structural(v, defs) for k, v in schema["properties"].items()}
            if schema.get("required"):
                out["required"] = list(schema["required"])
        ap = schema.get("additionalProperties")
        if isinstance(ap, dict) and "properties" not in schema:
            out["additionalProperties"] = structural(ap, defs)
        elif ap is None and "properties" not in schema:
            out["x-kubernetes-preserve-unknown-fields"] = True
    if schema.get("type") == "array":
        items = schema.get("items")
        if isinstance(items, dict):
            out["items"] = structural(items, defs)
        else:  # fixed-length tuple or anything: keep whatever is there
            out["items"] = {"x-kubernetes-preserve-unknown-fields": True}
    desc = _first_sentence(schema.get("description"))
    if desc:
        out["description"] = desc
    return out


def spec_schema() -> dict[str, Any]:
    """The ``spec`` schema: Recipe's fields limited to SPEC_FIELDS; ``packages`` is a map of
    Package (its ``name`` is the map key, so not a field)."""
    full = Recipe.model_json_schema()
    defs = full.get("$defs", {})
    props = {k: v for k, v in full["properties"].items() if k in SPEC_FIELDS}
    missing = set(SPEC_FIELDS) - set(props)
    if missing:
        raise AssertionError(f"SPEC_FIELDS not on the Recipe model: {sorted(missing)}")
    pkg = Package.model_json_schema()
    pkg_defs = {**defs, **pkg.get("$defs", {})}
    pkg_props = {k: v for k, v in pkg["properties"].items() if k != "name"}
    pkg_schema = structural({"type": "object", "properties": pkg_props,
                             "required": [r for r in pkg.get("required", []) if r != "name"],
                             "description": pkg.get("description")}, pkg_defs)
    spec: dict[str, Any] = {"type": "object", "description": _first_sentence(full.get("description")) or "",
                            "properties": {}}
    for name, sub in props.items():
        if name == "packages":
            spec["properties"][name] = {"type": "object", "additionalProperties": pkg_schema,
                                        "description": _first_sentence(sub.get("description")) or ""}
        else:
            spec["properties"][name] = structural(sub, defs)
    return spec


def status_schema() -> dict[str, Any]:
    """kstatus-compatible status; fields beyond these are kept (the controller may add some)."""
    condition = {
        "type": "object",
        "required": ["type", "status", "lastTransitionTime", "reason", "message"],
        "properties": {
            "type": {"type": "string"},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "reason": {"type": "string"},
            "message": {"type": "string"},
            "observedGeneration": {"type": "integer", "format": "int64"},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
        },
    }
    return {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        # kstatus calls an object without a status Current: until the controller's first status
        # write, observedGeneration -1 (behind every generation) makes a new object InProgress
        "default": {"observedGeneration": -1},
        "properties": {
            "observedGeneration": {"type": "integer", "format": "int64"},
            "phase": {"type": "string"},
            "summary": {"type": "string", "description": "<complete>/<total> nodes complete, ..."},
            "nodes": {"type": "object", "additionalProperties": {"type": "integer"}},
            "recipeVersion": {"type": "string"},
            "revision": {"type": "string"},
            "planHash": {"type": "string"},
            "conditions": {"type": "array", "x-kubernetes-list-type": "map",
                           "x-kubernetes-list-map-keys": ["type"], "items": condition},
        },
    }


def noderecipe_crd() -> dict[str, Any]:
    """The whole NodeRecipe CustomResourceDefinition object."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"noderecipes.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Cluster",
            "names": {"kind": "NodeRecipe", "listKind": "NodeRecipeList", "plural": "noderecipes",
                      "singular": "noderecipe", "shortNames": ["nrec"], "categories": ["reconciler"]},
            "versions": [{
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
                    {"name": "Summary", "type": "string", "jsonPath": ".status.summary"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "required": ["spec"],
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": spec_schema(),
                        "status": status_schema(),
                    },
                }},
            }],
        },
    }


def nodereciperollout_crd() -> dict[str, Any]:
    """The NodeRecipeRollout CustomResourceDefinition (status objects of ``apply``), from the
    package's ``nodereciperollouts.yaml`` (hand-written: the status model has no fields to
    generate it from)."""
    from importlib.resources import files

    import yaml

    doc: dict[str, Any] = yaml.safe_load(files("reconciler.load").joinpath("nodereciperollouts.yaml").read_text())
    return doc


def all_crds() -> list[dict[str, Any]]:
    """Every CustomResourceDefinition of this release (what the chart's ``crds/`` holds)."""
    return [noderecipe_crd(), nodereciperollout_crd()]


# ------------------------------------------------------------------ the check


_TYPES: dict[str, tuple[type, ...]] = {"object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,),
                                      "integer": (int,), "number": (int, float)}


def _type_ok(value: Any, node: Mapping[str, Any]) -> bool:
    """Whether ``value`` has the type ``node`` asks for (``nullable``, int-or-string; a bool is no number)."""
    if value is None:
        return bool(node.get("nullable")) or ("type" not in node and not node.get("x-kubernetes-int-or-string"))
    if node.get("x-kubernetes-int-or-string"):
        return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
    kind = node.get("type")
    if kind is None:
        return True
    if isinstance(value, bool) and kind != "boolean":
        return False
    return isinstance(value, _TYPES[kind])


#: Bounds of a structural schema: keyword → (a lower bound?, unit). A number is bounded by its
#: value, a string by its length in characters, a list by its items.
_BOUNDS = {"minimum": (True, ""), "maximum": (False, ""), "minLength": (True, " characters"),
           "maxLength": (False, " characters"), "minItems": (True, " items"), "maxItems": (False, " items")}


def _check(value: Any, node: Mapping[str, Any], path: PathKey, out: list[tuple[PathKey, str]]) -> None:
    """Append ``(path, problem)`` for each way ``value`` breaks the structural schema ``node``."""
    if not _type_ok(value, node):
        want = "integer or string" if node.get("x-kubernetes-int-or-string") else node.get("type")
        out.append((path, f"must be of type {want}"))
        return
    if value is None:
        return
    if "enum" in node and value not in node["enum"]:
        out.append((path, f"must be one of {', '.join(map(str, node['enum']))}"))
    size = len(value) if isinstance(value, str | list) else value if isinstance(value, int | float) else None
    for key, (lower, unit) in _BOUNDS.items():
        if key in node and size is not None and (size < node[key] if lower else size > node[key]):
            side = "at least" if lower else "at most"
            out.append((path, f"must have {side} {node[key]}{unit}" if unit else f"must be {side} {node[key]}"))
    if "pattern" in node and isinstance(value, str) and not re.search(node["pattern"], value):
        out.append((path, f"must match {node['pattern']}"))
    if isinstance(value, dict):
        props = node.get("properties")
        out.extend((path, f"{req} is required") for req in node.get("required", ()) if req not in value)
        for k, v in value.items():
            if props is not None and k in props:
                _check(v, props[k], (*path, k), out)
            elif isinstance(node.get("additionalProperties"), Mapping):
                _check(v, node["additionalProperties"], (*path, k), out)
            elif props is not None and not node.get("x-kubernetes-preserve-unknown-fields"):
                out.append(((*path, k), "unknown field (strict field validation refuses it)"))
    elif isinstance(value, list) and isinstance(node.get("items"), Mapping):
        for i, v in enumerate(value):
            _check(v, node["items"], (*path, i), out)


@functools.cache
def object_schema() -> Mapping[str, Any]:
    """The NodeRecipe schema the API server applies to an object: :func:`noderecipe_crd`'s, with
    ``metadata`` limited to ObjectMeta's fields (the server validates ObjectMeta itself) and
    ``status`` left out (with a status subresource, a write of the object ignores it). Built once
    (generating the schema from the models takes about 50 ms); not to be changed."""
    schema = dict(noderecipe_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    props = dict(schema["properties"])
    props["metadata"] = {"type": "object", "properties": {k: {} for k in (*USER_METADATA, *SERVER_METADATA)}}
    props.pop("status")
    schema["properties"] = props
    return schema


def schema_problems(doc: YamlDoc, *, ignore: tuple[PathKey, ...] = ()) -> list[InputError]:
    """What the API server would refuse in the NodeRecipe document ``doc`` (:func:`object_schema`,
    strict field validation), each an :class:`InputError` at its line naming the field and
    saying it is the CRD's schema that refuses it. ``ignore``: paths not checked (a deprecated
    field the loader warns about). ``status`` is never checked."""
    data = doc.data
    if not isinstance(data, dict):
        return []
    found: list[tuple[PathKey, str]] = []
    trimmed = {k: v for k, v in data.items() if k != "status"}
    _check(trimmed, object_schema(), (), found)
    return [doc.error(path, f"the NodeRecipe CRD's schema refuses {'it' if path else 'the object'}: {problem}")
            for path, problem in found if path not in ignore]

"""NodeWright / Skyhook custom resources and AICR ``RecipeResult`` files → :class:`Recipe`.

**NodeWright / Skyhook** (``nodewright.nvidia.com/v1alpha1 NodeWright``,
``skyhook.nvidia.com/v1alpha1 Skyhook``; spec per semantics-nodewright.md §1.1):
``nodeSelectors`` becomes ``nodeSelector``; ``interruptionBudget``, ``deploymentPolicy``,
``packages``, ``priority``, ``sequencing``, ``additionalTolerations``, ``runtimeRequired`` and
``autoTaintNewNodes`` keep their names. ``deploymentPolicyOptions.resetBatchStateOnCompletion`` is
kept as a per-recipe override of the policy's flag (see :func:`reconciler.load.policy_for`).
``serial`` is accepted and ignored (we start one stage per node step anyway). An
``interruptionBudget`` with neither ``percent`` nor ``count`` means "not set" (100 %), as in
NodeWright. ``metadata`` other than ``name``/``annotations`` and a ``status`` are ignored; the
recipe version comes from the annotation :data:`VERSION_ANNOTATION` (else the AICR RecipeResult's
``metadata.version``, else ``""``). NodeWright's own annotations (pause/disable) are not mapped.

**AICR RecipeResult** (gitops-conventions.md §1.2, §1.9-1.10; apiVersions
:data:`AICR_API_VERSIONS`): only the ``componentRefs`` entry named ``nodewright-customizations``
is read (skipped when ``overrides.enabled`` is false). Its NodeWright/Skyhook resources come from

* ``manifestFiles``: paths relative to the RecipeResult file's directory. Absolute paths, ``..``
  and anything resolving outside that directory (symlinks) are refused. A file still holding
  Helm template syntax (``{{``) is refused: render it first (``aicr bundle``);
* ``manifests`` (our extension): a list of inline resource objects on the componentRef.

In those manifests ``NodeWright``/``Skyhook`` and ``DeploymentPolicy`` resources are loaded and
other kinds (Namespaces, ConfigMaps, …) are ignored.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from reconciler.errors import InputError, SourcePos
from reconciler.load import policies
from reconciler.load.pathwords import MISSING, path_problem
from reconciler.load.recipes import VERSION_ANNOTATION as RECIPE_VERSION_ANNOTATION
from reconciler.load.recipes import (
    LoadedRecipe,
    Origin,
    build_recipe,
    check_keys,
    check_metadata,
    object_name,
    require_mapping,
)
from reconciler.load.yamlsafe import YamlDoc, parse_documents, read_text

NODEWRIGHT_API = "nodewright.nvidia.com/v1alpha1"
SKYHOOK_API = "skyhook.nvidia.com/v1alpha1"
#: kind → the apiVersion it is accepted with.
CR_KINDS: dict[str, str] = {"NodeWright": NODEWRIGHT_API, "Skyhook": SKYHOOK_API}

AICR_KIND = "RecipeResult"
AICR_API_VERSIONS = (
    "aicr.run/v1alpha1",
    "aicr.run/v1alpha2",
    "aicr.run/v1alpha3",
    "aicr.run/v1beta1",
    "aicr.run/v1beta2",
    "aicr.run/v1",
    "aicr.nvidia.com/v1alpha1",
)
AICR_COMPONENT = "nodewright-customizations"

#: Annotation carrying the recipe release on a NodeWright/Skyhook resource: the same one a
#: NodeRecipe object carries (one name everywhere).
VERSION_ANNOTATION = RECIPE_VERSION_ANNOTATION
#: The name used before 0.1.0; refused with the new name, so a release is never silently dropped.
OLD_VERSION_ANNOTATION = "reconciler.nodewright.dev/recipe-version"

#: NodeWright spec field → Recipe field (only the renamed one differs).
_FIELD_FOR = {
    "nodeSelectors": "nodeSelector",
    "podNonInterruptLabels": "podNonInterruptLabels",
    "interruptionBudget": "interruptionBudget",
    "deploymentPolicy": "deploymentPolicy",
    "additionalTolerations": "additionalTolerations",
    "runtimeRequired": "runtimeRequired",
    "autoTaintNewNodes": "autoTaintNewNodes",
    "priority": "priority",
    "sequencing": "sequencing",
}
SPEC_FIELDS = (*_FIELD_FOR, "packages", "deploymentPolicyOptions", "serial")
_TOP_KEYS = ("apiVersion", "kind", "metadata", "spec", "status")
_TEMPLATE = re.compile(r"\{\{")
_TEMPLATE_MSG = "still contains Helm template syntax ({{ … }}); render it first (aicr bundle)"


@dataclass
class Loaded:
    """What one document (or one RecipeResult with its manifests) produced."""

    recipes: list[LoadedRecipe] = field(default_factory=list)
    policies: list[policies.LoadedPolicy] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


def load_custom_resource(
    doc: YamlDoc, errors: list[InputError], *, locked: bool, default_version: str = ""
) -> LoadedRecipe | None:
    """Convert a ``NodeWright`` or ``Skyhook`` resource (kind read from the document).

    Returns None (errors appended) when anything is wrong.
    """
    before = len(errors)
    kind = doc.get(("kind",))
    origin: Origin = "Skyhook" if kind == "Skyhook" else "NodeWright"
    check_keys(doc, (), _TOP_KEYS, errors, f"a {origin}")
    name = object_name(doc, errors, origin)
    check_metadata(doc, errors)
    version = default_version
    annotations = doc.get(("metadata", "annotations"))
    if annotations is not None and not isinstance(annotations, dict):
        errors.append(doc.error(("metadata", "annotations"), "annotations must be a mapping of strings"))
    elif isinstance(annotations, dict) and OLD_VERSION_ANNOTATION in annotations:
        errors.append(doc.error(("metadata", "annotations", OLD_VERSION_ANNOTATION),
                                f"the annotation {OLD_VERSION_ANNOTATION} was renamed {VERSION_ANNOTATION}"))
    elif isinstance(annotations, dict) and VERSION_ANNOTATION in annotations:
        v = annotations[VERSION_ANNOTATION]
        if isinstance(v, str):
            version = v
        else:
            errors.append(
                doc.error(
                    ("metadata", "annotations", VERSION_ANNOTATION),
                    "annotation values must be strings (quote it)",
                )
            )
    if not require_mapping(doc, ("spec",), errors, required=True):
        return None
    check_keys(doc, ("spec",), SPEC_FIELDS, errors, f"{origin} spec")
    reset = _policy_options(doc, errors)
    serial = doc.get(("spec", "serial"))
    if serial is not None and not isinstance(serial, bool):
        errors.append(doc.error(("spec", "serial"), "serial must be true or false"))
    fields = {}
    for src, dst in _FIELD_FOR.items():
        path = ("spec", src)
        if doc.get(path) is None:
            continue
        if src == "interruptionBudget":
            budget = doc.get(path)
            if isinstance(budget, dict) and all(budget.get(k) is None for k in ("percent", "count")) and not (
                set(budget) - {"percent", "count"}
            ):
                continue  # NodeWright: neither set means 100 %
        fields[dst] = path
    recipe = build_recipe(
        doc,
        name=name or "invalid",
        version=version,
        origin=origin,
        fields=fields,
        packages_path=("spec", "packages"),
        errors=errors,
        locked=locked,
    )
    if recipe is None or name is None or len(errors) != before:
        return None
    return LoadedRecipe(recipe, doc, reset)


def _policy_options(doc: YamlDoc, errors: list[InputError]) -> bool | None:
    path = ("spec", "deploymentPolicyOptions")
    if not require_mapping(doc, path, errors, required=False):
        return None
    check_keys(doc, path, ("resetBatchStateOnCompletion",), errors, "deploymentPolicyOptions")
    value = doc.get((*path, "resetBatchStateOnCompletion"))
    if value is None:
        return None
    if not isinstance(value, bool):
        errors.append(doc.error((*path, "resetBatchStateOnCompletion"), "must be true or false"))
        return None
    return value


# ---------------------------------------------------------------------------------------------
# AICR RecipeResult


def load_recipe_result(doc: YamlDoc, errors: list[InputError], *, locked: bool) -> Loaded:
    """Read the ``nodewright-customizations`` component of an AICR ``RecipeResult``.

    Manifest files are read with the same guards as any input (size, UTF-8, YAML safety) and
    listed in the result's ``files``. Errors are appended to ``errors``.
    """
    out = Loaded()
    refs = doc.get(("componentRefs",))
    if refs is None:
        return out
    if not isinstance(refs, list):
        errors.append(doc.error(("componentRefs",), "componentRefs must be a list"))
        return out
    aicr_version = doc.get(("metadata", "version"), "")
    version = aicr_version if isinstance(aicr_version, str) else ""
    base = os.path.dirname(doc.file) or "."
    for i, ref in enumerate(refs):
        if not isinstance(ref, dict) or ref.get("name") != AICR_COMPONENT:
            continue
        rpath = ("componentRefs", i)
        overrides = ref.get("overrides")
        if isinstance(overrides, dict) and overrides.get("enabled") is False:
            continue
        files = ref.get("manifestFiles")
        if files is not None and not isinstance(files, list):
            errors.append(doc.error((*rpath, "manifestFiles"), "manifestFiles must be a list of paths"))
            files = None
        for j, rel in enumerate(files or []):
            fpath = (*rpath, "manifestFiles", j)
            target = _manifest_path(doc, fpath, rel, base, errors)
            if target is None:
                continue
            if target not in out.files:
                out.files.append(target)
            for mdoc in _manifest_docs(target, doc.pos(fpath), errors):
                _load_manifest(mdoc, errors, locked=locked, version=version, out=out)
        inline = ref.get("manifests")
        if inline is not None and not isinstance(inline, list):
            errors.append(doc.error((*rpath, "manifests"), "manifests must be a list of resource objects"))
            inline = None
        for j, obj in enumerate(inline or []):
            mpath = (*rpath, "manifests", j)
            if not isinstance(obj, dict):
                errors.append(doc.error(mpath, "each inline manifest must be a resource object (a mapping)"))
                continue
            sub = doc.sub(mpath)
            bad = next(_template_paths(obj, ()), None)
            if bad is not None:
                errors.append(sub.error(bad, _TEMPLATE_MSG))
                continue
            _load_manifest(sub, errors, locked=locked, version=version, out=out)
    return out


def _drive_letter(rel: str) -> bool:
    """``C:…``: a Windows drive prefix (absolute there)."""
    return rel[1:2] == ":" and rel[:1].isascii() and rel[:1].isalpha()


def _manifest_path(
    doc: YamlDoc, path: tuple[str | int, ...], rel: Any, base: str, errors: list[InputError]
) -> str | None:
    """Resolve a ``manifestFiles`` entry inside ``base`` or report why not."""
    if not isinstance(rel, str) or not rel.strip() or "\x00" in rel:
        errors.append(doc.error(path, "a manifestFiles entry must be a non-empty relative path"))
        return None
    if os.path.isabs(rel) or rel.startswith(("/", "\\")) or _drive_letter(rel):
        errors.append(
            doc.error(
                path, f"manifest path {rel!r} is absolute; paths are relative to the RecipeResult's directory"
            )
        )
        return None
    if ".." in re.split(r"[/\\]", rel):
        errors.append(
            doc.error(
                path, f"manifest path {rel!r} uses '..' to leave the RecipeResult's directory; not allowed"
            )
        )
        return None
    target = os.path.join(base, rel)
    real_base = os.path.realpath(base)
    real = os.path.realpath(target)
    if os.path.commonpath([real_base, real]) != real_base:
        errors.append(
            doc.error(
                path,
                f"manifest path {rel!r} resolves outside the RecipeResult's directory (symlink); not allowed",
            )
        )
        return None
    problem = path_problem(target, want_file=True)
    if problem is not None:
        errors.append(doc.error(path, f"manifest file {target} does not exist" if problem == MISSING
                                else f"manifest file {target}: {problem}"))
        return None
    if not os.path.isfile(target):
        errors.append(doc.error(path, f"manifest file {target} is not a regular file"))
        return None
    return target


def _manifest_docs(target: str, ref_pos: SourcePos, errors: list[InputError]) -> list[YamlDoc]:
    try:
        text = read_text(target)
        m = _TEMPLATE.search(text)
        if m:
            line = text.count("\n", 0, m.start()) + 1
            col = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
            raise InputError(
                f"manifest {_TEMPLATE_MSG} (referenced at {ref_pos})",
                SourcePos(target, line, col),
            )
        return parse_documents(text, target)
    except InputError as e:
        errors.append(e)
        return []


def _template_paths(value: Any, path: tuple[str | int, ...]) -> Iterator[tuple[str | int, ...]]:
    if isinstance(value, str):
        if "{{" in value:
            yield path
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _template_paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _template_paths(v, (*path, i))


def _load_manifest(
    mdoc: YamlDoc, errors: list[InputError], *, locked: bool, version: str, out: Loaded
) -> None:
    """Dispatch one manifest object: NodeWright/Skyhook → recipe, DeploymentPolicy → policy,
    other kinds ignored. A known kind with an unknown apiVersion is an error."""
    if not isinstance(mdoc.data, dict):
        return
    kind, api = mdoc.data.get("kind"), mdoc.data.get("apiVersion")
    if kind in CR_KINDS:
        if api != CR_KINDS[kind]:
            errors.append(
                mdoc.error(("apiVersion",), f"kind {kind} needs apiVersion {CR_KINDS[kind]} (found {api!r})")
            )
            return
        rec = load_custom_resource(mdoc, errors, locked=locked, default_version=version)
        if rec is not None:
            out.recipes.append(rec)
    elif kind == policies.KIND:
        if api not in policies.API_VERSIONS:
            wanted = " or ".join(policies.API_VERSIONS)
            msg = f"kind DeploymentPolicy needs apiVersion {wanted} (found {api!r})"
            errors.append(mdoc.error(("apiVersion",), msg))
            return
        pol = policies.load_policy(mdoc, errors)
        if pol is not None:
            out.policies.append(pol)

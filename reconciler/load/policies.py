"""``DeploymentPolicy`` documents → :class:`DeploymentPolicy` (NodeWright shape, semantics §1.2).

Accepted in three API groups, all ``v1alpha1``: ours (``reconciler.nodewright.dev``), NodeWright
(``nodewright.nvidia.com``) and Skyhook (``skyhook.nvidia.com``). ``spec`` holds
``resetBatchStateOnCompletion``, ``default {budget, strategy}`` and ``compartments [{name,
selector, budget, strategy}]``. Decision (i): a zero budget (``count: 0`` / ``percent: 0``) is
rejected as a policy that can never finish. Two compartments with identical selectors, or the
same name, are rejected at the second one's line. ``metadata`` other than ``name`` and a
``status`` (a policy read back from a cluster) are ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import ValidationError

from reconciler.errors import InputError
from reconciler.load.recipes import check_keys, object_name, require_mapping
from reconciler.load.yamlsafe import YamlDoc, validation_errors
from reconciler.model.policy import DeploymentPolicy
from reconciler.model.selector import LabelSelector

KIND = "DeploymentPolicy"
API_VERSIONS = (
    "reconciler.nodewright.dev/v1alpha1",
    "nodewright.nvidia.com/v1alpha1",
    "skyhook.nvidia.com/v1alpha1",
)
SPEC_FIELDS = ("resetBatchStateOnCompletion", "default", "compartments")
_TOP_KEYS = ("apiVersion", "kind", "metadata", "spec", "status")
_UNIQUENESS = re.compile(r"identical selectors|is used twice")


@dataclass(frozen=True)
class LoadedPolicy:
    """A converted policy with the document it came from."""

    policy: DeploymentPolicy
    doc: YamlDoc


def _check_compartments(doc: YamlDoc, errors: list[InputError]) -> bool:
    """Unique compartment names and selectors, reported at the second occurrence's line."""
    comps = doc.get(("spec", "compartments"))
    if not isinstance(comps, list):
        return True
    ok = True
    names: dict[str, int] = {}
    selectors: dict[str, tuple[int, str]] = {}
    for i, comp in enumerate(comps):
        if not isinstance(comp, dict):
            continue
        path = ("spec", "compartments", i)
        name = comp.get("name")
        label = repr(name) if isinstance(name, str) else f"#{i}"
        if isinstance(name, str):
            if name in names:
                ok = False
                first = doc.pos(("spec", "compartments", names[name], "name")).line
                msg = f"compartment name {name!r} is used twice (first at line {first})"
                errors.append(doc.error((*path, "name"), msg))
            else:
                names[name] = i
        sel = comp.get("selector")
        if not isinstance(sel, dict):
            continue
        try:
            canonical = LabelSelector.model_validate(sel).canonical()
        except ValidationError:
            continue  # reported by the model validation
        if canonical in selectors:
            ok = False
            j, other = selectors[canonical]
            errors.append(
                doc.error(
                    (*path, "selector"),
                    f"compartments {other} (line {doc.pos(('spec', 'compartments', j, 'selector')).line}) "
                    f"and {label} have identical selectors; a node could never be placed deterministically",
                )
            )
        else:
            selectors[canonical] = (i, label)
    return ok


def load_policy(doc: YamlDoc, errors: list[InputError]) -> LoadedPolicy | None:
    """Convert a ``DeploymentPolicy`` document; problems are appended to ``errors``.

    Returns None when the policy has any error.
    """
    before = len(errors)
    check_keys(doc, (), _TOP_KEYS, errors, "a DeploymentPolicy")
    name = object_name(doc, errors, "policy")
    if not require_mapping(doc, ("spec",), errors, required=True):
        return None
    check_keys(doc, ("spec",), SPEC_FIELDS, errors, "spec")
    unique = _check_compartments(doc, errors)
    spec = doc.get(("spec",))
    kwargs = {k: v for k, v in spec.items() if k in SPEC_FIELDS and v is not None}
    kwargs.update(name=name or "invalid", source=doc.file)
    try:
        policy = DeploymentPolicy.model_validate(kwargs)
    except ValidationError as exc:
        found = validation_errors(
            exc, doc, lambda loc: ("metadata", "name") if loc[0] == "name" else ("spec", *loc), root=("spec",)
        )
        if not unique:  # the model's own whole-policy uniqueness error repeats ours, less precisely
            found = [e for e in found if not _UNIQUENESS.search(e.message)]
        errors.extend(found)
        return None
    if name is None or len(errors) != before:
        return None
    return LoadedPolicy(policy, doc)

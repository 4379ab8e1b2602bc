"""Names an operations verb is given must exist: an unknown recipe, package or node is an error
(exit 2) that names what was not found and what exists, before anything is shown or written.

* recipes known on a cluster: those with any record of ours on a node
  (:func:`reconciler.ops.nodeops.recipes_on`) or a key in the controls ConfigMap
  (:func:`reconciler.ops.controls.read_controls`);
* packages known for a recipe: those in a node's recorded state or failure record of it;
* nodes: the cluster's nodes (names or whole-name regular expressions,
  :func:`reconciler.ops.patches.select_nodes`, which lists them in its error).

The one documented exception: ``pause`` and ``disable`` accept a recipe that has not run yet with
``--new`` (stopping a rollout before its first ``apply`` is a real need); ``resume``/``enable``
of a recipe that was never switched stay errors (nothing to resume).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence

from reconciler.errors import InputError, shown
from reconciler.model.nodestate import NodeStateError, failure_of, parse_state, state_key
from reconciler.model.observed import NodeInfo
from reconciler.ops.controls import read_controls
from reconciler.ops.nodeops import recipes_on

#: names listed in an error before "… and N more"
SHOWN = 20


def listing(names: Iterable[str], what: str, where: str = "on this cluster") -> str:
    """``"known recipes: a, b, c"`` (at most :data:`SHOWN`, then ``… and N more``), or ``"no
    recipes are known on this cluster"`` when empty (``what`` is the plural noun, ``where`` what
    was looked in)."""
    ordered = sorted(set(names))
    if not ordered:
        return f"no {what} are known {where}"
    more = f", … and {len(ordered) - SHOWN} more" if len(ordered) > SHOWN else ""
    return f"known {what}: {', '.join(ordered[:SHOWN])}{more}"


def known_recipes(cluster: object, nodes: Sequence[NodeInfo]) -> set[str]:
    """Recipes with records on ``nodes`` or a control switch on ``cluster``."""
    out = {r for n in nodes for r in recipes_on(n)}
    out |= set(read_controls(cluster))
    return out


def require_recipe(name: str, cluster: object, nodes: Sequence[NodeInfo], *, hint: str = "") -> None:
    """Raise unless ``name`` is a known recipe (module doc).

    Raises:
        InputError: ``recipe 'x' not found: no node has a record of it and it has no control switch;
            known recipes: a, b``.
    """
    known = known_recipes(cluster, nodes)
    if name in known:
        return
    raise InputError(f"recipe {shown(name)} not found: no node has a record of it and it has no control switch; "
                     f"{listing(known, 'recipes')}{hint}")


def known_packages(nodes: Sequence[NodeInfo], recipe: str | None) -> set[str]:
    """Package names recorded (state entries or failure records) on ``nodes`` for ``recipe``
    (every recipe when None)."""
    out: set[str] = set()
    for n in nodes:
        for r in recipes_on(n):
            if recipe is not None and r != recipe:
                continue
            with contextlib.suppress(NodeStateError):  # a malformed state names no package
                out |= {e.name for e in parse_state(n.annotations.get(state_key(r)), node=n.name).values()}
            f = failure_of(n.annotations, r)
            if f is not None and f.package:
                out.add(f.package)
    return out


def require_package(name: str, nodes: Sequence[NodeInfo], recipe: str | None) -> None:
    """Raise unless ``name`` is recorded on a node (for ``recipe`` when given).

    Raises:
        InputError: naming the package, the recipe and the packages that are recorded.
    """
    known = known_packages(nodes, recipe)
    if name in known:
        return
    scope = f" for recipe {shown(recipe)}" if recipe else ""
    raise InputError(f"package {shown(name)} not found: no node records it{scope}; {listing(known, 'packages')}")

"""The package dependency graph of one recipe: validate, order, and walk (pure).

Vertices are package names (one version per name in a recipe); an edge runs from a dependency to
its dependent. Unlike NodeWright's snapshot (semantics §2.4), a package is ready as soon as *its
own* dependencies are complete (decision (g)), and cycles are rejected with the cycle named.
"""

from __future__ import annotations

import graphlib
from collections.abc import Collection, Iterable, Mapping


class CycleError(ValueError):
    """``dependsOn`` forms a cycle; ``cycle`` lists it with the first name repeated at the end."""

    def __init__(self, cycle: list[str]) -> None:
        self.cycle = cycle
        super().__init__("dependsOn cycle: " + " -> ".join(cycle))


def find_cycle(deps: Mapping[str, Iterable[str]]) -> list[str] | None:
    """Return one cycle as ``[a, b, ..., a]`` (each depends on the next) or None.

    ``deps`` maps name → names it depends on; names not in ``deps`` are ignored (a missing
    dependency is reported elsewhere). Deterministic: names are visited in sorted order.
    """
    graph = {k: sorted(d for d in v if d in deps) for k, v in deps.items()}
    color: dict[str, int] = {}
    for root in sorted(graph):
        if color.get(root):
            continue
        path: list[str] = [root]
        stack: list[tuple[str, int]] = [(root, 0)]
        color[root] = 1
        while stack:
            node, i = stack[-1]
            if i < len(graph[node]):
                stack[-1] = (node, i + 1)
                nxt = graph[node][i]
                if color.get(nxt) == 1:
                    return [*path[path.index(nxt):], nxt]
                if not color.get(nxt):
                    color[nxt] = 1
                    path.append(nxt)
                    stack.append((nxt, 0))
            else:
                color[node] = 2
                path.pop()
                stack.pop()
    return None


def topo_order(deps: Mapping[str, Iterable[str]]) -> list[str]:
    """A deterministic topological order (dependencies first; ties by name).

    Raises:
        CycleError: the graph has a cycle.
    """
    cyc = find_cycle(deps)
    if cyc:
        raise CycleError(cyc)
    ts = graphlib.TopologicalSorter({k: [d for d in v if d in deps] for k, v in deps.items()})
    ts.prepare()
    out: list[str] = []
    while ts.is_active():
        ready = sorted(ts.get_ready())
        out.extend(ready)
        ts.done(*ready)
    return out


def ready(deps: Mapping[str, Iterable[str]], done: Collection[str], started: Collection[str] = ()) -> list[str]:
    """Packages whose own dependencies are all in ``done`` and that are neither done nor
    ``started``, sorted by name. Dependencies outside ``deps`` count as satisfied (they are not
    changing on this node)."""
    out = []
    for name, ds in deps.items():
        if name in done or name in started:
            continue
        if all(d in done or d not in deps for d in ds):
            out.append(name)
    return sorted(out)


def dependents(deps: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    """Reverse edges: name → sorted names that depend on it (for removal order)."""
    rev: dict[str, list[str]] = {k: [] for k in deps}
    for k, v in deps.items():
        for d in v:
            rev.setdefault(d, []).append(k)
    return {k: sorted(v) for k, v in rev.items()}

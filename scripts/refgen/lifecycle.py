"""docs/explanation/lifecycle.md: the node lifecycle as a state diagram, read from the code.

The states are :class:`reconciler.model.vocab.Phase`; each phase's handler is the one
``reconciler.execute.machine._HANDLERS`` names. A transition ``A → B`` is an assignment
``….phase = Phase.B`` (or of a name bound to ``Phase`` members) in A's handler or in a method it
uses (``self.x``), not descending into another phase's handler (that is B's behaviour). An end is
an assignment ``….outcome = Outcome.X``; ``self._fail(…)`` ends in ``failing``. The reading is
syntactic on purpose: it follows any reshaping of the handlers as long as they keep these spellings.
"""

from __future__ import annotations

import ast
from pathlib import Path

from reconciler.execute import machine
from reconciler.model.vocab import Phase
from refgen.common import GENERATED, _md

EXECUTE = Path(machine.__file__).resolve().parent


def _methods() -> dict[str, list[ast.FunctionDef]]:
    """Every method of every class of reconciler/execute, by name."""
    out: dict[str, list[ast.FunctionDef]] = {}
    for path in sorted(EXECUTE.glob("*.py")):
        for cls in (n for n in ast.parse(path.read_text()).body if isinstance(n, ast.ClassDef)):
            for fn in cls.body:
                if isinstance(fn, ast.FunctionDef):
                    out.setdefault(fn.name, []).append(fn)
    return out


def _members(node: ast.AST, enum_name: str) -> set[str]:
    return {n.attr for n in ast.walk(node)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == enum_name}


def _direct(fn: ast.FunctionDef) -> tuple[set[str], set[str], set[str]]:
    """``(phases set, outcomes set, self attributes used)`` of one method's own body."""
    bound: dict[str, set[str]] = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    value = n.value
                    # {Phase.A: Phase.A, ...}.get(x): the values are what the name can hold
                    if (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                            and isinstance(value.func.value, ast.Dict)):
                        value = ast.Tuple(elts=[v for v in value.func.value.values if v], ctx=ast.Load())
                    bound.setdefault(t.id, set()).update(_members(value, "Phase"))
    phases: set[str] = set()
    outcomes: set[str] = set()
    used: set[str] = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Attribute) and t.attr == "phase":
                    value = n.value
                    phases |= bound.get(value.id, set()) if isinstance(value, ast.Name) else _members(value, "Phase")
                if isinstance(t, ast.Attribute) and t.attr == "outcome":
                    outcomes |= _members(n.value, "Outcome")
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self":
            used.add(n.attr)
    if "_fail" in used:
        phases.add("FAILING")
    return phases, outcomes, used


def transitions() -> dict[Phase, tuple[set[Phase], set[str]]]:
    """Each phase's ``(next phases, outcomes)``, self-loops left out."""
    methods = _methods()
    handlers = set(machine._HANDLERS.values())
    out: dict[Phase, tuple[set[Phase], set[str]]] = {}
    for phase, handler in machine._HANDLERS.items():
        seen: set[str] = set()
        phases: set[str] = set()
        outcomes: set[str] = set()
        todo = [handler]
        while todo:
            name = todo.pop()
            if name in seen or name not in methods or (name in handlers and name != handler):
                continue
            seen.add(name)
            for fn in methods[name]:
                p, o, used = _direct(fn)
                phases |= p
                outcomes |= o
                todo.extend(used)
        out[phase] = ({Phase[p] for p in phases} - {phase}, outcomes)
    return out


def lifecycle_page() -> str:
    """docs/explanation/lifecycle.md."""
    from refgen.vocabulary import MEANINGS

    table = transitions()
    lines = [GENERATED, "# The node lifecycle", "",
             "Every node a recipe changes goes through these phases, one lifecycle per node and change. The "
             "phase is recorded on the node (`inflight_<recipe>`) before its effect, so a run killed anywhere "
             "resumes at the recorded phase: that is why `start` leads to every later phase. The diagram is "
             "generated from the `Phase` enum and the transitions the phase handlers of "
             "`reconciler/execute` make; an API error in any phase is retried with bounded backoff and then "
             "fails the node (`failing`), and a node deleted from the cluster ends as `removed`.", "",
             "```mermaid", "stateDiagram-v2", f"    [*] --> {Phase.START.value.replace('-', '_')}"]
    for phase, (nexts, outcomes) in table.items():
        a = phase.value.replace("-", "_")
        lines += [f"    {a} --> {n.value.replace('-', '_')}" for n in sorted(nexts, key=list(Phase).index)]
        lines += [f"    {a} --> [*]: {o.lower()}" for o in sorted(outcomes)]
    lines += ["```", "", "| phase | what happens | next | ends as |", "| --- | --- | --- | --- |"]
    for phase, (nexts, outcomes) in table.items():
        nxt = ", ".join(f"`{n.value}`" for n in sorted(nexts, key=list(Phase).index))
        ends = ", ".join(o.lower() for o in sorted(outcomes))
        lines.append(f"| `{phase.value}` | {_md(MEANINGS['Phase'][phase.value])} | {nxt} | {ends} |")
    lines += ["", "The rules each phase follows, with the tests that prove them, are in "
              "[semantics](../semantics.md); the guarantees across crashes in [safety](../reliability.md)."]
    return "\n".join(lines) + "\n"

"""Every method of the cluster role ports (reconciler/ports.py) is used by the reconciler itself
(issue 13: the port carries no method only an adapter or a test needs), found by reading the
source: calls ``<port>.<method>(...)`` on something that holds a port (:data:`PORT_RECEIVER`:
``ports.nodes``, ``opened.cluster``, the Lease store...) in the modules outside ``adapters/``
(which implement the ports), ``testing/`` and the write fence (decorators that only forward)."""

from __future__ import annotations

import ast
import inspect
import re
from collections import defaultdict
from pathlib import Path

import reconciler
from reconciler import ports

PACKAGE = Path(reconciler.__file__).resolve().parent
ROLES = (ports.NodePort, ports.PodPort, ports.StageRunner, ports.LeaseStore, ports.EventSink, ports.ConfigMapStore)
FORWARDERS = ("adapters/", "testing/", "execute/fence.py", "ports.py")


def port_methods() -> dict[str, str]:
    """Method name → role name, for every method the role Protocols declare."""
    out = {}
    for role in ROLES:
        for name, fn in vars(role).items():
            if not name.startswith("_") and inspect.isfunction(fn):
                out[name] = role.__name__
    return out


#: How the core names what holds a port: the role bundle's members (``ports.nodes``), a whole
#: cluster (``opened.cluster``), the Lease or ConfigMap store (``store``, ``self.leases``). A call
#: on anything else (``loader.get_node``) is not a port call, whatever its method is called.
PORT_RECEIVER = re.compile(r"(?:^|\.)(?:cluster|nodes|pods|stages|events|leases|store)$")


def callers() -> dict[str, set[str]]:
    """Method name → ``module:function`` of every core function calling a method of that name on
    a port (:data:`PORT_RECEIVER`)."""
    found: dict[str, set[str]] = defaultdict(set)
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(FORWARDERS):
            continue
        tree = ast.parse(path.read_text(), str(path))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and PORT_RECEIVER.search(ast.unparse(node.func.value))):
                    found[node.func.attr].add(f"{rel}:{fn.name}")
    return found


def test_every_port_method_has_a_caller_in_the_reconciler() -> None:
    methods = port_methods()
    assert len(methods) >= 20 and {"patch_node", "evict_pods", "replace_lease", "get_config_map"} <= set(methods)
    used = callers()
    unused = sorted(f"{role}.{m}" for m, role in methods.items() if not used.get(m))
    assert unused == [], f"port methods no reconciler code calls: {unused}"


def test_the_reader_finds_calls_in_nested_functions_and_ignores_the_forwarders() -> None:
    used = callers()
    assert any(c.startswith("execute/lock.py:") for c in used["replace_lease"])
    assert not any(c.startswith(FORWARDERS) for cs in used.values() for c in cs)


def test_a_method_of_the_same_name_on_something_else_is_not_a_port_call() -> None:
    """The snapshot loader's own ``get_node`` (load/snapshotfile.py) does not count as a caller
    of ``NodePort.get_node``; the CLI's ``opened.cluster.get_node`` does."""
    used = callers()
    assert not any(c.startswith("load/") for c in used["get_node"])
    assert any(c.startswith("cli/package.py:") for c in used["get_node"])

"""Open the cluster a verb works on: ``--cluster sim:PATH`` (simulated fleet) or the real cluster
through ``--kubeconfig``/``--context`` (or in-cluster config), in the reconciler's namespace
``-n/--namespace`` (the simulated fleet supports only the default one) with ``--request-timeout``."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable, Mapping
from functools import cache

from reconciler.adapters.sim.config import SimConfig
from reconciler.errors import PATH_LIMIT, InputError, SourcePos, shown
from reconciler.model.nodestate import is_ignored
from reconciler.model.recipe import Recipe
from reconciler.ops.controls import DEFAULT_NAMESPACE
from reconciler.session import Session

#: What a verb works on: a :class:`~reconciler.session.Session` (the CLI verbs are shells over it).
Opened = Session


def open_cluster(args: argparse.Namespace, *, read_only: bool = False) -> Session:
    """The session a verb works on, from parsed arguments: ``--cluster sim:PATH`` (the simulated
    fleet, :func:`reconciler.session.simulate`) or the real cluster (``--kubeconfig``,
    ``--context``, ``-n``, ``--request-timeout``: :func:`reconciler.session.connect`). Closed
    when the verb ends (:func:`close_sessions`). ``read_only``: the verb only reads the cluster
    (``plan``): a simulated fleet is loaded with only the fields the reconciler reads, and must
    not be saved.

    Raises:
        InputError: bad ``--cluster`` value, unreadable simulation files, or a ``--sim-save``
            path that cannot be written.
        ClusterError: the real cluster cannot be reached.
    """
    from reconciler.session import connect, simulate

    spec = getattr(args, "cluster", None)
    if spec and (getattr(args, "kubeconfig", None) or getattr(args, "context", None)):
        raise InputError("--cluster sim:PATH and --kubeconfig/--context name two different clusters; give one")
    if spec and (getattr(args, "as_user", None) or getattr(args, "as_group", None)):
        raise InputError("--as/--as-group act as another user of a real cluster; the simulated fleet has no users")
    from reconciler.cli.optcheck import prepare_outputs

    outputs = prepare_outputs(args)  # written at the end (or as they go): checked before any work
    namespace = getattr(args, "namespace", None)
    if spec:
        if namespace and namespace != DEFAULT_NAMESPACE:
            raise InputError(f"-n/--namespace {shown(namespace)}: the simulated fleet keeps the reconciler's objects "
                             f"in {DEFAULT_NAMESPACE} only (drop -n, or use a real cluster)")
        if not spec.startswith("sim:"):
            raise InputError(f"--cluster {shown(spec, PATH_LIMIT)}: expected sim:PATH "
                             "(or use --kubeconfig for a real cluster)")
        if not spec[4:].strip():
            raise InputError("--cluster sim: names no file: expected sim:PATH, a kubectl YAML or JSON dump "
                             "(examples/fleets/gpu-24.yaml)")
        from reconciler.fileio.reading import regular_file_problem

        problem = regular_file_problem(spec[4:])  # the reader checks again on the open file
        if problem is not None:
            raise InputError(f"--cluster {shown(spec, PATH_LIMIT)}: cannot read fleet file: {problem}")
        cfg_path = getattr(args, "sim_config", None)
        from reconciler.load.snapshotfile import paused_gc

        with paused_gc():  # frozen before the collector runs again: it never scans the snapshot
            session = simulate(spec[4:], config=load_sim_config(cfg_path) if cfg_path else None, read_only=read_only,
                               crash_after=getattr(args, "sim_crash_after", None))
            if _freeze_if_large(spec[4:]):
                LARGE_FLEETS.append(session.sim)
        fleet = session.sim
        assert fleet is not None
        fleet.save_on_crash = outputs.get("--sim-save") if fleet.crash_after is not None else None
        return session
    from reconciler.cli.globalflags import impersonation
    from reconciler.execute.rollout import MAX_AUTO_WORKERS

    who = impersonation(args)  # --as-group without --as: said in the CLI's words

    session = connect(getattr(args, "kubeconfig", None), getattr(args, "context", None), namespace=namespace,
                      request_timeout=getattr(args, "request_timeout", None) or 30.0,
                      workers=getattr(args, "workers", None) or MAX_AUTO_WORKERS,
                      impersonate=who[0] if who else None, impersonate_group=who[1] if who else None)
    OPEN_SESSIONS.append(session)
    return session


#: The sessions on real clusters this process's verbs opened (:func:`close_sessions` ends them).
OPEN_SESSIONS: list[Session] = []


def close_sessions() -> None:
    """Close the session of every verb that ended (called when it ends, :func:`reconciler.cli.main.main`),
    so an in-process caller running several verbs is not left with their watch threads and
    connections."""
    while OPEN_SESSIONS:
        OPEN_SESSIONS.pop().close()


#: Snapshots at least this large (bytes) are moved out of the garbage collector's sight once loaded.
FREEZE_BYTES = 16 * 1024 * 1024

#: The simulated fleets loaded from large snapshots: they live as long as the process, and the
#: command-line entry point (:func:`reconciler.cli.main.main` without ``argv``) ends the process
#: without freeing them one object at a time (millions of them: about a second per 100,000 nodes).
LARGE_FLEETS: list[object] = []


def _freeze_if_large(path: str) -> bool:
    """After loading a large snapshot, ``gc.freeze()`` it: it lives as long as the command, holds
    no cycles, and every later full collection would otherwise rescan its millions of objects.
    Small snapshots (tests) are left alone. Returns whether it was frozen."""
    import gc

    try:
        if os.stat(path).st_size >= FREEZE_BYTES:
            gc.freeze()
            return True
    except OSError:
        pass
    return False


def check_sim_config_names(args: argparse.Namespace, opened: Opened, recipes: Iterable[Recipe]) -> None:
    """:func:`check_sim_names` for a verb's ``--sim-config`` (if any) against the fleet it runs on
    (one LIST of nodes, only when the config names a node); the config as the simulated fleet
    already read it, else read here (``plan --sim-config`` against a real cluster). Raises InputError."""
    path = getattr(args, "sim_config", None)
    if path:
        config = opened.sim_config or load_sim_config(path)
        check_sim_names(path, config, lambda: {n.name: n.labels for n in opened.cluster.nodes.list_nodes()}, recipes)


def check_sim_names(path: str | None, config: SimConfig | None, nodes: Callable[[], Mapping[str, Mapping[str, str]]],
                    recipes: Iterable[Recipe]) -> None:
    """A ``--sim-config`` that names a node the fleet does not have or a package none of
    ``recipes`` has is bad input: a typo would make the what-if silently pass
    (:meth:`SimConfig.unknown_names`). So is one whose names exist but never meet: a failure of a
    package on a node no recipe that has the package selects (its ``nodeSelector``, or the node
    labelled ignore), a ``neverReturns`` or ``validator.failsOn`` node no recipe selects — the
    what-if would pass as silently. ``nodes``: the fleet's node names with their labels (called
    only when the config names a node).

    Raises:
        InputError: with file:line:column of each unknown name
            (:class:`~reconciler.errors.InputErrors` when several).
    """
    if not path or config is None:
        return
    recipes = list(recipes)
    packages = {p for r in recipes for p in r.packages}
    fleet = cache(nodes)

    def runs(node: str) -> set[str]:
        labels = fleet().get(node, {})
        if is_ignored(labels):
            return set()
        return {p for r in recipes if r.nodeSelector.matches(labels) for p in r.packages}

    unknown = config.unknown_names(fleet, packages, runs)
    if not unknown:
        return
    from reconciler.errors import InputErrors
    from reconciler.load.yamlsafe import load_file

    doc = load_file(path)[0]  # read and checked whole by load_sim_config already
    errors = [doc.error(at, msg) for at, msg in unknown]
    raise errors[0] if len(errors) == 1 else InputErrors(errors)


def load_sim_config(path: str) -> SimConfig:
    """Read a ``--sim-config`` file (YAML or JSON, one mapping) into a SimConfig.

    Read through :mod:`reconciler.load.yamlsafe` (size, encoding, alias-bomb, tag and duplicate-key
    guards, a position for every field).

    Raises:
        InputError: unreadable, malformed, empty, not one mapping, unknown fields or values out of
            range; with file:line:column and the field (:class:`~reconciler.errors.InputErrors`
            when several).
    """
    from pydantic import ValidationError

    from reconciler.errors import InputErrors
    from reconciler.fileio.reading import regular_file_problem
    from reconciler.load.snapshot import best_errors, loc_path, pydantic_message
    from reconciler.load.yamlsafe import load_file

    problem = regular_file_problem(path)
    if problem is not None:
        raise InputError(f"--sim-config {shown(path, PATH_LIMIT)}: cannot read simulation config: {problem}")
    docs = load_file(path, option="--sim-config")  # the reader checks the open file again
    if not docs:
        raise InputError("simulation config holds no settings (leave out --sim-config to use the defaults)",
                         SourcePos(path, 1, 1))
    if len(docs) > 1:
        raise InputError("simulation config must be one YAML document", docs[1].pos())
    doc = docs[0]
    if not isinstance(doc.data, dict):
        raise InputError("simulation config must be a mapping of settings (stageSeconds, rebootSeconds, ...)",
                         doc.pos())
    try:
        return SimConfig.model_validate(doc.data)
    except ValidationError as e:
        errors = []
        for err in best_errors(e.errors(include_url=False)):
            at = loc_path(tuple(err["loc"]))
            msg = pydantic_message(err)
            if err["type"] == "extra_forbidden" and at:
                msg = f"unknown field {at[-1]!r}"
            elif "[key]" in err["loc"] and at:
                msg = f"key {at[-1]!r}: {msg}"
            errors.append(doc.error(at, msg))
        raise errors[0] if len(errors) == 1 else InputErrors(errors) from None

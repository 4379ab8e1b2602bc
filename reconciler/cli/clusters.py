"""Open the cluster a verb works on: ``--cluster sim:PATH`` (simulated fleet) or the real cluster
through ``--kubeconfig``/``--context`` (or in-cluster config), in the reconciler's namespace
``-n/--namespace`` (the simulated fleet supports only the default one) with ``--request-timeout``."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from reconciler.adapters.sim.config import SimConfig
from reconciler.errors import PATH_LIMIT, InputError, SourcePos, clip, shown
from reconciler.model.nodestate import is_ignored
from reconciler.model.recipe import Recipe
from reconciler.ops.controls import DEFAULT_NAMESPACE
from reconciler.ports import ChangeFeed, Clock, ClusterPorts

if TYPE_CHECKING:
    from reconciler.adapters.kube.cluster import KubeCluster
    from reconciler.adapters.kube.watch import KubeWatch


@dataclass
class Opened:
    """A cluster's roles with its clock and wall-clock function; ``sim`` is set for the simulated
    fleet, ``sim_config`` to its ``--sim-config`` when one was given, ``kube`` for a real cluster."""

    cluster: ClusterPorts
    clock: Clock
    wall: Callable[[], float]
    poll_seconds: float
    sim: object | None = None
    description: str = ""
    sim_config: SimConfig | None = None
    kube: KubeCluster | None = None
    changes: ChangeFeed | None = None


def open_cluster(args: argparse.Namespace, *, read_only: bool = False) -> Opened:
    """Build the cluster adapter from parsed arguments. ``read_only``: the verb only reads the
    cluster (``plan``): a simulated fleet is loaded with only the fields the reconciler reads
    (:meth:`SimFleet.from_file`), and must not be saved.

    Raises:
        InputError: bad ``--cluster`` value, unreadable simulation files, or a ``--sim-save``
            path that cannot be written.
        ClusterError: the real cluster cannot be reached.
    """
    spec = getattr(args, "cluster", None)
    if spec and (getattr(args, "kubeconfig", None) or getattr(args, "context", None)):
        raise InputError("--cluster sim:PATH and --kubeconfig/--context name two different clusters; give one")
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
        from reconciler.adapters.sim.fleet import SimFleet

        config = SimConfig()
        cfg_path = getattr(args, "sim_config", None)
        if cfg_path:
            config = load_sim_config(cfg_path)
        from reconciler.load.snapshotfile import paused_gc

        with paused_gc():  # frozen before the collector runs again: it never scans the snapshot
            fleet = SimFleet.from_file(spec[4:], config, crash_after=getattr(args, "sim_crash_after", None),
                                       **({"read_only": True} if read_only else {}))
            if _freeze_if_large(spec[4:]):
                LARGE_FLEETS.append(fleet)
        fleet.save_on_crash = outputs.get("--sim-save") if fleet.crash_after is not None else None
        return Opened(ClusterPorts.of(fleet), fleet, fleet.wall, poll_seconds=5.0, sim=fleet,
                      description=f"simulated fleet {spec[4:]}", sim_config=config if cfg_path else None)
    from reconciler.adapters.kube.cache import WatchStore
    from reconciler.adapters.kube.cluster import DEFAULT_POOL_SIZE, KubeCluster

    # one connection per worker thread, plus the two watch streams, the lease renewer and the main thread
    from reconciler.execute.rollout import MAX_AUTO_WORKERS

    workers = getattr(args, "workers", None) or MAX_AUTO_WORKERS
    check_kubeconfig(getattr(args, "kubeconfig", None), getattr(args, "context", None))
    ns = namespace or DEFAULT_NAMESPACE
    # the watch streams wake the rollout on change (the poll interval is only the fallback) and
    # hold every node and pod, so reading them costs no request
    cluster = KubeCluster.from_kubeconfig(getattr(args, "kubeconfig", None), getattr(args, "context", None),
                                          pool_size=max(DEFAULT_POOL_SIZE, workers + 8), store=WatchStore(ns),
                                          namespace=ns, request_timeout=getattr(args, "request_timeout", None) or 30.0)
    from reconciler.adapters.host import SystemClock

    watch = cluster.watch()
    OPEN_WATCHES.append(watch)
    clock = SystemClock()
    return Opened(cluster.ports, clock, clock.utc, poll_seconds=15.0, description="kubernetes cluster", kube=cluster,
                  changes=watch)


#: The watch streams this process's verbs opened (:func:`close_watches` ends them).
OPEN_WATCHES: list[KubeWatch] = []


def close_watches() -> None:
    """Stop the watch streams of every clock a verb opened (called when the verb ends,
    :func:`reconciler.cli.main.main`), so an in-process caller running several verbs is not left
    with their threads and connections."""
    while OPEN_WATCHES:
        OPEN_WATCHES.pop().close()


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


def check_kubeconfig(path: str | None, context: str | None = None) -> None:
    """A ``--kubeconfig`` that names no file is bad input (exit 2), not a cluster error.

    So is no cluster at all: no ``--kubeconfig``, no ``$KUBECONFIG``, no ``~/.kube/config`` and
    not in a pod (``KUBERNETES_SERVICE_HOST``), where the client would only say "Invalid
    kube-config file" (the same places the client looks, in that order).

    The kubeconfig files themselves (``path``, else each file of ``$KUBECONFIG`` that exists,
    else ``~/.kube/config``) are checked as inputs
    (:func:`reconciler.load.kubeconfigfile.check_kubeconfig_file`: syntax, shape, base64 data and,
    for a single file, the ``context`` used), so a malformed one is bad input at its line.

    Raises:
        InputError: ``path`` is given and is not a file, nothing names a cluster, or a
            kubeconfig file is malformed.
    """
    from reconciler.fileio.reading import MISSING, regular_file_problem

    problem = regular_file_problem(path) if path else None
    if path and problem:
        hint = (" (give the path of a kubeconfig, or leave it out to use $KUBECONFIG, ~/.kube/config or the "
                "in-cluster service account)") if problem == MISSING else ""
        raise InputError(f"--kubeconfig {clip(path, PATH_LIMIT)}: {'no such file' if problem == MISSING else problem}"
                         f"{hint}")
    default = os.path.expanduser("~/.kube/config")

    def existing(where: str, f: str) -> bool:
        """``f`` is a regular file (False: missing, which the client skips too); anything else
        (a FIFO, a device, a directory) is refused: the client would block or fail on it."""
        problem = regular_file_problem(f)
        if problem in (None, MISSING):
            return problem is None
        raise InputError(f"{where} {clip(f, PATH_LIMIT)}: {problem}")

    if path:
        files = [path]
    elif os.environ.get("KUBECONFIG"):
        files = [f for f in os.environ["KUBECONFIG"].split(os.pathsep) if f and existing("$KUBECONFIG entry", f)]
    elif os.path.lexists(default):
        files = [default] if existing("kubeconfig", default) else []
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        files = []  # in a pod: the service account
    else:
        raise InputError("no cluster given: use --cluster sim:FILE for a simulated fleet (e.g. "
                         "sim:examples/fleets/gpu-24.yaml, or a kubectl get nodes,pods,pdb -A -o json dump), or "
                         "--kubeconfig FILE / $KUBECONFIG / ~/.kube/config for a real cluster")
    from reconciler.load.kubeconfigfile import check_kubeconfig_file

    for f in files:
        check_kubeconfig_file(f, context=context, whole=len(files) == 1)


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

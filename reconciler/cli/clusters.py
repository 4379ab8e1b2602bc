"""Open the cluster a verb works on: ``--cluster sim:PATH`` (simulated fleet) or the real cluster
through ``--kubeconfig``/``--context`` (or in-cluster config), in the reconciler's namespace
``-n/--namespace`` (the simulated fleet supports only the default one) with ``--request-timeout``."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reconciler.adapters.simconfig import SimConfig
from reconciler.errors import InputError, SourcePos
from reconciler.ops.controls import DEFAULT_NAMESPACE
from reconciler.ports import Clock, Cluster


@dataclass
class Opened:
    """A cluster with its clock and wall-clock function; ``sim`` is set for the simulated fleet."""

    cluster: Cluster
    clock: Clock
    wall: Callable[[], float]
    poll_seconds: float
    sim: object | None = None
    description: str = ""


def open_cluster(args: argparse.Namespace) -> Opened:
    """Build the cluster adapter from parsed arguments.

    Raises:
        InputError: bad ``--cluster`` value, unreadable simulation files, or a ``--sim-save``
            path that cannot be written.
        ClusterError: the real cluster cannot be reached.
    """
    spec = getattr(args, "cluster", None)
    if getattr(args, "sim_save", None) is not None:  # written at the end: checked before any work
        from reconciler.cli.optcheck import output_file

        output_file("--sim-save", args.sim_save)
    namespace = getattr(args, "namespace", None)
    if spec:
        if namespace and namespace != DEFAULT_NAMESPACE:
            raise InputError(f"-n/--namespace {namespace!r}: the simulated fleet keeps the reconciler's objects in "
                             f"{DEFAULT_NAMESPACE} only (drop -n, or use a real cluster)")
        if not spec.startswith("sim:"):
            raise InputError(f"--cluster {spec!r}: expected sim:PATH (or use --kubeconfig for a real cluster)")
        from reconciler.adapters.sim import SimFleet

        config = SimConfig()
        cfg_path = getattr(args, "sim_config", None)
        if cfg_path:
            config = load_sim_config(cfg_path)
        fleet = SimFleet.from_file(spec[4:], config, crash_after=getattr(args, "sim_crash_after", None))
        fleet.save_on_crash = getattr(args, "sim_save", None) if fleet.crash_after is not None else None
        return Opened(fleet, fleet, fleet.wall, poll_seconds=5.0, sim=fleet, description=f"simulated fleet {spec[4:]}")
    from reconciler.adapters.kube import DEFAULT_POOL_SIZE, KubeCluster
    from reconciler.adapters.kubecache import NODES, WatchCache
    from reconciler.adapters.kubeobjects import node_from
    from reconciler.adapters.kubewatch import WatchClock

    # one connection per worker thread, plus the two watch streams, the lease renewer and the main thread
    from reconciler.execute.rollout import MAX_AUTO_WORKERS

    workers = getattr(args, "workers", None) or MAX_AUTO_WORKERS
    # watches wake the rollout on change (the poll interval is only the fallback) and keep the
    # nodes and stage pods being worked on current in a cache, so reading them costs no request
    cache = WatchCache({NODES: node_from})
    cluster = KubeCluster.from_kubeconfig(getattr(args, "kubeconfig", None), getattr(args, "context", None),
                                          pool_size=max(DEFAULT_POOL_SIZE, workers + 8), cache=cache,
                                          namespace=namespace or DEFAULT_NAMESPACE,
                                          request_timeout=getattr(args, "request_timeout", None) or 30.0)
    return Opened(cluster, WatchClock(cluster.api_client, cache=cache), time.time, poll_seconds=15.0,
                  description="kubernetes cluster")


def load_sim_config(path: str) -> SimConfig:
    """Read a ``--sim-config`` YAML file into a SimConfig.

    Raises:
        InputError: unreadable, malformed, or unknown fields (with file and field).
    """
    from pydantic import ValidationError
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        raw = YAML(typ="safe").load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read simulation config: {e}", SourcePos(path)) from None
    except YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise InputError(f"YAML syntax error: {getattr(e, 'problem', e)}",
                         SourcePos(path, mark.line + 1 if mark else 0, mark.column + 1 if mark else 0)) from None
    try:
        return SimConfig.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise InputError(first["msg"], SourcePos(path), field) from None

"""``reconciler version [--kubeconfig FILE [--context NAME] | --cluster sim:PATH] [-o table|json|yaml]``:
print the client version (from the installed package's metadata) and, given a cluster, the
server's version as ``GET /version`` answers it (like ``kubectl version``).

Text output is one ``Client Version:`` line (plus ``Python:``) and, with a cluster, one
``Server Version:`` line; ``-o json`` prints ``{"client": {...}, "server": {...}}`` where
``server`` is absent without a cluster. A server that cannot be reached is a cluster error
(exit 4) after nothing but the read of ``/version`` was attempted.
"""

from __future__ import annotations

import argparse
import platform
import sys
from typing import Any

from reconciler.cli.common import add_output_arg
from reconciler.cli.globalflags import add_context_args, impersonation
from reconciler.cli.outputs import dump
from reconciler.errors import EXIT_OK
from reconciler.version import package_version


def add_parser(sub: Any) -> None:
    """Register the ``version`` verb."""
    p: argparse.ArgumentParser = sub.add_parser("version", help="client (and server) version", description=__doc__)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--cluster", metavar="sim:PATH", help="simulated fleet from a kubectl YAML or JSON dump")
    g.add_argument("--kubeconfig", metavar="FILE", default=argparse.SUPPRESS,
                   help="kubeconfig of the real cluster (also the server version)")
    add_context_args(p, argparse.SUPPRESS)
    add_output_arg(p, ("table", "json", "yaml"))
    p.set_defaults(func=run)


def client_info() -> dict[str, str]:
    """``{"version": <package version>, "python": "3.11.2", "platform": "linux/x86_64"}``."""
    return {"version": package_version(), "python": platform.python_version(),
            "platform": f"{sys.platform}/{platform.machine()}"}


def server_info(args: argparse.Namespace) -> dict[str, str] | None:
    """The server's version fields, ``{"simulated": PATH}`` for ``--cluster sim:PATH`` (after
    loading the fleet file), or None without any cluster option.

    Raises:
        InputError: bad ``--cluster`` value or fleet file, a ``--kubeconfig`` that is no file.
        ClusterError: kubeconfig invalid or the server unreachable.
    """
    if args.cluster:
        from reconciler.cli.clusters import open_cluster

        open_cluster(args)
        return {"simulated": args.cluster[4:]}
    if args.kubeconfig is None and args.context is None:
        return None
    from reconciler.adapters.kube.cluster import KubeCluster
    from reconciler.session import check_kubeconfig

    who = impersonation(args)
    check_kubeconfig(args.kubeconfig, args.context)
    with KubeCluster.from_kubeconfig(args.kubeconfig, args.context, impersonate=who,
                                     request_timeout=args.request_timeout or 30.0) as kube:
        return kube.server_version()


def run(args: argparse.Namespace) -> int:
    """Print the versions; exit 0. As ``kubectl version``, the client's is printed before the
    server is asked, so a server that cannot be reached (exit 4) still leaves the client version
    on the terminal (text output; ``-o json|yaml`` is one document, printed only when complete)."""
    doc: dict[str, Any] = {"client": client_info()}
    if args.output not in ("json", "yaml"):
        print(f"Client Version: {doc['client']['version']}")
        print(f"Python: {doc['client']['python']} ({doc['client']['platform']})", flush=True)
    server = server_info(args)
    if server is not None:
        doc["server"] = server
    if args.output in ("json", "yaml"):
        dump(doc, args.output)
        return EXIT_OK
    if server is not None:
        if "simulated" in server:
            print(f"Server Version: simulated fleet {server['simulated']}")
        else:
            print(f"Server Version: {server.get('gitVersion', '(not reported)')}")
    return EXIT_OK

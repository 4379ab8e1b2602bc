"""``reconciler crds apply [--dry-run] [--timeout SECONDS]`` and ``reconciler crds print``: the
CustomResourceDefinitions of this release (NodeRecipe, NodeRecipeRollout), the same objects as the
chart's ``crds/``.

``helm upgrade`` never updates a chart's CRDs (Helm installs ``crds/`` on first install only), so
upgrading to a release whose NodeRecipe schema changed is: ``reconciler crds apply`` (this
release's package, with the cluster admin's kubeconfig), then ``helm upgrade``. ``apply`` is a
server-side apply (field manager ``node-reconciler``, conflicts forced) followed by a wait until
each CRD is Established; it prints ``customresourcedefinition/NAME created|configured|unchanged``
per CRD, as ``kubectl apply`` does. ``--dry-run``: the API server validates and answers, nothing
is stored. ``print`` writes them as YAML (for ``kubectl apply --server-side -f -`` or a GitOps
repository). Exit 0; 4 when the API server refuses (the rights: ``patch`` and ``create`` on
``customresourcedefinitions``) or cannot be reached.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from reconciler.cli.globalflags import add_context_args, impersonation
from reconciler.errors import EXIT_OK, shown


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"{shown(text)}: seconds, more than 0 and at most 3600")
    return value


def add_parser(sub: Any) -> None:
    """Register the ``crds`` verb and its sub-commands."""
    p: argparse.ArgumentParser = sub.add_parser(
        "crds", help="apply or print this release's CustomResourceDefinitions (helm upgrade does not)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    csub = p.add_subparsers(dest="crds_cmd", metavar="COMMAND")
    csub.required = True
    a = csub.add_parser("apply", help="server-side apply the CRDs and wait until they are Established")
    a.add_argument("--kubeconfig", metavar="FILE", default=argparse.SUPPRESS,
                   help="kubeconfig of the real cluster (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    add_context_args(a, argparse.SUPPRESS)
    a.add_argument("--dry-run", action="store_true", help="the API server validates, stores nothing")
    a.add_argument("--timeout", type=_seconds, default=60.0, metavar="SECONDS",
                   help="how long to wait for the CRDs to be Established (default 60)")
    a.set_defaults(func=run)
    pr = csub.add_parser("print", help="print the CRDs as YAML")
    pr.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Apply or print the CRDs."""
    from reconciler.load.crd import all_crds

    docs = all_crds()
    if args.crds_cmd == "print":
        import yaml

        sys.stdout.write(yaml.safe_dump_all(docs, sort_keys=False))
        return EXIT_OK
    from reconciler.adapters.kube.cluster import KubeCluster
    from reconciler.adapters.kube.crds import apply_crds
    from reconciler.session import check_kubeconfig

    path, context = getattr(args, "kubeconfig", None), getattr(args, "context", None)
    check_kubeconfig(path, context)
    timeout = getattr(args, "request_timeout", None) or 30.0
    with KubeCluster.from_kubeconfig(path, context, pool_size=2, impersonate=impersonation(args)) as kube:
        applied = apply_crds(kube.api_client, docs, dry_run=args.dry_run, timeout=args.timeout,
                             request_timeout=timeout)
    suffix = " (server dry run)" if args.dry_run else ""
    for a in applied:
        print(f"customresourcedefinition.apiextensions.k8s.io/{a.name} {a.action.value}{suffix}")
    return EXIT_OK

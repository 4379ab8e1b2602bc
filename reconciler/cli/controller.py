"""``reconciler controller``: run as a long-lived controller (a Deployment; charts/node-reconciler).

Desired state from NodeRecipe objects in the cluster (``--source crd``, the default; applied by
Argo CD or Flux from git), from a git branch or tag it fetches itself every ``--git-interval``
(``--source git --git-url URL``), or from files mounted into the pod (``--source directory
--recipes DIR``; checked for changes every ``--files-interval``). Watches nodes, NodeRecipe objects
and the pause/disable controls (one LIST, then watch) and applies every recipe through the same
service as ``reconciler apply`` whenever something that matters changes: a node joins (it gets its
packages and loses the runtime-required taint), a recipe changes (planned and rolled out with batch
gating), a recipe is paused or resumed. Status (kstatus: observedGeneration, Ready, Reconciling,
Stalled) goes on each NodeRecipe object, and with ``--status-repo`` (needs ``--cluster-name``) into
git as ``apply`` writes it (:mod:`reconciler.cli.statusgit`): one commit per recipe run that
changed the status file.

``--leader-elect``: two replicas, one active through the Lease ``reconciler-controller-leader-…``
in the reconciler's namespace. SIGTERM stops the running pass between two steps (every node keeps
its record), releases the Leases and exits 0; the next leader resumes. ``/healthz`` and
``/readyz`` on ``--health-probe-bind-address``, ``/metrics`` on ``--metrics-bind-address``.

Exit codes: 0 stopped by a signal (or ``--once`` succeeded), 1 ``--once`` pass failed, 2 bad
options or (``--once``) bad input, 4 cluster unreachable at start.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import stat
import sys
import time
from typing import Any

from reconciler.cli.common import add_cluster_args
from reconciler.cli.globalflags import request_timeout
from reconciler.cli.optcheck import count, seconds
from reconciler.cli.statusgit import add_git_status_args
from reconciler.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, InputError, shown

log = logging.getLogger(__name__)


def _bool(text: str) -> bool:
    v = text.strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"{shown(text)}: expected true or false")


def add_parser(sub: Any) -> None:
    """Register the ``controller`` verb."""
    p: argparse.ArgumentParser = sub.add_parser(
        "controller", help="run as a controller: watch nodes and recipes, roll out on change (a Deployment)",
        description=__doc__.split("\n\n")[1] if __doc__ else None)
    p.add_argument("--source", choices=("crd", "directory", "git"), default="crd",
                   help="desired state: NodeRecipe objects (crd), a git ref fetched every --git-interval (git), "
                        "files (directory)")
    p.add_argument("--recipes", "--path", dest="recipe_paths", action="append", default=[], metavar="PATH",
                   help="--source directory: recipe files or directories (repeatable)")
    p.add_argument("--policy", action="append", default=[], metavar="PATH",
                   help="DeploymentPolicy files or directories (repeatable; both sources)")
    p.add_argument("--git-url", default=None, metavar="URL",
                   help="--source git: repository (a token in $RECONCILER_GIT_TOKEN is used as the password)")
    p.add_argument("--git-ref", default="main", metavar="BRANCH|TAG", help="--source git: branch or tag (main)")
    p.add_argument("--git-path", default="", metavar="DIR", help="--source git: recipes inside the repository")
    p.add_argument("--git-policy-path", default="", metavar="DIR",
                   help="--source git: DeploymentPolicies inside the repository")
    p.add_argument("--git-interval", type=request_timeout, default=300.0, metavar="DURATION",
                   help="--source git: how often the ref is fetched (5m)")
    p.add_argument("--git-workdir", default=None, metavar="DIR",
                   help="--source git: where the repository is kept (default /source when writable, else a temp dir)")
    p.add_argument("--cluster-name", default="", help="cluster name for messages and git status paths")
    add_git_status_args(p.add_argument_group("git status commits (optional; the status is on the NodeRecipe objects "
                                             "too)"))
    p.add_argument("--no-locked", dest="locked", action="store_false", help="allow packages not pinned by digest")
    p.add_argument("--leader-elect", type=_bool, nargs="?", const=True, default=False, metavar="true|false",
                   help="leader election: one active replica through a Lease")
    p.add_argument("--leader-elect-lease-duration", type=request_timeout, default=10.0, metavar="DURATION",
                   help="how long a leader's Lease holds without renewal before another replica may take it (10s)")
    p.add_argument("--leader-elect-renew-deadline", type=request_timeout, default=7.0, metavar="DURATION",
                   help="the leader stops leading when it could not renew within this (7s)")
    p.add_argument("--leader-elect-retry-period", type=request_timeout, default=1.0, metavar="DURATION",
                   help="how often replicas try to acquire or renew the Lease (1s)")
    p.add_argument("--metrics-bind-address", default=":8080", metavar="[HOST]:PORT", help="/metrics (0: off)")
    p.add_argument("--health-probe-bind-address", default=":8081", metavar="[HOST]:PORT",
                   help="/healthz and /readyz (0: off)")
    p.add_argument("--lease-duration", type=count(5, 86400), default=60, metavar="SECONDS",
                   help="recipe Lease duration (one run per recipe)")
    p.add_argument("--workers", type=count(1, 1024), default=None, metavar="N", help="nodes advanced at once")
    p.add_argument("--poll-seconds", type=seconds(0, 3600, low_inclusive=False), default=None,
                   help="fallback seconds between looks at a node in progress (watches wake it first)")
    p.add_argument("--files-interval", type=request_timeout, default=15.0, metavar="DURATION",
                   help="how often mounted recipe (--source directory) and --policy files are checked for changes; "
                        "a change starts a pass (15s; 0: never)")
    p.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info",
                   help="log level of the controller (info: every pass, its reason and its result; -v/-vv before "
                        "the verb also work)")
    p.add_argument("--retry-seconds", type=seconds(1, 3600), default=30.0, help="retry a failed pass after this long")
    p.add_argument("--once", action="store_true", help="run one pass and exit with its result (tests, debugging)")
    add_cluster_args(p)
    p.set_defaults(func=run, locked=True)


def _check(args: argparse.Namespace) -> None:
    if args.source == "git" and not args.git_url:
        raise InputError("--source git needs --git-url URL")
    if args.source != "git" and args.git_url:
        raise InputError("--git-url is for --source git")
    if args.status_repo and not args.cluster_name:
        raise InputError("--status-repo needs --cluster-name (status files are per cluster)")
    if args.source == "directory" and not args.recipe_paths:
        raise InputError("--source directory needs --recipes PATH (files or directories of recipes)")
    if args.source == "crd" and args.recipe_paths:
        raise InputError("--recipes is for --source directory; with --source crd the recipes are NodeRecipe objects")
    if args.source == "crd" and getattr(args, "cluster", None):
        raise InputError("--source crd needs a real cluster (NodeRecipe objects); with --cluster use --source "
                         "directory")
    if args.leader_elect and not (args.leader_elect_retry_period < args.leader_elect_renew_deadline
                                  < args.leader_elect_lease_duration):
        raise InputError("--leader-elect-retry-period < --leader-elect-renew-deadline < --leader-elect-lease-duration "
                         "is required")
    _check_git_paths(args)
    from reconciler.adapters.kube.probes import parse_bind_address

    args.metrics_addr = parse_bind_address(args.metrics_bind_address, "--metrics-bind-address")
    args.probe_addr = parse_bind_address(args.health_probe_bind_address, "--health-probe-bind-address")


def _check_git_paths(args: argparse.Namespace) -> None:
    """``--git-path``/``--git-policy-path`` stay inside the repository (no absolute path, no
    ``..`` out of it; a symlink out is refused when the commit is laid out:
    :func:`reconciler.load.pathwords.confined`); ``--git-workdir`` is a directory or can be one.

    Raises:
        InputError: naming the option.
    """
    from reconciler.errors import PATH_LIMIT
    from reconciler.load.pathwords import relative_path

    for option, attr in (("--git-path", "git_path"), ("--git-policy-path", "git_policy_path")):
        value = getattr(args, attr)
        norm = relative_path(value)
        if norm is None:
            raise InputError(f"{option} {shown(value, PATH_LIMIT)}: must be a path inside the repository "
                             "(relative, without '..' leading out of it)")
        setattr(args, attr, norm)
    workdir = args.git_workdir
    if args.source == "git" and workdir:
        from reconciler.fileio.reading import kind_of

        try:
            st = os.stat(workdir)
        except FileNotFoundError:
            parent = os.path.dirname(os.path.abspath(workdir))
            if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
                raise InputError(f"--git-workdir {shown(workdir, PATH_LIMIT)}: does not exist and cannot be created "
                                 f"(directory {shown(parent, PATH_LIMIT)} is missing or not writable)") from None
            return
        except OSError as e:
            from reconciler.fileio.reading import os_reason

            raise InputError(f"--git-workdir {shown(workdir, PATH_LIMIT)}: {os_reason(e)}") from None
        if not stat.S_ISDIR(st.st_mode):
            raise InputError(f"--git-workdir {shown(workdir, PATH_LIMIT)}: is {kind_of(st.st_mode)}, not a "
                             "directory")
        if not os.access(workdir, os.W_OK | os.X_OK):
            raise InputError(f"--git-workdir {shown(workdir, PATH_LIMIT)}: directory is not writable")


def _log_level(args: argparse.Namespace) -> None:
    """``--log-level`` (default info: a controller's log is how it is watched), unless ``-v`` asks
    for more; log lines carry a UTC time stamp."""
    level = min(getattr(logging, args.log_level.upper()), logging.WARNING - 10 * min(args.verbose, 2))
    root = logging.getLogger()
    root.setLevel(level)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%Y-%m-%dT%H:%M:%SZ")
    fmt.converter = time.gmtime
    for h in root.handlers:
        h.setFormatter(fmt)


def _identity() -> str:
    """``<pod name>/<pid>`` in a pod (``POD_NAME`` from the downward API), else ``<host>/<pid>``."""
    from reconciler.adapters.host import process_identity

    pod = os.environ.get("POD_NAME")
    return f"{pod}/{os.getpid()}" if pod else process_identity()


def run(args: argparse.Namespace) -> int:
    """Start the controller and serve until SIGTERM/SIGINT (module docstring)."""
    _check(args)
    if not getattr(args, "namespace", None) and os.environ.get("POD_NAMESPACE") and not getattr(args, "cluster", None):
        args.namespace = os.environ["POD_NAMESPACE"]
    from reconciler.cli.clusters import open_cluster
    from reconciler.cli.wiring import build, git_status

    _log_level(args)
    reporters = git_status(args)  # every option, and the status repository, checked before any work
    opened = open_cluster(args)
    if opened.kube is not None:
        opened.kube.server_version()  # a cluster that does not answer: exit 4 now, not a pass that finds nothing
    wired = build(args, opened, _identity(), reporters)
    ctl = wired.controller
    if args.once:
        try:
            wired.start_watches(required=True)  # NodeRecipe objects and the controls, as a serving pass sees them
            outcome = ctl.reconcile(["--once"])
        finally:
            wired.close()
        return {"succeeded": EXIT_OK, "idle": EXIT_OK, "invalid": EXIT_BAD_INPUT}.get(outcome, EXIT_FAILED)
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}

    def on_signal(signum: int, frame: Any) -> None:
        print(f"received {signal.Signals(signum).name}: stopping the current pass and releasing the Leases",
              file=sys.stderr)
        ctl.stop()

    for s in previous:
        signal.signal(s, on_signal)
    try:
        wired.start()
        ctl.serve()
    finally:
        wired.close()
        for s, h in previous.items():
            signal.signal(s, h)
    print(f"controller stopped after {ctl.passes} pass(es)", file=sys.stderr)
    return EXIT_OK

"""Wire ``reconciler controller`` together: the controller (:mod:`reconciler.controller`) with the
adapters of the cluster it runs against — watches (:mod:`reconciler.adapters.kube.informer`), the
NodeRecipe status writer, leader election, and the HTTP endpoints (:mod:`reconciler.adapters.kube.probes`).

On the simulated fleet (``--cluster sim:PATH``, tests) there are no watches: passes run on start
(and ``--once``)."""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from reconciler.cli.clusters import Opened
from reconciler.controller.leader import Leadership
from reconciler.controller.loop import Controller, ControllerSettings
from reconciler.controller.metrics import ControllerMetrics
from reconciler.controller.source import DirectorySource, GitSource, ObjectSource, files_fingerprint
from reconciler.errors import ReconcilerError
from reconciler.ops.controls import CONTROLS_CONFIGMAP, namespace_for

log = logging.getLogger(__name__)


@dataclass
class Wired:
    """The controller and what runs beside it; :meth:`start` and :meth:`close` them together."""

    controller: Controller
    args: argparse.Namespace
    informers: list[Any] = field(default_factory=list)
    leader: Leadership | None = None
    endpoints: Any = None
    changes: Any = None
    ports: list[int] = field(default_factory=list)
    git: tuple[GitSource, float] | None = None
    files: tuple[list[str], float] | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def healthy(self) -> str:
        """``""`` or why /healthz fails: a watch thread or the decision thread died."""
        dead = [i.name for i in self.informers if not i.alive()]
        if dead:
            return f"watch thread(s) stopped: {', '.join(dead)}"
        return ""

    def ready(self) -> str:
        """``""`` or why /readyz fails: caches not synced yet, or the decision thread not running."""
        pending = [i.name for i in self.informers if not i.synced.is_set()]
        if pending:
            return f"waiting for the initial LIST of {', '.join(pending)}"
        if not self.controller.thread_alive.is_set():
            return "the controller is not running"
        return ""

    def start(self, sync_timeout: float = 120.0) -> None:
        """Serve the endpoints, start the watches (waiting for their first LIST), the election and
        the git and file checks."""
        from reconciler.adapters.kube.probes import Endpoints

        self.endpoints = Endpoints(self.controller.metrics.registry, self.healthy, self.ready)
        self.ports = self.endpoints.serve(self.args.metrics_addr, self.args.probe_addr)
        self.start_watches(sync_timeout)
        if self.controller.signal.shutdown.is_set():
            return
        if self.leader is not None:
            self.leader.start()
        if self.git is not None:
            threading.Thread(target=self._fetch_loop, name="git-fetch", daemon=True).start()
        if self.files is not None:
            threading.Thread(target=self._files_loop, name="files", daemon=True).start()

    def start_watches(self, sync_timeout: float = 120.0, *, required: bool = False) -> None:
        """Start the watches and wait for the first LIST of each (at most ``sync_timeout`` seconds
        in all; a stop request — SIGTERM — ends the wait at once). ``required`` (``--once``):
        a watch without its first LIST is an error.

        Raises:
            ClusterError: ``required`` and a watch has no first LIST.
        """
        from reconciler.errors import ClusterError

        for i in self.informers:
            i.start()
        shutdown = self.controller.signal.shutdown
        deadline = time.monotonic() + sync_timeout
        for i in self.informers:
            while not i.synced.wait(0.2):
                if shutdown.is_set():
                    return
                if time.monotonic() >= deadline:
                    if required:
                        raise ClusterError(f"no initial LIST of {i.name} after {sync_timeout:.0f} s: {i.last_error}")
                    log.warning("informer %s: no initial LIST after %.0f s (%s); going on", i.name, sync_timeout,
                                i.last_error)
                    break

    def _files_loop(self) -> None:
        """Every interval, compare the mounted recipe and policy files with what the last check
        saw; a change queues a pass (a ConfigMap volume is updated in place by the kubelet)."""
        assert self.files is not None
        paths, interval = self.files
        seen = files_fingerprint(paths)
        while not self._stop.wait(interval):
            now = files_fingerprint(paths)
            if now != seen:
                seen = now
                self.controller.metrics.triggers.labels("files").inc()
                self.controller.queue.add("mounted recipe or policy files changed")

    def _fetch_loop(self) -> None:
        """Fetch the git ref every interval; a new commit queues a pass (the first pass fetches itself)."""
        assert self.git is not None
        source, interval = self.git
        while not self._stop.wait(interval):
            try:
                reason = source.refresh()
            except ReconcilerError as e:
                log.warning("git fetch failed (the last commit fetched stays in use): %s", e)
                continue
            if reason:
                self.controller.metrics.triggers.labels("git").inc()
                self.controller.queue.add(reason)

    def close(self) -> None:
        """Stop everything; release the leader Lease (the standby takes over at once)."""
        self._stop.set()
        for i in self.informers:
            i.stop()
        if self.leader is not None:
            self.leader.release()
        if self.endpoints is not None:
            self.endpoints.close()
        close = getattr(self.changes, "close", None)
        if close is not None:
            close()


def build(args: argparse.Namespace, opened: Opened, identity: str, reporters: Any = None) -> Wired:
    """The controller for ``args`` on ``opened`` (see the module docstring); ``reporters``: what
    :func:`git_status` returned (None: none)."""
    sim = opened.sim is not None
    api_client = opened.kube.api_client if opened.kube is not None else None
    watched_nodes: dict[str, Any] | None = None  # the node watch's store, once it exists (below)

    def nodes_now() -> list[Any]:
        """The nodes for the rollout gauges: the node watch's store (no request per scrape), else one LIST."""
        if watched_nodes is not None:
            return list(watched_nodes.values())
        return list(opened.cluster.nodes.list_nodes())

    metrics = ControllerMetrics(nodes=nodes_now, wall=opened.clock.utc)
    settings = ControllerSettings(
        holder=identity,
        locked=args.locked,
        workers=1 if sim else args.workers,
        poll_seconds=args.poll_seconds or opened.poll_seconds,
        lease_duration=args.lease_duration,
        wait_for_lock=max(2.0 * args.lease_duration, 30.0),
        retry_seconds=args.retry_seconds,
    )
    leader = None
    if args.leader_elect:
        leader = Leadership(opened.cluster.leases, opened.clock, identity,
                            lease_duration=args.leader_elect_lease_duration,
                            renew_deadline=args.leader_elect_renew_deadline,
                            retry_period=args.leader_elect_retry_period)
    source: Any
    status = None
    events = None
    if args.source == "crd":
        source = ObjectSource(args.policy, locked=args.locked)
    elif args.source == "git":
        from reconciler.adapters.git.source import GitMirror

        source = GitSource(GitMirror(args.git_url, args.git_ref, _git_workdir(args.git_workdir)), args.git_path,
                           args.git_policy_path, locked=args.locked)
    else:
        source = DirectorySource(args.recipe_paths, args.policy, locked=args.locked)
    if args.source == "crd" and api_client is not None:
        from reconciler.adapters.host import process_identity
        from reconciler.adapters.kube.noderecipes import NodeRecipeEvents, NodeRecipeStatus

        status = (NodeRecipeStatus(api_client), source)
        events = (NodeRecipeEvents(api_client, instance=process_identity()), source)
    observers: list[Any] = []
    if reporters is not None:
        observers.append(reporters(lambda: ctl.revision))  # type: ignore[has-type]  # ctl: bound below, before any pass
    ctl = Controller(source, opened, settings, status=status, leader=leader, metrics=metrics, events=events,
                     reporters=observers)
    wired = Wired(ctl, args, leader=leader, changes=opened.changes)
    if isinstance(source, GitSource):
        wired.git = (source, args.git_interval)
    mounted = [*args.recipe_paths, *args.policy] if args.source == "directory" else list(args.policy)
    if mounted and args.files_interval > 0:
        wired.files = (mounted, args.files_interval)
    if api_client is not None and not sim:
        from reconciler.adapters.kube.informer import config_map_informer, node_informer, pdb_informer, recipe_informer

        nodes = node_informer(api_client, ctl.on_node)
        watched_nodes = nodes.store
        wired.informers.append(nodes)
        wired.informers.append(pdb_informer(api_client, ctl.on_pdb))
        if isinstance(source, ObjectSource):
            objects = source

            def on_recipe(event: str, old: Any, new: Any) -> None:
                objects.observe(event, new if new is not None else old)
                ctl.on_recipe(event, old, new)

            wired.informers.append(recipe_informer(api_client, on_recipe))

        def on_controls(event: str, old: Any, new: Any) -> None:
            ctl.on_controls((old or {}).get("data"), (new or {}).get("data"))

        wired.informers.append(config_map_informer(api_client, namespace_for(opened.cluster), CONTROLS_CONFIGMAP,
                                                   on_controls))
    return wired


def git_status(args: argparse.Namespace) -> Any:
    """``--status-repo``: a factory of the git status observer (given how to read the pass's
    revision), checked now (exit 2 before anything runs); None without it. The watched paths are
    the source's recipe and policy paths (the status prefix may not overlap them)."""
    from reconciler.cli.statusgit import GitStatus, GitStatusObserver
    from reconciler.errors import LeaseHeldError
    from reconciler.execute.lock import LeaseLostError  # PassStopped (a preempted or stopped pass) is one

    watched = [args.git_path, args.git_policy_path] if args.source == "git" else [*args.recipe_paths, *args.policy]
    git = GitStatus.from_args(args, watched, log.info)
    if git is None:
        return None

    def make(revision: Any) -> GitStatusObserver:
        # a preempted or stopped pass, or a Lease another run holds, is retried: no error status for it
        return GitStatusObserver(git, revision, log.warning, transient=(LeaseHeldError, LeaseLostError))

    return make


def _git_workdir(given: str | None) -> str:
    """``--git-workdir``, else ``/source`` (the chart's emptyDir) when writable, else a new temp dir."""
    if given:
        return given
    if os.path.isdir("/source") and os.access("/source", os.W_OK):
        return "/source"
    return tempfile.mkdtemp(prefix="reconciler-git-")

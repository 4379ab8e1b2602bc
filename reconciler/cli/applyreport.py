"""Where ``apply`` reports results besides the terminal (issue #5): a status commit in git and the
``NodeRecipeRollout`` object in the cluster. Adds its options to ``apply`` and is driven by it.

Git (``--status-repo URL|PATH``, needs ``--cluster-name``): :mod:`reconciler.cli.statusgit` (its
options and checks are shared with ``reconciler controller``).

Cluster (``--status-object``, default on for a real cluster, off for ``--cluster sim:``): the
``NodeRecipeRollout`` named after the recipe gets the run's spec when the run starts (new
generation), then its status on every change of node counts and at the end
(:mod:`reconciler.report.status`). A failed status write is logged and never stops the rollout.

Every option is checked before anything runs: bad values are one-line input errors (exit 2) and
nothing is changed.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from typing import Any

from reconciler.cli.safeio import error_line
from reconciler.errors import InputError, ReconcilerError
from reconciler.execute.timeline import Event, RunResult
from reconciler.model.plan import Plan

log = logging.getLogger(__name__)


def add_report_args(p: argparse.ArgumentParser) -> None:
    """Add the git status and status object options to the ``apply`` parser."""
    from reconciler.cli.statusgit import add_git_status_args

    g = p.add_argument_group("report results (git status commit, in-cluster status object)")
    g.add_argument("--cluster-name", metavar="NAME", help="cluster name used in status paths and messages")
    g.add_argument("--source-revision", default="", metavar="SHA", help="revision of the recipes being applied")
    add_git_status_args(g)
    g.add_argument(
        "--status-object",
        dest="status_object",
        action="store_true",
        default=None,
        help="write the NodeRecipeRollout object (default: on for a real cluster)",
    )
    g.add_argument("--no-status-object", dest="status_object", action="store_false",
                   help="do not write the NodeRecipeRollout object")


class Reporter:
    """Reports of one ``apply`` invocation (see the module docstring). Build with
    :meth:`from_args` before any rollout starts."""

    def __init__(self) -> None:
        self.git: Any = None
        self.revision = ""
        self.objects: Any = None
        self._progress: Any = None
        self._generation = 0
        self._conditions: list[Any] = []

    @classmethod
    def from_args(cls, args: argparse.Namespace, opened: Any) -> Reporter:
        """Validate the options and build the reporter.

        Raises:
            InputError: a bad git status option (:meth:`reconciler.cli.statusgit.GitStatus.from_args`,
                the watched paths being the recipe and policy paths given to ``apply``), or
                ``--status-object`` on a simulated cluster.
        """
        from reconciler.cli.statusgit import GitStatus

        r = cls()
        r.revision = args.source_revision or ""
        r.git = GitStatus.from_args(args, [*args.recipes, *args.policy],
                                    lambda line: print(line, file=sys.stderr))
        want_object = args.status_object
        if want_object is None:
            want_object = getattr(opened, "sim", None) is None
        if want_object:
            api_client = opened.kube.api_client if opened.kube is not None else None
            if api_client is None:
                raise InputError("--status-object needs a real cluster (--kubeconfig), not a simulated one")
            from reconciler.adapters.kube.statusobject import StatusObjects

            r.objects = StatusObjects(api_client)
        return r

    # ---------------------------------------------------------------- status object
    def _write_object(self, plan: Plan) -> None:
        if self.objects is None or self._progress is None:
            return
        from reconciler.adapters.kube.statusobject import rfc3339_now
        from reconciler.report.status import rollout_status

        status = rollout_status(
            self._progress, generation=self._generation, now=rfc3339_now(), previous=self._conditions
        )
        try:
            self.objects.write_status(plan.recipe.name, status)
            self._conditions = status["conditions"]
        except ReconcilerError as e:
            log.warning("could not update NodeRecipeRollout %s: %s", plan.recipe.name, e)

    def listener(
        self, plan: Plan, run_id: str, inner: Callable[[Event], None] | None
    ) -> Callable[[Event], None] | None:
        """Start reporting a run of ``plan``; returns the ``on_event`` callback for the rollout
        (calls ``inner`` too)."""
        from reconciler.report.status import RolloutProgress, new_object

        self._progress = RolloutProgress(plan, run_id=run_id)
        if self.objects is not None:
            try:
                stored = self.objects.ensure(new_object(plan, revision=self.revision))
                self._generation = int(stored.get("metadata", {}).get("generation") or 1)
                self._conditions = list((stored.get("status") or {}).get("conditions") or [])
            except ReconcilerError as e:
                log.warning("could not create NodeRecipeRollout %s: %s", plan.recipe.name, e)
                self.objects = None
            self._write_object(plan)
        if self.objects is None and inner is None:
            return None

        def on_event(ev: Event) -> None:
            if inner is not None:
                inner(ev)
            if self._progress is not None and self._progress.on_event(ev):
                self._write_object(plan)

        return on_event

    # ---------------------------------------------------------------- end of a run
    def finished(self, plan: Plan, result: RunResult) -> None:
        """Report a finished run (status object, then the git status commit)."""
        if self._progress is not None:
            self._progress.finish(result)
            self._write_object(plan)
        if self.git is not None:
            self.git.finished(plan, result, self.revision)

    def failed(self, recipe: str, version: str, plan: Plan | None, error: BaseException, run_id: str) -> None:
        """Report a run that ended with an error before a result existed (a failed commit is a
        warning: the original error is what the caller reports)."""
        if self.git is None:
            return
        try:
            self.git.failed(recipe, version, plan, error, run_id, self.revision)
        except ReconcilerError as e:
            print(error_line("warning", f"status commit failed: {e}"), file=sys.stderr)

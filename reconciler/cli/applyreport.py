"""Where ``apply`` reports results besides the terminal (issue #5): a status commit in git and the
``NodeRecipeRollout`` object in the cluster. Adds its options to ``apply`` and is driven by it.

Git (``--status-repo URL|PATH``, needs ``--cluster-name``): after each recipe's run — and when
the run fails with an error — ``<prefix>/<cluster>/<recipe>.json``
(:mod:`reconciler.report.gitstatus`) is committed on ``--status-branch`` (default
``reconciler-status``) and pushed with fetch/re-apply/retry (:class:`reconciler.adapters.git.StatusPusher`).
``--status-author "Name <email>"``, ``--status-message TEMPLATE`` (placeholders
``{recipe} {version} {cluster} {result} {summary} {run_id} {revision} {plan_hash} {path}``;
the default carries ``[skip ci]``), ``--status-sign-command CMD`` (e.g. ``"gpg --detach-sign
--armor -u KEYID"`` or ``"ssh-keygen -Y sign -n git -f KEY"``). The status prefix may not lie
inside a recipe or policy path given to ``apply`` (a status commit must never trigger a sync).

Cluster (``--status-object``, default on for a real cluster, off for ``--cluster sim:``): the
``NodeRecipeRollout`` named after the recipe gets the run's spec when the run starts (new
generation), then its status on every change of node counts and at the end
(:mod:`reconciler.report.status`). A failed status write is logged and never stops the rollout.

Every option is checked before anything runs: bad values are one-line input errors (exit 2) and
nothing is changed.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import re
import shlex
import shutil
import sys
from collections.abc import Callable, Iterator
from typing import Any

from reconciler.cli.safeio import error_line
from reconciler.errors import InputError, ReconcilerError
from reconciler.execute.timeline import Event, RunResult
from reconciler.model.plan import Plan
from reconciler.report.redact import redact
from reconciler.report.safetext import visible

log = logging.getLogger(__name__)
_AUTHOR = re.compile(r"\s*(?P<name>[^<>\x00-\x1f\x7f]+?)\s*<(?P<email>[^<>\s\x00-\x1f\x7f]+@[^<>\s\x00-\x1f\x7f]+)>\s*")


def add_report_args(p: argparse.ArgumentParser) -> None:
    """Add the git status and status object options to the ``apply`` parser."""
    from reconciler.report.gitstatus import DEFAULT_BRANCH, DEFAULT_PREFIX

    g = p.add_argument_group("report results (git status commit, in-cluster status object)")
    g.add_argument("--cluster-name", metavar="NAME", help="cluster name used in status paths and messages")
    g.add_argument("--source-revision", default="", metavar="SHA", help="revision of the recipes being applied")
    g.add_argument("--status-repo", metavar="URL|PATH", help="git repository receiving status commits")
    g.add_argument(
        "--status-branch",
        default=DEFAULT_BRANCH,
        metavar="BRANCH",
        help=f"branch for status commits (default {DEFAULT_BRANCH})",
    )
    g.add_argument(
        "--status-prefix",
        default=DEFAULT_PREFIX,
        metavar="DIR",
        help=f"directory of status files in that repository (default {DEFAULT_PREFIX})",
    )
    g.add_argument(
        "--status-author",
        default="node-reconciler <reconciler@nodewright.dev>",
        metavar="'NAME <EMAIL>'",
        help="author and committer of status commits",
    )
    g.add_argument("--status-message", metavar="TEMPLATE", help="commit message template (default has [skip ci])")
    g.add_argument(
        "--status-sign-command",
        metavar="CMD",
        help="sign status commits: command reading the payload on stdin, signature on stdout",
    )
    g.add_argument(
        "--status-object",
        dest="status_object",
        action="store_true",
        default=None,
        help="write the NodeRecipeRollout object (default: on for a real cluster)",
    )
    g.add_argument("--no-status-object", dest="status_object", action="store_false")


@contextlib.contextmanager
def _option(name: str) -> Iterator[None]:
    """Turn an input or git error raised while checking option ``name`` into an InputError
    (exit 2) that names the option; the message is redacted."""
    from reconciler.adapters.git import GitError

    try:
        yield
    except (InputError, GitError) as e:
        text = redact(str(e))
        raise InputError(text if text.startswith(name) else f"{name}: {text}") from None


def _sign_command(text: str) -> list[str]:
    """``--status-sign-command`` split as a shell would, its program found on ``PATH``.

    Raises:
        InputError: unbalanced quotes, an empty command, or a program that is not there.
    """
    try:
        argv = shlex.split(text)
    except ValueError as e:
        raise InputError(f"--status-sign-command: {e}") from None
    if not argv:
        raise InputError("--status-sign-command: empty command")
    if shutil.which(argv[0]) is None:
        raise InputError(f"--status-sign-command: program {visible(argv[0])!r} not found "
                         "(not on PATH or not executable)")
    return argv


class Reporter:
    """Reports of one ``apply`` invocation (see the module docstring). Build with
    :meth:`from_args` before any rollout starts."""

    def __init__(self) -> None:
        self.pusher: Any = None
        self.cluster_name = ""
        self.prefix = ""
        self.template = ""
        self.revision = ""
        self.objects: Any = None
        self._progress: Any = None
        self._generation = 0
        self._conditions: list[Any] = []

    @classmethod
    def from_args(cls, args: argparse.Namespace, opened: Any) -> Reporter:
        """Validate the options and build the reporter.

        Raises:
            InputError: ``--status-repo`` without ``--cluster-name``, a bad author, template,
                branch, prefix (or one inside the watched recipe paths), or ``--status-object``
                on a simulated cluster.
        """
        from reconciler.report.gitstatus import DEFAULT_MESSAGE, check_template, status_path

        r = cls()
        r.revision = args.source_revision or ""
        r.cluster_name = args.cluster_name or ""
        if args.status_repo:
            from reconciler.adapters.git import Identity, StatusPusher, paths_overlap

            if not r.cluster_name:
                raise InputError("--status-repo needs --cluster-name (status files are per cluster)")
            with _option("--cluster-name"):
                status_path(r.cluster_name, "x")  # validates the name
            with _option("--status-prefix"):
                status_path("x", "x", args.status_prefix)
            m = _AUTHOR.fullmatch(args.status_author)
            if not m:
                raise InputError(f"--status-author {visible(args.status_author)!r}: expected 'Name <email@host>'")
            r.template = args.status_message or DEFAULT_MESSAGE
            with _option("--status-message"):
                check_template(r.template)
            watched = [p for p in [*args.recipes, *args.policy] if not p.startswith("/")]
            clash = paths_overlap(args.status_prefix, watched)
            if clash is not None:
                raise InputError(
                    f"--status-prefix {args.status_prefix!r} overlaps the watched path {clash!r}: a status commit "
                    "there would trigger another sync; use a separate directory or branch"
                )
            sign = _sign_command(args.status_sign_command) if args.status_sign_command else None
            r.prefix = args.status_prefix
            with _option("--status-repo"):
                r.pusher = StatusPusher(
                    args.status_repo, args.status_branch, author=Identity(m["name"], m["email"]), sign_command=sign
                )
                r.pusher.check_reachable()  # before anything runs: a bad repository fails first, exit 2
        want_object = args.status_object
        if want_object is None:
            want_object = getattr(opened, "sim", None) is None
        if want_object:
            api_client = getattr(opened.cluster, "api_client", None)
            if api_client is None:
                raise InputError("--status-object needs a real cluster (--kubeconfig), not a simulated one")
            from reconciler.adapters.statusobject import StatusObjects

            r.objects = StatusObjects(api_client)
        return r

    # ---------------------------------------------------------------- status object
    def _write_object(self, plan: Plan) -> None:
        if self.objects is None or self._progress is None:
            return
        from reconciler.adapters.statusobject import rfc3339_now
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
        from reconciler.report.gitstatus import status_document

        if self._progress is not None:
            self._progress.finish(result)
            self._write_object(plan)
        if self.pusher is not None:
            doc = status_document(result, plan, cluster=self.cluster_name, revision=self.revision)
            self._push(plan.recipe.name, plan.recipe.version, doc, result.run_id, plan.planHash)

    def failed(self, recipe: str, version: str, plan: Plan | None, error: BaseException, run_id: str) -> None:
        """Report a run that ended with an error before a result existed."""
        from reconciler.report.gitstatus import error_document

        if self.pusher is None:
            return
        doc = error_document(
            recipe,
            version,
            cluster=self.cluster_name,
            revision=self.revision,
            plan_hash=plan.planHash if plan else "",
            error=redact(str(error)),
        )
        try:
            self._push(recipe, version, doc, run_id, doc["planHash"])
        except ReconcilerError as e:  # the original error is what the caller reports
            print(error_line("warning", f"status commit failed: {e}"), file=sys.stderr)

    def _push(self, recipe: str, version: str, doc: dict[str, Any], run_id: str, plan_hash: str) -> None:
        from reconciler.report.gitstatus import encode, render_message, status_path

        path = status_path(self.cluster_name, recipe, self.prefix)
        msg = render_message(
            self.template,
            {
                "recipe": recipe,
                "version": version,
                "cluster": self.cluster_name,
                "result": doc["result"],
                "summary": doc["summary"],
                "run_id": run_id,
                "revision": doc["sourceRevision"],
                "plan_hash": plan_hash,
                "path": path,
            },
        )
        res = self.pusher.write({path: encode(doc)}, msg)
        what = "committed" if res.changed else "unchanged"
        print(visible(f"status {path}: {what} {res.commit[:12]} on {self.pusher.branch}"), file=sys.stderr)

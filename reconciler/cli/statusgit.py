"""Git status commits (``--status-repo URL|PATH``, needs ``--cluster-name``), shared by ``apply``
and ``controller``: after each recipe's run — and when a run fails with an error —
``<prefix>/<cluster>/<recipe>.json`` (:mod:`reconciler.report.gitstatus`) is committed on
``--status-branch`` (default ``reconciler-status``) and pushed with fetch/re-apply/retry
(:class:`reconciler.adapters.git.push.StatusPusher`).

``--status-author "Name <email>"``, ``--status-message TEMPLATE`` (placeholders
``{recipe} {version} {cluster} {result} {summary} {run_id} {revision} {plan_hash} {path}``; the
default carries ``[skip ci]``), ``--status-sign-command CMD`` (e.g. ``"gpg --detach-sign --armor
-u KEYID"`` or ``"ssh-keygen -Y sign -n git -f KEY"``). The status prefix may not lie inside a
recipe or policy path the run reads (a status commit must never trigger a sync).

Every option is checked, and the repository reached, before anything runs: a bad value is a
one-line input error (exit 2) naming the option, redacted (no credential of the URL is shown).
A push that fails after the run is a warning: it never changes the run's result.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shlex
import shutil
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from reconciler.errors import InputError, ReconcilerError, shown
from reconciler.execute.timeline import Event, RunResult
from reconciler.model.plan import Plan
from reconciler.model.recipe import Recipe
from reconciler.report.redact import redact
from reconciler.report.safetext import visible

_AUTHOR = re.compile(r"\s*(?P<name>[^<>\x00-\x1f\x7f]+?)\s*<(?P<email>[^<>\s\x00-\x1f\x7f]+@[^<>\s\x00-\x1f\x7f]+)>\s*")


def add_git_status_args(g: Any) -> None:
    """Add ``--status-repo``, ``--status-branch``, ``--status-prefix``, ``--status-author``,
    ``--status-message`` and ``--status-sign-command`` to the parser or argument group ``g``."""
    from reconciler.report.gitstatus import DEFAULT_BRANCH, DEFAULT_PREFIX

    g.add_argument("--status-repo", metavar="URL|PATH", help="git repository receiving status commits")
    g.add_argument("--status-branch", default=DEFAULT_BRANCH, metavar="BRANCH",
                   help=f"branch for status commits (default {DEFAULT_BRANCH})")
    g.add_argument("--status-prefix", default=DEFAULT_PREFIX, metavar="DIR",
                   help=f"directory of status files in that repository (default {DEFAULT_PREFIX})")
    g.add_argument("--status-author", default="node-reconciler <reconciler@nodewright.dev>", metavar="'NAME <EMAIL>'",
                   help="author and committer of status commits")
    g.add_argument("--status-message", metavar="TEMPLATE", help="commit message template (default has [skip ci])")
    g.add_argument("--status-sign-command", metavar="CMD",
                   help="sign status commits: command reading the payload on stdin, signature on stdout")


@contextlib.contextmanager
def option(name: str) -> Iterator[None]:
    """Turn an input or git error raised while checking option ``name`` into an InputError
    (exit 2) that names the option; the message is redacted."""
    from reconciler.adapters.git.repo import GitError

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
        raise InputError(f"--status-sign-command: program {shown(visible(redact(argv[0])))} not found "
                         "(not on PATH or not executable)")
    return argv


class GitStatus:
    """Writes the status files of one cluster to git (module docstring). Build with
    :meth:`from_args`; ``say`` receives one line per commit (the terminal, or a log)."""

    def __init__(self, pusher: Any, cluster_name: str, prefix: str, template: str,
                 say: Callable[[str], None]) -> None:
        self.pusher, self.cluster_name, self.prefix, self.template = pusher, cluster_name, prefix, template
        self.say = say

    @classmethod
    def from_args(cls, args: argparse.Namespace, watched: Sequence[str],
                  say: Callable[[str], None]) -> GitStatus | None:
        """The git status writer for ``args`` (None without ``--status-repo``); ``watched``: the
        repository-relative recipe and policy paths the run reads (the prefix may not overlap them).

        Raises:
            InputError: ``--status-repo`` without ``--cluster-name``, a bad cluster name, author,
                template, branch, prefix (or one inside ``watched``), sign command, or a
                repository that cannot be reached (exit 2, before anything runs).
        """
        from reconciler.report.gitstatus import DEFAULT_MESSAGE, check_template, status_path

        if not args.status_repo:
            return None
        from reconciler.adapters.git.push import Identity, StatusPusher, paths_overlap

        cluster = args.cluster_name or ""
        if not cluster:
            raise InputError("--status-repo needs --cluster-name (status files are per cluster)")
        with option("--cluster-name"):
            status_path(cluster, "x")  # validates the name
        with option("--status-prefix"):
            status_path("x", "x", args.status_prefix)
        m = _AUTHOR.fullmatch(args.status_author)
        if not m:
            raise InputError(f"--status-author {shown(visible(args.status_author))}: expected 'Name <email@host>'")
        template = args.status_message or DEFAULT_MESSAGE
        with option("--status-message"):
            check_template(template)
        clash = paths_overlap(args.status_prefix, [p for p in watched if p and not p.startswith("/")])
        if clash is not None:
            raise InputError(
                f"--status-prefix {args.status_prefix!r} overlaps the watched path {clash!r}: a status commit "
                "there would trigger another sync; use a separate directory or branch"
            )
        sign = _sign_command(args.status_sign_command) if args.status_sign_command else None
        with option("--status-repo"):
            pusher = StatusPusher(args.status_repo, args.status_branch, author=Identity(m["name"], m["email"]),
                                  sign_command=sign)
            pusher.check_reachable()  # before anything runs: a bad repository fails first, exit 2
        return cls(pusher, cluster, args.status_prefix, template, say)

    def finished(self, plan: Plan, result: RunResult, revision: str) -> None:
        """Commit the status of a finished run of ``plan``.

        Raises:
            ReconcilerError: the push failed after its retries (callers report it as a warning).
        """
        from reconciler.report.gitstatus import status_document

        doc = status_document(result, plan, cluster=self.cluster_name, revision=revision)
        self._push(plan.recipe.name, plan.recipe.version, doc, result.run_id, plan.planHash)

    def failed(self, recipe: str, version: str, plan: Plan | None, error: BaseException, run_id: str,
               revision: str) -> None:
        """Commit the status of a run of ``recipe`` that ended with ``error`` before a result
        existed (the error's text redacted).

        Raises:
            ReconcilerError: the push failed after its retries.
        """
        from reconciler.report.gitstatus import error_document

        doc = error_document(recipe, version, cluster=self.cluster_name, revision=revision,
                             plan_hash=plan.planHash if plan else "", error=redact(str(error)))
        self._push(recipe, version, doc, run_id, doc["planHash"])

    def _push(self, recipe: str, version: str, doc: dict[str, Any], run_id: str, plan_hash: str) -> None:
        from reconciler.report.gitstatus import encode, render_message, status_path

        path = status_path(self.cluster_name, recipe, self.prefix)
        msg = render_message(self.template, {
            "recipe": recipe, "version": version, "cluster": self.cluster_name, "result": doc["result"],
            "summary": doc["summary"], "run_id": run_id, "revision": doc["sourceRevision"],
            "plan_hash": plan_hash, "path": path,
        })
        res = self.pusher.write({path: encode(doc)}, msg)
        what = "committed" if res.changed else "unchanged"
        self.say(visible(f"status {path}: {what} {res.commit[:12]} on {self.pusher.branch}"))


class GitStatusObserver:
    """The :class:`~reconciler.service.Observer` committing git status for a long-running caller
    (``reconciler controller``): one commit per finished or failed recipe run; a push that fails
    is passed to ``warn`` and never stops the rollout. ``revision``: the source revision of the
    pass being applied (read at each commit). ``transient``: errors that end a pass only to be
    retried (a preemption, a Lease held elsewhere): no error status is committed for them."""

    def __init__(self, git: GitStatus, revision: Callable[[], str], warn: Callable[[str], None], *,
                 transient: tuple[type[BaseException], ...] = ()) -> None:
        self.git, self.revision, self.warn, self.transient = git, revision, warn, transient
        self._plans: dict[str, Plan] = {}

    def tainted(self, nodes: Sequence[str]) -> None:
        """Nothing to commit."""

    def skipped(self, recipe: Recipe, reason: str) -> None:
        """Nothing to commit (a paused recipe keeps its last status)."""

    def started(self, recipe: Recipe, plan: Plan, run_id: str) -> None:
        """Remember ``plan`` for a failure of this run."""
        self._plans[recipe.name] = plan

    def event(self, plan: Plan, event: Event) -> None:
        """Nothing to commit per event."""

    def finished(self, recipe: Recipe, plan: Plan, result: RunResult) -> None:
        """Commit the run's status."""
        self._plans.pop(recipe.name, None)
        try:
            self.git.finished(plan, result, self.revision())
        except ReconcilerError as e:
            self.warn(f"status commit for {recipe.name} failed: {redact(str(e))}")

    def failed(self, recipe: Recipe | None, error: ReconcilerError, run_id: str) -> None:
        """Commit an error status for ``recipe`` (nothing before any recipe started)."""
        if recipe is None:
            return
        plan = self._plans.pop(recipe.name, None)
        if isinstance(error, self.transient):
            return
        try:
            self.git.failed(recipe.name, recipe.version, plan, error, run_id, self.revision())
        except ReconcilerError as e:
            self.warn(f"status commit for {recipe.name} failed: {redact(str(e))}")

"""``reconciler plan --repo PATH --base REV --head REV [RECIPE-PATH...] --cluster ...``: plan a change.

Revision mode of the ``plan`` verb (this module adds its options to ``plan``). It reads the
recipes and policies at both revisions from git objects (never the work tree), plans only the
recipes the change touches, both revisions against the same observed fleet, and shows what the
change adds, removes and alters (:mod:`reconciler.report.compare`). A recipe deleted in head is
shown as its uninstall plan. The base side is the *merge base* of ``--base`` and ``--head``, as
GitHub and GitLab compare a pull/merge request: when the target branch moved on after the change
branched off, its later commits are not shown as the change's. Every output says so (text: a
line under the header; JSON: ``comparedFrom: merge-base`` and ``requestedBaseRevision``;
Markdown: a note under the revisions), and a warning (stderr and every output) says when base is
not an ancestor of head.

``RECIPE-PATH`` are repository-relative paths (default ``recipes``); ``--policy`` paths are
repository-relative too (default: ``policies/`` next to each recipe directory, as in plain
``plan``). A path missing at one revision means "no recipes there" at that revision.

Output ``-o table|json|markdown``; ``markdown`` is the body of the pull-request comment(s)
(:mod:`reconciler.report.prcomment`). With ``--comment github|gitlab`` one sticky comment per
(PR, recipe[, --comment-scope]) is created or updated in place and a commit status
(``--status-context``, default ``reconciler/plan``) is set on the head SHA:

* GitHub: ``--pr N``, ``--github-repo OWNER/NAME`` (default ``$GITHUB_REPOSITORY``),
  ``--api-url`` (default ``$GITHUB_API_URL`` or ``https://api.github.com``), token
  ``$GITHUB_TOKEN``;
* GitLab: ``--pr IID`` (merge request), ``--gitlab-project ID|PATH`` (default ``$CI_PROJECT_ID``),
  ``--api-url`` (default ``$CI_API_V4_URL`` or ``https://gitlab.com/api/v4``), token
  ``$GITLAB_TOKEN``.

A revision that does not load (with ``--comment``): the sticky comment of every recipe whose file
the change touches, and a PR-level error comment, become an error comment naming
``file:line:column``; the commit status is ``failure``; exit 2. Under GitHub Actions
(``GITHUB_ACTIONS=true``) every input error is also printed as an ``::error file=…,line=…::``
workflow command (:mod:`reconciler.cli.ghactions`). The duration estimates are the simulator's
(:mod:`reconciler.cli.estimate`: ``--stage-time``/``--reboot-time``, recipe annotations,
``--sim-config``).

Tokens are read from the environment only and never printed. Missing token, PR number or
repository, an unknown revision or a path that is not a repository: one-line error, exit 2,
nothing posted. Exit codes otherwise as ``plan`` (3 with ``--detailed-exitcode`` when a head plan
has work).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

from reconciler.cli.optcheck import count
from reconciler.cli.safeio import error_line
from reconciler.errors import (
    EXIT_CHANGES,
    EXIT_OK,
    PATH_LIMIT,
    InputError,
    InputErrors,
    ReconcilerError,
    SourcePos,
    clip,
)
from reconciler.report.safetext import visible


def add_revision_args(p: argparse.ArgumentParser) -> None:
    """Add the revision-mode options to the ``plan`` parser and route ``plan`` through
    :func:`dispatch` (RECIPE becomes optional: it is required only without ``--repo``)."""
    from reconciler.cli.estimate import add_estimate_args

    add_estimate_args(p)
    for action in p._actions:
        if action.dest == "recipes":
            action.nargs = "*"
            action.default = []
    g = p.add_argument_group("plan a change between two revisions (git)")
    g.add_argument("--repo", metavar="PATH", help="git repository holding the recipes (revision mode)")
    g.add_argument("--base", metavar="REV",
                   help="base revision (e.g. the PR's target branch); compared from its merge base with --head")
    g.add_argument("--head", metavar="REV", help="head revision (e.g. the PR's head SHA)")
    g.add_argument(
        "--recipe", dest="only", action="append", default=[], metavar="NAME", help="only these recipes (repeatable)"
    )
    g.add_argument("--comment", choices=("github", "gitlab"), help="post/update one sticky comment per recipe")
    g.add_argument("--pr", type=count(1, 2**31 - 1), metavar="N",
                   help="pull request number (GitHub) or merge request IID (GitLab)")
    g.add_argument("--github-repo", metavar="OWNER/NAME", help="GitHub repository (default $GITHUB_REPOSITORY)")
    g.add_argument("--gitlab-project", metavar="ID", help="GitLab project id or path (default $CI_PROJECT_ID)")
    g.add_argument("--api-url", metavar="URL", help="API base URL (default from the CI environment)")
    g.add_argument(
        "--status-context",
        default="reconciler/plan",
        metavar="NAME",
        help="commit status context/name (default reconciler/plan)",
    )
    g.add_argument(
        "--comment-scope",
        default="",
        metavar="SCOPE",
        help="extra marker scope, e.g. the cluster name, for one comment per (PR, recipe, scope)",
    )
    g.add_argument(
        "--details-url",
        default="",
        metavar="URL",
        help="link for the commit status and the truncation note (e.g. the CI run)",
    )
    p.set_defaults(func=dispatch)


def dispatch(args: argparse.Namespace) -> int:
    """``plan`` entry: revision mode with ``--repo``/``--base``/``--head``, else plain ``plan``.

    Raises:
        InputError: revision options given partially, or no RECIPE without ``--repo``.
    """
    rev_opts = [o for o in ("repo", "base", "head") if getattr(args, o, None)]
    if rev_opts:
        missing = [f"--{o}" for o in ("repo", "base", "head") if not getattr(args, o, None)]
        if missing:
            raise InputError(f"revision mode needs --repo, --base and --head (missing {', '.join(missing)})")
        if getattr(args, "selector", None) is not None:
            raise InputError("-l/--selector is not supported in revision mode (--repo/--base/--head): the comparison "
                             "covers every node the recipes select")
        if getattr(args, "retry_failed", False):
            raise InputError("--retry-failed is not supported in revision mode (--repo/--base/--head): the comparison "
                             "plans both revisions as apply plans them by default")
        if args.output in ("yaml", "name"):
            raise InputError(f"-o {args.output}: revision mode (--repo/--base/--head) prints table, json or markdown")
        return run_revisions(args)
    if getattr(args, "comment", None):
        raise InputError("--comment needs revision mode (--repo, --base and --head)")
    if not args.recipes:
        raise InputError("plan needs RECIPE files or directories, or --repo PATH --base REV --head REV")
    from reconciler.cli.plan import run

    return run(args)


def _relocate(err: InputError, roots: dict[str, str]) -> InputError:
    """``err`` with a scratch-directory position rewritten as ``<rev>:<repo path>``."""

    def fix(e: InputError) -> InputError:
        if e.pos is None:
            return e
        for root, label in roots.items():
            if e.pos.file.startswith(root + os.sep):
                rel = os.path.relpath(e.pos.file, root)
                return InputError(e.message, SourcePos(f"{label}:{rel}", e.pos.line, e.pos.column), e.field)
        return e

    if isinstance(err, InputErrors):
        return InputErrors([fix(e) for e in err.errors])
    return fix(err)


def _load_at(
    repo: Any, rev: str, label: str, paths: Sequence[str], policies: Sequence[str], scratch: str, locked: bool
) -> Any:
    """Extract ``paths`` + ``policies`` (+ sibling ``policies/``) of ``rev`` into ``scratch`` and
    load them; paths absent at ``rev`` are skipped (no recipes there)."""
    from reconciler.load import POLICY_DIR, Inputs, load_inputs

    siblings = [
        os.path.join(os.path.dirname(p.strip("/")), POLICY_DIR) for p in paths if not p.endswith((".yaml", ".yml"))
    ]
    repo.extract(rev, [*paths, *policies, *siblings], scratch)
    present = [os.path.join(scratch, p) for p in paths if repo.exists(rev, p)]
    pols = [os.path.join(scratch, p) for p in policies if repo.exists(rev, p)]
    if not present:
        return Inputs(recipes=(), policies={}, files=())
    try:
        return load_inputs(present, pols, locked=locked)
    except InputError as e:
        raise _relocate(e, {scratch: label}) from None


def run_revisions(args: argparse.Namespace) -> int:
    """Revision mode (see the module docstring).

    With ``--comment``, a revision that does not load (or a comparison refused as bad input)
    replaces the sticky comment(s) with an error comment naming ``file:line`` and sets a failing
    commit status before the error is raised (:func:`_report_invalid`). When the review host
    refuses that (a token without write access, the host down), the refusal is printed as an
    error and the head's own error is raised all the same: the exit code is 2, bad input."""
    from reconciler.adapters.git.repo import GitRepo
    from reconciler.cli.reportfile import check_report_file

    host = _review_host(args) if args.comment else None  # check token/PR before any work
    check_report_file(args)
    repo = GitRepo(args.repo)
    requested, head_sha = repo.resolve(args.base), repo.resolve(args.head)
    base_sha, from_merge_base, warnings = compare_base(repo, requested, head_sha, args.base, args.head)
    for w in warnings:
        print(error_line("warning", w), file=sys.stderr)
    paths = [p.strip("/") or "." for p in (args.recipes or ["recipes"])]
    policies = [p.strip("/") for p in args.policy]
    if not any(repo.exists(base_sha, p) or repo.exists(head_sha, p) for p in paths):
        raise InputError(f"none of {clip(', '.join(paths), PATH_LIMIT)} exists at {clip(args.base)} or "
                         f"{clip(args.head)} in {clip(args.repo, PATH_LIMIT)}")
    changed = sorted({p for c in repo.changed_paths(base_sha, head_sha) for p in c.paths})
    loaded: dict[str, Any] = {}
    try:
        cmp = _compare(args, repo, base_sha, head_sha, paths, policies, changed, requested if from_merge_base else "",
                       warnings, loaded)
    except InputError as e:
        if host is not None:
            try:
                _report_invalid(host, args, e, base_sha, head_sha, changed, loaded)
            except (ReconcilerError, OSError) as posting:  # the head's own error still decides the exit
                print(error_line("error", f"could not post the error comment on {args.comment} #{args.pr}: "
                                          f"{posting}"), file=sys.stderr)
        raise
    if getattr(args, "report_file", None):
        _write_head_report(args, cmp, loaded.get("runs", {}))
    return _publish(args, host, cmp, head_sha)


def _write_head_report(args: argparse.Namespace, cmp: Any, runs: dict[str, Any]) -> None:
    """``--report FILE`` in revision mode: the predicted rollout of each head plan with work."""
    from reconciler.cli.reportfile import write_report
    from reconciler.report.htmlreport import ReportRun

    drawn = []
    for r in cmp.recipes:
        found = runs.get(r.head_plan.planHash)
        if found is not None:
            run, assumed = found
            drawn.append(ReportRun(run, "predicted", f"head {cmp.head_revision[:12]}; simulated: {assumed.text()} "
                                                     f"(from {assumed.source})"))
    write_report(args, drawn, title="node-reconciler: predicted rollout of the change",
                 subtitle=f"base {cmp.base_revision[:12]} → head {cmp.head_revision[:12]}")


def _compare(args: argparse.Namespace, repo: Any, base_sha: str, head_sha: str, paths: list[str],
             policies: list[str], changed: list[str], requested: str, warnings: list[str],
             loaded: dict[str, Any]) -> Any:
    """Load both revisions, observe the fleet once, compare (with the simulator's estimates).
    ``loaded`` receives ``base``/``head`` inputs (and ``rel``) as they load, for the error path.

    Raises:
        InputError: a revision does not load (positions as ``<sha12>:<repo path>``).
    """
    from reconciler.cli.clusters import open_cluster
    from reconciler.cli.estimate import simulator
    from reconciler.observe.snapshot import observe
    from reconciler.report.compare import compare_revisions

    locked = getattr(args, "locked", True)
    with tempfile.TemporaryDirectory(prefix="reconciler-rev-") as tmp:
        roots = {os.path.join(tmp, "base"): base_sha[:12], os.path.join(tmp, "head"): head_sha[:12]}
        base_root, head_root = roots

        def rel(source: str) -> str:
            for root in roots:
                if source.startswith(root + os.sep):
                    return os.path.relpath(source, root)
            return source

        loaded["rel"] = rel
        loaded["side"] = "base"
        loaded["base"] = _load_at(repo, base_sha, base_sha[:12], paths, policies, base_root, locked)
        loaded["side"] = "head"
        loaded["head"] = _load_at(repo, head_sha, head_sha[:12], paths, policies, head_root, locked)
        opened = open_cluster(args)
        fleet = observe(opened.cluster)
        try:
            return compare_revisions(
                loaded["base"],
                loaded["head"],
                fleet,
                changed_files=changed,
                base_revision=base_sha,
                head_revision=head_sha,
                rel=rel,
                only=args.only,
                requested_base=requested,
                warnings=warnings,
                estimator=simulator(fleet, args, loaded["head"], loaded["base"], keep=loaded.setdefault("runs", {})),
            )
        except InputError as e:
            raise _relocate(e, roots) from None
        # loaded sources point into the scratch directory: keep repository paths in the output


def _publish(args: argparse.Namespace, host: Any, cmp: Any, head_sha: str) -> int:
    """Print the comparison; with ``--comment`` upsert the comments and set the status."""
    from reconciler.report.compare import render_comparison_text
    from reconciler.report.prcomment import error_marker, render_comments, resolved_comment

    scope = args.comment_scope or ""
    bodies = render_comments(cmp, scope=scope, details_url=args.details_url)
    if args.output == "json":
        sys.stdout.write(cmp.to_json())
    elif args.output == "markdown":
        sys.stdout.write("\n---\n\n".join(b.body for b in bodies) if bodies else "No recipe is affected.\n")
    else:
        sys.stdout.write(render_comparison_text(cmp))
    if host is not None:
        from reconciler.report.prcomment import commit_status

        for b in bodies:
            action = host.upsert_comment(args.pr, b.marker, b.body)
            print(visible(f"{action} comment for recipe {b.recipe} on {args.comment} #{args.pr}"), file=sys.stderr)
        emk = error_marker(scope)
        found = host.find_marked(args.pr, emk)
        if found is not None and not found[1].startswith(resolved_comment(emk, "").body[: len(emk) + 3]):
            host.upsert_comment(args.pr, emk, resolved_comment(emk, head_sha).body)
            print(f"updated the error comment on {args.comment} #{args.pr}: head loads again", file=sys.stderr)
        state, description = commit_status(cmp)
        host.set_status(head_sha, state, description, args.status_context, args.details_url)
    if args.detailed_exitcode and cmp.pending:
        return EXIT_CHANGES
    return EXIT_OK


def _report_invalid(host: Any, args: argparse.Namespace, err: InputError, base_sha: str, head_sha: str,
                    changed: list[str], loaded: dict[str, Any]) -> None:
    """Replace the sticky comment(s) with an error comment and fail the commit status.

    The error comment goes under the PR-level :func:`~reconciler.report.prcomment.error_marker`
    and under the marker of every base recipe whose file (or policy file) the change touches —
    the comments a reviewer would otherwise still read as the plan of this head."""
    from reconciler.cli.ghactions import problems
    from reconciler.report.prcomment import error_marker, marker, render_error_comment

    side = str(loaded.get("side", "head"))
    sha = head_sha if side == "head" else base_sha
    found = problems(err)
    scope = args.comment_scope or ""
    recipes: list[str] = []
    base = loaded.get("base")
    if base is not None:
        from reconciler.load import policy_for

        rel = loaded["rel"]
        touched = set(changed)
        for r in base.recipes:
            try:
                srcs = {rel(r.source), rel(policy_for(r, base).source)}
            except InputError:
                srcs = {rel(r.source)}
            if srcs & touched:
                recipes.append(r.name)
    targets = [(error_marker(scope), ""), *((marker(n, scope), n) for n in recipes)]
    for mk, name in targets:
        body = render_error_comment(mk, found, side=side, revision=sha, subject=name, details_url=args.details_url)
        action = host.upsert_comment(args.pr, mk, body.body)
        what = f"recipe {name}" if name else "the revision"
        print(visible(f"{action} error comment for {what} on {args.comment} #{args.pr}"), file=sys.stderr)
    first = found[0]
    desc = f"{side} {sha[:12]} does not load: {first.where()}: {first.message}"
    host.set_status(head_sha, "failure", desc[:140], args.status_context, args.details_url)


def compare_base(repo: Any, base: str, head: str, base_name: str, head_name: str) -> tuple[str, bool, list[str]]:
    """``(commit to compare head from, whether it is the merge base, warnings)``.

    The commit is the merge base of ``base`` and ``head`` (full SHAs), as GitHub ("three-dot"
    comparison of a pull request) and GitLab (merge request diff) compare, so changes made on
    base after head branched off are not shown as the change's. Warns when base is not an
    ancestor of head (base moved on, or head is behind), or when the histories share no commit
    (then the two trees are compared as given)."""
    mb = repo.merge_base(base, head)
    if mb is None:
        return base, False, [f"--base {base_name} and --head {head_name} share no history; comparing the two trees "
                             "as given"]
    if mb == base:
        return base, True, []
    return mb, True, [f"--base {base_name} ({base[:12]}) is not an ancestor of --head {head_name} ({head[:12]}): "
                      f"comparing from their merge base {mb[:12]}, as the pull request is; changes made on the base "
                      "since then are not part of this change"]


def _review_host(args: argparse.Namespace) -> Any:
    """The ReviewHost for ``--comment`` (checks token, PR number and repository first).

    Raises:
        InputError: no token in the environment, no ``--pr``, no repository/project.
    """
    if not args.pr or args.pr < 1:
        raise InputError(f"--comment {args.comment} needs --pr N (the pull/merge request number)")
    if args.comment == "github":
        from reconciler.adapters.review.github import GitHubHost

        token = os.environ.get("GITHUB_TOKEN", "")
        if not token:
            raise InputError("--comment github: GITHUB_TOKEN is not set in the environment")
        repo = args.github_repo or os.environ.get("GITHUB_REPOSITORY", "")
        if not repo or repo.count("/") != 1:
            raise InputError("--comment github needs --github-repo OWNER/NAME (or $GITHUB_REPOSITORY)")
        api = args.api_url or os.environ.get("GITHUB_API_URL") or "https://api.github.com"
        return GitHubHost(repo, token, api_url=api)
    from reconciler.adapters.review.gitlab import GitLabHost

    token = os.environ.get("GITLAB_TOKEN", "")
    if not token:
        raise InputError("--comment gitlab: GITLAB_TOKEN is not set in the environment")
    project = args.gitlab_project or os.environ.get("CI_PROJECT_ID", "")
    if not project:
        raise InputError("--comment gitlab needs --gitlab-project ID (or $CI_PROJECT_ID)")
    api = args.api_url or os.environ.get("CI_API_V4_URL") or "https://gitlab.com/api/v4"
    return GitLabHost(project, token, api_url=api)

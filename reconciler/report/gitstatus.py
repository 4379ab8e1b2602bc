"""The status file ``apply`` writes back to git, and its commit message (pure).

One JSON file per (cluster, recipe): ``<prefix>/<cluster>/<recipe>.json`` (default prefix
``status``), committed by :class:`reconciler.adapters.git.push.StatusPusher` onto a configured branch
(default ``reconciler-status``, a branch of its own, so a status commit never touches the watched
recipe paths and never triggers a sync; gitops-conventions.md §5.4).

Document (``apiVersion: reconciler.nodewright.dev/v1alpha1``, ``kind: RolloutStatusFile``)::

    {cluster, recipe: {name, version}, sourceRevision, planHash, result: succeeded|failed|halted|error,
     summary: "<complete>/<total> nodes complete, …", counts: {total, complete, failed, blocked, …},
     nodes: [{name, state, compartment, failedStage, message}], failures: [...], error: "..."}

It carries no timestamps and no run id (those go into the commit message trailers), so a re-run
that ends in the same state produces the same bytes and no commit.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Mapping
from typing import Any

from reconciler.errors import InputError
from reconciler.model.plan import Plan
from reconciler.model.run import RunResult
from reconciler.model.vocab import NodeResult

API_VERSION = "reconciler.nodewright.dev/v1alpha1"
KIND = "RolloutStatusFile"

DEFAULT_BRANCH = "reconciler-status"
DEFAULT_PREFIX = "status"

#: Default commit message: subject with ``[skip ci]`` (so the status commit does not start CI),
#: and trailers tooling can filter on.
DEFAULT_MESSAGE = (
    "reconciler: {recipe} {version} on {cluster}: {result} [skip ci]\n"
    "\n"
    "{summary}\n"
    "\n"
    "Reconciler-Run: {run_id}\n"
    "Cluster: {cluster}\n"
    "Recipe-Revision: {revision}\n"
    "Plan-Hash: {plan_hash}\n"
)

#: Placeholders a message template may use.
FIELDS = ("recipe", "version", "cluster", "result", "summary", "run_id", "revision", "plan_hash", "path")

_SAFE = re.compile(r"[A-Za-z0-9._-]{1,253}")
_FAILED = (NodeResult.FAILED, NodeResult.BLOCKED)


def status_path(cluster: str, recipe: str, prefix: str = DEFAULT_PREFIX) -> str:
    """``<prefix>/<cluster>/<recipe>.json``.

    Raises:
        InputError: a name that is not a plain path segment (``[A-Za-z0-9._-]``, not ``.``/``..``).
    """
    for what, v in (("cluster name", cluster), ("recipe name", recipe)):
        if not _SAFE.fullmatch(v) or v in (".", ".."):
            raise InputError(f"{what} {v!r} cannot be used in a status path (letters, digits, '.', '_', '-')")
    prefix = prefix.strip("/")
    if not prefix or ".." in prefix.split("/"):
        raise InputError(f"status path prefix {prefix!r} must be a relative directory")
    return f"{prefix}/{cluster}/{recipe}.json"


def summary_text(counts: Mapping[str, int]) -> str:
    """``"<complete>/<total> nodes complete"`` followed by the non-zero other states, e.g.
    ``"5/8 nodes complete, 1 failed, 2 in progress"`` (the NodeWright ``Ready`` message shape)."""
    text = f"{counts.get('complete', 0)}/{counts.get('total', 0)} nodes complete"
    for key, label in (
        ("failed", "failed"),
        ("blocked", "blocked"),
        ("inProgress", "in progress"),
        ("pending", "pending"),
        ("removed", "removed"),
    ):
        if counts.get(key):
            text += f", {counts[key]} {label}"
    return text


def result_counts(result: RunResult, plan: Plan) -> dict[str, int]:
    """Node counts of a finished run: ``total`` selected nodes, ``complete`` (up to date before
    the run or completed by it), ``failed``, ``blocked``, ``pending`` (left untouched with work),
    ``removed``."""
    outcome = {n.name: n.state for n in result.nodes}
    counts = {"total": len(plan.nodes), "complete": 0, "failed": 0, "blocked": 0, "pending": 0, "removed": 0}
    for n in plan.nodes:
        state = outcome.get(n.name)
        if state == NodeResult.COMPLETE or (state in (None, NodeResult.UNTOUCHED) and not n.has_work):
            counts["complete"] += 1
        elif state in ("failed", "blocked", "removed"):
            counts[state] += 1
        else:
            counts["pending"] += 1
    return counts


def status_document(result: RunResult, plan: Plan, *, cluster: str, revision: str = "") -> dict[str, Any]:
    """The status file of a finished (or halted/failed) run of ``plan``."""
    counts = result_counts(result, plan)
    nodes = [
        {
            "name": n.name,
            "state": n.state,
            "compartment": n.compartment,
            "failedStage": n.failed_stage or None,
            "message": n.message,
        }
        for n in sorted(result.nodes, key=lambda x: x.name)
    ]
    failures = [
        {
            "node": n.name,
            "state": n.state,
            "stage": n.failed_stage or None,
            "reason": n.reason or None,
            "exitCode": n.exit_code,
            "message": n.message,
        }
        for n in sorted(result.nodes, key=lambda x: x.name)
        if n.state in _FAILED
    ]
    halted = [c.name for c in result.compartments if c.halted]
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "cluster": cluster,
        "recipe": {"name": plan.recipe.name, "version": plan.recipe.version},
        "sourceRevision": revision or plan.revision,
        "planHash": plan.planHash,
        "result": result.result,
        "summary": summary_text(counts),
        "counts": counts,
        "haltedCompartments": halted,
        "nodes": nodes,
        "failures": failures,
    }


def error_document(
    recipe: str, version: str, *, cluster: str, revision: str, plan_hash: str, error: str
) -> dict[str, Any]:
    """The status file when ``apply`` failed before it had a run result (cluster error, lease
    held, stale plan …): ``result: error`` with the one-line ``error``."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "cluster": cluster,
        "recipe": {"name": recipe, "version": version},
        "sourceRevision": revision,
        "planHash": plan_hash,
        "result": "error",
        "summary": f"apply failed: {error}"[:500],
        "counts": {},
        "haltedCompartments": [],
        "nodes": [],
        "failures": [],
        "error": error[:2000],
    }


def encode(doc: Mapping[str, Any]) -> bytes:
    """Canonical bytes of a status document (sorted keys, two-space indent, newline)."""
    return (json.dumps(doc, sort_keys=True, indent=2) + "\n").encode()


def check_template(template: str) -> None:
    """Validate a commit message template: only ``{name}`` placeholders from :data:`FIELDS`.

    Raises:
        InputError: unknown placeholder, attribute/index access, or malformed braces.
    """
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as e:
        raise InputError(f"commit message template: {e}") from None
    for _, name, spec, conv in parsed:
        if name is None:
            continue
        if name not in FIELDS or spec or conv:
            allowed = ", ".join("{" + f + "}" for f in FIELDS)
            raise InputError(f"commit message template: unknown placeholder {{{name}}} (use {allowed})")


def render_message(template: str, fields: Mapping[str, str]) -> str:
    """The commit message from ``template`` (see :data:`DEFAULT_MESSAGE`) and ``fields``.

    Raises:
        InputError: see :func:`check_template`.
    """
    check_template(template)
    values = {k: str(fields.get(k, "")) for k in FIELDS}
    msg = template.format_map(values)
    return msg if msg.endswith("\n") else msg + "\n"

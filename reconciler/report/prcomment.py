"""Pull-request comment bodies and commit-status verdicts for a revision comparison (pure).

One sticky comment per (PR, recipe[, scope]) (gitops-conventions.md §4.3): the body starts with
a hidden marker (:func:`marker`) by which the review-host adapters
(:mod:`reconciler.adapters.github`, :mod:`reconciler.adapters.gitlab`) find and update it in
place. Layout, summary first:

1. title: recipe, what happened to it (added/modified/removed), version base → head, the two
   revisions, head plan hash, changed files;
2. a headline (nodes changing, actions, reboots, batches, estimated duration) and a base → head
   table of the same numbers;
3. **risks** above the fold: protected pods waited on, PodDisruptionBudgets allowing 0
   disruptions, drains that would refuse, downgrades, uninstalls, other planner warnings;
4. ``<details>`` sections: recipe (package) changes, nodes whose plan changes, the full head plan
   (:func:`reconciler.report.render.render_markdown`).

The body never exceeds ``limit`` characters (default :data:`COMMENT_LIMIT`, under GitHub's
65,536): rows are dropped from the end of the details, every table and ``<details>`` opened is
closed, and an explicit note says what was left out and how to get everything. Every text from a
recipe, policy or the cluster is escaped with :func:`reconciler.report.render.md_escape` (no HTML,
links, emphasis, tables or mentions can be injected).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from reconciler.report.compare import Comparison, RecipeChange, Totals, human_duration
from reconciler.report.render import md_escape, render_markdown

#: GitHub refuses comment bodies over 65,536 characters; we stay below with a margin.
COMMENT_LIMIT = 60_000
#: Room kept for the truncation note and the footer.
_RESERVE = 700
#: Risks listed above the fold (the rest are counted).
_MAX_RISKS = 15

StatusState = Literal["success", "failure", "error", "pending"]


@dataclass(frozen=True)
class CommentBody:
    """One comment: the recipe it is about, its hidden ``marker`` (first line of ``body``)."""

    recipe: str
    marker: str
    body: str


def marker(recipe: str, scope: str = "") -> str:
    """The hidden marker identifying the sticky comment of (PR, ``recipe``[, ``scope``]).

    Names are reduced to ``[A-Za-z0-9._-]`` so the marker cannot close the HTML comment.
    """
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", recipe)
    sc = re.sub(r"[^A-Za-z0-9._-]", "_", scope)
    return f"<!-- reconciler:pr-plan recipe={safe}" + (f" scope={sc}" if sc else "") + " -->"


def _signed(a: float, b: float) -> str:
    d = b - a
    return "±0" if d == 0 else (f"+{d:g}" if d > 0 else f"{d:g}")


def _actions(t: Totals) -> str:
    parts = [f"{v} {k}" for k, v in t.actions.items() if v]
    return ", ".join(parts) or "none"


def _row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _cells(items: tuple[str, ...]) -> str:
    return "<br>".join(md_escape(_clip(s, 300)) for s in items) or "-"


def render_comment(
    change: RecipeChange,
    *,
    base_revision: str,
    head_revision: str,
    scope: str = "",
    details_url: str = "",
    limit: int = COMMENT_LIMIT,
    base_note: str = "",
    warnings: Sequence[str] = (),
) -> CommentBody:
    """The sticky comment for one recipe (see the module docstring). ``len(body) <= limit``.

    ``base_note`` (e.g. "compared from the merge base …") follows the revisions line;
    ``warnings`` about the revisions are quoted below it."""
    mk = marker(change.name, scope)
    b, h = change.base, change.head
    ver = f"{md_escape(change.base_version or '-')} → {md_escape(change.head_version or '-')}"
    title = f"### node-reconciler plan: {md_escape(change.name)} ({change.change}, {ver})"
    if scope:
        title += f" on {md_escape(scope)}"
    lines = [mk, title]
    meta = (
        f"base `{base_revision[:12]}` → head `{head_revision[:12]}` · head plan hash `{change.head_plan.planHash[:12]}`"
    )
    if change.files:
        listed = ", ".join(md_escape(f) for f in change.files[:5])
        more = f" and {len(change.files) - 5} more" if len(change.files) > 5 else ""
        meta += f" · files: {listed}{more}"
    lines.append(meta)
    if base_note:
        lines.append(f"<sub>{md_escape(_clip(base_note, 300))}</sub>")
    lines += [f"> ⚠️ {md_escape(_clip(w, 300))}" for w in warnings[:3]]
    lines.append("")
    headline = (
        f"**{h.nodes_changing} of {h.nodes} selected nodes change** (base: {b.nodes_changing}) · "
        f"{_actions(h)} · **{h.reboots} reboot(s)** · {h.batches} batch(es) · est. {human_duration(h.seconds)}"
    )
    lines += [headline, ""]
    lines += [
        _row("", "base", "head", "change"),
        "|---|---|---|---|",
        _row("Nodes changing", b.nodes_changing, h.nodes_changing, _signed(b.nodes_changing, h.nodes_changing)),
        _row("Actions", _actions(b), _actions(h), ""),
        _row("Reboots", b.reboots, h.reboots, _signed(b.reboots, h.reboots)),
        _row("Interrupts (all kinds)", b.interrupts, h.interrupts, _signed(b.interrupts, h.interrupts)),
        _row("Cordon and drain", b.cordons, h.cordons, _signed(b.cordons, h.cordons)),
        _row("Pods evicted", b.evictions, h.evictions, _signed(b.evictions, h.evictions)),
        _row(
            "Batches",
            b.batches,
            f"{h.batches} ({md_escape(_clip('; '.join(h.batch_sizes), 400)) or '-'})",
            _signed(b.batches, h.batches),
        ),
        _row("Estimated duration", human_duration(b.seconds), human_duration(h.seconds), ""),
        "",
    ]
    if change.risks:
        lines += [f"**Risks ({len(change.risks)})**", ""]
        lines += [f"- ⚠️ {md_escape(_clip(r.message, 500))}" for r in change.risks[:_MAX_RISKS]]
        if len(change.risks) > _MAX_RISKS:
            lines.append(f"- … and {len(change.risks) - _MAX_RISKS} more (see the head plan below)")
        lines.append("")
    elif not h.nodes_changing:
        lines += ["No node changes: every selected node already matches the head revision.", ""]
    else:
        lines += ["No risks found (no protected pods, no blocking PodDisruptionBudgets, no drain blockers).", ""]

    footer = (
        f"\n\n<sub>full comparison: `reconciler plan --repo . --base {base_revision[:12]} --head "
        f"{head_revision[:12]} -o json`" + (f" · [details]({_url(details_url)})" if details_url else "") + "</sub>\n"
    )
    out = "\n".join(lines)
    budget = limit - len(footer) - _RESERVE
    if len(out) > budget:  # an absurd summary: cut it (never the marker)
        out = out[: max(len(mk) + 1, budget - 1)] + "…"

    sections: list[tuple[str, str, list[str]]] = []
    if change.packages:
        pkg_rows = [
            _row(
                md_escape(p.name),
                p.change,
                md_escape(p.from_ or "-"),
                md_escape(p.to or "-"),
                md_escape(_clip(p.detail, 300)) or "-",
            )
            for p in change.packages
        ]
        sections.append(
            (
                f"Recipe changes ({len(pkg_rows)} package(s))",
                _row("Package", "Change", "From", "To", "Detail") + "\n|---|---|---|---|---|",
                pkg_rows,
            )
        )
    if change.nodes:
        node_rows = [
            _row(
                md_escape(n.name),
                n.change,
                md_escape(n.compartment),
                f"{n.base_batch or '-'} → {n.head_batch or '-'}",
                _cells(n.base_steps),
                _cells(n.head_steps),
                f"{md_escape(n.base_interrupt)} → {md_escape(n.head_interrupt)}",
            )
            for n in change.nodes
        ]
        sections.append(
            (
                f"Nodes whose plan changes ({len(node_rows)})",
                _row("Node", "Change", "Compartment", "Batch", "Base steps", "Head steps", "Interrupt")
                + "\n"
                + "|---" * 7
                + "|",
                node_rows,
            )
        )
    omitted: list[str] = []
    for title_, head_, rows in sections:
        open_ = f"\n<details><summary>{title_}</summary>\n\n{head_}"
        close = "\n\n</details>"
        body = ""
        shown = 0
        for row in rows:
            if len(out) + len(open_) + len(body) + len(row) + 1 + len(close) > budget:
                break
            body += "\n" + row
            shown += 1
        if shown:
            out += open_ + body + close
        if shown < len(rows):
            omitted.append(f"{title_.split(' (')[0]}: {len(rows) - shown} of {len(rows)} rows")
    # the full head plan with whatever room is left (its own renderer truncates inside)
    room = budget - len(out) - len("\n<details><summary>Head plan (full)</summary>\n\n\n\n</details>")
    if room >= 1500:
        plan_md = render_markdown(change.head_plan, limit=room)
        plan_md = "\n".join(ln for ln in plan_md.split("\n") if not ln.startswith("<!-- reconciler:plan"))
        out += f"\n<details><summary>Head plan (full)</summary>\n\n{plan_md.strip()}\n\n</details>"
    else:
        omitted.append("the full head plan")
    if omitted:
        where = f" Full output: [CI run]({_url(details_url)})." if details_url else ""
        out += (
            "\n\n**Truncated** to stay under the comment size limit — not shown: "
            + "; ".join(omitted)
            + ". Run the command below with `-o json` for everything."
            + where
        )
    out += footer
    assert len(out) <= limit, (len(out), limit)
    return CommentBody(change.name, mk, out)


def _url(url: str) -> str:
    """A link target that cannot break out of the Markdown link (only http(s), no spaces/parens)."""
    if not re.fullmatch(r"https?://[^\s()<>\"']+", url):
        return "#"
    return url


def render_comments(
    cmp: Comparison, *, scope: str = "", details_url: str = "", limit: int = COMMENT_LIMIT
) -> list[CommentBody]:
    """One comment per touched recipe, in recipe-name order."""
    return [
        render_comment(
            r,
            base_revision=cmp.base_revision,
            head_revision=cmp.head_revision,
            scope=scope,
            details_url=details_url,
            limit=limit,
            base_note=cmp.base_note(),
            warnings=cmp.warnings,
        )
        for r in cmp.recipes
    ]


def commit_status(cmp: Comparison) -> tuple[StatusState, str]:
    """The commit status of the plan (GitHub vocabulary; the GitLab adapter maps it) and a
    description of at most 140 characters.

    ``failure`` when a head plan has nodes that cannot be drained as configured (the rollout
    would stop there); otherwise ``success`` with the headline numbers.
    """
    if not cmp.recipes:
        return "success", "no recipe or policy affected by this change"
    blocked = [r.name for r in cmp.recipes if any(k.kind == "drain-blocked" for k in r.risks)]
    nodes = sum(r.head.nodes_changing for r in cmp.recipes)
    reboots = sum(r.head.reboots for r in cmp.recipes)
    risks = sum(len(r.risks) for r in cmp.recipes)
    if blocked:
        return "failure", _clip(f"drain blocked for recipe(s) {', '.join(blocked)}; see the plan comment", 140)
    text = f"{len(cmp.recipes)} recipe(s): {nodes} node(s) change, {reboots} reboot(s)"
    if risks:
        text += f", {risks} risk(s) to review"
    return "success", _clip(text, 140)

"""Pull-request comment bodies and commit-status verdicts for a revision comparison (pure).

One sticky comment per (PR, recipe[, scope]) (gitops-conventions.md §4.3): the body starts with
a hidden marker (:func:`marker`) by which the review-host adapters
(:mod:`reconciler.adapters.review.github`, :mod:`reconciler.adapters.review.gitlab`) find and update it in
place. Layout, decision first:

1. the **verdict line** (:func:`verdict_line`): blocked / review the risks / ready / no node
   changes; the recipe (its version, ``old → new`` only when it changed); what changed (package
   ``old → new`` version, digest change, added/removed packages, else the changed fields); nodes
   affected; reboots; protected pods waited on; the readiness gate the nodes are held at; the
   estimated duration (simulated or rough);
2. revisions, head plan hash, changed files (small print);
3. **risks** (protected pods, PodDisruptionBudgets allowing 0 disruptions, drains that would
   refuse, downgrades, uninstalls, other planner warnings grouped by text) and the base's risks
   the change **resolves**;
4. one *after merge (vs. base)* table: each figure once, with its change from base (``24 (±0)``,
   ``6 (was 2)``) — no duplicated base/head sections, never ``X → X``; when each compartment
   halts (:func:`~reconciler.report.render.halting_text`, a ``never`` is also a risk); the
   readiness gate when either revision has one;
5. the estimate per compartment (nodes, batches run-length encoded ``3 x 1, 333 x 3``, simulated
   duration, the stage/reboot times assumed and where they came from) and a Mermaid Gantt of the
   predicted batches (:mod:`reconciler.report.mermaid`, bounded);
6. ``<details>``: what the change alters (packages with version, digest and fields; recipe and
   policy fields), and the nodes whose plan changes **grouped** by identical work (one row with
   a count and the names as ranges, ``gpu-a-001..012``).

The body never exceeds ``limit`` characters (default :data:`COMMENT_LIMIT`, under GitHub's
65,536): rows are dropped from the end of the details, every table and ``<details>`` opened is
closed, and an explicit note says what was left out and how to get everything. Every text from a
recipe, policy or the cluster is escaped with :func:`reconciler.report.render.md_escape` (no HTML,
links, emphasis, tables or mentions can be injected).

When a revision does not load, :func:`render_error_comment` replaces the comment (and the
PR-level one under :func:`error_marker`): verdict line with the first ``file:line:column``, then
every error.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from reconciler.model.plan import Plan
from reconciler.report.compare import Comparison, NodeDelta, PackageDelta, RecipeChange, Totals, group_nodes
from reconciler.report.estimate import REBOOT_ANNOTATION, STAGE_ANNOTATION, human_duration, name_ranges, run_length
from reconciler.report.mermaid import gantt
from reconciler.report.render import halting_text
from reconciler.report.safetext import md_escape

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


Verdict = Literal["blocked", "review", "ready", "no-change"]

_VERDICT_TEXT: dict[str, str] = {
    "blocked": "❌ **Blocked**",
    "review": "⚠️ **Review the risks**",
    "ready": "✅ **Ready**",
    "no-change": "➖ **No node changes**",
}


def verdict(change: RecipeChange) -> Verdict:
    """``blocked`` (a drain would be refused: the rollout stops there), ``review`` (risks to
    look at), ``ready`` (nodes change, nothing risky found) or ``no-change``."""
    if any(r.kind == "drain-blocked" for r in change.risks):
        return "blocked"
    if change.risks:
        return "review"
    return "ready" if change.head.nodes_changing else "no-change"


def _digest(d: str | None) -> str:
    return (d or "none").removeprefix("sha256:")[:12]


def package_summary(p: PackageDelta) -> str:
    """One package change in words (not escaped): ``nvidia-tuned 0.3.2 → 0.3.3 (digest
    changed)``, ``tools added 2.0.0``, ``drv digest changed 1a2b… → 3c4d… (same version 1.0.0)``."""
    if p.change == "added":
        return f"{p.name} added {p.to}"
    if p.change == "removed":
        return f"{p.name} removed (was {p.from_})"
    if p.change == "version":
        extra = []
        if p.digest_changed:
            extra.append("digest changed")
        extra += [f for f in p.fields if f not in ("version", "containerSHA")]
        return f"{p.name} {p.from_} → {p.to}" + (f" ({', '.join(extra)})" if extra else "")
    if p.change == "digest":
        return f"{p.name} digest {_digest(p.digest_from)} → {_digest(p.digest_to)} (same version {p.to})"
    return f"{p.name} {p.to}: {p.detail or ', '.join(p.fields)}"


def _protected_pods(change: RecipeChange) -> int:
    return len({pod for n in change.head_plan.nodes for pod in n.waitFor})


def verdict_line(change: RecipeChange, scope: str = "") -> str:
    """The first visible line: verdict, recipe, what changed (packages, old → new version, digest
    change; recipe/policy fields when no package changed), nodes affected, reboots, protected pods
    waited on, the estimated duration. Escaped Markdown, at most about 600 characters."""
    h = change.head
    what = [package_summary(p) for p in change.packages[:3]]
    if len(change.packages) > 3:
        what.append(f"{len(change.packages) - 3} more package(s)")
    if not what and change.fields:
        what.append("changed " + ", ".join(change.fields[:4]) + (" …" if len(change.fields) > 4 else ""))
    if change.change == "removed":
        what.insert(0, "recipe removed")
    elif change.change == "added":
        what.insert(0, "new recipe")
    if change.base_version and change.head_version and change.base_version != change.head_version:
        name = f"{change.name} {change.base_version} → {change.head_version}"
    else:
        name = f"{change.name} {change.head_version or change.base_version}".strip()
    parts = [f"{_VERDICT_TEXT[verdict(change)]} · **{md_escape(name)}**" + (f" on {md_escape(scope)}" if scope else "")]
    if what:
        parts.append(md_escape(_clip("; ".join(what), 300)))
    parts.append(f"**{h.nodes_changing} of {h.nodes} node(s)** change")
    parts.append(f"**{h.reboots} reboot(s)**")
    pods = _protected_pods(change)
    if pods:
        parts.append(f"waits on **{pods} protected pod(s)**")
    if h.nodes_changing and change.head_plan.readinessGate is not None:
        parts.append("each held at the **readiness gate** (" + md_escape(_clip(_gate(change.head_plan), 160)) + ")")
    if h.nodes_changing:
        est = change.head_estimate
        parts.append(f"est. **{human_duration(h.seconds)}**" + (" (simulated)" if est is not None else " (rough)"))
    return " · ".join(parts)


def _diff_cell(b: object, h: object, *, numeric: bool = True) -> str:
    """``head`` with what it was at base: ``24 (±0)``, ``24 (was 7)``."""
    if b == h:
        return f"{h}" + (" (±0)" if numeric else " (unchanged)")
    if numeric and isinstance(b, int | float) and isinstance(h, int | float):
        return f"{h} ({_signed(b, h)})"
    return f"{h} (was {b})"


def _diff_table(change: RecipeChange) -> list[str]:
    b, h = change.base, change.head
    rows = [
        _row("", "after merge (vs. base)"),
        "|---|---|",
        _row("Nodes changing", _diff_cell(b.nodes_changing, h.nodes_changing)),
        _row("Actions", _diff_cell(_actions(b), _actions(h), numeric=False)),
        _row("Reboots", _diff_cell(b.reboots, h.reboots)),
        _row("Interrupts (all kinds)", _diff_cell(b.interrupts, h.interrupts)),
        _row("Cordon and drain", _diff_cell(b.cordons, h.cordons)),
        _row("Pods evicted", _diff_cell(b.evictions, h.evictions)),
        _row("Batches", _diff_cell(b.batches, h.batches)),
        _row("Estimated duration", _diff_cell(human_duration(b.seconds), human_duration(h.seconds), numeric=False)),
    ]
    base_halt = halting_text(change.base_plan) if change.base_plan is not None else ""
    head_halt = halting_text(change.head_plan)
    if base_halt or head_halt:
        rows.append(_row("Halts", md_escape(_clip(_diff_cell(base_halt or "-", head_halt or "-", numeric=False),
                                                 1000))))
    base_gate, head_gate = _gate(change.base_plan), _gate(change.head_plan)
    if base_gate or head_gate:
        rows.append(_row("Readiness gate", md_escape(_diff_cell(base_gate or "none", head_gate or "none",
                                                                numeric=False))))
    return rows


def _gate(plan: Plan | None) -> str:
    """The plan's readiness gate in one line ("" without one)."""
    return plan.readinessGate.describe() if plan is not None and plan.readinessGate is not None else ""


#: Compartments listed in the estimate table (the rest are counted).
_MAX_COMPARTMENTS = 20


def _estimate_section(change: RecipeChange) -> list[str]:
    """Per compartment: nodes, batches (run-length encoded), simulated duration and the
    assumptions; then the Mermaid Gantt of the predicted batches."""
    est = change.head_estimate
    plan = change.head_plan
    lines = ["", _row("Compartment", "Nodes", "Batches", "Est. duration", "Assumes"), "|---|---|---|---|---|"]
    shown = 0
    for c in plan.compartments:
        if not c.batches:
            continue
        shown += 1
        if shown > _MAX_COMPARTMENTS:
            continue
        sizes = [len(b) for b in c.batches]
        ce = est.compartment(c.name) if est is not None else None
        dur = human_duration(ce.seconds) if ce is not None else "-"
        assumes = est.assumptions.text() if est is not None else "fixed per-step times"
        lines.append(_row(md_escape(c.name), sum(sizes), f"{len(sizes)}: {md_escape(_clip(run_length(sizes), 200))}",
                          dur, assumes))
    if shown > _MAX_COMPARTMENTS:
        lines.append(f"\n… and {shown - _MAX_COMPARTMENTS} more compartment(s) (`-o json` for all)")
    if shown == 0:
        return []
    if est is not None:
        a = est.assumptions
        lines += [
            "",
            f"<sub>Estimated by the simulator `reconciler simulate` uses: {md_escape(a.text())} (from "
            f"{md_escape(a.source)}); simulated result: {md_escape(est.result)}. Set the recipe annotations "
            f"`{STAGE_ANNOTATION}` / `{REBOOT_ANNOTATION}` or `--stage-time` / `--reboot-time` to your "
            "measured times.</sub>",
        ]
        if est.batches:
            chart = gantt(est.batches, f"{change.name} - predicted batches per compartment",
                          order=[c.name for c in plan.compartments])
            lines += ["", "<details><summary>Predicted rollout (Gantt)</summary>", "", "```mermaid", chart, "```",
                      "", "</details>"]
    else:
        lines += ["", "<sub>Rough estimate from fixed per-step times (no simulator was run).</sub>"]
    return lines


def _steps_diff(n: NodeDelta) -> str:
    """Head steps; a step that differs from base says what it was (per package)."""
    if n.change == "added" or n.base_steps == n.head_steps:
        return _cells(n.head_steps)
    if n.change == "removed":
        return "no longer changes (was: " + _cells(n.base_steps) + ")"
    base_by_pkg = {s.split(":", 1)[0]: s for s in n.base_steps}
    head_pkgs = {s.split(":", 1)[0] for s in n.head_steps}
    cells = []
    for s in n.head_steps:
        was = base_by_pkg.get(s.split(":", 1)[0])
        cells.append(md_escape(_clip(s, 300)) + ("" if was in (s, None) else f" (was: {md_escape(_clip(was, 200))})")
                     + (" (new)" if was is None else ""))
    cells += [f"(no longer: {md_escape(_clip(s, 200))})" for p, s in base_by_pkg.items() if p not in head_pkgs]
    return "<br>".join(cells) or "-"


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
    lines = [mk, verdict_line(change, scope)]
    meta = (
        f"<sub>{change.change} · base `{base_revision[:12]}` → head `{head_revision[:12]}` · head plan hash "
        f"`{change.head_plan.planHash[:12]}`"
    )
    if change.files:
        listed = ", ".join(md_escape(f) for f in change.files[:5])
        more = f" and {len(change.files) - 5} more" if len(change.files) > 5 else ""
        meta += f" · files: {listed}{more}"
    if base_note:
        meta += f" · {md_escape(_clip(base_note, 300))}"
    lines.append(meta + "</sub>")
    lines += [f"> ⚠️ {md_escape(_clip(w, 300))}" for w in warnings[:3]]
    lines.append("")
    if change.risks:
        lines += [f"**Risks ({len(change.risks)})**", ""]
        lines += [f"- ⚠️ {md_escape(_clip(r.message, 500))}" for r in change.risks[:_MAX_RISKS]]
        if len(change.risks) > _MAX_RISKS:
            lines.append(f"- … and {len(change.risks) - _MAX_RISKS} more (`-o json` for all)")
        lines.append("")
    elif not change.head.nodes_changing:
        lines += ["Every selected node already matches the head revision.", ""]
    else:
        lines += ["No risks found (no protected pods, no blocking PodDisruptionBudgets, no drain blockers).", ""]
    if change.removed_risks:
        lines += [f"**Resolved by this change ({len(change.removed_risks)})**", ""]
        lines += [f"- ✔️ {md_escape(_clip(r.message, 300))}" for r in change.removed_risks[:_MAX_RISKS]]
        if len(change.removed_risks) > _MAX_RISKS:
            lines.append(f"- … and {len(change.removed_risks) - _MAX_RISKS} more")
        lines.append("")
    lines += _diff_table(change)
    lines += _estimate_section(change)

    footer = (
        f"\n\n<sub>full comparison: `reconciler plan --repo . --base {base_revision[:12]} --head "
        f"{head_revision[:12]} -o json`" + (f" · [details]({_url(details_url)})" if details_url else "") + "</sub>\n"
    )
    out = "\n".join(lines)
    budget = limit - len(footer) - _RESERVE
    if len(out) > budget:  # an absurd summary: cut it (never the marker)
        out = out[: max(len(mk) + 1, budget - 1)] + "…"

    sections: list[tuple[str, str, list[str]]] = []
    if change.packages or change.fields:
        pkg_rows = [
            _row(
                md_escape(p.name),
                p.change,
                _version_cell(p),
                f"`{_digest(p.digest_from)}` → `{_digest(p.digest_to)}`" if p.digest_changed else "-",
                md_escape(", ".join(p.fields)) or "-",
                md_escape(_clip(p.detail, 300)) or "-",
            )
            for p in change.packages
        ]
        pkg_rows += [_row("(recipe/policy)", "field", "-", "-", md_escape(f), "-") for f in change.fields]
        sections.append(
            (
                f"What the change alters ({len(change.packages)} package(s), {len(change.fields)} other field(s))",
                _row("Package", "Change", "Version", "Digest", "Fields", "Detail") + "\n|---|---|---|---|---|---|",
                pkg_rows,
            )
        )
    if change.nodes:
        node_rows = [
            _row(
                md_escape(name_ranges([n.name for n in group], 300)),
                len(group),
                md_escape(", ".join(f"{c} ({k})" for c, k in _count(n.compartment for n in group))),
                rep.change,
                _steps_diff(rep),
                md_escape(rep.head_interrupt) if rep.base_interrupt in (rep.head_interrupt, "none")
                else f"{md_escape(rep.head_interrupt)} (was {md_escape(rep.base_interrupt)})",
            )
            for group, rep in group_nodes(change.nodes)
        ]
        sections.append(
            (
                f"Nodes whose plan changes ({len(change.nodes)} in {len(node_rows)} group(s))",
                _row("Nodes", "Count", "Compartments", "Change", "Steps after merge", "Interrupt")
                + "\n"
                + "|---" * 6
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


def _version_cell(p: PackageDelta) -> str:
    if p.from_ == p.to:
        return md_escape(p.to or "-")
    return f"{md_escape(p.from_ or '-')} → {md_escape(p.to or '-')}"


def _count(items: Iterable[str]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for i in items:
        counts[i] = counts.get(i, 0) + 1
    return sorted(counts.items())


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


def error_marker(scope: str = "") -> str:
    """The hidden marker of the PR-level "this revision does not load" comment (one per PR
    and scope; :func:`marker` is per recipe)."""
    sc = re.sub(r"[^A-Za-z0-9._-]", "_", scope)
    return "<!-- reconciler:pr-plan-error" + (f" scope={sc}" if sc else "") + " -->"


@dataclass(frozen=True)
class LoadProblem:
    """One input error for an error comment: repository ``file`` (may be ""), 1-based
    ``line``/``column`` (0 when unknown), dotted ``field`` and the message."""

    file: str
    line: int
    column: int
    field: str
    message: str

    def where(self) -> str:
        """``recipes/x.yaml:12:7`` (as much as is known)."""
        if not self.file:
            return "(no file)"
        return self.file + (f":{self.line}" if self.line else "") + (f":{self.column}" if self.column else "")


#: Errors listed in an error comment (the rest are counted).
_MAX_PROBLEMS = 50


def render_error_comment(
    mk: str,
    problems: Sequence[LoadProblem],
    *,
    side: str,
    revision: str,
    subject: str = "",
    details_url: str = "",
    limit: int = COMMENT_LIMIT,
) -> CommentBody:
    """The comment that replaces a sticky plan comment when a revision does not load: first
    line the verdict and the first error's ``file:line``, then every error (up to
    :data:`_MAX_PROBLEMS`). ``side`` is ``head`` or ``base``; ``subject`` the recipe name
    ("" for the PR-level comment under :func:`error_marker`)."""
    first = problems[0] if problems else LoadProblem("", 0, 0, "", "unknown error")
    what = f"recipe {md_escape(subject)}: " if subject else ""
    lines = [
        mk,
        f"❌ **Cannot plan: {what}{side} `{revision[:12]}` does not load** · "
        f"**{md_escape(first.where())}**: {md_escape(_clip(first.message, 300))}"
        + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
        f"<sub>The previous plan was replaced: it does not describe this {side}. Fix the file(s) and push; "
        "this comment is updated in place.</sub>",
        "",
        _row("Where", "Field", "Error"),
        "|---|---|---|",
    ]
    for p in problems[:_MAX_PROBLEMS]:
        lines.append(_row(md_escape(p.where()), md_escape(p.field) or "-", md_escape(_clip(p.message, 400))))
    if len(problems) > _MAX_PROBLEMS:
        lines.append(f"\n… and {len(problems) - _MAX_PROBLEMS} more error(s)")
    lines.append("")
    lines.append(f"<sub>`reconciler validate` on the {side} shows the same"
                 + (f" · [details]({_url(details_url)})" if details_url else "") + "</sub>\n")
    body = "\n".join(lines)
    if len(body) > limit:
        body = body[: limit - 1] + "…"
    return CommentBody(subject, mk, body)


def resolved_comment(mk: str, head_revision: str) -> CommentBody:
    """What the PR-level error comment becomes once a head loads again."""
    return CommentBody("", mk, f"{mk}\n✔️ Head `{head_revision[:12]}` loads again; the plan is in the recipe "
                                "comment(s).\n")

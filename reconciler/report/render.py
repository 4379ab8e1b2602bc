"""Render a :class:`~reconciler.model.plan.Plan` for people and machines (pure: returns strings).

* :func:`render_text`: terminal tables (``rich``), no colour codes unless asked for;
* :func:`render_json`: the stable JSON contract (``Plan.to_json()``);
* :func:`render_markdown`: the pull-request comment body: a hidden marker, the summary first
  (nodes changing, actions, interrupts, batches, when each compartment halts, risks), then
  details in ``<details>`` sections, under :data:`MARKDOWN_LIMIT` characters with an explicit
  truncation note
  (gitops-conventions.md §4.3).

Every text that comes from a recipe, a policy or the cluster (names, versions, reasons, pod
references, warnings) is escaped: in Markdown it cannot open HTML tags, links, emphasis, code
spans or table cells; in the terminal it is never read as ``rich`` markup.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from reconciler.model.plan import ActionCounts, CompartmentPlan, InterruptCounts, NodePlan, Plan, Step
from reconciler.plan.interrupts import describe
from reconciler.report.estimate import run_length
from reconciler.report.safetext import md_escape, text

#: Hard cap of the Markdown body: GitHub refuses comments over 65,536 characters; the margin
#: leaves room for a caller's own header/footer.
MARKDOWN_LIMIT = 60_000


#: Room kept for the truncation note.
_NOTE_RESERVE = 400

#: Longest warning shown in the summary's risk list (the full text is in the details).
_RISK_MAX = 500


# --------------------------------------------------------------------------------------------
# shared wording


def step_text(s: Step) -> str:
    """One step in words: ``tuning: upgrade 1.1.3 → 1.1.4 [upgrade, config, post-interrupt]``."""
    if s.action == "install":
        ver = f"{s.to}"
    elif s.action == "uninstall":
        ver = f"{s.from_}"
    else:
        ver = f"{s.from_} → {s.to}" if s.from_ != s.to else f"{s.to}"
    extra = ""
    if s.changedKeys:
        extra += f" keys: {', '.join(s.changedKeys)}"
    if s.restartOnly:
        extra += " (restart only)"
    if s.after:
        extra += f" after: {', '.join(s.after)}"
    return f"{s.package}: {s.action} {ver} [{', '.join(s.stages)}]{extra}"


def owed_lines(n: NodePlan) -> list[str]:
    """What a node's lifecycle of an older release still owes, before the recipe's steps (one
    line per step, then its interrupt): ``owed by release 2026.1.1: tuned: upgrade 6.8.0 → 6.8.1
    [config]``."""
    head = f"owed by release {n.owedRelease or '?'}: "
    out = [head + step_text(st) for st in n.owed]
    if n.owedInterrupt is not None:
        out.append(f"{head}{describe(n.owedInterrupt)} interrupt")
    return out


def interrupt_text(n: NodePlan) -> str:
    """The node's interrupt(s) in order: the one an older release owes first, then the recipe's."""
    if n.owedInterrupt is None:
        return describe(n.interrupt)
    owed = f"{describe(n.owedInterrupt)} (owed)"
    return owed if n.interrupt is None else f"{owed}, then {describe(n.interrupt)}"


def gate_text(plan: Plan) -> str:
    """What the plan's readiness gate does, in one line ("" without one): e.g. ``condition
    example.com/Validated=True (timeout 30m): after its packages each node is held until then
    …``."""
    gate = plan.readinessGate
    if gate is None:
        return ""
    return (f"{gate.describe()}: after its packages each node is held until then (kept cordoned if it was "
            "cordoned for them, runtime-required taint kept); past the timeout it fails (ReadinessGateTimeout) "
            "and stays held")


def compartment_halting(c: CompartmentPlan) -> str:
    """When the rollout halts compartment ``c`` (:meth:`~reconciler.model.plan.HaltRule.describe`),
    saying so when all its nodes to change are in one batch: they all run before it can halt."""
    rule = c.halt.describe()
    if len(c.batches) == 1 and len(c.batches[0]) > 1 and not c.halt.off:
        rule += f"; all {len(c.batches[0])} nodes to change are in its first batch and run before it can halt"
    return rule


def halting_text(plan: Plan) -> str:
    """When the rollout halts, per compartment with work (:func:`compartment_halting`),
    compartments with the same rule named together: ``halts after the first failed batch (…)`` for
    one compartment, ``gpu-a, gpu-b: halts after …; __default__: never halts …`` for several;
    "" when no compartment has work."""
    rules: dict[str, list[str]] = {}
    for c in plan.compartments:
        if c.batches:
            rules.setdefault(compartment_halting(c), []).append(c.name)
    if len(rules) == 1 and sum(1 for c in plan.compartments if c.batches) == 1:
        return next(iter(rules))
    return "; ".join(f"{', '.join(names)}: {rule}" for rule, names in rules.items())


def _changing(plan: Plan) -> list[NodePlan]:
    """The nodes shown one by one: those with work and those left failed (``notRetried``)."""
    return [n for n in plan.nodes if n.has_work]


def nodes_line(plan: Plan, what: str = "selected") -> str:
    """``24 of 24 selected change`` (``what``: the words after the total), with the nodes
    ``apply`` leaves failed when there are any (``…; 2 failed with the same inputs before: not
    retried (use --retry-failed)``)."""
    s = plan.summary
    line = f"{s.nodesChanging} of {s.nodes} {what} change"
    failed = s.notRetried
    if failed:
        line += f"; {failed} failed with the same inputs before: not retried (use --retry-failed)"
    return line


def no_changes_text(plan: Plan) -> str:
    """The line shown when no node is listed: every selected node is up to date, or — with
    ``-l/--selector`` — what the selector picks is, and how many nodes with work it leaves out."""
    narrowed = plan.summary.selector
    if narrowed is None:
        return "No changes: every selected node is up to date."
    sel, picked, left = narrowed.selector, narrowed.nodes, narrowed.leftOut
    total = plan.summary.nodes
    if not picked:
        line = f"No changes: -l {sel} picks none of the {total} node(s) the recipe selects"
    elif left:
        line = f"No changes for the {picked} node(s) -l {sel} picks"
    else:
        line = f"No changes: the {picked} node(s) -l {sel} picks are up to date"
    return line + (f"; {left} node(s) with work left out by -l." if left else ".")


def batch_cell(n: NodePlan) -> str:
    """The batch a node runs in (``us-east-1a #2``), its compartment alone when it has none, or
    ``us-east-1a: failed, not retried`` for a node ``apply`` leaves failed."""
    if n.notRetried is not None:
        return f"{n.compartment}: failed, not retried"
    return f"{n.compartment} #{n.batch}" if n.batch else n.compartment


def _count_line(counts: ActionCounts | InterruptCounts) -> str:
    parts = [f"{n} {k}" for k, n in counts if n]
    return ", ".join(parts) if parts else "none"


def _batch_sizes(sizes: Sequence[int]) -> str:
    """Batch sizes run-length encoded (``3 x 1, 333 x 3``), ``no batch`` for none."""
    return run_length(sizes) if sizes else "no batch"


# --------------------------------------------------------------------------------------------
# text


class _AsciiBuffer(io.StringIO):
    """A buffer rich takes for an ASCII-only stream (its ``encoding``): tables get ASCII borders."""

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "ascii"


#: Changing nodes above which the text plan groups nodes that do the same (``-o wide``: never):
#: a plan of 2,000 nodes was 6,419 lines, one row per node (issue 38).
SUMMARY_AT = 30


@dataclass(frozen=True)
class NodeGroup:
    """Nodes of a plan whose steps, interrupt and drain read the same, in plan order."""

    nodes: tuple[NodePlan, ...]
    steps: str
    interrupt: str
    drain: str


def _node_cells(n: NodePlan) -> tuple[str, str, str]:
    """A node's steps (owed first; its note), interrupt and drain cells."""
    steps = "\n".join([*owed_lines(n), *(step_text(st) for st in n.steps)]) or "-"
    if n.note:
        steps += f"\n({n.note})"
    drain = []
    if n.cordon:
        drain.append("cordon")
    if n.waitFor:
        drain.append(f"wait {len(n.waitFor)}")
    if len(n.evict) > len(n.finished):
        drain.append(f"evict {len(n.evict) - len(n.finished)}")
    if n.finished:
        drain.append(f"remove {len(n.finished)} finished")
    if n.drainBlockers:
        drain.append(f"BLOCKED {len(n.drainBlockers)}")
    if n.untaint:
        drain.append("untaint")
    return steps, interrupt_text(n), ", ".join(drain) or "-"


def _groups(rows: Sequence[tuple[NodePlan, tuple[str, str, str]]]) -> list[NodeGroup]:
    """``rows`` (node, its cells) grouped by equal cells, in the order each group first appears."""
    out: dict[tuple[str, str, str], list[NodePlan]] = {}
    for n, cells in rows:
        out.setdefault(cells, []).append(n)
    return [NodeGroup(tuple(ns), *cells) for cells, ns in out.items()]


def render_text(plan: Plan, *, width: int = 120, color: bool = False, ascii_only: bool = False,
                wide: bool = False) -> str:
    """The plan as terminal tables: a summary, compartments with batch sizes, one row per node
    with work (up-to-date nodes are only counted) — above :data:`SUMMARY_AT` such nodes, unless
    ``wide``, one row per group of nodes whose steps, interrupt and drain read the same — and the
    warnings.

    ``color`` enables ANSI styles (the CLI passes whether stdout is a TTY); without it the
    output is plain text. ``ascii_only``: table borders in ASCII (stdout cannot encode more).
    Recipe and cluster text is never interpreted as ``rich`` markup.
    """
    buf = _AsciiBuffer() if ascii_only else io.StringIO()
    console = Console(
        file=buf,
        width=width,
        force_terminal=color,
        color_system="standard" if color else None,
        no_color=not color,
        highlight=False,
        emoji=False,
        markup=False,
        soft_wrap=False,
    )
    s = plan.summary
    title = f"Plan for recipe {plan.recipe.name}"
    if plan.recipe.version:
        title += f" {plan.recipe.version}"
    console.print(text(title, style="bold"), soft_wrap=True)
    meta = f"policy {plan.policy}"
    if plan.revision:
        meta += f" · revision {plan.revision}"
    meta += f" · plan hash {plan.planHash[:12]}"
    console.print(text(meta), soft_wrap=True)
    console.print(text(f"Nodes: {nodes_line(plan)}"), soft_wrap=True)
    console.print(text(f"Actions: {_count_line(s.actions)}"), soft_wrap=True)
    console.print(text(f"Interrupts: {_count_line(s.interrupts)}"), soft_wrap=True)
    console.print(text(f"Batches: {s.batches}"))
    if plan.readinessGate is not None:
        console.print(text(f"Readiness gate: {gate_text(plan)}"), soft_wrap=True)

    if plan.compartments:
        ct = Table(title="Compartments", title_justify="left", show_lines=False)
        for col in ("compartment", "strategy", "ceiling", "matched", "batch sizes", "halts"):
            ct.add_column(col, overflow="fold")
        for c in plan.compartments:
            ct.add_row(
                text(c.name),
                text(c.strategy),
                text(str(c.ceiling)),
                text(str(c.matched)),
                text(_batch_sizes([len(b) for b in c.batches])),
                text(compartment_halting(c).removeprefix("halts ")),
            )
        console.print(ct)

    changing = _changing(plan)
    if changing:
        rows = [(n, _node_cells(n)) for n in sorted(changing, key=lambda x: (x.compartment, x.batch or 10**9, x.name))]
        if wide or len(rows) <= SUMMARY_AT:
            nt = Table(title="Nodes", title_justify="left", show_lines=False)
            for col in ("node", "batch", "steps", "interrupt", "drain"):
                nt.add_column(col, overflow="fold")
            for n, (steps, intr, drain) in rows:
                nt.add_row(text(n.name), text(batch_cell(n)), text(steps, multiline=True), text(intr), text(drain))
        else:
            nt = Table(title=f"Nodes, grouped by what they do ({len(rows)} nodes; -o wide: one row per node)",
                       title_justify="left", show_lines=False)
            for col in ("nodes", "batches", "steps", "interrupt", "drain"):
                nt.add_column(col, overflow="fold")
            for group in _groups(rows):
                names = [n.name for n in group.nodes]
                shown = ", ".join(names[:3]) + (f" … ({len(names)} nodes)" if len(names) > 3 else "")
                batches = sorted({batch_cell(n) for n in group.nodes})
                nt.add_row(text(shown), text(_clip(", ".join(batches), 40)), text(group.steps, multiline=True),
                           text(group.interrupt), text(group.drain))
        console.print(nt)
    else:
        console.print(text(no_changes_text(plan)), soft_wrap=True)

    if plan.warnings:
        console.print(text("Warnings:", style="bold yellow"))
        for w in plan.warnings:
            console.print(text(f"  ! {w}"), soft_wrap=True)
    return "\n".join(line.rstrip() for line in buf.getvalue().split("\n"))


# --------------------------------------------------------------------------------------------
# json


def render_json(plan: Plan) -> str:
    """The JSON contract: exactly ``plan.to_json()`` (sorted keys, 2-space indent, newline)."""
    return plan.to_json()


# --------------------------------------------------------------------------------------------
# markdown

def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _md_step(s: Step) -> str:
    return md_escape(step_text(s))


def _risks(plan: Plan) -> list[str]:
    return list(plan.warnings)


def render_markdown(plan: Plan, *, limit: int = MARKDOWN_LIMIT) -> str:
    """The pull-request comment body for ``plan``.

    Layout: hidden marker ``<!-- reconciler:plan recipe=NAME -->``; title; summary (nodes
    changing, actions, interrupts/reboots, batches per compartment); risks (warnings) above the
    fold; then ``<details>`` sections with the batch plan and one table row per changing node.
    When the body would exceed ``limit`` characters, rows are dropped from the end of the details,
    every open table/``<details>`` is closed, and a truncation note says how much was left out
    and how to get the full plan (``reconciler plan -o json``).
    """
    s = plan.summary
    name = md_escape(plan.recipe.name)
    marker_name = re.sub(r"[^A-Za-z0-9._-]", "_", plan.recipe.name)
    head: list[str] = [f"<!-- reconciler:plan recipe={marker_name} -->"]
    title = f"### Plan for recipe {name}"
    if plan.recipe.version:
        title += f" {md_escape(plan.recipe.version)}"
    head.append(title)
    meta = [f"policy {md_escape(plan.policy)}"]
    if plan.revision:
        meta.append(f"revision {md_escape(plan.revision)}")
    meta.append(f"plan hash {plan.planHash[:12]}")
    head.append(" · ".join(meta))
    head.append("")
    head.append(f"**{md_escape(nodes_line(plan, 'selected nodes'))}.**")
    head.append("")
    head.append("| | |")
    head.append("|---|---|")
    head.append(f"| Actions | {_count_line(s.actions)} |")
    head.append(f"| Interrupts | {_count_line(s.interrupts)} |")
    head.append(f"| Reboots | {s.interrupts.reboot} |")
    cordons = sum(1 for n in plan.nodes if n.cordon)
    finished = sum(len(n.finished) for n in plan.nodes)
    evicts = sum(len(n.evict) for n in plan.nodes) - finished
    removed = f", {finished} finished pod(s) removed" if finished else ""
    head.append(f"| Cordon and drain | {cordons} node(s), {evicts} pod(s) evicted{removed} |")
    batch_txt = md_escape(
        _clip(
            "; ".join(
                f"{c.name}: {len(c.batches)} ({_batch_sizes([len(b) for b in c.batches])})" for c in plan.compartments
            ),
            1000,
        )
    )
    head.append(f"| Batches | {s.batches}" + (f" — {batch_txt}" if batch_txt else "") + " |")
    halting = halting_text(plan)
    if halting:
        head.append(f"| Halts | {md_escape(_clip(halting, 1000))} |")
    if s.untaint:
        head.append(f"| Runtime-required taint removed | {s.untaint} node(s) |")
    if plan.readinessGate is not None:
        head.append(f"| Readiness gate | {md_escape(gate_text(plan))} |")
    head.append("")
    risks = _risks(plan)
    if risks:
        head.append(f"**Risks ({len(risks)})**")
        head.append("")
        top = risks[:20]
        head.extend(f"- ⚠️ {md_escape(_clip(r, _RISK_MAX))}" for r in top)
        if len(risks) > len(top):
            head.append(f"- … and {len(risks) - len(top)} more (see details)")
        head.append("")
    elif not _changing(plan):
        head.append(md_escape(no_changes_text(plan)))
        head.append("")

    changing = sorted(_changing(plan), key=lambda x: (x.compartment, x.batch or 10**9, x.name))
    node_rows = []
    for n in changing:
        steps = "<br>".join([*(md_escape(x) for x in owed_lines(n)), *(_md_step(st) for st in n.steps)]) or "-"
        if n.note:
            steps += f"<br>_{md_escape(n.note)}_"
        drain = []
        if n.waitFor:
            drain.append("wait: " + ", ".join(md_escape(p) for p in n.waitFor))
        done = set(n.finished)
        if len(n.evict) > len(done):
            drain.append("evict: " + ", ".join(md_escape(p) for p in n.evict if p not in done))
        if n.finished:
            drain.append("remove finished: " + ", ".join(md_escape(p) for p in n.finished))
        if n.pdbs:
            drain.append("PDBs: " + ", ".join(f"{md_escape(k)}={v}" for k, v in sorted(n.pdbs.items())))
        if n.drainBlockers:
            drain.append("**blocked**: " + "; ".join(md_escape(b) for b in n.drainBlockers))
        if n.untaint:
            drain.append("untaint")
        node_rows.append(
            _row(
                md_escape(n.name),
                md_escape(n.compartment),
                "failed, not retried" if n.notRetried is not None else n.batch or "-",
                steps,
                md_escape(interrupt_text(n)),
                "yes" if n.cordon else "no",
                "<br>".join(drain) or "-",
            )
        )
    batch_rows = []
    for c in plan.compartments:
        if not c.batches:
            batch_rows.append(_row(md_escape(c.name), md_escape(c.strategy), c.ceiling, c.matched, "-", "-"))
        for i, b in enumerate(c.batches, start=1):
            nodes = ", ".join(md_escape(x) for x in b)
            batch_rows.append(_row(md_escape(c.name), md_escape(c.strategy), c.ceiling, c.matched, i, nodes))

    sections: list[tuple[str, str, list[str]]] = []
    if node_rows:
        table = _row("Node", "Compartment", "Batch", "Steps", "Interrupt", "Cordon", "Drain")
        sections.append((f"Nodes ({len(node_rows)} changing)", table + "\n" + "|---" * 7 + "|", node_rows))
    if batch_rows:
        table = _row("Compartment", "Strategy", "Ceiling", "Matched", "Batch", "Nodes")
        sections.append(("Batches", table + "\n" + "|---" * 6 + "|", batch_rows))
    if plan.warnings:
        sections.append((f"All warnings ({len(plan.warnings)})", "", [f"- {md_escape(w)}" for w in plan.warnings]))

    footer = f"\n\n<sub>full plan: `reconciler plan -o json` · plan hash {plan.planHash}</sub>\n"
    reserve = len(footer) + _NOTE_RESERVE
    out = "\n".join(head)
    if len(out) + reserve > limit:  # an absurdly long summary: cut it, never the marker
        out = out[: max(0, limit - reserve - 1)] + "…"
    omitted: list[str] = []
    for title, table_head, rows in sections:
        open_ = f"\n<details><summary>{title}</summary>\n\n" + (table_head if table_head else "")
        close = "\n\n</details>"
        shown = 0
        if len(out) + len(open_) + len(close) + reserve <= limit:
            body = ""
            for row in rows:
                if len(out) + len(open_) + len(body) + 1 + len(row) + len(close) + reserve > limit:
                    break
                body += ("\n" if body or table_head else "") + row
                shown += 1
            if shown:
                out += open_ + body + close
        if shown < len(rows):
            omitted.append(f"{title.split(' (')[0]}: {len(rows) - shown} of {len(rows)} rows")
    if omitted:
        out += (
            "\n\n**Truncated** to stay under the comment size limit — not shown: "
            + "; ".join(omitted)
            + ". Run `reconciler plan -o json` for the full plan."
        )
    out += footer
    return out

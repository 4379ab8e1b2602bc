"""Invariants every rollout must keep, checked from the outside (the simulated fleet's record of
writes and the run's timeline), for tests and fault-injection sweeps.

Give the run :attr:`Watch.port` (a port decorator over a :class:`~reconciler.adapters.sim.fleet.SimFleet`);
it records, after every node write, which nodes are held cordoned by a recipe, and every eviction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.adapters.sim.fleet import SimFleet
from reconciler.model.nodestate import (
    InFlight,
    PackageState,
    cordon_key,
    failure_key,
    inflight_key,
    parse_model,
    parse_state,
    state_key,
)
from reconciler.model.recipe import Recipe
from reconciler.model.run import Event
from reconciler.ports import StageSpec
from reconciler.testing.faults import FaultyCluster


@dataclass
class Watch:
    """Observes a simulated fleet write by write, as a port decorator: the run talks to
    :attr:`port` (a :class:`~reconciler.testing.faults.FaultyCluster` over ``sim`` with hooks; wrap
    it in further decorators — faults, crashes, a test's own hooks — so this one sees exactly the
    requests that reached the fleet).

    ``max_held[compartment]`` is the most nodes held cordoned by the recipe at once (node →
    compartment from ``compartments``), counted after every node write; ``evicted`` lists
    ``ns/name`` of every accepted eviction with the pod's labels and phase at that moment;
    ``overlaps`` every stage pod created while another of the recipe's stage pods ran on its node
    of another lifecycle, or of the same package (:func:`check_stage_pods`); ``made`` every stage
    pod created, by pod name: the node's UID then, the clock reading and its spec;
    ``lifted`` every uncordon of a node that was cordoned without this recipe's cordon record
    (:func:`check_foreign_cordons`).
    """

    sim: SimFleet
    recipe: str
    compartments: Mapping[str, str]
    max_held: dict[str, int] = field(default_factory=dict)
    evicted: list[tuple[str, dict[str, str], str]] = field(default_factory=list)
    overlaps: list[str] = field(default_factory=list)
    made: dict[str, tuple[str, float, StageSpec]] = field(default_factory=dict)
    lifted: list[str] = field(default_factory=list)
    port: FaultyCluster = field(init=False, repr=False)
    _asked: dict[tuple[str, str], tuple[dict[str, str], str]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.port = FaultyCluster(self.sim, clock=self.sim,
                                  before={"evict_pod": self._before_evict, "start_stage": self._before_stage,
                                          "patch_node": self._before_patch},
                                  after={"patch_node": self._after_patch, "evict_pod": self._after_evict})
        self._count()

    def _after_patch(self, name: str, **kw: Any) -> None:
        self._count()

    def _before_evict(self, namespace: str, name: str, uid: str, grace: int | None) -> None:
        pod = self.sim.get_pod(namespace, name)
        self._asked[(namespace, name)] = (dict(pod.labels) if pod else {}, pod.phase if pod else "")

    def _before_patch(self, name: str, **kw: Any) -> None:
        n = self.sim.nodes.get(name)
        if kw.get("unschedulable") is not False or n is None or not (n.get("spec") or {}).get("unschedulable"):
            return
        if cordon_key(self.recipe) not in (n["metadata"].get("annotations") or {}):
            self.lifted.append(f"{name}: uncordoned at {self.sim.wall():.0f} although cordoned by someone else")

    def _before_stage(self, spec: StageSpec) -> None:
        pods = self.sim.stage_pods()
        if spec.pod_name in pods:
            return  # exists: nothing is created
        node = self.sim.nodes.get(spec.node)
        if node is not None:
            self.made[spec.pod_name] = (node["metadata"]["uid"], self.sim.wall(), spec)
        for other in pods.values():
            if other.node != spec.node or other.recipe != spec.recipe:
                continue
            if self.sim.stage_status(other).phase != "running":
                continue  # ended, or never started (an image it cannot pull): it runs nothing
            if other.run_id != spec.run_id or other.package == spec.package:
                self.overlaps.append(f"{spec.node}: {spec.package} {spec.version} {spec.stage} (lifecycle "
                                     f"{spec.run_id}) started while {other.package} {other.version} {other.stage} "
                                     f"(lifecycle {other.run_id}) runs")

    def _after_evict(self, namespace: str, name: str, uid: str, grace: int | None) -> None:
        labels, phase = self._asked.pop((namespace, name), ({}, ""))
        self.evicted.append((f"{namespace}/{name}", labels, phase))

    def held(self) -> dict[str, list[str]]:
        """Compartment → nodes currently unschedulable with this recipe's cordon record."""
        out: dict[str, list[str]] = {}
        for n in self.sim.list_nodes():
            if n.unschedulable and cordon_key(self.recipe) in n.annotations:
                out.setdefault(self.compartments.get(n.name, "?"), []).append(n.name)
        return out

    def _count(self) -> None:
        for comp, nodes in self.held().items():
            self.max_held[comp] = max(self.max_held.get(comp, 0), len(nodes))


def check_budget(watch: Watch, ceilings: Mapping[str, int]) -> list[str]:
    """Violations of "never more nodes held cordoned than the ceiling" (decision (a))."""
    return [
        f"compartment {c}: {n} nodes held cordoned at once > ceiling {ceilings[c]}"
        for c, n in watch.max_held.items()
        if c in ceilings and n > ceilings[c]
    ]


def check_protected(watch: Watch, recipe: Recipe) -> list[str]:
    """Violations of "no protected pod is ever evicted" (a protected pod that has finished is
    removed like any finished pod: it no longer protects anything)."""
    sel = recipe.podNonInterruptLabels
    if sel is None or sel.is_empty():
        return []
    return [
        f"protected pod {ref} was evicted while {phase}"
        for ref, labels, phase in watch.evicted
        if sel.matches(labels) and phase in ("Running", "Pending")
    ]


def check_cordons(sim: SimFleet, recipe: str, failed_nodes: Iterable[str]) -> list[str]:
    """Violations of "every node we cordoned is uncordoned, recorded failed, or records the
    interrupt it still owes" (a node that left the recipe's scope owing one keeps its cordon and
    its in-flight record, issue 12's scope rules)."""
    failed = set(failed_nodes)
    out = []
    for n in sim.list_nodes():
        if cordon_key(recipe) in n.annotations and n.name not in failed and failure_key(recipe) not in n.annotations:
            fl = parse_model(InFlight, n.annotations.get(inflight_key(recipe)))
            if fl is not None and fl.interrupt:
                continue
            out.append(f"node {n.name} is cordoned by {recipe} without a failure record")
    return out


def check_stage_pods(watch: Watch) -> list[str]:
    """Violations of "a node runs stage pods of one lifecycle only, at most one per package" (a
    stage pod created while one of another lifecycle, or of the same package, ran on its node)."""
    return list(watch.overlaps)


_BODY = ("apply", "upgrade")


def check_recorded_ran(sim: SimFleet, recipe: str,
                       before: Mapping[str, Mapping[str, PackageState]] | None = None) -> list[str]:
    """Violations of "a node is recorded complete at a version only if that version's stages ran
    on that machine": every package entry recorded complete at ``config``, ``interrupt`` or
    ``post-interrupt`` needs its ``config`` (and ``post-interrupt`` for that stage) and an
    ``apply`` or ``upgrade`` of that version to have succeeded on the node since its machine
    registered (the simulated fleet's stage log; :meth:`SimFleet.replace_node` starts a new
    machine). An entry the node already had in ``before`` (its state when the runs began, by node)
    needs only its own stage again when it changed."""
    out: list[str] = []
    for n in sim.list_nodes():
        start = sim.machine_log_start.get(n.name, 0)
        ran = {(p, v, s) for _t, ev, node, p, v, s in sim.stage_log[start:] if node == n.name and ev == "succeeded"}
        had = {} if start else dict((before or {}).get(n.name, {}))
        for key, e in parse_state(n.annotations.get(state_key(recipe))).items():
            if e.state != "complete" or e.stage not in ("config", "interrupt", "post-interrupt"):
                continue
            old = had.get(key)
            if old == e:
                continue
            need = {e.stage} - {"interrupt"} if old is not None else {"config", e.stage} - {"interrupt"}
            missing = [s for s in sorted(need) if (e.name, e.version, s) not in ran]
            if old is None and not any((e.name, e.version, b) in ran for b in _BODY):
                missing.insert(0, "apply or upgrade")
            if missing:
                out.append(f"{n.name}: {key} recorded {e.stage}/complete but never ran on this machine: "
                           f"{', '.join(missing)}")
    return out


def check_no_rerun(sim: SimFleet) -> list[str]:
    """Violations of "a stage that completed is never run again" (within one lifecycle of a node:
    the simulated fleet's log of stage pod starts and ends)."""
    done: set[tuple[str, str, str, str]] = set()
    out = []
    for t, event, node, package, version, stage in sim.stage_log:
        key = (node, package, version, stage)
        if event == "start" and key in done and stage not in ("interrupt",):
            out.append(f"{node}: {package} {version} {stage} started again at {t} after it had succeeded")
        if event == "succeeded":
            done.add(key)
    return out


def check_one_interrupt(sim: SimFleet) -> list[str]:
    """Violations of "a node is interrupted at most once per lifecycle", across every run on ``sim``
    (a crash and a resume included): interrupt pods created per node, from the simulated fleet's log
    of stage pod starts (a pod that already exists is not created again)."""
    created: dict[str, int] = {}
    for _t, event, node, _package, _version, stage in sim.stage_log:
        if event == "start" and stage in ("interrupt", "uninstall-interrupt"):
            created[node] = created.get(node, 0) + 1
    return [f"{node}: {n} interrupt pods created in one lifecycle" for node, n in sorted(created.items()) if n > 1]


def check_timeline(events: Iterable[Event], deps: Mapping[str, Iterable[str]]) -> list[str]:
    """Violations of "stages in dependency order" and "at most one interrupt per node per run",
    per machine and commitment: a node found replaced by another machine (event ``replaced``), or
    whose lifecycle took up a newer release after finishing an older one's (event ``release``),
    starts over — one interrupt request per interrupt a commitment owes (a request made again
    because the first one never reached the node is the same request).

    ``deps``: package → packages it depends on (the recipe's ``dependsOn`` names).
    """
    out: list[str] = []
    started: dict[str, dict[str, float]] = {}
    ended: dict[str, dict[str, float]] = {}
    interrupts: dict[str, int] = {}
    for ev in events:
        if ev.event in ("replaced", "release"):
            out += _order_problems(ev.node, started.pop(ev.node, {}), ended.pop(ev.node, {}), deps)
            interrupts.pop(ev.node, None)
        elif ev.event == "stage-start":
            pkg = ev.detail.split()[0]
            started.setdefault(ev.node, {}).setdefault(pkg, ev.t)
        elif ev.event == "stage-end":
            pkg = ev.detail.split()[0]
            ended.setdefault(ev.node, {})[pkg] = ev.t
        elif ev.event == "interrupt" and "requested again" not in ev.detail:
            # a request made again because the first never acted (its pod gone, the bootID unchanged)
            # replaces it; what acted on the machine is check_reboots'
            interrupts[ev.node] = interrupts.get(ev.node, 0) + 1
    for node, starts in started.items():
        out += _order_problems(node, starts, ended.get(node, {}), deps)
    out += [f"{n}: {k} interrupts in one run" for n, k in interrupts.items() if k > 1]
    return out


def _order_problems(node: str, starts: Mapping[str, float], ends: Mapping[str, float],
                    deps: Mapping[str, Iterable[str]]) -> list[str]:
    return [f"{node}: {pkg} started at {t} before its dependency {dep} ended"
            for pkg, t in starts.items() for dep in deps.get(pkg, ())
            if dep in starts and ends.get(dep, float("inf")) > t]


def check_foreign_cordons(watch: Watch) -> list[str]:
    """Violations of "a cordon we did not make is never lifted" (decision (c)): every uncordon the
    run sent for a node that was unschedulable without this recipe's cordon record."""
    return list(watch.lifted)


def _lifecycles(watch: Watch) -> dict[tuple[str, str, str], list[tuple[float, StageSpec]]]:
    """Stage pods created, by (node, machine UID, lifecycle id), in creation order."""
    out: dict[tuple[str, str, str], list[tuple[float, StageSpec]]] = {}
    for uid, t, spec in watch.made.values():
        out.setdefault((spec.node, uid, spec.run_id), []).append((t, spec))
    return out


def _acted(watch: Watch) -> dict[tuple[str, str, str], list[float]]:
    """When interrupts acted (a reboot went down, a service restart ended), by (node, machine UID,
    lifecycle id of the interrupt pod), from the simulated fleet's ``interrupt_log``."""
    out: dict[tuple[str, str, str], list[float]] = {}
    for t, node, uid, pod in watch.sim.interrupt_log:
        made = watch.made.get(pod)
        if made is not None:
            out.setdefault((node, uid, made[2].run_id), []).append(t)
    return out


def check_reboots(watch: Watch) -> list[str]:
    """Violations of "at most one interrupt acts per owed interrupt": a lifecycle (one commitment
    on one machine) whose interrupt pods rebooted the node, or restarted its services, more than
    once. An interrupt pod deleted before it acted asked for nothing, so its re-creation is no
    second request."""
    return [f"{node}: lifecycle {life} interrupted the machine {len(ts)} times"
            for (node, _uid, life), ts in sorted(_acted(watch).items()) if len(ts) > 1]


def check_owed_interrupts(watch: Watch, interrupting: Iterable[str]) -> list[str]:
    """Violations of "every owed interrupt is done or still recorded owed": once a stage
    (``apply``, ``upgrade``, ``config``) of a package in ``interrupting`` (the packages with an
    interrupt) started on a machine, the machine owes an interrupt; one must have acted on it since
    the last such stage started (whichever lifecycle asked for it), or the node — the same machine
    — must still carry an in-flight record owing one (:attr:`InFlight.owes`). A deleted or
    replaced machine owes nothing."""
    pkgs = set(interrupting)
    owed: dict[tuple[str, str], tuple[float, StageSpec]] = {}
    for uid, t, spec in watch.made.values():
        if spec.package in pkgs and spec.stage in ("apply", "upgrade", "config"):
            key = (spec.node, uid)
            if key not in owed or t >= owed[key][0]:
                owed[key] = (t, spec)
    out = []
    for (node, uid), (since, spec) in sorted(owed.items()):
        if any(n == node and u == uid and t >= since for t, n, u, _pod in watch.sim.interrupt_log):
            continue
        cur = watch.sim.nodes.get(node)
        if cur is None or cur["metadata"]["uid"] != uid:
            continue
        fl = parse_model(InFlight, (cur["metadata"].get("annotations") or {}).get(inflight_key(watch.recipe)))
        if fl is not None and fl.owes:
            continue
        out.append(f"{node}: {spec.package} {spec.version} {spec.stage} ran (lifecycle {spec.run_id}) and no "
                   "interrupt acted since, nor does a record owe one")
    return out


def check_retries(watch: Watch, stage_retries: int) -> list[str]:
    """Violations of "every retry ends within its bound": more than ``1 + stage_retries`` stage
    pods of one stage (node, machine, lifecycle, package, version, stage, rerun) — a pod deleted
    by someone else counts as an attempt."""
    count: dict[tuple[str, ...], int] = {}
    for uid, _t, spec in watch.made.values():
        key = (spec.node, uid, spec.run_id, spec.package, spec.version, spec.stage, str(spec.rerun))
        count[key] = count.get(key, 0) + 1
    return [f"{k[0]}: {k[3]} {k[4]} {k[5]} created {n} times in lifecycle {k[2]} (bound {1 + stage_retries})"
            for k, n in sorted(count.items()) if n > 1 + stage_retries]

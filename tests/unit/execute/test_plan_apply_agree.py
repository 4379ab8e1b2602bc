"""Plan and apply agree by construction (issue 34, items 8-10): for generated recipes and node
records, the stages ``apply`` runs on a node are exactly the ones ``plan`` shows for it — per
package, in order: what an older release's lifecycle still owes, then the recipe's own steps — or
the run fails with a named reason; and afterwards a new plan has nothing left to do.

The records are made the way they are in the field: a generated release 1 applied on the
simulated fleet, whole or stopped right after its k-th stage pod started (a preempted controller
pass, a killed ``apply``); then a generated release 2 (versions bumped up or down, configuration
changed, packages added, removed, given or relieved of an interrupt) is planned and applied."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.adapters.sim.config import SimConfig
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.errors import CrashInjected
from reconciler.model.nodestate import parse_state, state_key
from reconciler.model.plan import NodePlan, Step
from reconciler.model.recipe import Recipe
from reconciler.model.vocab import FailureReason
from reconciler.observe.snapshot import observe
from reconciler.plan.owed import stage_version
from reconciler.plan.planner import compute_plan
from reconciler.ports import StageSpec
from reconciler.testing.builders import package, policy, recipe
from reconciler.testing.fleetgen import make_node

from .harness import apply

pytestmark = pytest.mark.slow  # a property sweep: CI runs it, the fast tier not

NAMES = ["alpha", "bravo", "charlie"]
VERSIONS = ["1.0.0", "1.1.0", "2.0.0"]
INTERRUPTS = [None, None, "reboot", "service:kubelet", "noop"]
POLICY = policy(count=2, default_strategy="fixed", initialBatch=2)
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                            HealthCheck.data_too_large])


def _recipe(version: str, specs: dict[str, dict[str, Any]]) -> Recipe:
    names = sorted(specs)
    pkgs = []
    for n in names:
        s = specs[n]
        deps = {d: specs[d]["version"] for d in s["deps"] if d in specs}
        cfg = dict(s["config"])
        cis = {"sysctl*": s["ci"]} if s["ci"] and "sysctl.conf" in cfg else None
        pkgs.append(package(n, s["version"], interrupt=s["interrupt"], depends_on=deps, config=cfg,
                            config_interrupts=cis, uninstall=s["uninstall"]))
    return recipe("agree", *pkgs, selector={"pool": "gpu"}, version=version)


@st.composite
def spec(draw: Any, name: str, earlier: list[str]) -> dict[str, Any]:
    return {
        "version": draw(st.sampled_from(VERSIONS)),
        "interrupt": draw(st.sampled_from(INTERRUPTS)),
        "deps": draw(st.lists(st.sampled_from(earlier), unique=True, max_size=2)) if earlier else [],
        "config": draw(st.dictionaries(st.sampled_from(["a.conf", "sysctl.conf"]), st.sampled_from(["1", "2"]),
                                       max_size=2)),
        "ci": draw(st.sampled_from([None, "restartAllServices", "reboot"])),
        "uninstall": None,
    }


@st.composite
def releases(draw: Any) -> tuple[Recipe, Recipe]:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True))
    names.sort()
    one = {n: draw(spec(n, names[:i])) for i, n in enumerate(names)}
    two: dict[str, dict[str, Any]] = {}
    for i, n in enumerate(names):
        change = draw(st.sampled_from(["keep", "keep", "version", "config", "interrupt", "remove", "uninstall"]))
        s = dict(one[n])
        if change == "version":
            s["version"] = draw(st.sampled_from([v for v in VERSIONS if v != s["version"]]))
            s["uninstall"] = False  # a downgrade needs uninstall steps
        elif change == "config":
            s["config"] = {**s["config"], "a.conf": "changed", "sysctl.conf": draw(st.sampled_from(["1", "9"]))}
        elif change == "interrupt":
            s["interrupt"] = draw(st.sampled_from([i for i in INTERRUPTS if i != s["interrupt"]]))
        elif change == "uninstall":
            s["uninstall"] = True
        if change != "remove":
            s["deps"] = [d for d in s["deps"] if d in names[:i]]
            two[n] = s
    if draw(st.booleans()):  # a new package
        extra = next((x for x in NAMES if x not in names), None)
        if extra is not None:
            two[extra] = draw(spec(extra, []))
    for s in two.values():  # dependencies only on packages the release keeps and installs
        s["deps"] = [d for d in s["deps"] if d in two and not two[d]["uninstall"]]
    for rel in (one, two):  # ... that never interrupt: a package after one that does starts before
        for s in rel.values():  # that package's post-interrupt stage (one merged interrupt per node)
            s["deps"] = [d for d in s["deps"] if d in rel and not rel[d]["interrupt"] and not rel[d]["ci"]]
    return _recipe("1", one), _recipe("2", two)


def planned(n: NodePlan) -> dict[str, list[tuple[str, str, str]]]:
    """Per package, the (package, version, stage) of every stage the plan says runs, in order."""
    out: dict[str, list[tuple[str, str, str]]] = {}

    def add(steps: tuple[Step, ...]) -> None:
        for s in steps:
            for stage in s.stages:
                out.setdefault(s.package, []).append((s.package, stage_version(s.action, stage, s.to, s.from_), stage))

    add(n.owed)
    add(n.steps)
    return out


def executed(sim: SimFleet, node: str, since: int) -> dict[str, list[tuple[str, str, str]]]:
    """Per package, the stages that ran to success on ``node`` from stage-log entry ``since`` on
    (interrupt pods left out: a reboot's pod dies with the host)."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    for _t, ev, n, p, v, s in sim.stage_log[since:]:
        if n == node and ev == "succeeded" and s != "interrupt":
            out.setdefault(p, []).append((p, v, s))
    return out


def lagging(sim: SimFleet, node: str) -> list[tuple[str, str, str]]:
    """Stages the node records in progress whose pod already succeeded (its completion is written
    with the node's next write, which the stopped run never made): a plan shows them, ``apply``
    records them without running them again."""
    done = {(p, v, s) for _t, ev, n, p, v, s in sim.stage_log if n == node and ev == "succeeded"}
    entries = parse_state(sim.get_node(node).annotations.get(state_key("agree")))
    return [(e.name, e.version, str(e.stage)) for e in entries.values()
            if e.state == "in_progress" and e.stage != "interrupt" and (e.name, e.version, str(e.stage)) in done]


@SETTINGS
@given(rels=releases(), stop=st.integers(0, 12), nodes=st.integers(1, 2))
def test_apply_runs_exactly_what_plan_shows(rels: tuple[Recipe, Recipe], stop: int, nodes: int) -> None:
    one, two = rels
    sim = SimFleet([make_node(f"n{i}", {"pool": "gpu"}, created=1795000000.0 + i) for i in range(nodes)],
                   SimConfig(stageSeconds=10, rebootSeconds=30))
    starts: list[StageSpec] = []

    def count(spec: StageSpec) -> None:
        starts.append(spec)
        if stop and len(starts) >= stop:
            raise CrashInjected(f"release 1 stopped after {stop} stage pods")

    with contextlib.suppress(CrashInjected):
        apply(sim, one, POLICY, check=False, after={"start_stage": count})
    plan = compute_plan(two, POLICY, observe(sim))
    cut = len(sim.stage_log)
    lag = {n.name: lagging(sim, n.name) for n in plan.nodes}
    run = apply(sim, two, POLICY)  # the invariants of the harness are checked too
    for n in plan.nodes:
        result = run.node(n.name)
        if result.state == "failed":
            assert result.reason in {r.value for r in FailureReason}, result
            continue
        assert result.state in ("complete", "untouched"), (n.name, result.state, result.message)
        want = planned(n)
        for p, v, stage in lag[n.name]:  # its pod already succeeded: recorded, not run again
            want[p].remove((p, v, stage))
            if not want[p]:
                del want[p]
        assert executed(sim, n.name, cut) == want, (n.name, n.note)
    left = compute_plan(two, POLICY, observe(sim))
    assert not [n.name for n in left.nodes if n.has_work and n.notRetried is None], [n.note for n in left.nodes]

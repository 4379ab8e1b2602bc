"""The lifecycle and rollout conformance table (issue 13): scenarios that run the whole
``apply_recipes`` path — Lease, plan, auto-taint, cordon, drain through the Eviction API, stage
pods, the merged interrupt, uncordon — on the simulated fleet (by default) and on the real control
plane (``--e2e``), in tests/e2e/test_lifecycle_conformance.py. Both sides must give the table's
answer, and on the real side the two :class:`Outcome` must be equal.

A scenario is described once, independently of the side: ``nodes`` Ready nodes (index order = name
order), each carrying :data:`SELECT_KEY` unless its index is outside ``selected``; ``workloads``
(one ReplicaSet-owned app each, every pod starting on one node, the first ``not_ready`` of them
Running but not Ready, and an optional PDB); the recipe's packages and settings; an injected stage
failure (``SimConfig.failures`` on the simulated fleet, the package's ``SIM_TEST_*`` env on kwok);
``leave``: the node (index) that leaves the recipe's selector as soon as its stage ``stage``
pod is created; ``relax``: the app whose PDB spec an admin changes right before the second
eviction request (both port hooks, on both sides).

What is compared (:class:`Outcome`): the run's result; per node its state, reason, failed stage and
exit code; the timeline's event kinds per node; the Kubernetes Events we emitted (node, reason,
type); the evictions by app and answer (allowed / refused 429 / 500); and the final node state —
``spec.unschedulable``, taints (the control plane's own ``node.kubernetes.io/*`` ones left out),
our labels, the keys of our annotations, our conditions and the per-package stage/state records.
Stage pods are short (1 s on both sides), fleets small, so the real side stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from reconciler.adapters.sim.config import SimConfig, StageFailure
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.execute.effects import NODE_EVENTS
from reconciler.load import Inputs
from reconciler.model.nodestate import PREFIX, parse_state, state_key
from reconciler.model.observed import NodeInfo
from reconciler.model.policy import DeploymentPolicy
from reconciler.model.recipe import DrainOptions, Package, Recipe, Timeouts
from reconciler.model.run import RunResult
from reconciler.model.vocab import EventKind
from reconciler.ports import ChangeFeed, Clock, ClusterPorts, StageSpec
from reconciler.service import ApplySettings, apply_recipes
from reconciler.testing import builders as b
from reconciler.testing.faults import FaultyCluster
from reconciler.testing.fleetgen import make_node, make_pdb, make_pod, pdb_keywords

RECIPE = "conf"
SELECT_KEY = "conformance.test/selected"
GROUP_KEY = "e2e.test/group"
SHA = "sha256:" + "c" * 64
ALLOWED, REFUSED, MULTIPLE = "allowed", "429", "500"
#: Short lifecycle timeouts, so a scenario that waits for one stays cheap on the real side.
TIMEOUTS = Timeouts(stage=60, reboot=60, waitNonInterrupt=60, stageRetries=0, retryBackoff=1)
DRAIN = DrainOptions(timeoutSeconds=60, evictionRetrySeconds=1)
#: Simulated durations close to kwok's (tests/controlplane/kwok-stages.yaml: stages ~1 s, reboots 2 s).
SIM_CONFIG = SimConfig(stageSeconds=1, rebootSeconds=2, interruptSeconds=1, podStartSeconds=1, rescheduleSeconds=1,
                       maxTerminationSeconds=1)


@dataclass(frozen=True)
class Workload:
    """An app of ``replicas`` ReplicaSet pods (label ``app=<app>``), all starting on node ``node``,
    the first ``not_ready`` (by name) Running but not Ready; ``pdb``: a PDB spec without its
    selector (always ``app=<app>``), or None."""

    app: str
    replicas: int
    node: int = 0
    not_ready: int = 0
    pdb: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Fail:
    """Every ``stage`` pod of ``package`` fails with ``exit_code``."""

    package: str
    stage: str
    exit_code: int


@dataclass(frozen=True)
class Expect:
    """The table's answer: ``result``; per node index (state, reason); the evictions as a set of
    (app, answer); the Events as a set of (node index, reason); per node index the final state
    (:func:`final_state`, only the keys given are compared)."""

    result: str
    nodes: Mapping[int, tuple[str, str]]
    evictions: frozenset[tuple[str, str]] = frozenset()
    events: frozenset[tuple[int, str]] = frozenset()
    final: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    tainted: tuple[int, ...] = ()


@dataclass(frozen=True)
class Scenario:
    """One row (module docstring)."""

    id: str
    nodes: int
    packages: tuple[Package, ...]
    expect: Expect
    policy: DeploymentPolicy = field(default_factory=lambda: b.policy("conf", default_budget=b.budget(count=1)))
    workloads: tuple[Workload, ...] = ()
    selected: tuple[int, ...] | None = None
    fail: Fail | None = None
    leave: tuple[int, str] | None = None
    relax: tuple[str, Mapping[str, Any]] | None = None
    drain: DrainOptions = DRAIN
    recipe_kw: Mapping[str, Any] = field(default_factory=dict)

    def is_selected(self, i: int) -> bool:
        """Whether node ``i`` carries the recipe's selector label at the start."""
        return self.selected is None or i in self.selected

    def recipe(self, group: str) -> Recipe:
        """The recipe over the scenario's nodes of ``group`` (with the failure's env for kwok)."""
        pkgs = self.packages
        if self.fail is not None:
            f = self.fail
            env = {"SIM_TEST_OUTCOME": "fail", "SIM_TEST_EXIT_CODE": str(f.exit_code), "SIM_TEST_STAGES": f.stage}
            pkgs = tuple(p.model_copy(update={"env": b.package(p.name, env=env).env}) if p.name == f.package else p
                         for p in pkgs)
        return b.recipe(RECIPE, *pkgs, selector={GROUP_KEY: group, SELECT_KEY: "yes"}, drain=self.drain,
                        policy=self.policy.name, timeouts=TIMEOUTS, **dict(self.recipe_kw))

    def sim_config(self) -> SimConfig:
        """The simulated fleet's behaviour for this scenario."""
        if self.fail is None:
            return SIM_CONFIG
        f = self.fail
        return SIM_CONFIG.model_copy(update={"failures": (
            StageFailure(package=f.package, stage=f.stage, exitCode=f.exit_code, times=999),)})  # type: ignore[arg-type]


def _pkg(name: str, **kw: Any) -> Package:
    return b.package(name, sha=SHA, **kw)


REBOOT = _pkg("tuned", interrupt="reboot")
FIXED_HALT = b.policy("conf", default_budget=b.budget(count=1),
                      default_strategy=b.strategy("fixed", initialBatch=1, failureThreshold=1, safetyLimit=100))
AA = {"unhealthyPodEvictionPolicy": "AlwaysAllow"}
DONE_REBOOT = {"unschedulable": False, "packages": (("tuned|1.0.0", "post-interrupt", "complete"),)}
UNTOUCHED = {"unschedulable": False, "records": (), "packages": ()}
CORDON, INFLIGHT, FAILURE = f"{PREFIX}/cordon_{RECIPE}", f"{PREFIX}/inflight_{RECIPE}", f"{PREFIX}/failure_{RECIPE}"
STATE, STATUS, CONFIG = f"{PREFIX}/nodeState_{RECIPE}", f"{PREFIX}/status_{RECIPE}", f"{PREFIX}/config_{RECIPE}"
FAILED_HELD = (CORDON, FAILURE, INFLIGHT, STATE, STATUS)
ERRORING = ((f"{PREFIX}/{RECIPE}/Erroring", "True"),)

SCENARIOS: tuple[Scenario, ...] = (
    # a config-only package: no interrupt, so no cordon and no drain; both nodes at once
    Scenario("config-only", 2, (_pkg("base", config={"profile.conf": "intent=training"}),),
             Expect("succeeded", {0: ("complete", ""), 1: ("complete", "")},
                    final={i: {"unschedulable": False, "taints": (),
                               "packages": (("base|1.0.0", "config", "complete"),)} for i in (0, 1)}),
             policy=b.policy("conf", default_budget=b.budget(count=2)),
             workloads=(Workload("web", 1),)),
    # a reboot: cordon, drain (the web pod evicted and re-created elsewhere), reboot, uncordon
    Scenario("reboot-with-drain", 2, (REBOOT,),
             Expect("succeeded", {0: ("complete", ""), 1: ("complete", "")}, frozenset({("web", ALLOWED)}),
                    final={0: DONE_REBOOT, 1: DONE_REBOOT}),
             workloads=(Workload("web", 1),)),
    # a PDB that allows no disruption (minAvailable 1 of 1) refuses the eviction (429) until an
    # admin relaxes it (minAvailable 0) before the drain's next try: then allowed, the node completes
    Scenario("pdb-blocks-then-allows", 2, (REBOOT,),
             Expect("succeeded", {0: ("complete", ""), 1: ("complete", "")},
                    frozenset({("web", ALLOWED), ("web", REFUSED)}), final={0: DONE_REBOOT, 1: DONE_REBOOT}),
             workloads=(Workload("web", 1, pdb={"minAvailable": 1}),), relax=("web", {"minAvailable": 0})),
    # a not-Ready pod under a PDB whose budget is not healthy (currentHealthy 0 < desiredHealthy 1):
    # no unhealthyPodEvictionPolicy, so IfHealthyBudget (the API's default), refuses it until the
    # drain times out (tests/eviction_cases.py also sets IfHealthyBudget explicitly): the node fails, stays
    # cordoned by us with the failure record
    Scenario("notready-pod-pdb-unset-policy-ifhealthybudget", 2, (REBOOT,),
             Expect("failed", {0: ("failed", "DrainTimeout")}, frozenset({("web", REFUSED)}),
                    frozenset({(0, "Failed")}),
                    final={0: {"unschedulable": True, "packages": (), "records": FAILED_HELD,
                               "conditions": ERRORING}, 1: UNTOUCHED}),
             workloads=(Workload("web", 1, not_ready=1, pdb={"minAvailable": 1}),), selected=(0,),
             drain=DrainOptions(timeoutSeconds=6, evictionRetrySeconds=1)),
    # the same pod with unhealthyPodEvictionPolicy AlwaysAllow: evicted, the node completes
    Scenario("notready-pod-pdb-alwaysallow", 2, (REBOOT,),
             Expect("succeeded", {0: ("complete", "")}, frozenset({("web", ALLOWED)}),
                    final={0: DONE_REBOOT, 1: UNTOUCHED}),
             workloads=(Workload("web", 1, not_ready=1, pdb={"minAvailable": 1, **AA}),), selected=(0,)),
    # a failing apply stage (exit 7, no retries) with failureThreshold 1 in batches of 1: the first
    # node fails and the rollout halts; the others are never touched
    Scenario("stage-failure-halts", 3, (REBOOT,),
             Expect("halted", {0: ("failed", "StageFailed"), 1: ("untouched", ""), 2: ("untouched", "")},
                    events=frozenset({(0, "Failed")}),
                    final={0: {"unschedulable": True, "records": FAILED_HELD, "conditions": ERRORING,
                               "packages": (("tuned|1.0.0", "apply", "erroring"),)}, 1: UNTOUCHED, 2: UNTOUCHED}),
             policy=FIXED_HALT, fail=Fail("tuned", "apply", 7)),
    # the node leaves the selector when its config stage starts: the running stage finishes, no
    # new one starts, the reboot it owes is recorded and it stays cordoned by us (issue 12)
    Scenario("node-leaves-the-selector", 1, (REBOOT,),
             Expect("succeeded", {0: ("left", "")},
                    final={0: {"unschedulable": True, "records": (CORDON, INFLIGHT, STATE, STATUS),
                               "packages": (("tuned|1.0.0", "config", "in_progress"),)}}),
             leave=(0, "config")),
    # a runtime-required recipe with autoTaintNewNodes: new nodes are tainted before the rollout and
    # the taint goes when the node is complete
    Scenario("runtime-required-new-node", 2, (_pkg("base"),),
             Expect("succeeded", {0: ("complete", ""), 1: ("complete", "")}, tainted=(0, 1),
                    final={i: {"unschedulable": False, "taints": (),
                               "records": (f"{PREFIX}/autoTaint", CONFIG, STATE, STATUS),
                               "packages": (("base|1.0.0", "config", "complete"),)} for i in (0, 1)}),
             policy=b.policy("conf", default_budget=b.budget(count=2)),
             recipe_kw={"runtimeRequired": True, "autoTaintNewNodes": True}),
)


# ---------------------------------------------------------------------------------------- running


class World(Protocol):
    """One side of the suite: the cluster adapter, its clock and change feed (None when the
    clock's waits cannot tell what changed), the scenario's node names (index order) and how the
    world changes a node's label on its own."""

    cluster: ClusterPorts
    clock: Clock
    changes: ChangeFeed | None
    names: list[str]
    group: str

    def set_label(self, node: str, key: str, value: str | None) -> None:
        """Change (None: remove) one label of ``node``, as someone else would."""
        ...

    def set_pdb(self, app: str, spec: Mapping[str, Any]) -> None:
        """Merge ``spec`` into the spec of the PDB ``<app>-pdb``, as an admin would."""
        ...


@dataclass
class Outcome:
    """What a run did, normalised so the two sides compare (node names → indexes)."""

    result: str
    tainted: tuple[int, ...]
    nodes: dict[int, tuple[str, str, str, int | None]]
    timeline: dict[int, tuple[str, ...]]
    events: tuple[tuple[int, str, str], ...]
    evictions: tuple[tuple[str, str], ...]
    final: dict[int, dict[str, Any]]

    def check(self, expect: Expect) -> list[str]:
        """Differences from the table's answer (empty when it matches)."""
        out = []
        if self.result != expect.result:
            out.append(f"result {self.result!r}, want {expect.result!r}")
        for i, (state, reason) in expect.nodes.items():
            got = self.nodes.get(i)
            if got is None or got[:2] != (state, reason):
                out.append(f"node {i}: {got}, want {(state, reason)}")
        if self.tainted != expect.tainted:
            out.append(f"tainted {self.tainted}, want {expect.tainted}")
        if set(self.evictions) != expect.evictions:
            out.append(f"evictions {sorted(set(self.evictions))}, want {sorted(expect.evictions)}")
        # the notice Events (cordon, drain, uncordon: NODE_EVENTS) follow the timeline, one each;
        # the table names the others
        notices = {(i, NODE_EVENTS[EventKind(k)]) for i, kinds in self.timeline.items() for k in kinds
                   if k in NODE_EVENTS}
        events = {(i, reason) for i, reason, _t in self.events if reason not in NODE_EVENTS.values()}
        if events != expect.events:
            out.append(f"events {sorted(events)}, want {sorted(expect.events)}")
        got_notices = {(i, reason) for i, reason, _t in self.events if reason in NODE_EVENTS.values()}
        if got_notices != notices:
            out.append(f"notice events {sorted(got_notices)}, want {sorted(notices)} (from the timeline)")
        for i, want in expect.final.items():
            got_final = self.final.get(i, {})
            for k, v in want.items():
                if got_final.get(k) != v:
                    out.append(f"node {i} final {k}: {got_final.get(k)!r}, want {v!r}")
        return out


def final_state(node: NodeInfo) -> dict[str, Any]:
    """A node's end state as compared: unschedulable, taints (key, effect) without the control
    plane's ``node.kubernetes.io/*``, our labels and :data:`SELECT_KEY`, the keys of our annotations,
    our conditions (type, status) and the recipe's per-package (key, stage, state)."""
    ours = f"{PREFIX}/"
    return {
        "unschedulable": node.unschedulable,
        "taints": tuple(sorted((t.key, t.effect) for t in node.taints if not t.key.startswith("node.kubernetes.io/"))),
        "labels": tuple(sorted((k, v) for k, v in node.labels.items() if k.startswith(ours) or k == SELECT_KEY)),
        "records": tuple(sorted(k for k in node.annotations if k.startswith(ours))),
        "conditions": tuple(sorted((c.type, c.status) for c in node.conditions if c.type.startswith(ours))),
        "packages": tuple(sorted((k, str(v.stage), str(v.state))
                                 for k, v in parse_state(node.annotations.get(state_key(RECIPE))).items())),
    }


def _answer(outcome: str) -> str:
    return {"ok": ALLOWED, "error:TooManyRequestsError": REFUSED, "error:ServerError": MULTIPLE}.get(outcome, outcome)


def run_scenario(sc: Scenario, world: World, *, poll_seconds: float = 5.0) -> Outcome:
    """Apply the scenario's recipe through ``apply_recipes`` on ``world`` and observe the outcome.
    Calls are watched through one port decorator (:class:`FaultyCluster` hooks): the app of every
    eviction asked for, the Events emitted, and the stage pod that makes a node leave."""
    apps: list[str] = []
    events: list[tuple[str, str, str]] = []
    left: list[str] = []

    def before_evict(namespace: str, name: str, uid: str, grace: int | None) -> None:
        pod = world.cluster.pods.get_pod(namespace, name)
        apps.append(pod.labels.get("app", "?") if pod is not None else "?")
        if sc.relax is not None and len(apps) == 2:
            world.set_pdb(*sc.relax)

    def after_event(node: str, reason: str, message: str, type_: str = "Normal") -> None:
        events.append((node, reason, type_))

    def after_start(spec: StageSpec) -> None:
        if sc.leave is not None and not left:
            i, stage = sc.leave
            if spec.node == world.names[i] and spec.stage == stage:
                left.append(spec.node)
                world.set_label(spec.node, SELECT_KEY, None)

    hooks_after: dict[str, Callable[..., object]] = {"emit_event": after_event, "start_stage": after_start}
    port = FaultyCluster(world.cluster, clock=world.clock, before={"evict_pod": before_evict}, after=hooks_after)
    r = sc.recipe(world.group)
    inputs = Inputs(recipes=(r,), policies={sc.policy.name: sc.policy}, files=())
    done = apply_recipes(inputs, port, world.clock,
                         ApplySettings(holder="conformance", workers=1, poll_seconds=poll_seconds),
                         changes=world.changes)
    (result,) = done.results
    evictions = [c.outcome for c in port.calls if c.verb == "evict_pod"]
    assert len(evictions) == len(apps), (evictions, apps)
    return outcome_of(world, result, done.tainted, events, list(zip(apps, map(_answer, evictions), strict=True)))


def outcome_of(world: World, result: RunResult, tainted: Sequence[str], events: Sequence[tuple[str, str, str]],
               evictions: Sequence[tuple[str, str]]) -> Outcome:
    """Normalise a run (see :class:`Outcome`)."""
    idx = {n: i for i, n in enumerate(world.names)}
    return Outcome(
        result=str(result.result),
        tainted=tuple(sorted(idx[n] for n in tainted if n in idx)),
        nodes={idx[n.name]: (str(n.state), n.reason, n.failed_stage, n.exit_code)
               for n in result.nodes if n.name in idx},
        timeline={i: tuple(sorted({str(e.event) for e in result.timeline if e.node == n})) for n, i in idx.items()},
        events=tuple(sorted({(idx[n], reason, t) for n, reason, t in events if n in idx})),
        evictions=tuple(sorted(set(evictions))),
        final={i: final_state(world.cluster.nodes.get_node(n)) for n, i in idx.items()},
    )


# ---------------------------------------------------------------------------------------- the simulated side


class SimWorld:
    """The scenario on a :class:`SimFleet` (Kubernetes objects from :mod:`reconciler.testing.fleetgen`)."""

    group = "sim"

    def __init__(self, sc: Scenario) -> None:
        self.names = [f"{sc.id[:40]}-n{i}" for i in range(sc.nodes)]
        objs: list[dict[str, Any]] = []
        for i, n in enumerate(self.names):
            labels = {GROUP_KEY: self.group, **({SELECT_KEY: "yes"} if sc.is_selected(i) else {})}
            objs.append(make_node(n, labels, created=1795000000.0 + i))
        for w in sc.workloads:
            for j in range(w.replicas):
                objs.append(make_pod("conf", f"{w.app}-5d8f7-{j:02d}", self.names[w.node], labels={"app": w.app},
                                     owner=("ReplicaSet", f"{w.app}-5d8f7"), ready=j >= w.not_ready, grace=1))
            if w.pdb is not None:
                objs.append(make_pdb("conf", f"{w.app}-pdb", {"app": w.app}, **pdb_keywords(w.pdb)))
        self.sim = SimFleet(objs, sc.sim_config())
        self.cluster = ClusterPorts.of(self.sim)
        self.clock: Clock = self.sim
        self.changes: ChangeFeed | None = None

    def set_label(self, node: str, key: str, value: str | None) -> None:
        """Through the simulated fleet's test helper (not a write of ours)."""
        labels = dict(self.sim.get_node(node).labels)
        if value is None:
            labels.pop(key, None)
        else:
            labels[key] = value
        self.sim.set_node(node, labels=labels)

    def set_pdb(self, app: str, spec: Mapping[str, Any]) -> None:
        """Through the simulated fleet's test helper."""
        self.sim.set_pdb("conf", f"{app}-pdb", **spec)


__all__ = ["SCENARIOS", "Outcome", "Scenario", "SimWorld", "World", "run_scenario"]

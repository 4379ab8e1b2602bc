"""Property tests: for any valid recipe, policy and fleet, the plan respects ``dependsOn``, its
batches never exceed the budget ceiling and cover every node with work exactly once, and planning
is deterministic (same hash, byte-identical JSON, independent of input order)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.diff import config_digest
from reconciler.model.nodestate import ConfigDigest
from reconciler.model.policy import DeploymentPolicy
from reconciler.plan.planner import compute_plan
from reconciler.testing import (
    budget,
    compartment,
    complete_entry,
    entry,
    fleet,
    inflight,
    node,
    package,
    pod,
    policy,
    recipe,
    strategy,
)

NAMES = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
VERSIONS = ["0.9.0", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "2.0.0"]
INTERRUPTS = [None, None, "reboot", "noop", "service:kubelet", "service:containerd", "restartAllServices"]
STAGES = ["apply", "config", "interrupt", "post-interrupt", "upgrade", "uninstall"]
STATES = ["complete", "complete", "complete", "in_progress", "erroring", "unknown", "skipped"]
LABELS = st.fixed_dictionaries({"pool": st.sampled_from(["gpu", "cpu"]), "zone": st.sampled_from(["a", "b", "c"])})

pytestmark = pytest.mark.slow  # property sweeps (120 examples each): CI runs them, the fast tier not

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def recipes(draw: Any) -> Any:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=0, max_size=6, unique=True))
    versions = {n: draw(st.sampled_from(VERSIONS)) for n in names}
    pkgs = []
    for i, n in enumerate(names):  # depend only on earlier names: acyclic by construction
        deps = draw(st.lists(st.sampled_from(names[:i]), unique=True, max_size=3)) if i else []
        cfg = draw(
            st.dictionaries(st.sampled_from(["a.conf", "sysctl.conf", "x"]), st.sampled_from(["1", "2"]), max_size=2)
        )
        cis = {"sysctl*": "restartAllServices"} if "sysctl.conf" in cfg and draw(st.booleans()) else None
        pkgs.append(
            package(
                n,
                versions[n],
                interrupt=draw(st.sampled_from(INTERRUPTS)),
                depends_on={d: versions[d] for d in deps},
                config=cfg,
                config_interrupts=cis,
                uninstall=True if draw(st.integers(0, 9)) == 0 else None,
            )
        )
    sel = draw(st.sampled_from([{}, {"pool": "gpu"}, {"zone": "a"}]))
    return recipe(
        "prop",
        *pkgs,
        selector=sel,
        protect=draw(st.sampled_from([None, {"w": "train"}])),
        runtimeRequired=draw(st.booleans()),
    )


@st.composite
def nodes(draw: Any, r: Any) -> Any:
    out = []
    count = draw(st.integers(0, 9))
    for i in range(count):
        entries = []
        for n in draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=4)):
            for v in draw(st.lists(st.sampled_from(VERSIONS), unique=True, min_size=1, max_size=2)):
                entries.append(
                    entry(
                        n,
                        v,
                        draw(st.sampled_from(STAGES)),
                        draw(st.sampled_from(STATES)),
                        restarts=draw(st.integers(0, 3)),
                    )
                )
        # often the recipe's own version complete (so reconfigure/unchanged are common too)
        entries += [complete_entry(p) for p in r.packages.values() if draw(st.integers(0, 2)) == 0]
        digests = {
            p.name: config_digest(p) if draw(st.booleans()) else ConfigDigest(configMap={"sysctl.conf": "stale"})
            for p in r.packages.values()
            if draw(st.booleans())
        }
        fl = None
        if draw(st.integers(0, 3)) == 0:
            pkgs = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=2))
            fl = inflight(
                draw(st.sampled_from(["wait", "stages", "interrupt", "post-interrupt"])),
                interrupt=draw(st.sampled_from(INTERRUPTS)),
                packages=pkgs,
            )
        ours = draw(st.booleans())
        out.append(
            node(
                f"n{i}",
                labels=draw(LABELS),
                recipe="prop",
                state=entries,
                digests=digests,
                inflight=fl,
                cordoned_by_us=ours,
                unschedulable=ours or draw(st.integers(0, 5)) == 0,
                created=float(draw(st.integers(0, 3))),
                legacy="skyhook.nvidia.com" if draw(st.integers(0, 7)) == 0 else None,
                taints=["reconciler.nodewright.dev/runtime-required=true:NoSchedule"] if draw(st.booleans()) else [],
            )
        )
    return out


@st.composite
def pods_for(draw: Any, ns: Any) -> Any:
    out = []
    for n in ns:
        for j in range(draw(st.integers(0, 3))):
            out.append(
                pod(
                    f"p{j}",
                    node=n.name,
                    namespace=n.name,
                    labels={"w": draw(st.sampled_from(["train", "web"]))},
                    phase=draw(st.sampled_from(["Running", "Running", "Pending", "Succeeded"])),
                    owner=draw(st.sampled_from(["ReplicaSet", "DaemonSet", "Job", None])),
                    emptydir=draw(st.booleans()),
                )
            )
    return out


BUDGETS = st.one_of(
    st.builds(lambda p: budget(percent=p), st.integers(1, 100)), st.builds(lambda c: budget(count=c), st.integers(1, 5))
)
STRATS = st.one_of(
    st.none(),
    st.builds(lambda b: strategy("fixed", initialBatch=b), st.integers(1, 4)),
    st.builds(lambda b, d: strategy("linear", initialBatch=b, delta=d), st.integers(1, 3), st.integers(1, 3)),
    st.builds(
        lambda b, g: strategy("exponential", initialBatch=b, growthFactor=g), st.integers(1, 3), st.integers(2, 3)
    ),
)


@st.composite
def policies(draw: Any) -> Any:
    if draw(st.booleans()):
        return DeploymentPolicy.legacy("legacy", draw(st.one_of(st.none(), BUDGETS)))
    comps = []
    selectors = {"gpu": {"pool": "gpu"}, "zone-a": {"zone": "a"}, "zone-b": {"zone": "b"}}
    for name in draw(st.lists(st.sampled_from(sorted(selectors)), unique=True, max_size=3)):
        comps.append(compartment(name, selectors[name], draw(BUDGETS), draw(STRATS)))
    return policy("prop-policy", default_budget=draw(BUDGETS), default_strategy=draw(STRATS), compartments=comps)


@st.composite
def scenarios(draw: Any) -> Any:
    r = draw(recipes())
    ns = draw(nodes(r))
    return r, draw(policies()), ns, draw(pods_for(ns))


@SETTINGS
@given(scenarios())
def test_steps_respect_depends_on(sc):
    r, pol, ns, pods = sc
    p = compute_plan(r, pol, fleet(ns, pods))
    for n in p.nodes:
        seen: set[str] = set()
        by = {s.package: s for s in n.steps}
        assert len(by) == len(n.steps), "one step per package"
        for s in n.steps:
            assert set(s.after) <= seen, f"{n.name}: {s.package} runs before {set(s.after) - seen}"
            pkg = r.packages.get(s.package)
            if s.action != "uninstall" and pkg is not None:
                for dep in pkg.dependsOn:
                    if dep in by and by[dep].action != "uninstall":
                        assert dep in s.after, f"{n.name}: {s.package} does not wait for {dep}"
            seen.add(s.package)
        uninstall_idx = [i for i, s in enumerate(n.steps) if s.action == "uninstall"]
        assert uninstall_idx == list(range(len(uninstall_idx))), "uninstalls come first"
        # post-interrupt is listed only when the step has an interrupt or resumes after one
        for s in n.steps:
            if s.interrupt is not None and s.action != "uninstall":
                assert s.stages[-1] == "post-interrupt"
        assert n.cordon == (n.interrupt is not None)


@SETTINGS
@given(scenarios())
def test_batches_never_exceed_the_ceiling_and_cover_work_once(sc):
    r, pol, ns, pods = sc
    p = compute_plan(r, pol, fleet(ns, pods))
    placed: dict[str, tuple[str, int]] = {}
    for c in p.compartments:
        assert c.matched == sum(1 for n in p.nodes if n.compartment == c.name)
        for i, b in enumerate(c.batches, start=1):
            assert 1 <= len(b) <= max(1, c.ceiling)
            for name in b:
                assert name not in placed
                placed[name] = (c.name, i)
    for n in p.nodes:
        has_work = bool(n.steps) or n.interrupt is not None or n.batch > 0
        if n.batch:
            assert placed[n.name] == (n.compartment, n.batch)
        else:
            assert n.name not in placed
        if n.steps or n.interrupt is not None:
            assert has_work and n.batch > 0
    assert p.summary.nodesChanging == len(placed)
    assert p.summary.nodes == len(p.nodes)


@SETTINGS
@given(scenarios(), st.randoms(use_true_random=False))
def test_planning_is_deterministic(sc, rnd):
    r, pol, ns, pods = sc
    a = compute_plan(r, pol, fleet(ns, pods), revision="rev")
    shuffled_nodes, shuffled_pods = list(ns), list(pods)
    rnd.shuffle(shuffled_nodes)
    rnd.shuffle(shuffled_pods)
    b = compute_plan(r, pol, fleet(shuffled_nodes, shuffled_pods), revision="rev")
    assert a.planHash == b.planHash
    assert a.to_json() == b.to_json()

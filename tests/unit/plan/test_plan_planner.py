"""The planner: selection, step order, interrupts, drain classes, untaint, compartments, batches,
warnings, summary and the plan hash."""

from __future__ import annotations

import pytest

from reconciler.diff import config_digest
from reconciler.errors import InputError
from reconciler.model.nodestate import RUNTIME_REQUIRED_TAINT_KEY, state_key
from reconciler.model.plan import Plan
from reconciler.model.policy import DEFAULT_COMPARTMENT, DeploymentPolicy
from reconciler.model.recipe import DrainOptions, Interrupt, ReadinessGate
from reconciler.plan.planner import compute_plan
from reconciler.testing import (
    as_interrupt,
    budget,
    compartment,
    entry,
    fleet,
    inflight,
    node,
    package,
    pdb,
    pod,
    policy,
    recipe,
    strategy,
)

LEGACY = DeploymentPolicy.legacy("legacy", None)
GPU = {"pool": "gpu"}


def plan_of(r, nodes, pods=(), pdbs=(), pol=LEGACY, **kw) -> Plan:
    return compute_plan(r, pol, fleet(nodes, pods, pdbs), **kw)


def steps_of(p: Plan, name: str) -> list[tuple[str, str, tuple[str, ...]]]:
    n = p.node(name)
    assert n is not None
    return [(s.package, s.action, s.after) for s in n.steps]


# ------------------------------------------------------------------------------ selection


def test_unselected_nodes_are_untouched_and_absent():
    r = recipe("gpu", package("tuned"), selector=GPU)
    p = plan_of(r, [node("g1", labels=GPU), node("c1", labels={"pool": "cpu"})])
    assert [n.name for n in p.nodes] == ["g1"]
    assert p.summary.nodes == 1


def test_up_to_date_node_has_no_steps_and_no_batch():
    pkg = package("tuned")
    p = plan_of(recipe("gpu", pkg), [node("n1", recipe="gpu", installed=[pkg])])
    n1 = p.node("n1")
    assert n1 is not None and n1.steps == () and n1.batch == 0 and n1.note == "up to date"
    assert p.summary.nodesChanging == 0 and p.compartments[0].batches == ()


# ------------------------------------------------------------------------------ dependency order

#   base ─┬─▶ left ──┬─▶ top
#         └─▶ right ─┘
DIAMOND = [
    package("base-pkg", "1.0.0"),
    package("left-pkg", "1.0.0", depends_on={"base-pkg": "1.0.0"}),
    package("right-pkg", "1.0.0", depends_on={"base-pkg": "1.0.0"}),
    package("top-pkg", "1.0.0", depends_on={"left-pkg": "1.0.0", "right-pkg": "1.0.0"}),
]


def test_diamond_install_order():
    p = plan_of(recipe("r", *DIAMOND), [node("n1")])
    assert steps_of(p, "n1") == [
        ("base-pkg", "install", ()),
        ("left-pkg", "install", ("base-pkg",)),
        ("right-pkg", "install", ("base-pkg",)),
        ("top-pkg", "install", ("left-pkg", "right-pkg")),
    ]


def test_independent_roots_run_without_waiting_for_each_other():
    pkgs = [
        package("aaa-root", "1.0.0"),
        package("zzz-root", "1.0.0"),
        package("mid-child", "1.0.0", depends_on={"zzz-root": "1.0.0"}),
    ]
    p = plan_of(recipe("r", *pkgs), [node("n1")])
    assert steps_of(p, "n1") == [
        ("aaa-root", "install", ()),
        ("zzz-root", "install", ()),
        ("mid-child", "install", ("zzz-root",)),  # not after aaa-root (decision (g))
    ]


def test_after_lists_only_changing_dependencies():
    base, left = DIAMOND[0], DIAMOND[1]
    p = plan_of(recipe("r", base, left), [node("n1", recipe="r", installed=[base])])
    assert steps_of(p, "n1") == [("left-pkg", "install", ())]


def test_root_rerun_after_dependents_completed_still_runs():
    # NodeWright PR #387: two roots with dependents all complete; bump one root → it must run
    roots = [package("root-a", "1.0.0"), package("root-b", "1.0.0")]
    kids = [
        package("kid-a", "1.0.0", depends_on={"root-a": "1.0.0"}),
        package("kid-b", "1.0.0", depends_on={"root-b": "1.0.0"}),
    ]
    installed = roots + kids
    bumped = [package("root-a", "1.1.0"), roots[1], package("kid-a", "1.0.0", depends_on={"root-a": "1.1.0"}), kids[1]]
    p = plan_of(recipe("r", *bumped), [node("n1", recipe="r", installed=installed)])
    assert steps_of(p, "n1") == [("root-a", "upgrade", ())]
    # and a root whose state was reset (entry gone) while dependents are complete
    p2 = plan_of(recipe("r", *installed), [node("n1", recipe="r", installed=installed[1:])])
    assert steps_of(p2, "n1") == [("root-a", "install", ())]


def test_uninstalls_first_then_downgrades_then_the_rest():
    spec = [
        package("app-pkg", "2.0.0", depends_on={"lib-pkg": "1.0.0"}),
        package("lib-pkg", "1.0.0"),
        package("zeta-pkg", "1.0.0"),
        package("old-pkg", "1.0.0", uninstall=True),
    ]
    installed = [package("app-pkg", "1.0.0"), package("lib-pkg", "2.0.0"), package("old-pkg", "1.0.0"),
                 package("gone-pkg", "1.0.0")]  # removed from the recipe: a marker, no step (issue 34)
    p = plan_of(recipe("r", *spec), [node("n1", recipe="r", installed=installed)])
    assert steps_of(p, "n1") == [
        ("old-pkg", "uninstall", ()),
        ("lib-pkg", "downgrade", ()),
        ("app-pkg", "upgrade", ("lib-pkg",)),
        ("zeta-pkg", "install", ()),
    ]


def test_explicit_uninstalls_in_reverse_dependency_order():
    spec = [
        package("lib-pkg", "1.0.0", uninstall=True),
        package("app-pkg", "1.0.0", depends_on={"lib-pkg": "1.0.0"}, uninstall=True),
    ]
    installed = [package("lib-pkg", "1.0.0"), package("app-pkg", "1.0.0", depends_on={"lib-pkg": "1.0.0"})]
    p = plan_of(recipe("r", *spec), [node("n1", recipe="r", installed=installed)])
    assert steps_of(p, "n1") == [("app-pkg", "uninstall", ()), ("lib-pkg", "uninstall", ("app-pkg",))]


def test_uninstalling_a_dependency_of_a_kept_package_warns():
    spec = [package("lib-pkg", "1.0.0", uninstall=True), package("app-pkg", "1.0.0", depends_on={"lib-pkg": "1.0.0"})]
    p = plan_of(recipe("r", *spec), [node("n1")])
    assert any("app-pkg depends on lib-pkg" in w for w in p.warnings)


def test_cycle_is_an_input_error_naming_it():
    pkgs = [package("a-pkg", depends_on={"b-pkg": "1.0.0"}), package("b-pkg", depends_on={"a-pkg": "1.0.0"})]
    with pytest.raises(InputError, match="a-pkg -> b-pkg -> a-pkg"):
        plan_of(recipe("r", *pkgs), [node("n1")])


# ------------------------------------------------------------------------------ interrupts and cordon


def test_node_interrupt_is_the_merge_and_cordon_follows_it():
    pkgs = [
        package("svc-a", interrupt="service:kubelet"),
        package("svc-b", interrupt="service:containerd"),
        package("plain-pkg"),
    ]
    p = plan_of(recipe("r", *pkgs), [node("n1")])
    n1 = p.node("n1")
    assert n1 is not None
    assert n1.interrupt == Interrupt(type="service", services=("containerd", "kubelet"))
    assert n1.cordon
    by = {s.package: s for s in n1.steps}
    assert by["plain-pkg"].stages == ("apply", "config")
    assert by["svc-a"].stages == ("apply", "config", "post-interrupt")
    assert p.summary.interrupts.model_dump() == {"reboot": 0, "service": 1, "restartAllServices": 0, "noop": 0}


def test_no_interrupt_no_cordon_no_drain():
    p = plan_of(recipe("r", package("plain-pkg")), [node("n1")], pods=[pod("web", node="n1")])
    n1 = p.node("n1")
    assert n1 is not None and not n1.cordon and n1.interrupt is None and n1.evict == () and n1.waitFor == ()


def test_noop_interrupt_still_cordons_and_drains():
    p = plan_of(recipe("r", package("noop-pkg", interrupt="noop")), [node("n1")], pods=[pod("web", node="n1")])
    n1 = p.node("n1")
    assert n1 is not None and n1.cordon and n1.evict == ("default/web",)


def test_owed_interrupt_from_inflight_is_planned_even_when_stages_are_complete():
    pkg = package("tuned", interrupt="reboot")
    n = node(
        "n1",
        recipe="r",
        state=[entry("tuned", "1.0.0", "config", "complete")],
        digests={"tuned": config_digest(pkg)},
        inflight=inflight("interrupt", interrupt="reboot", packages=["tuned"]),
        cordoned_by_us=True,
    )
    p = plan_of(recipe("r", pkg), [n, node("n2", recipe="r", installed=[pkg])])
    n1 = p.node("n1")
    assert n1 is not None and n1.interrupt == Interrupt(type="reboot") and n1.cordon
    assert [(s.package, s.stages) for s in n1.steps] == [("tuned", ("post-interrupt",))]
    assert "resumes run run-0 at phase interrupt" in n1.note
    assert n1.batch == 1 and p.summary.nodesChanging == 1


def test_held_cordon_without_work_is_released_in_a_batch():
    pkg = package("tuned")
    p = plan_of(recipe("r", pkg), [node("n1", recipe="r", installed=[pkg], cordoned_by_us=True)])
    n1 = p.node("n1")
    assert n1 is not None and n1.steps == () and n1.batch == 1 and "our cordon is released" in n1.note


# ------------------------------------------------------------------------------ drain classes (S08, S09)

S08_PODS = [
    pod("report-28931-x", namespace="batch", owner="Job", phase="Succeeded", emptydir=True),
    pod("oneoff", owner=None, phase="Failed"),
    pod("debug-shell", owner=None),
    pod("cache-1", namespace="web", emptydir=True),
    pod("cache-2", namespace="web", emptydir=True),
    pod("db-2", namespace="web"),
    pod("agent", namespace="kube-system", owner="DaemonSet"),
    pod("kube-proxy-static", namespace="kube-system", owner="Node", mirror=True),
]
FINISHED = {"batch/report-28931-x", "default/oneoff"}


@pytest.mark.parametrize(
    ("force", "empty_dir", "blocked"),
    [
        (False, False, {"default/debug-shell", "web/cache-1", "web/cache-2"}),
        (True, False, {"web/cache-1", "web/cache-2"}),
        (False, True, {"default/debug-shell"}),
        (True, True, set()),
    ],
)
def test_s08_filter_matrix(force, empty_dir, blocked):
    r = recipe("r", package("tuned", interrupt="reboot"), drain=DrainOptions(force=force, deleteEmptyDirData=empty_dir))
    p = plan_of(r, [node("n1")], pods=S08_PODS)
    n1 = p.node("n1")
    assert n1 is not None
    got_blocked = {b.split(":")[0] for b in n1.drainBlockers}
    assert got_blocked == blocked
    everyone = {x.ref for x in S08_PODS} - {"kube-system/agent", "kube-system/kube-proxy-static"}
    assert set(n1.evict) == everyone - blocked  # finished pods always removable; db-2 never local storage
    assert set(n1.evict) >= FINISHED
    assert "kube-system/agent" not in n1.evict  # DaemonSet pods left running (ignoreDaemonSets)
    if blocked:
        refusal = [w for w in p.warnings if "drain would be refused" in w]
        assert len(refusal) == 1 and all(b in refusal[0] for b in blocked)  # every blocker in one message
    if force:
        assert (
            any("default/debug-shell" in w and "bare pod" in w for w in p.warnings) or "default/debug-shell" in blocked
        )


def test_daemonset_pods_block_without_ignore_daemonsets():
    r = recipe("r", package("tuned", interrupt="reboot"), drain=DrainOptions(ignoreDaemonSets=False))
    p = plan_of(r, [node("n1")], pods=[pod("agent", owner="DaemonSet")])
    n1 = p.node("n1")
    assert n1 is not None and n1.drainBlockers and "DaemonSet" in n1.drainBlockers[0]


def test_s09_protected_pods_are_waited_for_and_never_evicted():
    r = recipe(
        "r",
        package("tuned", interrupt="reboot"),
        protect={"workload": "training"},
        drain=DrainOptions(force=True, deleteEmptyDirData=True),
    )
    pods = [
        pod("train-7", namespace="ml", owner="Job", labels={"workload": "training"}),
        pod("train-8", namespace="ml", owner=None, labels={"workload": "training"}, phase="Pending", emptydir=True),
        pod("web-1", labels={"app": "web"}),
    ]
    p = plan_of(r, [node("n1")], pods=pods)
    n1 = p.node("n1")
    assert n1 is not None
    assert n1.waitFor == ("ml/train-7", "ml/train-8")
    assert n1.evict == ("default/web-1",)
    assert any("waits for protected pods" in w for w in p.warnings)


def test_empty_protect_selector_protects_nothing():
    r = recipe("r", package("tuned", interrupt="reboot"), protect={})
    p = plan_of(r, [node("n1")], pods=[pod("web-1")])
    n1 = p.node("n1")
    assert n1 is not None and n1.waitFor == () and n1.evict == ("default/web-1",)


def test_pdbs_of_evicted_pods_and_zero_budget_warning():
    r = recipe("r", package("tuned", interrupt="reboot"))
    pods = [
        pod("web-1", labels={"app": "web"}),
        pod("db-1", labels={"app": "db"}),
        pod("done", phase="Succeeded", labels={"app": "db"}),
    ]
    pdbs = [
        pdb("web", {"app": "web"}, allowed=1),
        pdb("db", {"app": "db"}, allowed=0),
        pdb("other-ns", {"app": "web"}, namespace="elsewhere", allowed=0),
    ]
    p = plan_of(r, [node("n1")], pods=pods, pdbs=pdbs)
    n1 = p.node("n1")
    assert n1 is not None and n1.pdbs == {"default/web": 1, "default/db": 0}
    zero = [w for w in p.warnings if "allows 0 disruptions" in w]
    assert len(zero) == 1 and "default/db-1" in zero[0]


def test_two_pdbs_on_one_pod_warn_http_500():
    r = recipe("r", package("tuned", interrupt="reboot"))
    p = plan_of(
        r,
        [node("n1")],
        pods=[pod("web-1", labels={"app": "web"})],
        pdbs=[pdb("a", {"app": "web"}), pdb("b", {"app": "web"})],
    )
    assert any("HTTP 500" in w for w in p.warnings)


# ------------------------------------------------------------------------------ runtime-required taint


def test_untaint_only_when_complete():
    pkg = package("tuned")
    taint = f"{RUNTIME_REQUIRED_TAINT_KEY}=true:NoSchedule"
    r = recipe("r", pkg, runtimeRequired=True)
    p = plan_of(
        r,
        [
            node("done", recipe="r", installed=[pkg], taints=[taint]),
            node("todo", taints=[taint]),
            node("clean", recipe="r", installed=[pkg]),
        ],
    )
    assert [(n.name, n.untaint) for n in p.nodes] == [("clean", False), ("done", True), ("todo", False)]
    assert p.summary.untaint == 1
    not_required = plan_of(recipe("r", pkg), [node("done", recipe="r", installed=[pkg], taints=[taint])])
    assert not not_required.nodes[0].untaint


# ------------------------------------------------------------------------------ compartments and batches


def test_batch_order_inflight_first_then_created_then_name():
    pkg = package("tuned")
    ns = [
        node("a-new", created=300.0),
        node("b-old", created=100.0),
        node("c-old", created=100.0),
        node(
            "z-resume",
            created=999.0,
            recipe="r",
            state=[entry("tuned", "1.0.0", "apply", "in_progress")],
            inflight=inflight("stages"),
        ),
    ]
    p = plan_of(recipe("r", pkg, budget=budget(count=1)), ns, pol=DeploymentPolicy.legacy("legacy", budget(count=1)))
    assert p.compartments[0].batches == (("z-resume",), ("b-old",), ("c-old",), ("a-new",))
    assert {n.name: n.batch for n in p.nodes} == {"a-new": 4, "b-old": 2, "c-old": 3, "z-resume": 1}


def test_compartments_with_strategies_and_ceilings():
    pol = policy(
        compartments=[
            compartment("gpu", GPU, budget(percent=25), strategy("exponential", initialBatch=1, growthFactor=2))
        ],
        default_budget=budget(count=2),
    )
    ns = [node(f"g{i:02d}", labels=GPU) for i in range(20)] + [node(f"c{i}", labels={"pool": "cpu"}) for i in range(3)]
    p = plan_of(recipe("r", package("tuned")), ns, pol=pol)
    gpu, default = p.compartments
    assert (gpu.name, gpu.strategy, gpu.ceiling, gpu.matched) == ("gpu", "exponential", 5, 20)
    assert [len(b) for b in gpu.batches] == [1, 2, 4, 5, 5, 3]
    assert (default.name, default.strategy, default.ceiling, default.matched) == (DEFAULT_COMPARTMENT, "none", 2, 3)
    assert [len(b) for b in default.batches] == [2, 1]
    assert p.summary.batches == 8
    assert {n.compartment for n in p.nodes if n.name.startswith("c")} == {DEFAULT_COMPARTMENT}


def test_a_compartment_that_gets_no_node_is_named_in_a_warning():
    zone_a = {"pool": "gpu", "zone": "a"}
    pol = policy(
        compartments=[
            compartment("nothing", {"doesnot": "exist"}, budget(percent=50),
                        strategy("linear", initialBatch=1, delta=1)),
            # every node it matches goes to the safer (fixed) zone-a compartment (the overlap rule)
            compartment("shadowed", {"zone": "a"}, budget(percent=50), strategy("exponential", growthFactor=2)),
            compartment("zone-a", zone_a, budget(count=1), strategy("fixed", initialBatch=1)),
        ],
    )
    ns = [node(f"a{i}", labels=zone_a) for i in range(3)] + [node("b0", labels=GPU)]
    p = plan_of(recipe("r", package("tuned"), selector=GPU), ns, pol=pol)
    assert [c.name for c in p.compartments] == ["zone-a", DEFAULT_COMPARTMENT]
    assert [w for w in p.warnings if w.startswith("compartment ")] == [
        "compartment nothing: its selector doesnot=exist matches none of the 4 node(s) the recipe selects: it gets "
        "no node and its budget and strategy apply to nothing (a typo in the selector, or nodes not labelled yet?)",
        "compartment shadowed: its selector zone=a matches 3 selected node(s), but each is placed in compartment "
        "zone-a (a node matching several compartments goes to the safest strategy — fixed, linear, exponential —, "
        "then the smaller budget ceiling, then the name): it gets no node and its budget and strategy apply to "
        "nothing",
    ]
    # a compartment that gets nodes, and a plan of no node at all, say nothing of the kind
    used = policy(compartments=[compartment("zone-a", zone_a, budget(count=1))])
    assert not any(w.startswith("compartment ") for w in plan_of(recipe("r", package("tuned")), ns, pol=used).warnings)
    none = plan_of(recipe("r", package("tuned"), selector={"pool": "storage"}), ns, pol=pol)
    assert not any(w.startswith("compartment ") for w in none.warnings)


def test_s20_percent_rounding_warns():
    pol = DeploymentPolicy.legacy("legacy", budget(percent=33))
    p = plan_of(
        recipe("r", package("tuned"), selector=GPU),
        [node("n1", labels=GPU), node("n2", labels=GPU)] + [node(f"x{i}") for i in range(8)],
        pol=pol,
    )
    c = p.compartments[0]
    assert (c.ceiling, c.matched, [len(b) for b in c.batches]) == (1, 2, [1, 1])
    # 33 % of 2 = 0.66 rounds down to 0: raised to 1, and the plan says so (decision (i))
    assert any("33% of 2 node(s) rounds down to 0" in w for w in p.warnings)
    p100 = plan_of(
        recipe("r", package("tuned")),
        [node(f"n{i}") for i in range(3)],
        pol=DeploymentPolicy.legacy("legacy", budget(percent=100)),
    )
    assert p100.compartments[0].ceiling == 3 and not any("rounds down" in w for w in p100.warnings)
    pol10 = DeploymentPolicy.legacy("legacy", budget(percent=10))
    p10 = plan_of(recipe("r", package("tuned")), [node(f"n{i}") for i in range(5)], pol=pol10)
    assert p10.compartments[0].ceiling == 1
    assert any("10% of 5 node(s) rounds down to 0" in w for w in p10.warnings)


def test_s22_selector_matching_nothing():
    pol = policy(default_strategy=strategy("exponential"), default_budget=budget(percent=25))
    p = plan_of(recipe("r", package("tuned"), selector={"pool": "storage"}), [node(f"n{i}") for i in range(6)], pol=pol)
    assert p.nodes == () and p.compartments == ()
    assert p.summary.nodes == 0 and p.summary.nodesChanging == 0 and p.summary.batches == 0
    assert any("matches no nodes" in w for w in p.warnings)


# ------------------------------------------------------------------------------ warnings


def test_foreign_cordon_and_not_ready_warnings():
    p = plan_of(recipe("r", package("tuned")), [node("admin", unschedulable=True), node("sick", ready=None)])
    assert any("admin is already cordoned by someone else" in w for w in p.warnings)
    assert any("sick is not Ready" in w for w in p.warnings)


def test_nodes_already_cordoned_go_first_and_the_warning_names_who_holds_them():
    """An unschedulable node adds nothing to the compartment's disruption, so with the budget used
    up it is the only node a rollout can start (execute/rollout.py): the plan puts such nodes right
    after unfinished lifecycles, so its batches say what the rollout does; the warning names the
    recipe that holds the cordon when it is one of ours."""
    from reconciler.model.nodestate import cordon_key

    held = node("held", unschedulable=True, annotations={cordon_key("other-recipe"): '{"at": "2026-12-01T00:00:00Z"}'})
    nodes = [node("a0"), node("a1"), node("admin", unschedulable=True), held, node("a2")]
    p = plan_of(recipe("r", package("tuned")), nodes, pol=policy(default_budget=budget(count=1)))
    order = [n for b in p.compartments[0].batches for n in b]
    assert order[:2] == ["admin", "held"] and order[2:] == ["a0", "a1", "a2"]
    assert any("held is already cordoned by recipe(s) other-recipe" in w for w in p.warnings)
    assert any("admin is already cordoned by someone else" in w for w in p.warnings)


def test_our_cordon_removed_by_someone_else_warns():
    pkg = package("tuned")
    p = plan_of(recipe("r", pkg), [node("n1", recipe="r", installed=[pkg], cordoned_by_us=True, unschedulable=False)])
    assert any("our cordon record is present but the node is schedulable" in w for w in p.warnings)


def test_imported_nodes_are_flagged():
    pkg = package("tuned")
    p = plan_of(recipe("r", pkg), [node("n1", recipe="r", installed=[pkg], legacy="skyhook.nvidia.com")])
    n1 = p.node("n1")
    assert n1 is not None and n1.imported and n1.steps == ()
    assert "skyhook.nvidia.com/nodeState_r" in n1.note
    assert any("imported" in w and "n1" in w for w in p.warnings)


def test_malformed_state_skips_the_node_with_a_warning():
    p = plan_of(recipe("r", package("tuned")), [node("n1", annotations={state_key("r"): "[]"})])
    n1 = p.node("n1")
    assert n1 is not None and n1.steps == () and n1.batch == 0 and "malformed" in n1.note
    assert any(w.startswith("node n1 skipped") for w in p.warnings)


def test_sha_mismatch_warning_is_aggregated():
    sha_a, sha_b = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    old, new = package("tuned", sha=sha_a), package("tuned", sha=sha_b)
    p = plan_of(recipe("r", new), [node(f"n{i}", recipe="r", installed=[old]) for i in range(3)])
    hits = [w for w in p.warnings if "containerSHA" in w]
    assert len(hits) == 1 and "3 node(s)" in hits[0]


# ------------------------------------------------------------------------------ summary, hash, json


def test_summary_counts_steps_and_interrupts():
    spec = [package("aaa-pkg", "2.0.0", interrupt="reboot"), package("bbb-pkg", "1.0.0", config={"k": "new"}),
            package("ccc-pkg", uninstall=True)]
    old = [package("aaa-pkg", "1.0.0"), package("bbb-pkg", "1.0.0", config={"k": "old"}), package("ccc-pkg")]
    p = plan_of(recipe("r", *spec), [node("n1", recipe="r", installed=old), node("n2")])
    assert p.summary.actions.model_dump() == {"install": 2, "upgrade": 1, "downgrade": 0, "reconfigure": 1,
                                              "uninstall": 1}
    assert p.summary.interrupts.reboot == 2
    assert p.summary.nodes == p.summary.nodesChanging == 2


def _fleet_for_hash(**kw):
    pkg = package("tuned", interrupt="reboot")
    return recipe("r", pkg, protect={"w": "t"}), [node("n1", **kw), node("n2")], [pod("web", node="n1")]


def test_same_inputs_same_hash_and_bytes():
    r, ns, pods = _fleet_for_hash()
    a = plan_of(r, ns, pods, revision="abc")
    b = plan_of(r, list(reversed(ns)), list(pods), revision="abc")
    assert a.planHash == b.planHash and a.to_json() == b.to_json()
    assert len(a.planHash) == 64


def test_hash_ignores_source_revision_and_unrelated_annotations():
    r, ns, pods = _fleet_for_hash()
    base = plan_of(r, ns, pods).planHash
    assert plan_of(r.model_copy(update={"source": "/elsewhere/r.yaml"}), ns, pods).planHash == base
    assert plan_of(r, ns, pods, revision="deadbeef").planHash == base
    _, ns2, _ = _fleet_for_hash(annotations={"unrelated/thing": "x", state_key("other-recipe"): "{}"})
    assert plan_of(r, ns2, pods).planHash == base


@pytest.mark.parametrize(
    "change",
    [
        {"labels": {"extra": "1"}},
        {"unschedulable": True},
        {"annotations": {state_key("r"): "{}"}},
        {"taints": ["x=y:NoSchedule"]},
        {"created": 5.0},
    ],
    ids=["labels", "unschedulable", "state", "taints", "created"],
)
def test_hash_changes_with_inputs_that_matter(change):
    r, ns, pods = _fleet_for_hash()
    _, ns2, _ = _fleet_for_hash(**change)
    assert plan_of(r, ns2, pods).planHash != plan_of(r, ns, pods).planHash


def test_hash_ignores_volatile_status():
    r, ns, pods = _fleet_for_hash()
    base = plan_of(r, ns, pods, pdbs=[pdb("web", {}, allowed=1)])
    moved = plan_of(r, ns, pods, pdbs=[pdb("web", {}, allowed=0)])
    assert base.planHash == moved.planHash and base.to_json() != moved.to_json()
    _, ns2, _ = _fleet_for_hash(ready=False)
    assert plan_of(r, ns2, pods, pdbs=[pdb("web", {}, allowed=1)]).planHash == base.planHash


def test_hash_changes_with_pod_identity_policy_and_recipe():
    r, ns, pods = _fleet_for_hash()
    base = plan_of(r, ns, pods).planHash
    assert plan_of(r, ns, [pod("web", node="n1", uid="other")]).planHash != base
    assert plan_of(r, ns, pods, pol=DeploymentPolicy.legacy("legacy", budget(count=1))).planHash != base
    assert plan_of(r.model_copy(update={"version": "2"}), ns, pods).planHash != base


def test_json_contract_shape():
    p = plan_of(
        recipe("r", package("tuned", "1.2.0", interrupt=as_interrupt("reboot"))),
        [node("n1", recipe="r", installed=[package("tuned", "1.0.0")])],
        revision="abc",
    )
    d = p.to_dict()
    assert set(d) == {"planHash", "recipe", "policy", "revision", "summary", "compartments", "nodes", "warnings",
                      "outOfScope"}
    step = d["nodes"][0]["steps"][0]
    assert step["from"] == "1.0.0" and step["to"] == "1.2.0" and "from_" not in step
    assert p.to_json().endswith("\n") and Plan.model_validate_json(p.to_json()) == p
    gated = p.model_copy(update={"readinessGate": ReadinessGate(conditionType="example.com/Validated")})
    assert set(gated.to_dict()) == set(d) | {"readinessGate"}  # present only with a gate
    assert Plan.model_validate_json(gated.to_json()) == gated


def test_malformed_state_never_plans_an_owed_interrupt():
    from reconciler.testing import state_annotations

    ann = state_annotations("r", inflight=inflight("interrupt", interrupt="reboot", packages=["tuned"]))
    ann[state_key("r")] = "{broken"
    p = plan_of(recipe("r", package("tuned", interrupt="reboot")), [node("n1", annotations=ann)])
    n1 = p.node("n1")
    assert n1 is not None and n1.interrupt is None and not n1.cordon and n1.batch == 0
    assert p.summary.nodesChanging == 0

"""Node operations as pure node → patch functions (issue #8 item 5)."""

from __future__ import annotations

import json

import pytest

from reconciler.errors import ConflictError, InputError
from reconciler.model.nodestate import (
    RECONCILE_REQUEST_KEY,
    CordonRecord,
    FailureRecord,
    InFlight,
    PackageState,
    config_key,
    cordon_key,
    dump_model,
    dump_state,
    failure_key,
    inflight_key,
    parse_model,
    parse_state,
    state_key,
    status_key,
)
from reconciler.model.observed import NodeInfo
from reconciler.ops.nodeops import (
    IGNORE_LABEL,
    ignore_patch,
    past_the_stages,
    recipes_on,
    rerun_patch,
    reset_package_patch,
    reset_patch,
)
from reconciler.ops.patches import NodeOp, NodePatch, plan_node_patches, select_nodes, write_node_patches
from reconciler.testing import builders as b

R = "gpu-setup"
STATE = dump_state({
    "base|1.0.0": PackageState(name="base", version="1.0.0", stage="config", state="complete"),
    "tune|2.0.0": PackageState(name="tune", version="2.0.0", stage="apply", state="erroring", restarts=3),
})
FAIL = dump_model(FailureRecord(runId="run-1", reason="StageFailed", stage="apply", package="tune", exitCode=3,
                                logTail="boom"))
CORDON = dump_model(CordonRecord(runId="run-1", at=5.0))


def node(name: str = "n1", *, unschedulable: bool = False, labels: dict[str, str] | None = None,
         **ann: str) -> NodeInfo:
    return b.node(name, labels=labels, annotations=ann, unschedulable=unschedulable, resource_version="7")


def ours(**extra: str) -> dict[str, str]:
    return {state_key(R): STATE, config_key(R): "{}", failure_key(R): FAIL, status_key(R): "erroring", **extra}


def test_ignore_and_unignore() -> None:
    p = ignore_patch(node(), True)
    assert p is not None and p.labels == {IGNORE_LABEL: "true"} and p.resource_version == "7"
    assert p.describe() == ('PATCH node/n1 {"metadata":{"labels":{"reconciler.nodewright.dev/ignore":"true"},'
                            '"resourceVersion":"7"}}')
    assert ignore_patch(node(labels={IGNORE_LABEL: "true"}), True) is None
    un = ignore_patch(node(labels={IGNORE_LABEL: "true"}), False)
    assert un is not None and un.labels == {IGNORE_LABEL: None}
    assert ignore_patch(node(), False) is None


def test_reset_releases_our_cordon_only() -> None:
    mine = node(unschedulable=True, labels={status_key(R): "erroring"}, **ours(**{cordon_key(R): CORDON}))
    p = reset_patch(mine, R)
    assert p is not None and p.unschedulable is False and "uncordon" in p.summary
    assert p.annotations == {k: None for k in (state_key(R), config_key(R), failure_key(R), status_key(R),
                                               cordon_key(R))}  # nothing left behind, no reconcileRequest
    assert p.labels == {status_key(R): None}
    assert p.body()["spec"] == {"unschedulable": False}
    theirs = reset_patch(node(unschedulable=True, **ours()), R)
    assert theirs is not None and theirs.unschedulable is None and "stays cordoned" in theirs.summary
    assert reset_patch(node(**{state_key("other"): STATE}), R) is None


def test_reset_blocks_reimport_of_old_state_and_warns_about_inflight() -> None:
    old = {"skyhook.nvidia.com/nodeState_" + R: STATE}
    inflight = dump_model(InFlight(runId="run-9", planHash="h", phase="stages"))
    p = reset_patch(node(**ours(**old, **{inflight_key(R): inflight})), R)
    assert p is not None and p.annotations[state_key(R)] == "{}" and "not imported again" in p.summary
    assert p.warnings and "run run-9, phase stages" in p.warnings[0]
    only_old = reset_patch(node(**old), R)
    assert only_old is not None and only_old.annotations == {state_key(R): "{}", RECONCILE_REQUEST_KEY: "7"}
    assert reset_patch(node(**old, **{state_key(R): "{}"}), R) is None  # idempotent


@pytest.mark.parametrize(("phase", "requested"), [("stages", None), ("interrupt", "2026-12-01T10:00:00.000000Z")])
def test_reset_refuses_a_node_that_owes_an_interrupt_unless_forced(phase: str, requested: str | None) -> None:
    """Issue 12: reset released a node whose reboot was still pending."""
    owed = dump_model(InFlight(runId="run-9", planHash="h", phase=phase, interrupt={"type": "reboot"},  # type: ignore[arg-type]
                               requestedAt=requested))
    pending = node(unschedulable=True, **ours(**{inflight_key(R): owed, cordon_key(R): CORDON}))
    with pytest.raises(InputError, match=r"still owes a reboot .*pass --force"):
        reset_patch(pending, R)
    with pytest.raises(InputError, match="owes a reboot"):
        plan_node_patches([pending], lambda n: reset_patch(n, R))
    forced = reset_patch(pending, R, force=True)
    assert forced is not None and forced.unschedulable is False
    assert any("reboot it owes is dropped" in w for w in forced.warnings)
    # nothing owed yet (before the stages) or owed nothing (no interrupt): no refusal
    for fl in (InFlight(runId="r", planHash="h", phase="drain", interrupt={"type": "reboot"}),
               InFlight(runId="r", planHash="h", phase="stages")):
        assert reset_patch(node(**ours(**{inflight_key(R): dump_model(fl)})), R) is not None


def test_rerun_rewrites_the_entry_and_drops_the_failure() -> None:
    p = rerun_patch(node(**ours()), R, "tune", "config")
    assert p is not None
    new = parse_state(p.annotations[state_key(R)])
    tune = new["tune|2.0.0"]
    # a fresh set of attempts: with restarts 3 kept the rerun would start past stageRetries
    assert (tune.stage, tune.state, tune.restarts) == ("config", "in_progress", 0)
    assert new["base|1.0.0"].state == "complete" and p.annotations[failure_key(R)] is None
    gone = rerun_patch(node(**ours()), R, "tune")
    assert gone is not None and list(parse_state(gone.annotations[state_key(R)])) == ["base|1.0.0"]
    assert rerun_patch(node(**ours()), R, "absent") is None
    assert rerun_patch(node(), R, "tune") is None


def test_rerun_refusals() -> None:
    with pytest.raises(InputError, match="--stage"):
        rerun_patch(node(**ours()), R, "tune", "uninstall")
    with pytest.raises(InputError, match="reconciler import"):
        rerun_patch(node(**{"skyhook.nvidia.com/nodeState_" + R: STATE}), R, "tune")
    two = dump_state({k: PackageState(name="tune", version=v, stage="config", state="complete")
                      for k, v in (("tune|1.0.0", "1.0.0"), ("tune|2.0.0", "2.0.0"))})
    with pytest.raises(InputError, match="--version"):
        rerun_patch(node(**{state_key(R): two}), R, "tune")
    assert rerun_patch(node(**{state_key(R): two}), R, "tune", version="1.0.0") is not None
    drain = dump_model(InFlight(runId="run-2", planHash="h", phase="drain"))
    flying = {state_key(R): STATE, inflight_key(R): drain}  # no failure record: a lifecycle in flight
    with pytest.raises(InputError, match=r"is in flight \(run run-2, phase drain\); let it finish .*pass --force"):
        rerun_patch(node(**flying), R, "tune")
    assert rerun_patch(node(**flying), R, "tune", force=True) is not None
    failed = ours(**{inflight_key(R): drain})  # the lifecycle failed: said so, with the ways on that work
    with pytest.raises(InputError, match=r"lifecycle of recipe gpu-setup failed \(StageFailed at tune apply, run "
                                         r"run-1; phase drain\).*pass --force to rerun tune .*apply --retry-failed"):
        rerun_patch(node(**failed), R, "tune")
    assert rerun_patch(node(**failed), R, "tune", force=True) is not None
    with pytest.raises(InputError, match="node reset"):
        rerun_patch(node(**{state_key(R): "{not json"}), R, "tune")


def _failed_in(phase: str, **kw: object) -> dict[str, str]:
    """A node whose lifecycle failed in ``phase``: failure record, in-flight record (the reboot
    owed), our cordon."""
    fl = InFlight.model_validate({"runId": "run-1", "planHash": "h", "phase": phase, "lifecycle": "run-1",
                                  "interrupt": {"type": "reboot"}, "interruptPackages": ["tune"], **kw})
    return ours(**{inflight_key(R): dump_model(fl), cordon_key(R): CORDON})


@pytest.mark.parametrize("restart", [
    lambda n: rerun_patch(n, R, "tune", force=True),
    lambda n: rerun_patch(n, R, "tune", "config", force=True),
    lambda n: reset_package_patch(n, R, "tune", force=True),
], ids=["rerun", "rerun-stage", "reset-package"])
def test_a_restart_in_a_lifecycle_counts_the_package_restarted_in_the_same_write(restart: NodeOp) -> None:
    """The new-user trial: `package rerun --force` on a failed node, then `apply`, read the failed
    stage pods of the first run back (their names come from the lifecycle). The one write that
    restarts the package also counts it restarted in the lifecycle the next apply resumes
    (InFlight.reruns: part of its stage pod names); everything else of the record is kept."""
    n = node(unschedulable=True, **_failed_in("stages"))
    p = restart(n)
    assert p is not None and "tune restarted (rerun 1: new stage pod names)" in p.summary
    assert "the failed lifecycle (run run-1, phase stages) resumes" in p.summary
    before = parse_model(InFlight, n.annotations[inflight_key(R)])
    after = parse_model(InFlight, p.annotations[inflight_key(R)])
    assert after.reruns == {"tune": 1} and after.model_copy(update={"reruns": None}) == before
    assert p.annotations[failure_key(R)] is None and cordon_key(R) not in p.annotations  # the cordon stays
    again = restart(node(**{**n.annotations, inflight_key(R): p.annotations[inflight_key(R)]}))
    assert again is not None and parse_model(InFlight, again.annotations[inflight_key(R)]).reruns == {"tune": 2}
    # an older record naming its lifecycle by runId only: the name is written out with the count
    legacy = dump_model(InFlight(runId="run-0", planHash="h", phase="stages"))
    old = restart(node(**ours(**{inflight_key(R): legacy})))
    assert old is not None and parse_model(InFlight, old.annotations[inflight_key(R)]).lifecycle == "run-0"
    # no lifecycle on the node: the next apply starts one, whose pods have new names anyway
    fresh = restart(node(**ours()))
    assert fresh is not None and inflight_key(R) not in fresh.annotations


@pytest.mark.parametrize(("phase", "stage", "skipped"), [
    ("wait", None, False), ("drain", "apply", False), ("stages", None, False), ("stages", "config", False),
    ("stages", "post-interrupt", False),
    ("interrupt", None, True), ("interrupt", "apply", True), ("interrupt", "config", True),
    ("interrupt", "interrupt", False), ("interrupt", "post-interrupt", False),
    ("post-interrupt", None, True), ("post-interrupt", "interrupt", True), ("post-interrupt", "post-interrupt", False),
    ("readiness-gate", None, False), ("uncordon", "apply", False),  # it completes; the apply after it runs them
])
def test_past_the_stages(phase: str, stage: str | None, skipped: bool) -> None:
    """A lifecycle resumed at its interrupt or after it runs only what comes next: a restart of an
    earlier stage would be skipped by it."""
    assert past_the_stages(InFlight(runId="r", planHash="h", phase=phase), stage) is skipped  # type: ignore[arg-type]


def test_a_restart_the_lifecycle_would_skip_is_refused_even_forced() -> None:
    requested = _failed_in("interrupt", requestedAt="2026-12-01T10:00:00.000000Z", bootID="b1")
    ops: tuple[NodeOp, ...] = (lambda n: rerun_patch(n, R, "tune", force=True),
                               lambda n: reset_package_patch(n, R, "tune", force=True))
    for op in ops:
        with pytest.raises(InputError, match=r"failed \(StageFailed.*\) and is past the stages of tune \(phase "
                                             r"interrupt; its reboot requested at 2026-12-01T10:00:00.000000Z, not "
                                             r"confirmed yet\).*`reconciler apply --retry-failed`.*node reset n1 "
                                             r"--recipe gpu-setup --force`"):
            op(node(unschedulable=True, **requested))
    # what is still ahead of it is fine
    assert rerun_patch(node(**requested), R, "tune", "post-interrupt", force=True) is not None
    flying = {state_key(R): STATE, inflight_key(R): dump_model(InFlight(runId="run-2", planHash="h",
                                                                         phase="post-interrupt"))}
    with pytest.raises(InputError, match=r"is in flight \(run run-2\) and is past .*first \(`reconciler apply`\)"):
        rerun_patch(node(**flying), R, "tune", "config", force=True)


def test_reset_of_a_failed_node_that_owes_its_reboot_names_the_ways_on() -> None:
    """The refusal stays (the reboot is owed: stages of the lifecycle ran), but it says the
    lifecycle failed and points to what works: a plain apply does not retry a failed node."""
    at_stages = node(unschedulable=True, **_failed_in("stages"))
    with pytest.raises(InputError) as e:
        reset_patch(at_stages, R)
    msg = str(e.value)
    assert "the lifecycle of recipe gpu-setup failed (StageFailed at tune apply, run run-1)" in msg
    assert "still owes a reboot (phase stages; not requested yet" in msg and "let the lifecycle finish" not in msg
    assert "`reconciler apply --retry-failed`" in msg and msg.endswith("or pass --force to reset it anyway")
    assert "`reconciler package rerun tune --recipe gpu-setup --node n1 --force` and then `reconciler apply`" in msg
    # at its interrupt the lifecycle would skip a rerun: not offered
    at_reboot = node(unschedulable=True, **_failed_in("interrupt", requestedAt="2026-12-01T10:00:00.000000Z"))
    with pytest.raises(InputError, match=r"requested at 2026-12-01T10:00:00.000000Z, not confirmed yet") as e:
        reset_patch(at_reboot, R)
    assert "package rerun" not in str(e.value) and "--retry-failed" in str(e.value)
    assert reset_patch(at_stages, R, force=True) is not None


def test_recipes_on_and_select_nodes() -> None:
    n = node(**ours(), **{cordon_key("b"): CORDON, "other/x": "1"})
    assert recipes_on(n) == ["b", R]
    nodes = [node("gpu-a-1"), node("gpu-a-2"), node("cpu-1")]
    assert [x.name for x in select_nodes(nodes, ["gpu-a-.*"])] == ["gpu-a-1", "gpu-a-2"]
    assert [x.name for x in select_nodes(nodes, ["cpu-1", "gpu-a-2"])] == ["gpu-a-2", "cpu-1"]
    with pytest.raises(InputError, match="no node"):
        select_nodes(nodes, ["gpu"])  # regexes match whole names
    with pytest.raises(InputError, match="regular expression"):
        select_nodes(nodes, ["("])


class _Flaky:
    """A cluster whose first write of n1 conflicts (the node changed since it was read)."""

    def __init__(self) -> None:
        self.nodes = {"n1": node(labels={"x": "1"}), "n2": node("n2")}
        self.writes: list[tuple[str, dict[str, str | None] | None, str | None]] = []
        self.conflicted = False

    def get_node(self, name: str) -> NodeInfo:
        n = self.nodes[name]
        return b.node(n.name, labels={**n.labels, IGNORE_LABEL: "true"} if name == "n2" else n.labels,
                      resource_version="8")

    def patch_node(self, name: str, *, annotations: object = None, labels: dict[str, str | None] | None = None,
                   unschedulable: object = None, resource_version: str | None = None) -> NodeInfo:
        if name == "n1" and not self.conflicted:
            self.conflicted = True
            raise ConflictError("changed", 409)
        if name == "n2" and resource_version == "7":
            raise ConflictError("changed", 409)
        self.writes.append((name, labels, resource_version))
        return self.nodes[name]


def test_conflict_rereads_and_recomputes() -> None:
    fake = _Flaky()
    op = lambda n: ignore_patch(n, True)  # noqa: E731
    patches = plan_node_patches(fake.nodes.values(), op)
    assert [p.node for p in patches] == ["n1", "n2"]
    res = write_node_patches(fake, patches, op)  # type: ignore[arg-type]
    assert fake.writes == [("n1", {IGNORE_LABEL: "true"}, "8")]  # retried with the fresh resourceVersion
    assert res.unchanged == ["n2"]  # the re-read showed someone ignored it meanwhile
    assert [p.node for p in res.written] == ["n1"]
    assert json.loads(json.dumps(NodePatch("n", unschedulable=False).to_dict()))["patch"] == {
        "spec": {"unschedulable": False}}


def test_every_record_changing_verb_asks_a_running_controller_for_a_pass() -> None:
    """package rerun and reset --package write RECONCILE_REQUEST_KEY in the same patch, with a value
    that differs from the node's current one (the controller's node trigger compares them); reset
    removes the state record, which the trigger takes as the request (records_removed), and leaves
    no request annotation behind."""
    import dataclasses

    from reconciler.controller.triggers import node_trigger, records_removed

    n = node(unschedulable=True, **ours(**{cordon_key(R): CORDON}))
    for patch in (rerun_patch(n, R, "tune"), reset_package_patch(n, R, "tune")):
        assert patch is not None
        assert patch.annotations[RECONCILE_REQUEST_KEY] == n.resource_version
    reset = reset_patch(n, R)
    assert reset is not None and RECONCILE_REQUEST_KEY not in reset.annotations
    after = dataclasses.replace(n, annotations={k: v for k, v in n.annotations.items() if k not in reset.annotations})
    assert records_removed(n, after) == [R]
    assert "were removed (reconciler reset)" in node_trigger("MODIFIED", n, after, [])
    again = node(**ours(**{RECONCILE_REQUEST_KEY: n.resource_version}))
    p = reset_patch(again, R)
    assert p is not None and p.annotations[RECONCILE_REQUEST_KEY] is None  # an earlier request goes too

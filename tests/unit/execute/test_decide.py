"""Table tests of the lifecycle's pure ownership decisions (execute/decide.py)."""

from __future__ import annotations

import pytest

from reconciler.execute.decide import CordonAction, decide_cordon, decide_release, reboot_confirmed
from reconciler.model.nodestate import RUNTIME_REQUIRED_TAINT_KEY, cordon_key, status_key
from reconciler.model.observed import NodeInfo
from reconciler.model.selector import Taint, Toleration
from reconciler.testing import builders as b

R = "tune"
CLAIM = '{"runId":"run-1"}'
RT = Taint(key=RUNTIME_REQUIRED_TAINT_KEY, value="true", effect="NoSchedule")
GPU = Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")
NW = Taint(key="skyhook.nvidia.com", value="runtime-required", effect="NoSchedule")  # NodeWright's default
NW_OTHER = Taint(key="skyhook.nvidia.com", value="something-else", effect="NoSchedule")


def node(*, unschedulable: bool = False, claims: tuple[str, ...] = (), taints: tuple[Taint, ...] = (),
         statuses: dict[str, str] | None = None, boot: str = "b1", ready: bool | None = True) -> NodeInfo:
    ann = {cordon_key(r): CLAIM for r in claims}
    labels = {status_key(r): s for r, s in (statuses or {}).items()}
    return b.node("n1", labels=labels, annotations=ann, unschedulable=unschedulable, taints=taints, boot_id=boot,
                  ready=ready, resource_version="9")


@pytest.mark.parametrize(("n", "action", "claim", "cordon", "others"), [
    (node(), CordonAction.CORDON, True, True, ()),
    (node(unschedulable=True), CordonAction.SOMEONE_ELSES, False, False, ()),
    (node(unschedulable=True, claims=("other",)), CordonAction.SHARE, True, False, ("other",)),
    (node(unschedulable=True, claims=(R,)), CordonAction.OURS, False, False, ()),
    (node(unschedulable=True, claims=(R, "other")), CordonAction.OURS, False, False, ("other",)),
    # our claim on a schedulable node: someone uncordoned it; cordon again under our claim
    (node(claims=(R,)), CordonAction.OURS, True, True, ()),
    # another recipe's claim on a schedulable node (uncordoned by someone): ours is a fresh cordon
    (node(claims=("other",)), CordonAction.CORDON, True, True, ("other",)),
])
def test_decide_cordon(n: NodeInfo, action: CordonAction, claim: bool, cordon: bool, others: tuple[str, ...]) -> None:
    d = decide_cordon(n, R)
    assert (d.action, d.claim, d.cordon, d.others) == (action, claim, cordon, others)
    if action is CordonAction.SOMEONE_ELSES:
        assert "someone else" in d.detail


@pytest.mark.parametrize(("n", "owns", "rt", "rt_recipes", "uncordon", "others", "taints"), [
    (node(unschedulable=True, claims=(R,)), True, False, (), True, (), None),
    (node(unschedulable=True, claims=(R, "b")), True, False, (), False, ("b",), None),
    (node(unschedulable=True), False, False, (), False, (), None),  # someone else's cordon stays
    (node(unschedulable=False, claims=(R,)), True, False, (), False, (), None),  # already schedulable
    (node(taints=(RT, GPU)), False, True, (R,), False, (), (GPU,)),
    (node(taints=(RT, GPU), statuses={"b": "in_progress"}), False, True, (R, "b"), False, (), None),
    (node(taints=(RT,), statuses={"b": "complete"}), False, True, (R, "b"), False, (), ()),
    (node(taints=(RT,)), False, False, (R,), False, (), None),  # not runtime-required: taint not ours to lift
    (node(taints=(GPU,)), False, True, (R,), False, (), None),  # no taint to remove: no taint write
    # NodeWright's runtime-required taint is honoured too: removed with ours when the node is done
    (node(taints=(NW, GPU)), False, True, (R,), False, (), (GPU,)),
    (node(taints=(RT, NW)), False, True, (R,), False, (), ()),
    (node(taints=(NW_OTHER,)), False, True, (R,), False, (), None),  # another skyhook taint: not ours
    (node(taints=(NW,), statuses={"b": "in_progress"}), False, True, (R, "b"), False, (), None),
])
def test_decide_release(n: NodeInfo, owns: bool, rt: bool, rt_recipes: tuple[str, ...], uncordon: bool,
                        others: tuple[str, ...], taints: tuple[Taint, ...] | None) -> None:
    d = decide_release(n, R, owns_cordon=owns, runtime_required=rt, runtime_required_recipes=rt_recipes)
    assert (d.uncordon, d.others, d.taints) == (uncordon, others, taints)


def test_a_recipe_names_its_own_runtime_required_taints() -> None:
    """``runtimeRequiredTaints`` replaces the defaults: only the named taints hold and are lifted,
    stage pods tolerate them, and a recipe without it hashes as before the field existed."""
    from reconciler.execute.stagework import tolerations
    from reconciler.model.recipe import DEFAULT_RUNTIME_REQUIRED_TAINTS
    from reconciler.testing import recipe

    mine = Taint(key="example.com/provisioning", value="pending", effect="NoSchedule")
    plain = recipe("tune", runtimeRequired=True)
    own = plain.model_copy(update={"runtimeRequiredTaints": (
        Toleration(key="example.com/provisioning", operator="Exists"),)})
    assert plain.required_taints() == DEFAULT_RUNTIME_REQUIRED_TAINTS
    assert plain.is_required_taint(NW) and plain.is_required_taint(RT) and not plain.is_required_taint(NW_OTHER)
    assert own.is_required_taint(mine) and not own.is_required_taint(NW)
    d = decide_release(node(taints=(mine, NW)), R, owns_cordon=False, runtime_required=True,
                       runtime_required_recipes=(R,), required_taint=own.is_required_taint)
    assert d.taints == (NW,)
    assert Toleration(key="example.com/provisioning", operator="Exists") in tolerations(own)
    assert all(t in tolerations(plain) for t in DEFAULT_RUNTIME_REQUIRED_TAINTS)
    assert "runtimeRequiredTaints" not in plain.digest_dump()


@pytest.mark.parametrize(("n", "before", "done"), [
    (node(boot="b2"), "b1", True),
    (node(boot="b1"), "b1", False),
    (node(boot="b2", ready=False), "b1", False),  # rebooted, not Ready yet
    (node(boot="b2", ready=None), "b1", False),
    (node(boot=""), "b1", False),  # bootID unknown: never taken as done
    (node(boot="b2"), "", False),
])
def test_reboot_confirmed(n: NodeInfo, before: str, done: bool) -> None:
    assert reboot_confirmed(n, before) is done


from reconciler.execute.decide import StageVerdict, judge_stage  # noqa: E402

T, G = 100.0, 60.0


@pytest.mark.parametrize(("phase", "reason", "elapsed", "verdict", "why", "wake"), [
    ("missing", "", 5, StageVerdict.MISSING, "", 0),
    ("succeeded", "", 5, StageVerdict.SUCCEEDED, "", 0),
    ("running", "", 10, StageVerdict.RUNNING, "", 90),
    ("running", "", 100, StageVerdict.FAILED, "StageTimeout", 0),
    ("failed", "Error", 10, StageVerdict.FAILED, "Error", 0),
    ("failed", "", 10, StageVerdict.FAILED, "Error", 0),
    ("failed", "", 150, StageVerdict.FAILED, "StageTimeout", 0),
    ("failed", "OOMKilled", 150, StageVerdict.FAILED, "OOMKilled", 0),
    ("pending", "ImagePullBackOff", 30, StageVerdict.RUNNING, "", 30),  # wait for the pull grace
    ("pending", "ImagePullBackOff", 60, StageVerdict.FAILED, "ImagePullBackOff", 0),
    ("pending", "ErrImagePull", 120, StageVerdict.FAILED, "ErrImagePull", 0),  # pull reason wins over timeout
    ("pending", "ContainerCreating", 30, StageVerdict.RUNNING, "", 30),
    # past the pull grace with no pull problem: paced by the stage timeout, never a busy loop
    ("pending", "ContainerCreating", 70, StageVerdict.RUNNING, "", 30),
    ("pending", "", 100, StageVerdict.FAILED, "StageTimeout", 0),
])
def test_judge_stage(phase: str, reason: str, elapsed: float, verdict: StageVerdict, why: str, wake: float) -> None:
    j = judge_stage(phase, reason, elapsed, timeout=T, pull_grace=G)
    assert (j.verdict, j.reason) == (verdict, why)
    if verdict is StageVerdict.RUNNING:
        assert j.wake_in == wake and j.wake_in > 0


# ---- the readiness gate (issue 15)
from reconciler.execute.decide import judge_gate  # noqa: E402
from reconciler.model.observed import NodeCondition  # noqa: E402
from reconciler.model.recipe import ReadinessGate  # noqa: E402

_COND = ReadinessGate(conditionType="example.com/Validated")
_LABELS = ReadinessGate.model_validate({"labelSelector": {"matchLabels": {"nvcre": "pass"}}})
_BOTH = ReadinessGate.model_validate({"conditionType": "example.com/Validated",
                                      "labelSelector": {"matchExpressions": [
                                          {"key": "nvcre", "operator": "In", "values": ["pass", "waived"]}]}})


def _gnode(conditions: tuple[tuple[str, str], ...] = (), labels: dict[str, str] | None = None) -> NodeInfo:
    return b.node("n1", labels=labels, conditions=[NodeCondition(t, s, "R", "m") for t, s in conditions])


@pytest.mark.parametrize(("gate", "node", "ready", "says"), [
    (_COND, _gnode(), False, "absent"),
    (_COND, _gnode((("example.com/Validated", "False"),)), False, "=False (R: m)"),
    (_COND, _gnode((("example.com/Validated", "Unknown"),)), False, "=Unknown"),
    (_COND, _gnode((("example.com/Validated", "True"),)), True, "=True"),
    (_COND, _gnode((("example.com/validated", "True"),)), False, "absent"),  # types are case-sensitive
    (_COND, _gnode((("example.com/Validated", "True"), ("example.com/Validated", "False"))), False, "=False"),
    (_LABELS, _gnode(labels={"nvcre": "fail"}), False, "node has nvcre=fail"),
    (_LABELS, _gnode(labels={}), False, "none of its keys"),
    (_LABELS, _gnode(labels={"nvcre": "pass"}), True, "match"),
    (_BOTH, _gnode((("example.com/Validated", "True"),), {"nvcre": "waived"}), True, "match"),
    (_BOTH, _gnode((("example.com/Validated", "True"),), {"nvcre": "fail"}), False, "do not match"),
    (_BOTH, _gnode((("example.com/Validated", "False"),), {"nvcre": "pass"}), False, "=False"),
])
def test_judge_gate(gate: ReadinessGate, node: NodeInfo, ready: bool, says: str) -> None:
    v = judge_gate(node, gate)
    assert v.ready is ready
    assert says in v.detail


# ---- gate freshness (issue 34): only a validation newer than the work passes
from reconciler.execute.decide import judge_freshness  # noqa: E402
from reconciler.model.nodestate import validated_key  # noqa: E402

WORK = 1_800_000_000.5  # the last stage pod started (sub-second; conditions keep whole seconds)


@pytest.mark.parametrize(("gate", "since", "echo", "armed", "fresh", "says"), [
    (_COND, WORK - 30 * 86400, "", False, False, "before the work it gates"),  # left True a month ago
    (_COND, WORK - 2, "", False, False, "before the work it gates"),
    (_COND, WORK - 0.5, "", False, True, "after the work"),  # the same whole second: the API's precision
    (_COND, WORK + 40, "", False, True, "after the work"),
    (_COND, None, "", False, False, "with no transition time"),
    (_COND, WORK - 86400, "1.2/run-a", False, True, "echoed 1.2/run-a"),  # the validator echoed the token
    (_COND, WORK - 86400, "1.1/run-0", False, False, "before the work"),  # an echo of an earlier gate
    (_COND, WORK - 86400, "", True, True, "since the gate opened"),  # seen unmet since the gate opened
    (_LABELS, None, "", False, False, "labels already matched"),  # labels carry no time
    (_LABELS, None, "1.2/run-a", False, True, "echoed"),
    (_LABELS, None, "", True, True, "since the gate opened"),
])
def test_judge_freshness(gate: ReadinessGate, since: float | None, echo: str, armed: bool, fresh: bool,
                         says: str) -> None:
    conds = [NodeCondition("example.com/Validated", "True", "Validated", "driver 1.0.0 passed", since=since)]
    n = b.node("n1", labels={"nvcre": "pass"}, conditions=conds,
               annotations={validated_key("r"): echo} if echo else {})
    f = judge_freshness(n, gate, recipe="r", token="1.2/run-a", work_start=WORK, armed=armed)
    assert f.fresh is fresh and says in f.detail

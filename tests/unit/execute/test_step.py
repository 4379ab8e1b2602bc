"""Table tests of the lifecycle's pure transition function (execute/machine.py ``step``), phase × event.

Each row gives the node run's memory (its phase and what it holds), what the interpreter observed
(the View: reads answered, eviction answers, the error of the last transition) and the expected
transition: the reads asked for, or the effects in order, the next phase, the outcome and the wake.
Properties checked on every row: ``step`` does not change the memory it is given, the same
arguments give the same transition, and every cluster write has a rollback memory (what the run
keeps if the write fails: the crash points between a record and its effect).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from reconciler.errors import ConflictError, ForbiddenError, NotFoundError, TransientError
from reconciler.execute.effects import (
    NODE_EVENTS,
    WRITES,
    Announce,
    DeleteStage,
    DeleteStages,
    EmitEvent,
    Evict,
    EvictAnswer,
    EvictResult,
    ListPods,
    Log,
    PatchNode,
    ReadNode,
    ReadStage,
    SetCondition,
    StartStage,
    Transition,
    View,
)
from reconciler.execute.machine import EvictTrack, Memory, Outcome, StepContext, step
from reconciler.execute.stagework import build_runs, interrupt_spec
from reconciler.model.nodestate import (
    IGNORE_LABEL,
    CordonRecord,
    FailureRecord,
    InFlight,
    cordon_key,
    dump_model,
    failure_key,
    inflight_key,
    parse_model,
    validate_key,
    validated_key,
)
from reconciler.model.observed import NodeCondition, NodeInfo
from reconciler.model.plan import NodePlan, Step
from reconciler.model.recipe import DrainOptions, Interrupt, ReadinessGate
from reconciler.model.utctime import to_rfc3339
from reconciler.model.vocab import EventKind, FailureReason, Phase
from reconciler.ports import StageStatus
from reconciler.testing import builders as b

R = "tune"
NOW = 1000.0
UTC = 1_800_000_000.0
REBOOT = Interrupt(type="reboot")
RECIPE = b.recipe(R, b.package("drv", "2.0", interrupt="reboot"), selector={"pool": "gpu"}, protect={"protect": "yes"},
                  drain=DrainOptions(timeoutSeconds=100))
STEP = Step(package="drv", action="install", to="2.0", stages=("apply",), reason="new", interrupt=REBOOT)
PLAN = NodePlan(name="n1", compartment="default", batch=1, steps=(STEP,), interrupt=REBOOT, cordon=True)
CTX = StepContext(recipe=RECIPE, run_id="run-1", plan_hash="h" * 64, poll_seconds=5.0)
CLAIM = dump_model(CordonRecord(runId="run-1", at=to_rfc3339(UTC - 50)))
INTERRUPT_POD = interrupt_spec(RECIPE, "n1", PLAN.steps, REBOOT, lifecycle="run-1", agent_image=None).pod_name
# the readiness gate (issue 15): an external validator's condition, 10 minutes
VALIDATED = "example.com/Validated"
GATED = RECIPE.model_copy(update={"readinessGate": ReadinessGate(conditionType=VALIDATED, timeout="10m")})
GCTX = replace(CTX, recipe=GATED)
#: A package without an interrupt (runs before the cordon) beside one with a reboot (issue 34, item 10).
FREE = Step(package="base", action="install", to="1.0", stages=("apply",), reason="new")
BOTH = PLAN.model_copy(update={"steps": (FREE, STEP)})
#: A new lifecycle plans the node from what it records (the planner's function): the recipe of BOTH.
BOTH_CTX = replace(CTX, recipe=b.recipe(R, b.package("base", "1.0"), b.package("drv", "2.0", interrupt="reboot"),
                                        selector={"pool": "gpu"}, protect={"protect": "yes"},
                                        drain=DrainOptions(timeoutSeconds=100)))
NO_INTERRUPT = PLAN.model_copy(update={"interrupt": None, "steps": (STEP.model_copy(update={"interrupt": None}),)})
PASSED = (NodeCondition(VALIDATED, "True", "Validated", "all checks passed"),)
NOT_YET = (NodeCondition(VALIDATED, "False", "Validating", "running checks"),)


def gate_fl(waited: float, *, armed: bool = True) -> InFlight:
    """At the gate for ``waited`` s; the work it holds began 60 s before; ``armed``: the validator was
    seen at work since (what it says next is newer than the work)."""
    timers = {"readiness-gate": to_rfc3339(UTC - waited), "readiness-gate-work": to_rfc3339(UTC - waited - 60)}
    if armed:
        timers["readiness-gate-armed"] = to_rfc3339(UTC - waited)
    return fl("readiness-gate", timers=timers)


def gate_mem(waited: float = 10, *, armed: bool = True) -> Memory:
    return mem(Phase.READINESS_GATE, owns_cordon=True, inflight=gate_fl(waited, armed=armed))


# a validation left True a month ago (issue 34, item 5): it names the driver of the last release
STALE = (NodeCondition(VALIDATED, "True", "Validated", "driver 1.0.0 passed", since=UTC - 30 * 86400),)
TOKEN = "1/run-1"  # the gate's request: the recipe version and the lifecycle


def stale_gate_node(*, echo: str = "", armed: bool = False) -> NodeInfo:
    n = node(unschedulable=True, ours=True, inflight=gate_fl(10, armed=armed), conditions=STALE)
    ann = {**n.annotations, validate_key(R): TOKEN, **({validated_key(R): echo} if echo else {})}
    return replace(n, annotations=ann)


def retried_gate_mem() -> Memory:
    m = gate_mem(601)
    m.lifecycle = "run-2"  # --retry-failed: a new lifecycle on a node that failed at the gate
    return m


def gate_node(conditions: tuple[NodeCondition, ...], waited: float = 10, armed: bool = True, **kw: Any) -> NodeInfo:
    return node(unschedulable=True, ours=True, inflight=gate_fl(waited, armed=armed), conditions=conditions, **kw)


def node(*, unschedulable: bool = False, ours: bool = False, ready: bool | None = True, boot: str = "b1",
         labels: dict[str, str] | None = None, inflight: InFlight | None = None, failed: bool = False,
         conditions: tuple[NodeCondition, ...] = (), since: float = UTC - 10) -> NodeInfo:
    """The node ``n1``; ``since``: when it was created, its Ready condition's last transition."""
    ann: dict[str, str] = {}
    if ours:
        ann[cordon_key(R)] = CLAIM
    if inflight is not None:
        ann[inflight_key(R)] = dump_model(inflight)
    if failed:
        ann[failure_key(R)] = '{"runId":"run-0","reason":"StageFailed"}'
    return b.node("n1", labels={"pool": "gpu", **(labels or {})}, annotations=ann, unschedulable=unschedulable,
                  ready=ready, boot_id=boot, resource_version="7", conditions=conditions, created=since)


def fl(phase: str, **kw: Any) -> InFlight:
    return InFlight.model_validate({"runId": "run-1", "planHash": "h" * 64, "phase": phase, "lifecycle": "run-1",
                                    "interrupt": REBOOT.model_dump(mode="json"), "interruptPackages": ("drv",),
                                    **kw})


WEB = b.pod("web", uid="u-web")
JOB = b.pod("train", namespace="ml", labels={"protect": "yes"}, uid="u-train")


def mem(phase: Phase, **kw: Any) -> Memory:
    m = Memory(phase=phase, lifecycle="run-1", **kw)
    if m.node is None:
        m.node = node(unschedulable=True, ours=True)
    return m


def stages_mem(*, running: bool, attempt: int = 1, started: float = UTC - 10, done: bool = False,
               seen: bool = False, deleted_by: str = "", timers: dict[str, str] | None = None) -> Memory:
    m = mem(Phase.STAGES, owns_cordon=True, inflight=fl("stages", timers=timers or {}))
    runs = build_runs(RECIPE, {}, PLAN.steps)
    runs[0].running, runs[0].attempt, runs[0].started, runs[0].done = running, attempt, started, done
    runs[0].seen, runs[0].deleted_by = seen, deleted_by
    m.runs = runs
    return m


def _lost(t: Transition[Memory], who: str, attempt: int = 2) -> bool:
    """The loss of a stage pod: its attempt counted and recorded (entry restarts, the first start
    as an in-flight timer), a Warning Event naming who deleted it, the replacement created."""
    patch, event, start = t.effects[0], t.effects[1], t.effects[3]
    rec = InFlight.model_validate_json(patch.annotations[inflight_key(R)])
    return (f'"restarts":{attempt - 1}' in patch.annotations["reconciler.nodewright.dev/nodeState_tune"]
            and rec.timers.get(f"drv/apply@{attempt}") == to_rfc3339(UTC - 10)
            and event.reason == "StagePodDeleted" and event.type_ == "Warning" and who in event.message
            and start.spec.attempt == attempt and t.memory.runs[0].attempt == attempt
            and not t.memory.runs[0].seen and t.rollbacks[1].runs[0].attempt == attempt)


def stage_view(status: StageStatus, attempt: int = 1, log: str | None = None, **kw: Any) -> View:
    """The view of the first stage pod's ``status`` (and its log tail when ``log`` is given: read)."""
    m = stages_mem(running=True, attempt=attempt)
    from reconciler.execute.stagework import stage_spec
    spec = stage_spec(RECIPE, "n1", m.runs[0], "apply", lifecycle="run-1", agent_image=None)
    return View(fresh=node(unschedulable=True, ours=True), stages={spec.pod_name: status},
                logs={} if log is None else {spec.pod_name: log}, **kw)


def drain_mem(answer: EvictResult | None = None, **track: Any) -> tuple[Memory, View]:
    m = mem(Phase.DRAIN, owns_cordon=True, inflight=fl("drain", timers={"drain": to_rfc3339(UTC - 10)}))
    m.evictions = {"default/web": EvictTrack(WEB, asked=answer is not None, **track)}
    return m, View(evictions={"default/web": answer} if answer else {})


@dataclass
class Row:
    id: str
    memory: Memory
    view: View
    needs: tuple[type, ...] = ()
    effects: tuple[type, ...] | None = None
    phase: Phase | None = None
    outcome: Outcome = Outcome.RUNNING
    wake: float | str | None = "any"  # offset from NOW, None (ended), or "any"
    again: bool = False
    announce: tuple[EventKind, ...] | None = None
    reason: str = ""
    raises: type | None = None
    check: Any = field(default=None)
    plan: NodePlan = PLAN
    ctx: StepContext = CTX


def _pre_cordon_done() -> Memory:
    m = mem(Phase.PRE_CORDON, inflight=fl("pre-cordon"), node=node(inflight=fl("pre-cordon")))
    runs = build_runs(RECIPE, {}, (FREE,))
    runs[0].done = True
    m.runs = runs
    return m


#: The interrupt requested twice more already (the bound with the default stageRetries 2).
AGAIN_TWICE = {"interrupt@2": to_rfc3339(UTC - 300), "interrupt@3": to_rfc3339(UTC - 30)}


def _replaced_mem() -> Memory:
    m = mem(Phase.WAIT, owns_cordon=True, inflight=fl("wait"))
    m.uid = "uid-old"
    return m


def _two_pdbs() -> tuple[Memory, View]:
    m, v = drain_mem(EvictResult(EvictAnswer.SERVER, "This pod has more than one PodDisruptionBudget"))
    pdbs = (b.pdb("a", {"app": "web"}), b.pdb("b", {"app": "web"}))
    web = replace(WEB, labels={"app": "web"})
    m.evictions["default/web"] = EvictTrack(web, asked=True)
    return m, View(evictions=v.evictions, pdbs=pdbs)


ROWS = [
    # ---- START
    Row("start/nothing-read", Memory(), View(), needs=(ReadNode,), phase=Phase.START),
    Row("start/a-package-without-interrupt->pre-cordon-no-cordon", Memory(), View(nodes=(node(),)),
        effects=(PatchNode, StartStage, Announce), phase=Phase.PRE_CORDON, wake=5.0, plan=BOTH, ctx=BOTH_CTX,
        announce=(EventKind.STAGE_START,),
        check=lambda t: (t.effects[0].unschedulable is None and cordon_key(R) not in t.effects[0].annotations
                         and '"phase":"pre-cordon"' in t.effects[0].annotations[inflight_key(R)]
                         and t.effects[1].spec.package == "base")),
    # ---- PRE-CORDON (issue 34): the package without an interrupt done, then the cordon
    Row("pre-cordon/done->cordon", _pre_cordon_done(), View(fresh=node(inflight=fl("pre-cordon"))),
        effects=(PatchNode, Announce), phase=Phase.WAIT, again=True, plan=BOTH, announce=(EventKind.CORDON,),
        check=lambda t: t.effects[0].unschedulable is True and t.memory.runs == []),
    Row("start/ready-schedulable->cordon", Memory(), View(nodes=(node(),)),
        effects=(PatchNode, Announce), phase=Phase.WAIT, again=True, announce=(EventKind.CORDON,),
        check=lambda t: (t.effects[0].unschedulable is True and cordon_key(R) in t.effects[0].annotations
                         and t.effects[0].resource_version == "7")),
    Row("start/someone-elses-cordon", Memory(), View(nodes=(node(unschedulable=True),)),
        effects=(PatchNode, Announce), phase=Phase.WAIT, again=True,
        check=lambda t: t.effects[0].unschedulable is None and cordon_key(R) not in t.effects[0].annotations
        and not t.memory.owns_cordon),
    # a node that is not Ready (joining: drivers loading) is waited for within timeouts.nodeReady (600 s),
    # counted from its Ready condition's last transition; past it, never started: waiting, not failed
    Row("start/not-ready->waits-for-it", Memory(), View(nodes=(node(ready=False),)),
        effects=(Announce,), phase=Phase.START, wake=5.0, announce=(EventKind.WAIT,),
        check=lambda t: "NodeNotReady" in t.effects[0].detail and "600 s" in t.effects[0].detail),
    Row("start/not-ready-past-the-bound->waiting-nothing-started", Memory(),
        View(nodes=(node(ready=False, since=UTC - 601),)),
        effects=(Announce,), outcome=Outcome.WAITING, wake=None, announce=(EventKind.NOT_STARTED,),
        check=lambda t: "NodeNotReady" in t.memory.message and t.memory.failure is None),
    Row("start/in-flight-not-ready-past-the-bound->failed-with-its-readiness", Memory(),
        View(nodes=(node(unschedulable=True, ours=True, ready=False, since=UTC - 601, inflight=fl("drain")),)),
        effects=(PatchNode, SetCondition, EmitEvent, Announce), outcome=Outcome.FAILED, wake=None,
        reason=FailureReason.NODE_NOT_READY,
        check=lambda t: (t.memory.failure.ready, t.memory.failure.uid) == ("False", "uid-n1")),
    Row("start/ignored->left", Memory(), View(nodes=(node(labels={IGNORE_LABEL: "true"}),)),
        effects=(Announce,), outcome=Outcome.LEFT, wake=None, announce=(EventKind.LEFT,)),
    Row("start/left-selector-holding-our-cordon->released", Memory(),
        View(nodes=(node(unschedulable=True, ours=True, labels={"pool": "cpu"}),)),
        effects=(PatchNode, Announce, Announce), outcome=Outcome.LEFT, wake=None,
        check=lambda t: t.effects[0].unschedulable is False),
    Row("start/resume-interrupt", Memory(),
        View(nodes=(node(unschedulable=True, ours=True, inflight=fl("interrupt", requestedAt=to_rfc3339(UTC))),)),
        effects=(Announce,), phase=Phase.INTERRUPT, wake=0.0, announce=(EventKind.RESUME,)),
    # ---- CORDON without a drain (config-only): nothing disruptive before the first stage
    Row("cordon/no-cordon-needed->first-stage-carries-the-records", Memory(phase=Phase.CORDON, lifecycle="run-1"),
        View(fresh=node()), effects=(PatchNode, StartStage, Announce), phase=Phase.STAGES, wake=5.0,
        plan=PLAN.model_copy(update={"cordon": False, "interrupt": None}),
        check=lambda t: t.effects[0].unschedulable is None and inflight_key(R) in t.effects[0].annotations),
    # ---- WAIT
    Row("wait/protected-pod->wait", mem(Phase.WAIT, owns_cordon=True, inflight=fl("wait", timers={
        "wait": to_rfc3339(UTC - 10)})), View(pod_lists=((JOB,),)),
        effects=(Announce,), phase=Phase.WAIT, wake=30.0, announce=(EventKind.WAIT,)),
    Row("wait/protected-pod-past-limit->blocked", mem(Phase.WAIT, owns_cordon=True, waiting_logged=True,
        inflight=fl("wait", timers={
        "wait": to_rfc3339(UTC - 4000)})), View(pod_lists=((JOB,),), fresh=node(unschedulable=True, ours=True)),
        effects=(PatchNode, Announce, Announce), outcome=Outcome.BLOCKED, wake=None,
        check=lambda t: t.effects[0].unschedulable is False),
    Row("wait/evictable-pod->drain-record-and-evict", mem(Phase.WAIT, owns_cordon=True, inflight=fl("wait")),
        View(pod_lists=((WEB,),)), effects=(PatchNode, Evict), phase=Phase.DRAIN, again=True),
    Row("wait/nothing-to-evict->read-node", mem(Phase.WAIT, owns_cordon=True, inflight=fl("wait")),
        View(pod_lists=((),)), needs=(ReadNode,), phase=Phase.WAIT),
    Row("wait/nothing-to-evict->first-stage", mem(Phase.WAIT, owns_cordon=True, inflight=fl("wait")),
        View(pod_lists=((),), nodes=(node(unschedulable=True, ours=True, inflight=fl("wait")),)),
        effects=(Announce, PatchNode, StartStage, Announce), phase=Phase.STAGES, wake=5.0,
        announce=(EventKind.DRAINED, EventKind.STAGE_START)),
    Row("wait/uncordoned-by-someone->recordon", mem(Phase.WAIT, owns_cordon=True, inflight=fl("wait")),
        View(pod_lists=((),), nodes=(node(unschedulable=False, ours=True, inflight=fl("wait")),)),
        effects=(PatchNode, Announce), phase=Phase.DRAIN, wake=0.0,
        check=lambda t: t.effects[0].unschedulable is True and t.memory.recordons == 1
        and cordon_key(R) not in (t.effects[0].annotations or {})),  # our claim is on the node: kept
    # `node reset` during the wait removed our records and released the node: the cordon taken again
    # carries our claim again, so it is never a cordon of ours without its record (world-moves sweep)
    Row("wait/reset-released-the-node->recordon-with-our-claim", mem(Phase.WAIT, owns_cordon=True, inflight=fl("wait")),
        View(pod_lists=((),), nodes=(node(unschedulable=False),)),
        effects=(PatchNode, Announce), phase=Phase.DRAIN, wake=0.0,
        check=lambda t: t.effects[0].unschedulable is True and cordon_key(R) in (t.effects[0].annotations or {})),
    # another machine under the node's name (a new UID): the old lifecycle's stage pods go first — one
    # it created after the replacement runs on the new machine (world-moves sweep) — then from scratch
    Row("wait/another-machine->old-pods-deleted-new-lifecycle", _replaced_mem(),
        View(pod_lists=((),), nodes=(replace(node(unschedulable=True, ours=True), uid="uid-new"),)),
        effects=(Announce, DeleteStages), phase=Phase.START, again=True, announce=(EventKind.REPLACED,),
        check=lambda t: t.memory.uid == "uid-new" and t.memory.lifecycle == "run-1-uid-new"
        and t.rollbacks[1].uid == "uid-old"),
    # ---- DRAIN: eviction answers
    # one look at the node's pods answers for every pod evicted, even one (the watch store holds them)
    Row("drain/accepted->look-at-the-nodes-pods", *drain_mem(EvictResult(EvictAnswer.ACCEPTED)),
        needs=(ListPods,), phase=Phase.DRAIN),
    Row("drain/accepted-and-gone->stages", drain_mem(EvictResult(EvictAnswer.ACCEPTED))[0],
        View(evictions={"default/web": EvictResult(EvictAnswer.ACCEPTED)}, pod_lists=((),),
             nodes=(node(unschedulable=True, ours=True, inflight=fl("drain")),)),
        effects=(Announce, Announce, PatchNode, StartStage, Announce), phase=Phase.STAGES,
        announce=(EventKind.EVICT, EventKind.DRAINED, EventKind.STAGE_START)),
    Row("drain/429-pdb->retry-later", *drain_mem(EvictResult(EvictAnswer.TOO_MANY, "budget", disruption_budget=True)),
        effects=(Announce,), phase=Phase.DRAIN, wake=5.0, announce=(EventKind.EVICT_REFUSED,),
        check=lambda t: t.memory.evictions["default/web"].attempts == 1 and t.effects[0].detail.startswith(
            "default/web: budget; retrying every 5 s until the drain timeout")),
    Row("drain/429-pdb-again->retried-silently",
        *drain_mem(EvictResult(EvictAnswer.TOO_MANY, "budget", disruption_budget=True), attempts=1),
        effects=(), phase=Phase.DRAIN, wake=5.0,  # said once per pod and drain
        check=lambda t: t.memory.evictions["default/web"].attempts == 2),
    Row("drain/404->gone", drain_mem(EvictResult(EvictAnswer.NOT_FOUND))[0],
        View(evictions={"default/web": EvictResult(EvictAnswer.NOT_FOUND)},
             nodes=(node(unschedulable=True, ours=True, inflight=fl("drain")),)),
        phase=Phase.STAGES, announce=(EventKind.DRAINED, EventKind.STAGE_START)),
    Row("drain/409-same-uid->retry", drain_mem(EvictResult(EvictAnswer.CONFLICT, "rv"))[0],
        View(evictions={"default/web": EvictResult(EvictAnswer.CONFLICT, "rv")}, pods={("default", "web"): WEB}),
        effects=(), phase=Phase.DRAIN, wake=5.0),
    Row("drain/403-namespace-terminating->retry",
        *drain_mem(EvictResult(EvictAnswer.FORBIDDEN, "terminating", reason="NamespaceTerminating")),
        effects=(), phase=Phase.DRAIN, wake=5.0),
    Row("drain/403->failed", *drain_mem(EvictResult(EvictAnswer.FORBIDDEN, "no")),
        effects=(PatchNode, SetCondition, EmitEvent, Announce), outcome=Outcome.FAILED, wake=None,
        reason=FailureReason.FORBIDDEN),
    Row("drain/500-two-pdbs->failed", *_two_pdbs(),
        effects=(PatchNode, SetCondition, EmitEvent, Announce), outcome=Outcome.FAILED, wake=None,
        reason=FailureReason.MULTIPLE_PDBS),
    Row("drain/timeout->failed", mem(Phase.DRAIN, owns_cordon=True, inflight=fl("drain", timers={
        "drain": to_rfc3339(UTC - 101)}), evictions={"default/web": EvictTrack(WEB, evicted=True)}),
        View(pod_lists=((WEB,),), pdbs=()),
        effects=(PatchNode, SetCondition, EmitEvent, Announce), outcome=Outcome.FAILED, wake=None,
        reason=FailureReason.DRAIN_TIMEOUT),
    Row("drain/429-retry-after-longer-than-the-pause", *drain_mem(EvictResult(EvictAnswer.TOO_MANY, "slow down",
                                                                          retry_after=30.0)),
        effects=(Announce,), phase=Phase.DRAIN, wake=5.0,  # the drain's poll comes first; the next try waits 30 s
        announce=(EventKind.EVICT_REFUSED,),
        check=lambda t: t.memory.evictions["default/web"].next_try == NOW + 30.0),
    Row("drain/500-one-pdb->retried", drain_mem(EvictResult(EvictAnswer.SERVER, "etcd timeout"))[0],
        View(evictions={"default/web": EvictResult(EvictAnswer.SERVER, "etcd timeout")},
             pdbs=(b.pdb("a", {"app": "web"}),)),
        effects=(), phase=Phase.DRAIN, check=lambda t: t.memory.outcome is Outcome.RUNNING),
    Row("drain/unmanaged-pod->refused-and-released", mem(Phase.DRAIN, owns_cordon=True, inflight=fl("drain")),
        View(pod_lists=((replace(WEB, owners=()),),), fresh=node(unschedulable=True, ours=True)),
        effects=(PatchNode, Announce, SetCondition, EmitEvent, Announce), outcome=Outcome.FAILED, wake=None,
        reason=FailureReason.DRAIN_REFUSED, check=lambda t: t.effects[0].unschedulable is False),
    Row("drain/protected-pod-appeared->wait-again", mem(Phase.DRAIN, owns_cordon=True, inflight=fl("drain")),
        View(pod_lists=((JOB,), (JOB,))), effects=(Announce,), phase=Phase.WAIT, announce=(EventKind.WAIT,)),
    # ---- STAGES
    Row("stages/running->look", stages_mem(running=True), View(fresh=node(unschedulable=True, ours=True)),
        needs=(ReadStage,), phase=Phase.STAGES),
    Row("stages/running-still->poll", stages_mem(running=True), stage_view(StageStatus("running", started=UTC - 10)),
        effects=(), phase=Phase.STAGES, wake=5.0),
    Row("stages/succeeded->interrupt-needs-node", stages_mem(running=True),
        stage_view(StageStatus("succeeded", started=UTC - 10)), needs=(ReadNode,), phase=Phase.STAGES),
    Row("stages/succeeded->reboot-requested", stages_mem(running=True),
        stage_view(StageStatus("succeeded", started=UTC - 10),
                   nodes=(node(unschedulable=True, ours=True, inflight=fl("stages"), boot="b1"),)),
        effects=(Announce, PatchNode, StartStage, Announce), phase=Phase.INTERRUPT, wake=5.0,
        announce=(EventKind.STAGE_END, EventKind.INTERRUPT),
        check=lambda t: t.memory.inflight.bootID == "b1" and t.memory.inflight.requestedAt),
    Row("stages/failed-retries-left->retry", stages_mem(running=True),
        stage_view(StageStatus("failed", exit_code=3, started=UTC - 10)),
        effects=(PatchNode, Announce), phase=Phase.STAGES, wake=10.0, announce=(EventKind.STAGE_RETRY,)),
    # the failing container's log is a request on a real cluster: read only for the failure record
    Row("stages/failed-no-retries->reads-its-log", stages_mem(running=True, attempt=3),
        stage_view(StageStatus("failed", exit_code=3, started=UTC - 10), attempt=3),
        needs=(ReadStage,), check=lambda t: t.needs[0].log and t.memory.runs[0].attempt == 3),
    Row("stages/failed-no-retries->failed", stages_mem(running=True, attempt=3),
        stage_view(StageStatus("failed", exit_code=3, started=UTC - 10), attempt=3, log="modprobe: error"),
        effects=(PatchNode, SetCondition, EmitEvent, Announce), outcome=Outcome.FAILED, wake=None,
        reason=FailureReason.STAGE_FAILED,
        check=lambda t: parse_model(FailureRecord, t.effects[0].annotations[failure_key(R)]).logTail
        == "modprobe: error"),
    Row("stages/timeout-last-attempt->failed", stages_mem(running=True, attempt=3, started=UTC - 4000),
        stage_view(StageStatus("running", started=UTC - 4000), attempt=3, log=""),
        effects=(PatchNode, SetCondition, EmitEvent, Announce, DeleteStage), outcome=Outcome.FAILED, wake=None,
        reason=FailureReason.STAGE_TIMEOUT),
    Row("stages/image-pull-stuck->failed", stages_mem(running=True, attempt=3, started=UTC - 120),
        stage_view(StageStatus("pending", reason="ImagePullBackOff", started=UTC - 120), attempt=3, log=""),
        effects=(PatchNode, SetCondition, EmitEvent, Announce, DeleteStage), outcome=Outcome.FAILED, wake=None,
        reason=FailureReason.IMAGE_PULL_BACK_OFF),
    Row("stages/left-selector-before-any-stage->released", stages_mem(running=False),
        View(fresh=node(unschedulable=True, ours=True, labels={"pool": "cpu"})),
        effects=(PatchNode, Announce, Announce), outcome=Outcome.LEFT, wake=None,
        announce=(EventKind.UNCORDON, EventKind.LEFT), check=lambda t: t.effects[0].unschedulable is False),
    Row("stages/left-selector-after-a-stage->keeps-the-owed-reboot", stages_mem(running=False, done=True),
        View(nodes=(node(unschedulable=True, ours=True, labels={"pool": "cpu"}, inflight=fl("stages")),)),
        outcome=Outcome.LEFT, wake=None, announce=(EventKind.OWED,),
        check=lambda t: not any(isinstance(e, PatchNode) and e.unschedulable is False for e in t.effects)),
    Row("stages/missing-pod->start-again", stages_mem(running=True), stage_view(StageStatus("missing")),
        effects=(StartStage,), phase=Phase.STAGES, wake=5.0),
    # a stage pod deleted by someone else (issue 34, item 4): seen being deleted, then gone
    Row("stages/pod-being-deleted->who-noted-wait", stages_mem(running=True, seen=True),
        stage_view(StageStatus("running", started=UTC - 10, deleting="EvictionByEvictionAPI: Eviction API")),
        effects=(), phase=Phase.STAGES, wake=5.0,
        check=lambda t: t.memory.runs[0].deleted_by == "EvictionByEvictionAPI: Eviction API"),
    Row("stages/seen-pod-gone->lost-counted-event-made-again", stages_mem(running=True, seen=True,
                                                                          deleted_by="DeletionByPodGC: gc"),
        stage_view(StageStatus("missing")),
        effects=(PatchNode, EmitEvent, Announce, StartStage, Announce), phase=Phase.STAGES, wake=5.0,
        announce=(EventKind.STAGE_LOST, EventKind.STAGE_START), check=lambda t: _lost(t, "DeletionByPodGC: gc")),
    Row("stages/seen-pod-gone-unseen-deleter->lost-who-unknown", stages_mem(running=True, seen=True),
        stage_view(StageStatus("missing")),
        effects=(PatchNode, EmitEvent, Announce, StartStage, Announce), phase=Phase.STAGES,
        check=lambda t: _lost(t, "no look caught it being deleted")),
    Row("stages/seen-pod-gone-last-attempt->failed-stage-pod-deleted", stages_mem(running=True, seen=True, attempt=3),
        stage_view(StageStatus("missing"), attempt=3),
        effects=(PatchNode, SetCondition, EmitEvent, Announce), outcome=Outcome.FAILED, wake=None,
        reason=FailureReason.STAGE_POD_DELETED),
    # its replacement's timeout counts from the first pod's start (the in-flight timer of attempt 2)
    Row("stages/replacement-times-out-from-the-first-start", stages_mem(
        running=True, attempt=2, started=UTC - 100, timers={"drv/apply@2": to_rfc3339(UTC - 1801)}),
        stage_view(StageStatus("running", started=UTC - 100), attempt=2),
        effects=(PatchNode, DeleteStage, Announce), phase=Phase.STAGES, announce=(EventKind.STAGE_RETRY,),
        check=lambda t: "StageTimeout" in t.effects[2].detail),
    Row("stages/replacement-wakes-by-the-first-start", stages_mem(
        running=True, attempt=2, started=UTC - 100, timers={"drv/apply@2": to_rfc3339(UTC - 1797)}),
        stage_view(StageStatus("running", started=UTC - 100), attempt=2),
        effects=(), phase=Phase.STAGES, wake=3.0),
    # ---- INTERRUPT
    Row("interrupt/rebooted->post-interrupt", mem(Phase.INTERRUPT, owns_cordon=True,
        inflight=fl("interrupt", bootID="b1", requestedAt=to_rfc3339(UTC - 60))),
        View(nodes=(node(unschedulable=True, ours=True, boot="b2",
                         inflight=fl("interrupt", bootID="b1", requestedAt=to_rfc3339(UTC - 60))),)),
        effects=(Announce,), phase=Phase.POST_INTERRUPT, wake=0.0, announce=(EventKind.REBOOTED,)),
    Row("interrupt/reboot-timeout->failed", mem(Phase.INTERRUPT, owns_cordon=True,
        inflight=fl("interrupt", bootID="b1", requestedAt=to_rfc3339(UTC - 901))),
        View(nodes=(node(unschedulable=True, ours=True, boot="b1",
                         inflight=fl("interrupt", bootID="b1", requestedAt=to_rfc3339(UTC - 901))),),
             stages={INTERRUPT_POD: StageStatus("running", started=UTC - 900)}),
        effects=(PatchNode, SetCondition, EmitEvent, Announce), outcome=Outcome.FAILED, wake=None,
        reason=FailureReason.REBOOT_TIMEOUT),
    Row("interrupt/reboot-pending->look-at-the-pod", mem(Phase.INTERRUPT, owns_cordon=True,
        inflight=fl("interrupt", bootID="b1", requestedAt=to_rfc3339(UTC - 30))),
        View(nodes=(node(unschedulable=True, ours=True, boot="b1",
                         inflight=fl("interrupt", bootID="b1", requestedAt=to_rfc3339(UTC - 30))),)),
        needs=(ReadStage,), phase=Phase.INTERRUPT, check=lambda t: not t.needs[0].log),
    # the reboot ends the interrupt pod (failed): nothing reads its log, the node's boot ID tells
    Row("interrupt/reboot-pod-failed->waits-for-the-boot-id", mem(Phase.INTERRUPT, owns_cordon=True,
        inflight=fl("interrupt", bootID="b1", requestedAt=to_rfc3339(UTC - 30))),
        View(nodes=(node(unschedulable=True, ours=True, boot="b1",
                         inflight=fl("interrupt", bootID="b1", requestedAt=to_rfc3339(UTC - 30))),),
             stages={INTERRUPT_POD: StageStatus("failed", exit_code=137, started=UTC - 30)}),
        effects=(), phase=Phase.INTERRUPT, wake=5.0),
    # the interrupt pod gone before it acted (a crash before it was made, or deleted by someone else):
    # requested again, its number recorded, at most max(1, stageRetries) times (world-moves sweep)
    Row("interrupt/reboot-pod-gone->requested-again-counted", mem(Phase.INTERRUPT, owns_cordon=True,
        inflight=fl("interrupt", bootID="b1", requestedAt=to_rfc3339(UTC - 30))),
        View(nodes=(node(unschedulable=True, ours=True, boot="b1",
                         inflight=fl("interrupt", bootID="b1", requestedAt=to_rfc3339(UTC - 30))),),
             stages={INTERRUPT_POD: StageStatus("missing")}),
        effects=(PatchNode, StartStage, Announce), phase=Phase.INTERRUPT, wake=5.0,
        check=lambda t: t.memory.inflight.timers == {"interrupt@2": to_rfc3339(UTC)}
        and t.memory.inflight.requestedAt == to_rfc3339(UTC)),
    Row("interrupt/reboot-pod-gone-past-the-bound->failed", mem(Phase.INTERRUPT, owns_cordon=True,
        inflight=fl("interrupt", bootID="b1", requestedAt=to_rfc3339(UTC - 30), timers=AGAIN_TWICE)),
        View(nodes=(node(unschedulable=True, ours=True, boot="b1",
                         inflight=fl("interrupt", bootID="b1", requestedAt=to_rfc3339(UTC - 30), timers=AGAIN_TWICE)),),
             stages={INTERRUPT_POD: StageStatus("missing")}),
        effects=(PatchNode, SetCondition, EmitEvent, Announce), outcome=Outcome.FAILED, wake=None,
        reason=FailureReason.STAGE_POD_DELETED),
    Row("error/transient-in-drain->retry", mem(Phase.DRAIN), View(error=TransientError("reset", 0, "")),
        effects=(Log,), phase=Phase.DRAIN, check=lambda t: t.memory.streak == 1),
    Row("error/transient-in-uncordon->retry", mem(Phase.UNCORDON),
        View(error=TransientError("reset", 0, "")), effects=(Log,), phase=Phase.UNCORDON),
    # ---- POST-INTERRUPT
    Row("post-interrupt/starts-the-post-interrupt-stage", mem(Phase.POST_INTERRUPT, owns_cordon=True,
        inflight=fl("post-interrupt")), View(fresh=node(unschedulable=True, ours=True)),
        effects=(PatchNode, StartStage, Announce), phase=Phase.POST_INTERRUPT, wake=5.0,
        announce=(EventKind.STAGE_START,),
        check=lambda t: t.effects[1].spec.stage == "post-interrupt"),
    # ---- READINESS GATE (issue 15): held cordoned until the validator's condition is True
    Row("stages/succeeded-with-a-gate->gate-recorded-cordon-kept", stages_mem(running=True),
        stage_view(StageStatus("succeeded", started=UTC - 10),
                   nodes=(node(unschedulable=True, ours=True, inflight=fl("stages")),)),
        effects=(Announce, PatchNode, Announce), phase=Phase.READINESS_GATE, wake=5.0, plan=NO_INTERRUPT, ctx=GCTX,
        announce=(EventKind.STAGE_END, EventKind.GATE),
        check=lambda t: (t.memory.inflight.phase is Phase.READINESS_GATE
                         and t.memory.inflight.timers["readiness-gate"] == to_rfc3339(UTC)
                         and t.memory.inflight.timers["readiness-gate-work"] == to_rfc3339(UTC - 10)
                         and t.memory.inflight.timers["readiness-gate-armed"] == to_rfc3339(UTC)
                         and t.effects[1].annotations[validate_key(R)] == TOKEN
                         and t.effects[1].unschedulable is None and t.effects[1].taints is None
                         and inflight_key(R) in t.effects[1].annotations and t.memory.owns_cordon)),
    # a validation older than the work does not pass the gate (issue 34): held, the request written
    Row("stages/succeeded-with-a-gate-and-a-stale-condition->held", stages_mem(running=True),
        stage_view(StageStatus("succeeded", started=UTC - 10),
                   nodes=(node(unschedulable=True, ours=True, inflight=fl("stages"), conditions=STALE),)),
        effects=(Announce, PatchNode, Announce), phase=Phase.READINESS_GATE, wake=5.0, plan=NO_INTERRUPT, ctx=GCTX,
        announce=(EventKind.STAGE_END, EventKind.GATE),
        check=lambda t: ("before the work it gates" in t.effects[2].detail
                         and "readiness-gate-armed" not in t.memory.inflight.timers
                         and t.effects[1].annotations[validate_key(R)] == TOKEN)),
    Row("stages/succeeded-with-a-gate-validated-after-the-work->passes-at-once", stages_mem(running=True),
        stage_view(StageStatus("succeeded", started=UTC - 10), nodes=(
            node(unschedulable=True, ours=True, inflight=fl("stages"),
                 conditions=(replace(PASSED[0], since=UTC - 3),)),) * 2),
        plan=NO_INTERRUPT, ctx=GCTX, outcome=Outcome.COMPLETE, wake=None,
        announce=(EventKind.STAGE_END, EventKind.GATE_PASSED, EventKind.UNCORDON, EventKind.COMPLETE)),
    Row("stages/succeeded-without-a-gate->uncordon", stages_mem(running=True),
        stage_view(StageStatus("succeeded", started=UTC - 10),
                   nodes=(node(unschedulable=True, ours=True, inflight=fl("stages")),)),
        phase=None, plan=NO_INTERRUPT, outcome=Outcome.COMPLETE, wake=None,
        announce=(EventKind.STAGE_END, EventKind.UNCORDON, EventKind.COMPLETE)),
    Row("gate/reads-the-node-afresh", gate_mem(), View(fresh=gate_node(PASSED)), needs=(ReadNode,),
        phase=Phase.READINESS_GATE, ctx=GCTX),
    Row("gate/condition-absent->wait", gate_mem(), View(nodes=(gate_node(()),)), effects=(),
        phase=Phase.READINESS_GATE, wake=5.0, ctx=GCTX),
    Row("gate/condition-false->wait", gate_mem(), View(nodes=(gate_node(NOT_YET),)), effects=(),
        phase=Phase.READINESS_GATE, wake=5.0, ctx=GCTX),
    Row("gate/near-the-timeout->wakes-at-it", gate_mem(598), View(nodes=(gate_node(NOT_YET, 598),)), effects=(),
        phase=Phase.READINESS_GATE, wake=2.0, ctx=GCTX),
    Row("gate/condition-true->needs-the-uncordon-read", gate_mem(), View(nodes=(gate_node(PASSED),)),
        needs=(ReadNode,), phase=Phase.READINESS_GATE, ctx=GCTX),
    Row("gate/condition-true->uncordoned-complete", gate_mem(),
        View(nodes=(gate_node(PASSED), gate_node(PASSED))),
        effects=(Announce, PatchNode, Announce, DeleteStages, Announce), outcome=Outcome.COMPLETE, wake=None,
        announce=(EventKind.GATE_PASSED, EventKind.UNCORDON, EventKind.COMPLETE), ctx=GCTX,
        check=lambda t: t.effects[1].unschedulable is False and inflight_key(R) in t.effects[1].annotations
        and t.effects[1].annotations[inflight_key(R)] is None),
    Row("gate/stale-condition-true->waits", gate_mem(armed=False), View(nodes=(stale_gate_node(),)), effects=(),
        phase=Phase.READINESS_GATE, wake=5.0, ctx=GCTX),
    Row("gate/stale-condition-but-the-token-echoed->passes", gate_mem(armed=False),
        View(nodes=(stale_gate_node(echo=TOKEN),) * 2), outcome=Outcome.COMPLETE, wake=None, ctx=GCTX,
        announce=(EventKind.GATE_PASSED, EventKind.UNCORDON, EventKind.COMPLETE),
        check=lambda t: t.effects[1].annotations[validate_key(R)] is None and "echoed" in t.effects[0].detail),
    Row("gate/stale-condition-and-an-old-token-echoed->waits", gate_mem(armed=False),
        View(nodes=(stale_gate_node(echo="1/run-0"),)), effects=(), phase=Phase.READINESS_GATE, ctx=GCTX),
    Row("gate/seen-unmet->armed-recorded-once", gate_mem(armed=False),
        View(nodes=(gate_node(NOT_YET, armed=False),)), effects=(PatchNode,), phase=Phase.READINESS_GATE, wake=5.0,
        ctx=GCTX, check=lambda t: "readiness-gate-armed" in t.memory.inflight.timers),
    Row("gate/timeout->failed-stays-cordoned", gate_mem(601), View(nodes=(gate_node(NOT_YET, 601),)),
        effects=(PatchNode, SetCondition, EmitEvent, Announce), outcome=Outcome.FAILED, wake=None, ctx=GCTX,
        reason=FailureReason.READINESS_GATE_TIMEOUT,
        check=lambda t: t.effects[0].unschedulable is None and inflight_key(R) not in t.effects[0].annotations
        and "Validating" in t.memory.message),
    Row("gate/retried-lifecycle->new-record-and-timer", retried_gate_mem(),
        View(nodes=(gate_node(NOT_YET, 601, failed=True),)), effects=(PatchNode, Announce),
        phase=Phase.READINESS_GATE, wake=5.0, ctx=GCTX, announce=(EventKind.GATE,),
        check=lambda t: t.memory.inflight.lifecycle == "run-2"
        and t.memory.inflight.timers["readiness-gate"] == to_rfc3339(UTC)),
    Row("gate/left-the-selector->released", gate_mem(), View(nodes=(gate_node(NOT_YET, labels={"pool": "cpu"}),)),
        effects=(PatchNode, Announce, Announce), outcome=Outcome.LEFT, wake=None, ctx=GCTX,
        check=lambda t: t.effects[0].unschedulable is False),
    Row("gate/recipe-dropped-its-gate->uncordon", gate_mem(), View(nodes=(gate_node(NOT_YET),)),
        outcome=Outcome.COMPLETE, wake=None, announce=(EventKind.UNCORDON, EventKind.COMPLETE)),
    Row("start/resume-at-the-readiness-gate", Memory(), View(nodes=(gate_node(NOT_YET, 300),)),
        effects=(Announce,), phase=Phase.READINESS_GATE, wake=0.0, announce=(EventKind.RESUME,), ctx=GCTX),
    # ---- FAILING (the failure records were refused; tried again)
    Row("failing/records-the-failure-again", mem(Phase.FAILING, owns_cordon=True, failure_args=(
        "StageFailed", "x", {"keep_cordon": True, "stage": "apply", "package": "drv", "exit_code": 3,
                             "log_tail": ""})), View(),
        effects=(PatchNode, SetCondition, EmitEvent, Announce), outcome=Outcome.FAILED, wake=None,
        reason=FailureReason.STAGE_FAILED),
    Row("failing/given-up->reported-not-recorded", mem(Phase.FAILING, give_up_recording=True, failure_args=(
        "StageFailed", "x", {"keep_cordon": True, "stage": "", "package": "", "exit_code": None, "log_tail": ""})),
        View(), effects=(Log, Announce), outcome=Outcome.FAILED, wake=None),
    # ---- UNCORDON
    Row("uncordon/ours-last-claim->complete", mem(Phase.UNCORDON, owns_cordon=True),
        View(nodes=(node(unschedulable=True, ours=True),)),
        effects=(PatchNode, Announce, DeleteStages, Announce), outcome=Outcome.COMPLETE, wake=None,
        announce=(EventKind.UNCORDON, EventKind.COMPLETE),
        check=lambda t: t.effects[0].unschedulable is False and t.effects[0].resource_version == "7"),
    Row("uncordon/after-a-failure->clear-condition", mem(Phase.UNCORDON, owns_cordon=True),
        View(nodes=(node(unschedulable=True, ours=True, failed=True),)),
        effects=(PatchNode, Announce, DeleteStages, SetCondition, Announce), outcome=Outcome.COMPLETE, wake=None),
    Row("uncordon/not-ready->waits-for-it", mem(Phase.UNCORDON, owns_cordon=True),
        View(nodes=(node(unschedulable=True, ours=True, ready=False),)),
        effects=(Announce,), phase=Phase.UNCORDON, wake=5.0, announce=(EventKind.WAIT,)),
    Row("uncordon/not-ready-past-the-bound->failed", mem(Phase.UNCORDON, owns_cordon=True),
        View(nodes=(node(unschedulable=True, ours=True, ready=False, since=UTC - 601),)),
        outcome=Outcome.FAILED, wake=None, reason=FailureReason.NODE_NOT_READY,
        check=lambda t: t.memory.failure.ready == "False"),
    # ---- errors of the last transition (execute/retry.py)
    Row("error/409->retry-in-1s", mem(Phase.CORDON), View(error=ConflictError("changed", 409, "Conflict")),
        effects=(Log,), phase=Phase.CORDON, wake=1.0, check=lambda t: t.memory.streak == 1),
    Row("error/transient-past-bound->failed", mem(Phase.STAGES, streak=12, streak_start=NOW - 10),
        View(error=TransientError("down", 503, "ServiceUnavailable"), fresh=node(unschedulable=True, ours=True)),
        effects=(PatchNode, SetCondition, EmitEvent, Announce), outcome=Outcome.FAILED, wake=None,
        reason=FailureReason.API_ERROR_PERSISTS),
    Row("error/404-node-check", mem(Phase.STAGES), View(error=NotFoundError("gone", 404, "NotFound")),
        needs=(ReadNode,), phase=Phase.STAGES),
    Row("error/404-node-gone->removed", mem(Phase.STAGES),
        View(error=NotFoundError("gone", 404, "NotFound"), nodes=(None,)),
        effects=(Announce,), outcome=Outcome.REMOVED, wake=None, announce=(EventKind.REMOVED,)),
    Row("error/403-while-recording-a-failure->stop-the-run",
        mem(Phase.FAILING, failure_args=("StageFailed", "x", {"keep_cordon": True, "stage": "", "package": "",
                                                                "exit_code": None, "log_tail": ""})),
        View(error=ForbiddenError("rbac", 403, "Forbidden")), raises=ForbiddenError),
]


def _offset(t: Transition[Memory]) -> float | None:
    return None if t.wake is None else round(t.wake - NOW, 3)


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_step(row: Row) -> None:
    before = copy.deepcopy(row.memory)
    t = step(row.memory, row.view, row.plan, row.ctx, NOW, UTC)
    assert row.memory == before, "step changed the memory it was given"
    assert t == step(before, row.view, row.plan, row.ctx, NOW, UTC), "same arguments, different transition"
    if row.raises is not None:
        assert isinstance(t.raise_, row.raises)
        return
    assert t.raise_ is None
    assert tuple(type(r) for r in t.needs) == row.needs
    if row.needs:
        assert t.effects == () and t.memory == before  # a step that needs reads decides nothing yet
        return
    notices = [i for i, e in enumerate(t.effects) if isinstance(e, EmitEvent) and e.notice]
    for i, e in enumerate(t.effects):  # cordon, drain, uncordon: a notice Event on the node right after
        if isinstance(e, Announce) and e.kind in NODE_EVENTS:
            notice = t.effects[i + 1]
            assert isinstance(notice, EmitEvent) and notice.notice and notice.reason == NODE_EVENTS[e.kind]
            assert notice.message.startswith("recipe ")
            notices.remove(i + 1)
    assert not notices, "a notice Event without its timeline event"
    if row.effects is not None:
        assert tuple(type(e) for e in t.effects if not (isinstance(e, EmitEvent) and e.notice)) == row.effects
    for i, e in enumerate(t.effects):
        if isinstance(e, WRITES) and not (isinstance(e, EmitEvent) and e.notice):  # a notice never rolls back
            assert i in t.rollbacks, f"write {i} ({type(e).__name__}) has no rollback memory"
    if row.phase is not None:
        assert t.memory.phase is row.phase
    assert t.memory.outcome is row.outcome
    if row.wake != "any":
        assert _offset(t) == row.wake
    assert t.again is row.again
    if row.announce is not None:
        assert tuple(e.kind for e in t.effects if isinstance(e, Announce)) == row.announce
    if row.reason:
        assert t.memory.failure is not None and t.memory.failure.reason == row.reason
    if row.check is not None:
        assert row.check(t)


def test_failed_write_rolls_back_to_the_memory_it_was_decided_from() -> None:
    """Crash point between a record and its effect: a write that fails leaves the memory as it was
    when the decision that made it began — nothing computed for it is kept (its record, the state it
    records), so the next step decides again from what the node holds; deferred records stay."""
    m = mem(Phase.WAIT, owns_cordon=True, inflight=fl("wait"), pending={"x": "1"})
    v = View(pod_lists=((),), nodes=(node(unschedulable=True, ours=True, inflight=fl("wait")),))
    t = step(m, v, PLAN, CTX, NOW, UTC)
    kinds = [type(e) for e in t.effects]
    patch, start = kinds.index(PatchNode), kinds.index(StartStage)
    assert t.memory.runs[0].running and not t.memory.pending
    for i in (patch, start):  # the stage's start is one decision: record and pod, redone together
        back = t.rollbacks[i]
        assert "drv|2.0" not in back.state and back.pending.get("x") == "1"
        assert not any(r.running for r in back.runs)
    assert isinstance(t.effects[patch], PatchNode) and t.effects[patch].annotations["x"] == "1"


def _fail_write(t: Transition[Memory], kind: type) -> Memory:
    i = next(i for i, e in enumerate(t.effects) if isinstance(e, kind))
    return t.rollbacks[i]


def test_a_refused_reboot_record_is_never_followed_by_the_reboot() -> None:
    """The record of the reboot request (phase interrupt, bootID, requestedAt) is refused: the next
    step, reading the node's older record, records the request again before it starts the pod —
    a reboot never starts without its record (semantics decision f)."""
    m = stages_mem(running=True)
    on_node = node(unschedulable=True, ours=True, inflight=fl("stages"), boot="b1")
    t = step(m, stage_view(StageStatus("succeeded", started=UTC - 10), nodes=(on_node,)), PLAN, CTX, NOW, UTC)
    assert [type(e) for e in t.effects if not isinstance(e, Announce)] == [PatchNode, StartStage]
    back = _fail_write(t, PatchNode)
    assert back.inflight is None or back.inflight.requestedAt is None  # nothing decided for the write kept
    later = step(replace(back, phase=Phase.INTERRUPT), View(nodes=(on_node,)), PLAN, CTX, NOW + 5, UTC + 5)
    kinds = [type(e) for e in later.effects if not isinstance(e, Announce)]
    assert kinds[:2] == [PatchNode, StartStage], kinds
    rec = later.effects[[type(e) for e in later.effects].index(PatchNode)]
    assert isinstance(rec, PatchNode) and '"requestedAt"' in (rec.annotations or {})[inflight_key(R)]


def test_a_refused_drain_record_is_written_again_before_any_eviction() -> None:
    m = mem(Phase.WAIT, owns_cordon=True, inflight=fl("wait"))
    t = step(m, View(pod_lists=((WEB,),)), PLAN, CTX, NOW, UTC)
    assert [type(e) for e in t.effects] == [PatchNode, Evict]
    back = _fail_write(t, PatchNode)
    assert not back.evictions and back.phase is Phase.DRAIN
    again = step(back, View(pod_lists=((WEB,),)), PLAN, CTX, NOW + 1, UTC + 1)
    assert [type(e) for e in again.effects] == [PatchNode, Evict]


def test_a_reboot_request_that_never_reached_the_node_is_requested_again_not_failed() -> None:
    """Resumed past the reboot timeout, the interrupt pod missing and the bootID unchanged: the
    request never reached the node. It is recorded (a new requestedAt) and sent; no RebootTimeout."""
    rec = fl("interrupt", bootID="b1", requestedAt=to_rfc3339(UTC - 5000))
    m = mem(Phase.INTERRUPT, owns_cordon=True, inflight=rec)
    spec = interrupt_spec(RECIPE, "n1", PLAN.steps, REBOOT, lifecycle="run-1", agent_image=None)
    v = View(nodes=(node(unschedulable=True, ours=True, boot="b1", inflight=rec),),
             stages={spec.pod_name: StageStatus("missing")})
    t = step(m, v, PLAN, CTX, NOW, UTC)
    assert [type(e) for e in t.effects if not isinstance(e, Announce)] == [PatchNode, StartStage]
    assert t.memory.outcome is Outcome.RUNNING and t.memory.inflight is not None
    assert t.memory.inflight.requestedAt == to_rfc3339(UTC)


def test_a_node_deleted_before_its_first_read_is_removed_not_failed() -> None:
    t = step(Memory(), View(error=NotFoundError("nodes n1 not found", 404, "NotFound")), PLAN, CTX, NOW, UTC)
    assert t.needs == (ReadNode(optional=True),)
    t = step(Memory(), View(error=NotFoundError("nodes n1 not found", 404, "NotFound"), nodes=(None,)),
             PLAN, CTX, NOW, UTC)
    assert t.memory.outcome is Outcome.REMOVED


def test_someone_elses_cordon_lifted_before_the_interrupt_becomes_ours_and_is_bounded() -> None:
    """Cordoned by someone else (no claim of ours), uncordoned by them during the stages: before the
    interrupt the node is cordoned again under our claim (so the end of the lifecycle releases it),
    and a node uncordoned again and again fails with ExternallyUncordoned."""
    m = mem(Phase.INTERRUPT, owns_cordon=False, inflight=fl("stages"))
    v = View(nodes=(node(unschedulable=False, ours=False, inflight=fl("stages")),))
    t = step(m, v, PLAN, CTX, NOW, UTC)
    (patch,) = [e for e in t.effects if isinstance(e, PatchNode)]
    assert patch.unschedulable is True and cordon_key(R) in (patch.annotations or {})
    assert t.memory.owns_cordon and t.memory.phase is Phase.DRAIN and t.memory.recordons == 1
    worn = replace(m, recordons=3)
    t = step(worn, v, PLAN, CTX, NOW, UTC)
    assert t.memory.failure is not None and t.memory.failure.reason == FailureReason.EXTERNALLY_UNCORDONED


def test_pure_module_needs_no_reads_it_did_not_ask_for() -> None:
    """The reads a step asks for are exactly what it consumes: answering them lets it decide."""
    m = Memory()
    t = step(m, View(), PLAN, CTX, NOW, UTC)
    assert t.needs == (ReadNode(),)
    t2 = step(m, View(nodes=(node(),)), PLAN, CTX, NOW, UTC)
    assert t2.again and t2.memory.phase is Phase.WAIT
    t3 = step(t2.memory, View(fresh=node(unschedulable=True, ours=True)), PLAN, CTX, NOW, UTC)
    assert t3.needs == (ListPods(),)


@pytest.mark.parametrize(("waited", "outcome"), [(300, Outcome.RUNNING), (601, Outcome.FAILED)])
def test_a_resumed_gate_counts_its_timeout_from_the_recorded_instant(waited: float, outcome: Outcome) -> None:
    """A new process (fresh memory, another monotonic origin) finds the node at the readiness gate:
    it resumes waiting there, and the 10-minute timeout counts from the UTC instant recorded when
    the node first reached the gate, not from the restart."""
    t1 = step(Memory(), View(nodes=(gate_node(NOT_YET, waited),)), PLAN, GCTX, 5.0, UTC)
    assert t1.memory.phase is Phase.READINESS_GATE and not t1.memory.local_start
    t2 = step(t1.memory, View(nodes=(gate_node(NOT_YET, waited),)), PLAN, GCTX, 5.0, UTC)
    assert t2.memory.outcome is outcome
    if outcome is Outcome.RUNNING:
        assert t2.wake == 10.0 and not [e for e in t2.effects if isinstance(e, WRITES)]  # no second record
    else:
        assert t2.memory.failure is not None and t2.memory.failure.reason == FailureReason.READINESS_GATE_TIMEOUT


def test_the_table_covers_every_phase() -> None:
    assert {r.memory.phase for r in ROWS} == set(Phase)


def test_eviction_tracks_are_shared_copy_on_write() -> None:
    """Memory.copy shares the drain's eviction tracks (issue 17: they were copied two to four
    times per step); a drain step works on its own copies, so neither the memory it was given nor
    a rollback snapshot of it sees what the step changed."""
    m, v = drain_mem(EvictResult(EvictAnswer.TOO_MANY, "budget", disruption_budget=True))
    c = m.copy()
    assert c.evictions == m.evictions and c.evictions is not m.evictions
    assert c.evictions["default/web"] is m.evictions["default/web"]  # shared until owned
    c.own_evictions()
    assert c.evictions["default/web"] == m.evictions["default/web"]
    assert c.evictions["default/web"] is not m.evictions["default/web"]
    track = m.evictions["default/web"]
    before = copy.deepcopy(track)
    t = step(m, v, PLAN, CTX, NOW, UTC)
    assert m.evictions["default/web"] is track and track == before  # the given memory's track unchanged
    after = t.memory.evictions["default/web"]
    assert after is not track and after.attempts == 1 and not after.asked and after.next_try > NOW
    for snapshot in t.rollbacks.values():
        assert snapshot.evictions["default/web"] == before


@pytest.mark.parametrize(("status", "moved"), [(StageStatus("failed", exit_code=3, started=UTC - 10), False),
                                               (StageStatus("succeeded", started=UTC - 10), True)])
def test_stage_runs_are_shared_copy_on_write(status: StageStatus, moved: bool) -> None:
    """Memory.copy shares the stage runs (issue 17: each was copied about twice per step); a
    stage step changes its own copy of the run it drives, so neither the memory it was given nor
    the rollback memory of a write it makes sees what the step changed after that write's
    decision began (a failed retry record: the run as given; the reboot request after the stage
    succeeded: the run past its stage, as when the interrupt was decided)."""
    m = stages_mem(running=True)
    c = m.copy()
    assert c.runs == m.runs and c.runs is not m.runs and c.runs[0] is m.runs[0]  # shared until owned
    owned = c.own_run(0)
    assert owned == m.runs[0] and owned is not m.runs[0] and c.runs[0] is owned
    run = m.runs[0]
    before = copy.deepcopy(run)
    v = stage_view(status, nodes=(node(unschedulable=True, ours=True, inflight=fl("stages"), boot="b1"),))
    t = step(m, v, PLAN, CTX, NOW, UTC)
    assert m.runs[0] is run and run == before  # the given memory's run unchanged
    after = t.memory.runs[0]
    assert after is not run and after != before  # retried (attempt 2) or moved past its stage
    expected = replace(before, index=1, done=True, running=False) if moved else before
    assert t.rollbacks and all(snap.runs[0] == expected for snap in t.rollbacks.values())


def test_stage_specs_are_memoised_by_what_they_are_made_of() -> None:
    """stage_spec answers the same spec object for the same arguments (issue 17), and a spec of
    another recipe, attempt, lifecycle or interrupt is another spec, built from it."""
    from reconciler.execute.stagework import stage_spec

    run = build_runs(RECIPE, {}, PLAN.steps)[0]
    first = stage_spec(RECIPE, "n1", run, "apply", lifecycle="run-1", agent_image=None)
    assert stage_spec(RECIPE, "n1", run, "apply", lifecycle="run-1", agent_image=None) is first
    other = RECIPE.model_copy(update={"name": "other"})
    assert stage_spec(other, "n1", run, "apply", lifecycle="run-1", agent_image=None).recipe == "other"
    assert stage_spec(RECIPE, "n1", run, "apply", lifecycle="run-2", agent_image=None).run_id == "run-2"
    retried = replace(run, attempt=2)
    assert stage_spec(RECIPE, "n1", retried, "apply", lifecycle="run-1", agent_image=None).attempt == 2
    rerun = stage_spec(RECIPE, "n1", run, "apply", lifecycle="run-1", agent_image=None, rerun=1)
    assert rerun.rerun == 1 and rerun.pod_name != first.pod_name
    reboot = interrupt_spec(RECIPE, "n1", PLAN.steps, Interrupt(type="reboot"), lifecycle="run-1", agent_image=None)
    restart = interrupt_spec(RECIPE, "n1", PLAN.steps, Interrupt(type="service", services=["kubelet"]),
                             lifecycle="run-1", agent_image=None)
    assert reboot.interrupt == Interrupt(type="reboot") and restart.interrupt == Interrupt(type="service",
                                                                                        services=["kubelet"])
    assert interrupt_spec(RECIPE, "n1", PLAN.steps, Interrupt(type="reboot"), lifecycle="run-1",
                          agent_image=None) is reboot  # an equal interrupt parsed afresh: the same spec


# ---- a package restarted by `package rerun` / `reset --package` in the lifecycle (InFlight.reruns)
RERUN_FL = fl("stages", reruns={"drv": 1})


def _rerun_mem(*, running: bool, lifecycle: str = "run-1") -> Memory:
    m = stages_mem(running=running)
    m.inflight, m.lifecycle = RERUN_FL, lifecycle
    return m


def _first_spec(**kw: Any) -> Any:
    from reconciler.execute.stagework import stage_spec

    return stage_spec(RECIPE, "n1", build_runs(RECIPE, {}, PLAN.steps)[0], "apply", lifecycle="run-1",
                      agent_image=None, **kw)


@pytest.mark.parametrize(("lifecycle", "rerun"), [("run-1", 1), ("run-2", 0)],
                         ids=["resumed-lifecycle", "new-lifecycle"])
def test_a_restarted_package_starts_its_stage_under_a_new_name(lifecycle: str, rerun: int) -> None:
    """The resumed lifecycle (the one the rerun counted the package in) starts the stage pod under
    a name of the rerun, never the name of its earlier (failed, kept) pod; a new lifecycle
    (``--retry-failed``) names every pod anew already: the count of the old one does not apply."""
    m = _rerun_mem(running=False, lifecycle=lifecycle)
    t = step(m, View(fresh=node(unschedulable=True, ours=True, inflight=RERUN_FL)), PLAN, CTX, NOW, UTC)
    started = [e.spec for e in t.effects if isinstance(e, StartStage)]
    assert len(started) == 1 and started[0].rerun == rerun and started[0].run_id == lifecycle
    assert (started[0].pod_name == _first_spec().pod_name) is (lifecycle == "run-1" and rerun == 0)
    if lifecycle == "run-1":
        assert started[0].pod_name == _first_spec(rerun=1).pod_name


def test_a_restarted_package_that_runs_is_looked_at_under_its_new_name() -> None:
    """Resumed after a crash (its entry in progress): the lifecycle reads the rerun's pod, not the
    earlier one (which would read as failed)."""
    t = step(_rerun_mem(running=True), View(fresh=node(unschedulable=True, ours=True, inflight=RERUN_FL)),
             PLAN, CTX, NOW, UTC)
    assert [type(r) for r in t.needs] == [ReadStage]
    assert t.needs[0].spec.pod_name == _first_spec(rerun=1).pod_name  # type: ignore[union-attr]


def test_the_rerun_count_is_kept_by_the_lifecycles_records_and_dropped_by_a_new_one() -> None:
    """The lifecycle rewrites its in-flight record at each phase: the count (what names the rerun's
    pods, post-interrupt included) stays with it; the interrupt pod keeps its name (a requested
    reboot is found again, never sent twice)."""
    m = _rerun_mem(running=True)
    v = stage_view(StageStatus("succeeded", started=UTC - 10),
                   nodes=(node(unschedulable=True, ours=True, inflight=RERUN_FL, boot="b1"),))
    v = replace(v, stages={_first_spec(rerun=1).pod_name: StageStatus("succeeded", started=UTC - 10)})
    t = step(m, v, PLAN, CTX, NOW, UTC)
    assert t.memory.phase is Phase.INTERRUPT and t.memory.inflight.reruns == {"drv": 1}
    assert [e.spec.pod_name for e in t.effects if isinstance(e, StartStage)] == [INTERRUPT_POD]
    # a new lifecycle (--retry-failed on the node) writes a record of its own: no count
    fresh = Memory(phase=Phase.CORDON, lifecycle="run-2", inflight=RERUN_FL, node=node(inflight=RERUN_FL))
    t2 = step(fresh, View(fresh=node(inflight=RERUN_FL)), PLAN, replace(CTX, run_id="run-2"), NOW, UTC)
    assert t2.memory.inflight is not None and t2.memory.inflight.lifecycle == "run-2"
    assert t2.memory.inflight.reruns is None

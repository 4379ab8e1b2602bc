"""The one metrics model (reconciler.report.metrics, reconciler.report.rolloutmetrics): the
gauges of a rollout move as its events arrive (nodes by state, batch k of N, budget in use,
phase, last progress), agree with the NodeRecipe status, and prometheus_client writes them."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from reconciler.model.nodestate import FailureRecord, InFlight, dump_model, failure_key, inflight_key
from reconciler.model.run import Event, NodeOutcome, RunResult
from reconciler.model.vocab import EventKind
from reconciler.plan.planner import compute_plan
from reconciler.report.metrics import MetricSet, exposition, rollout_metrics
from reconciler.report.rolloutmetrics import RolloutMetrics
from reconciler.report.status import RolloutProgress, rollout_status
from reconciler.testing import builders

R = "tuning"
NODES = [builders.node(f"n{i}", labels={"pool": "gpu"}) for i in range(1, 4)]
RECIPE = builders.recipe(R, builders.package("tools", "1.0.0"), selector={"pool": "gpu"},
                         budget=builders.budget(count=1))
PLAN = compute_plan(RECIPE, builders.policy("legacy", count=1), builders.fleet(NODES))


class Clock:
    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def __call__(self) -> float:
        return self.t


def scrape(metrics: RolloutMetrics) -> dict[str, float]:
    """``name{labels}`` → value of a scrape through a prometheus_client registry (its text, parsed)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    out = {}
    for fam in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in fam.samples:
            keep = {k: v for k, v in s.labels.items() if k in ("state", "phase", "result")}
            out[s.name + "".join(f"[{k}={v}]" for k, v in sorted(keep.items()))] = s.value
    return out


def test_the_gauges_move_during_a_rollout_and_settle_at_its_end() -> None:
    clock = Clock()
    m = RolloutMetrics(lambda: NODES, clock)
    progress = RolloutProgress(PLAN)
    m.started(RECIPE, PLAN, "run-1")
    g = scrape(m)
    assert g["node_reconciler_rollout_nodes[state=pending]"] == 3
    assert g["node_reconciler_recipe_phase[phase=Progressing]"] == 1
    assert g["node_reconciler_rollout_batches"] == 3 and g["node_reconciler_rollout_current_batch"] == 0
    assert g["node_reconciler_rollout_start_timestamp_seconds"] == clock.t
    events = [Event(0.0, "__default__", EventKind.BATCH_START), Event(0.5, "n1", EventKind.CORDON),
              Event(1.0, "n1", EventKind.STAGE_START)]
    clock.t += 60
    for ev in events:
        m.event(PLAN, ev)
        progress.on_event(ev)
    g = scrape(m)
    assert g["node_reconciler_rollout_current_batch"] == 1  # batch 1 of 3
    assert g["node_reconciler_rollout_disrupted"] == 1  # the budget in use: n1 held cordoned
    assert g["node_reconciler_rollout_nodes[state=inProgress]"] == 1
    assert g["node_reconciler_rollout_in_progress"] == 1
    assert g["node_reconciler_rollout_last_progress_timestamp_seconds"] == clock.t
    assert g["node_reconciler_run_duration_seconds"] == 60
    for state, n in rollout_status(progress, generation=1, now="t")["nodes"].items():
        if state != "total":
            assert g[f"node_reconciler_rollout_nodes[state={state}]"] == n  # the status's own counts
    clock.t += 600
    for ev in (Event(600.0, "n1", EventKind.UNCORDON), Event(600.1, "n1", EventKind.COMPLETE)):
        m.event(PLAN, ev)
    g = scrape(m)
    assert g["node_reconciler_rollout_nodes[state=complete]"] == 1 and g["node_reconciler_rollout_disrupted"] == 0
    assert g["node_reconciler_rollout_progress_percent"] == round(100 / 3, 2)
    assert g["node_reconciler_rollout_last_progress_timestamp_seconds"] == clock.t
    result = RunResult("run-1", PLAN.planHash, R, "failed",
                       [NodeOutcome("n1", "complete", "__default__"), NodeOutcome("n2", "failed", "__default__"),
                        NodeOutcome("n3", "untouched", "__default__")], [], [], 700.0)
    m.finished(RECIPE, PLAN, result)
    g = scrape(m)
    assert g["node_reconciler_recipe_phase[phase=Failed]"] == 1
    assert g["node_reconciler_recipe_phase[phase=Progressing]"] == 0
    assert g["node_reconciler_run_result[result=failed]"] == 1 and g["node_reconciler_run_duration_seconds"] == 700
    assert g["node_reconciler_rollout_nodes[state=failed]"] == 1


def test_a_stopped_rollout_stays_in_progress_until_the_next_pass() -> None:
    m = RolloutMetrics(lambda: NODES, Clock())
    m.started(RECIPE, PLAN, "r")
    m.event(PLAN, Event(1.0, "", EventKind.STOPPED))
    m.finished(RECIPE, PLAN, RunResult("r", "h", R, "failed", [], [], [], 1.0))
    assert scrape(m)["node_reconciler_recipe_phase[phase=Progressing]"] == 1


def test_a_held_recipe_reports_its_switch() -> None:
    m = RolloutMetrics(lambda: NODES, Clock())
    m.skipped(RECIPE, "paused by ci at 2026-12-01T00:00:00Z")
    g = scrape(m)
    assert g["node_reconciler_recipe_paused"] == 1 and g["node_reconciler_recipe_disabled"] == 0


def test_without_a_rollout_node_states_come_from_the_records() -> None:
    nodes = [builders.node("n1", labels={"pool": "gpu"},
                           annotations={failure_key(R): dump_model(FailureRecord(runId="r", reason="RebootTimeout"))}),
             builders.node("n2", labels={"pool": "gpu"},
                           annotations={inflight_key(R): dump_model(InFlight(runId="r", planHash="h",
                                                                             phase="stages"))}),
             NODES[2]]
    plan = compute_plan(RECIPE, builders.policy("legacy", count=1), builders.fleet(nodes))
    ms = rollout_metrics(R, nodes, plan=plan)
    assert ms.value("rollout_nodes", state="failed") == 1 and ms.value("rollout_failed") == 1
    assert ms.value("rollout_nodes", state="inProgress") == 1
    assert ms.value("rollout_current_batch") is None and ms.value("recipe_phase") is None  # only a rollout knows


def test_prometheus_client_writes_the_exposition() -> None:
    ms = MetricSet()
    ms.set("rollout_ceiling", {"recipe": 'we"ird\\name\n', "compartment": "a"}, 3)
    text = exposition(ms).decode()
    (fam,) = text_string_to_metric_families(text)
    assert fam.name == "node_reconciler_rollout_ceiling" and fam.type == "gauge"
    assert fam.samples[0].labels == {"compartment": "a", "recipe": 'we"ird\\name\n'} and fam.samples[0].value == 3
    assert exposition(ms) == exposition(ms)  # deterministic


def test_a_pass_with_nothing_to_do_leaves_the_last_rollout_as_it_ended() -> None:
    """The controller passes again after a rollout (its own writes, the status it wrote); such a
    pass read Progressing until it ended, after the NodeRecipe was already Current (seen in
    tests/e2e/test_metrics_e2e.py)."""
    clock = Clock()
    m = RolloutMetrics(lambda: NODES, clock)
    m.started(RECIPE, PLAN, "run-1")
    done = RunResult("run-1", PLAN.planHash, R, "succeeded",
                     [NodeOutcome(n.name, "complete", "__default__") for n in NODES], [], [], 60.0)
    m.finished(RECIPE, PLAN, done)
    assert scrape(m)["node_reconciler_recipe_phase[phase=Complete]"] == 1
    installed = [builders.node(n.name, labels={"pool": "gpu"}, recipe=R, installed=list(RECIPE.packages.values()))
                 for n in NODES]
    nothing = compute_plan(RECIPE, builders.policy("legacy", count=1), builders.fleet(installed))
    assert nothing.summary.nodesChanging == 0
    m.started(RECIPE, nothing, "run-2")
    g = scrape(m)
    assert g["node_reconciler_recipe_phase[phase=Complete]"] == 1
    assert g["node_reconciler_recipe_phase[phase=Progressing]"] == 0
    assert g["node_reconciler_run_duration_seconds"] == 60
    m.finished(RECIPE, nothing, RunResult("run-2", nothing.planHash, R, "succeeded", [], [], [], 0.1))
    assert scrape(m)["node_reconciler_recipe_phase[phase=Complete]"] == 1
    m.started(RECIPE, PLAN, "run-3")  # work again: a new rollout
    assert scrape(m)["node_reconciler_recipe_phase[phase=Progressing]"] == 1

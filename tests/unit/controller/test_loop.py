"""The controller's passes on the simulated fleet (reconciler.controller.loop): NodeRecipe
objects are rolled out through the application service, their status follows kstatus (checked
with the real kstatus library, tests/gitops/kstatus), pause is honoured, a refused object is
Stalled without stopping the others, and a pass stopped (new work, SIGTERM) leaves the nodes'
records for the next pass, which resumes and finishes."""

from __future__ import annotations

from typing import Any

from reconciler.adapters.sim.config import SimConfig, StageFailure
from reconciler.model.nodestate import inflight_key
from reconciler.ops.controls import control_patch, store_for
from reconciler.testing import builders
from tests.gitops.tools import kstatus
from tests.unit.controller.conftest import Events, conditions, make, recipe_object

TUNING = "gpu-training-tuning"


def _kstatus(obj: dict[str, Any]) -> str:
    return str(kstatus([obj])[0]["status"])


def test_a_pass_rolls_out_a_noderecipe_object_and_it_goes_ready_by_kstatus() -> None:
    ctl, sim, writer = make([recipe_object("gpu-training-tuning.yaml")])
    before = writer.object(TUNING)
    # kstatus calls an object without any status Current; the CRD defaults status.observedGeneration
    # to -1 (scripts/gen-crds) so a new object is InProgress until the controller has looked at it
    assert _kstatus(before) == "Current"
    assert _kstatus({**before, "status": {"observedGeneration": -1}}) == "InProgress"
    seen: list[str] = []
    writer.hook = lambda name, st: seen.append(_kstatus(writer.object(name)))
    assert ctl.reconcile(["startup"]) == "succeeded"
    final = writer.last(TUNING)
    assert final["observedGeneration"] == 1 and final["phase"] == "Complete"
    assert conditions(final) == {"Ready": "True", "Reconciling": "False", "Stalled": "False"}
    assert final["recipeVersion"] == "2026.11.2"  # the release from the annotation
    assert seen[0] == "InProgress" and seen[-1] == "Current"
    assert not sim.leases  # recipe Leases released
    assert ctl.metrics.passes.labels("succeeded")._value.get() == 1


def test_a_new_generation_is_in_progress_until_a_pass_observed_it() -> None:
    ctl, _, writer = make([recipe_object("gpu-training-tuning.yaml")])
    ctl.reconcile(["startup"])
    obj = writer.object(TUNING)
    obj["metadata"] = {**obj["metadata"], "generation": 2}
    ctl.source.observe("MODIFIED", obj)  # type: ignore[attr-defined]
    assert _kstatus(writer.object(TUNING)) == "InProgress"
    assert ctl.reconcile(["recipe changed"]) == "succeeded"
    assert writer.last(TUNING)["observedGeneration"] == 2
    assert _kstatus(writer.object(TUNING)) == "Current"


def test_a_paused_recipe_is_held_and_resume_rolls_it_out() -> None:
    ctl, sim, writer = make([recipe_object("gpu-training-tuning.yaml")])
    store = store_for(sim)
    assert store is not None
    patch, _, _ = control_patch(sim, TUNING, "pause", reason="freeze", by="sre")
    assert patch is not None
    patch.write(store)
    node_writes = len([c for c in sim.calls if not c[0].endswith("-lease")])
    assert ctl.reconcile(["startup"]) == "succeeded"
    held = writer.last(TUNING)
    assert held["phase"] == "Paused" and conditions(held)["Ready"] == "False"
    assert _kstatus(writer.object(TUNING)) == "InProgress"  # Flux waits; Argo CD shows it Suspended
    assert len([c for c in sim.calls if not c[0].endswith("-lease")]) == node_writes  # nothing done on nodes
    old = store.get_config_map("node-reconciler", "node-reconciler-controls")
    patch, _, _ = control_patch(sim, TUNING, "resume")
    assert patch is not None
    patch.write(store)
    ctl.on_controls(old, store.get_config_map("node-reconciler", "node-reconciler-controls"))
    assert ctl.queue.pending()
    assert ctl.reconcile(ctl.queue.take(ctl.signal.shutdown, 0.1)) == "succeeded"
    assert writer.last(TUNING)["phase"] == "Complete"


def test_a_refused_object_is_stalled_and_the_others_are_rolled_out() -> None:
    bad = recipe_object("containerd-limits.yaml")
    bad["spec"]["packages"] = {k: {**v, "version": "not a version"} for k, v in bad["spec"]["packages"].items()}
    ctl, _, writer = make([recipe_object("gpu-training-tuning.yaml"), bad])
    assert ctl.reconcile(["startup"]) == "succeeded"
    refused = writer.last("containerd-limits")
    assert refused["phase"] == "Invalid" and conditions(refused)["Stalled"] == "True"
    assert "NodeRecipe/containerd-limits" in refused["summary"] and "spec.packages" in refused["summary"]
    assert _kstatus(writer.object("containerd-limits")) == "Failed"
    assert _kstatus(writer.object(TUNING)) == "Current"


def test_a_recipe_naming_a_policy_not_given_is_stalled_alone_with_an_event() -> None:
    """No --policy (the chart without recipeSource.crd.policyVolume): the recipe naming a
    deploymentPolicy is Stalled with an Event naming the field and the missing policy; the recipe
    with an interruptionBudget is rolled out."""
    events = Events()
    ctl, _, writer = make([recipe_object("gpu-training-tuning.yaml"), recipe_object("cve-ksmbd-blacklist.yaml")],
                          policies=(), events=events)
    assert ctl.reconcile(["startup"]) == "succeeded"
    refused = writer.last(TUNING)
    assert refused["phase"] == "Invalid" and conditions(refused)["Stalled"] == "True"
    assert _kstatus(writer.object(TUNING)) == "Failed"
    assert "spec.deploymentPolicy" in refused["summary"] and "'gpu-rollout' is not defined" in refused["summary"]
    assert _kstatus(writer.object("cve-ksmbd-blacklist")) == "Current"
    invalid = [e for e in events.emitted if e[1] == "InvalidSpec"]
    assert [(e[0], e[3]) for e in invalid] == [(TUNING, "Warning")]
    assert "spec.deploymentPolicy" in invalid[0][2] and "gpu-rollout" in invalid[0][2]
    ctl.reconcile(["again"])  # the same refusal: Stalled still, no second Event
    assert len([e for e in events.emitted if e[1] == "InvalidSpec"]) == 1


def _stop_when_in_progress(ctl: Any, writer: Any, action: Any) -> None:
    def hook(name: str, status: dict[str, Any]) -> None:
        if status.get("nodes", {}).get("complete", 0) >= 3 and status.get("phase") == "Progressing":
            action()
            writer.hook = None
    writer.hook = hook


def test_new_work_preempts_a_pass_and_the_next_pass_resumes_and_finishes() -> None:
    ctl, sim, writer = make([recipe_object("gpu-training-tuning.yaml")])
    _stop_when_in_progress(ctl, writer, lambda: ctl.on_node("ADDED", None, builders.node("new-node")))
    ctl._in_pass.set()  # the handler below runs inside the pass
    assert ctl.reconcile(["startup"]) == "preempted"
    assert not sim.leases  # released on the way out
    assert ctl.queue.pending()  # the join is the next pass's work
    in_flight = [n.name for n in sim.list_nodes() if inflight_key(TUNING) in n.annotations]
    assert writer.last(TUNING)["phase"] == "Progressing"  # not Stalled: the next pass resumes
    outcome = ctl.reconcile(ctl.queue.take(ctl.signal.shutdown, 0.1))
    assert outcome == "succeeded", outcome
    assert writer.last(TUNING)["phase"] == "Complete"
    assert not [n.name for n in sim.list_nodes() if inflight_key(TUNING) in n.annotations]
    assert in_flight or ctl.passes == 2


def test_shutdown_stops_the_pass_between_steps_and_releases_the_leases() -> None:
    ctl, sim, writer = make([recipe_object("gpu-training-tuning.yaml")])
    _stop_when_in_progress(ctl, writer, ctl.stop)
    assert ctl.reconcile(["startup"]) == "stopped"
    assert not sim.leases
    assert writer.last(TUNING)["phase"] == "Progressing"
    assert conditions(writer.last(TUNING))["Reconciling"] == "True"


def test_a_halted_rollout_is_not_restarted_by_unrelated_events() -> None:
    obj = recipe_object("containerd-limits.yaml")
    ctl, sim, writer = make([obj], SimConfig(failures=(StageFailure(stage="apply", times=99),)))
    assert ctl.reconcile(["startup"]) == "failed"
    status = writer.last("containerd-limits")
    assert status["phase"] in ("Halted", "Failed") and conditions(status)["Stalled"] == "True"
    assert "containerd-limits" in ctl.stalled
    writes = len(sim.calls)
    assert ctl.reconcile(["node x joined"]) == "idle"
    assert len(sim.calls) == writes  # nothing started again
    obj2 = recipe_object("containerd-limits.yaml", generation=2, priority=7)
    ctl.source.observe("MODIFIED", obj2)  # type: ignore[attr-defined]
    assert ctl.reconcile(["recipe changed"]) == "failed"  # new content: tried again


def test_a_locked_mode_refusal_stalls_that_recipe_only() -> None:
    """A downgrade without uninstall steps is refused in locked mode; the service refuses the
    whole set, the controller finds the recipe by its plan, marks it InvalidSpec and goes on."""
    limits = recipe_object("containerd-limits.yaml")
    ctl, _, writer = make([limits])
    assert ctl.reconcile(["startup"]) == "succeeded"
    older = recipe_object("containerd-limits.yaml", generation=2)
    for pkg in older["spec"]["packages"].values():
        pkg["version"] = "1.0.0"
    ctl.source.observe("MODIFIED", older)  # type: ignore[attr-defined]
    ctl.source.observe("ADDED", recipe_object("gpu-training-tuning.yaml"))  # type: ignore[attr-defined]
    assert ctl.reconcile(["recipes changed"]) == "succeeded"
    refused = writer.last("containerd-limits")
    assert refused["phase"] == "Invalid" and "refused in locked mode" in refused["summary"]
    assert refused["observedGeneration"] == 2
    assert writer.last(TUNING)["phase"] == "Complete"


def test_pause_during_a_rollout_stops_it_and_resume_finishes_it() -> None:
    ctl, sim, writer = make([recipe_object("gpu-training-tuning.yaml")])
    store = store_for(sim)
    assert store is not None

    def pause() -> None:
        old = store.get_config_map("node-reconciler", "node-reconciler-controls")
        patch, _, _ = control_patch(sim, TUNING, "pause", reason="incident", by="sre")
        assert patch is not None
        patch.write(store)
        ctl.on_controls(old, store.get_config_map("node-reconciler", "node-reconciler-controls"))

    _stop_when_in_progress(ctl, writer, pause)
    assert ctl.reconcile(["startup"]) == "preempted"
    done = sum(1 for n in sim.list_nodes() if n.labels.get(f"reconciler.nodewright.dev/status_{TUNING}") == "complete")
    assert ctl.reconcile(ctl.queue.take(ctl.signal.shutdown, 0.1)) == "succeeded"
    assert writer.last(TUNING)["phase"] == "Paused"
    still = sum(1 for n in sim.list_nodes() if n.labels.get(f"reconciler.nodewright.dev/status_{TUNING}") == "complete")
    assert still == done  # nothing more was done while paused
    old = store.get_config_map("node-reconciler", "node-reconciler-controls")
    patch, _, _ = control_patch(sim, TUNING, "resume")
    assert patch is not None
    patch.write(store)
    ctl.on_controls(old, store.get_config_map("node-reconciler", "node-reconciler-controls"))
    assert ctl.reconcile(ctl.queue.take(ctl.signal.shutdown, 0.1)) == "succeeded"
    assert writer.last(TUNING)["phase"] == "Complete"


def test_a_reset_on_a_running_controller_queues_a_pass_and_unstalls_a_halted_rollout() -> None:
    """`reconciler reset`/`package rerun` change node records and the request annotation in one
    write; the node watch sees the request: a pass is queued and a halted recipe is tried again."""
    from reconciler.model.nodestate import RECONCILE_REQUEST_KEY
    from reconciler.ops.nodeops import reset_patch
    from reconciler.ops.patches import write_node_patches

    obj = recipe_object("containerd-limits.yaml")
    ctl, sim, _ = make([obj], SimConfig(failures=(StageFailure(stage="apply", times=99),)))
    assert ctl.reconcile(["startup"]) == "failed"
    assert "containerd-limits" in ctl.stalled
    assert ctl.reconcile(["an unrelated node event"]) == "idle"  # halted: not started again
    sim.config = SimConfig()  # the operator fixed the cause
    failed = [n for n in sim.list_nodes() if any(k.endswith("failure_containerd-limits") for k in n.annotations)]
    assert failed
    old = failed[0]
    patch = reset_patch(old, "containerd-limits", force=True)  # it owes a restart: --force
    assert patch is not None and RECONCILE_REQUEST_KEY not in patch.annotations
    assert patch.remove_conditions == ("reconciler.nodewright.dev/containerd-limits/Erroring",)
    write_node_patches(sim, [patch], lambda n: reset_patch(n, "containerd-limits", force=True))
    new = sim.get_node(old.name)
    # nothing of the recipe is left: no record, no request annotation, no node condition
    assert not [k for k in new.annotations if "containerd-limits" in k or k == RECONCILE_REQUEST_KEY]
    assert not [c.type for c in new.conditions if "containerd-limits" in c.type]
    ctl.on_node("MODIFIED", old, new)
    assert ctl.queue.pending() and not ctl.stalled
    assert ctl.reconcile(ctl.queue.take(ctl.signal.shutdown, 0.1)) in ("succeeded", "failed")
    assert not any(k.endswith("failure_containerd-limits") for k in sim.get_node(old.name).annotations)


def _gauge(ctl: Any, recipe: str, state: str) -> float:
    value = ctl.metrics.rollout.sets()[recipe].value("rollout_nodes", state=state)
    assert value is not None
    return float(value)


def test_the_node_metrics_agree_with_the_status_and_a_preempted_rollout_is_no_failure() -> None:
    ctl, _, writer = make([recipe_object("gpu-training-tuning.yaml")])
    _stop_when_in_progress(ctl, writer, lambda: ctl.on_node("ADDED", None, builders.node("new-node")))
    ctl._in_pass.set()
    assert ctl.reconcile(["startup"]) == "preempted"
    assert ctl.metrics.rollouts.labels(TUNING, "failed")._value.get() == 0  # stopped, not failed
    assert ctl.reconcile(ctl.queue.take(ctl.signal.shutdown, 0.1)) == "succeeded"
    ctl.reconcile(["again"])  # nothing left to do: every node was up to date before this rollout
    nodes = writer.last(TUNING)["nodes"]
    assert nodes["complete"] == nodes["total"] > 0
    assert _gauge(ctl, TUNING, "complete") == nodes["complete"]
    assert ctl.metrics.rollouts.labels(TUNING, "failed")._value.get() == 0


def test_a_pass_resolves_each_recipes_policy_once() -> None:
    """The pass checks that a recipe's policy resolves, then applies it: one resolution flows
    through both (it was made twice: once to check, once by the service)."""
    from dataclasses import replace

    looked: list[str] = []

    class Counted(dict[str, Any]):
        def get(self, key: str, default: Any = None) -> Any:
            looked.append(key)
            return super().get(key, default)

    ctl, _, _ = make([recipe_object("gpu-training-tuning.yaml")])
    current = ctl.source.current

    def counted() -> Any:
        d = current()
        return replace(d, inputs=replace(d.inputs, policies=Counted(d.inputs.policies)))

    ctl.source.current = counted  # type: ignore[method-assign]
    assert ctl.reconcile(["startup"]) == "succeeded"
    assert looked == ["gpu-rollout"]

"""The simulated fleet behaves like the API server and the disruption controller (drain §1.6-1.7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.adapters.sim.config import SimConfig, StageFailure
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.errors import (
    ConflictError,
    CrashInjected,
    InputError,
    NotFoundError,
    ServerError,
    TooManyRequestsError,
)
from reconciler.model.recipe import Interrupt
from reconciler.ports import StageSpec
from reconciler.testing.fleetgen import make_node, make_pdb, make_pod


def _fleet(pdbs: list | None = None, **cfg: object) -> SimFleet:
    objs = [make_node(f"n{i}", {"pool": "gpu"}) for i in (1, 2, 3)]
    objs += [make_pod("web", f"web-{i}", f"n{i}", labels={"app": "web"}, owner=("ReplicaSet", "web")) for i in (1, 2)]
    objs += pdbs or []
    return SimFleet(objs, SimConfig(**cfg))  # type: ignore[arg-type]


def test_pdb_allows_one_then_429_until_replacement_is_ready() -> None:
    sim = _fleet([make_pdb("web", "web", {"app": "web"}, max_unavailable=1)])
    uid1 = sim.get_pod("web", "web-1").uid  # type: ignore[union-attr]
    uid2 = sim.get_pod("web", "web-2").uid  # type: ignore[union-attr]
    sim.evict_pod("web", "web-1", uid1, None)
    with pytest.raises(TooManyRequestsError) as e:
        sim.evict_pod("web", "web-2", uid2, None)
    assert e.value.disruption_budget
    sim.advance(1000)  # terminate, recreate elsewhere, become Ready
    assert sim.get_pod("web", "web-1") is None
    pods = sim.list_pods()
    assert len([p for p in pods if p.labels.get("app") == "web"]) == 2
    sim.evict_pod("web", "web-2", uid2, None)  # budget is back


def test_two_pdbs_give_500_and_uid_precondition_409() -> None:
    sim = _fleet([make_pdb("web", "a", {"app": "web"}, max_unavailable=1),
                  make_pdb("web", "b", {"app": "web"}, min_available=0)])
    with pytest.raises(ServerError):
        sim.evict_pod("web", "web-1", sim.get_pod("web", "web-1").uid, None)  # type: ignore[union-attr]
    with pytest.raises(ConflictError):
        sim.evict_pod("web", "web-1", "not-the-uid", None)
    with pytest.raises(NotFoundError):
        sim.evict_pod("web", "nope", "", None)
    assert sim.writes == 0


def test_stage_failure_injection_and_reboot_changes_boot_id() -> None:
    sim = _fleet(failures=[StageFailure(node="n1", package="p", stage="apply", exitCode=7, times=1)],
                 stageSeconds=10, rebootSeconds=50)
    spec = StageSpec(recipe="r", node="n1", package="p", version="1.0.0", stage="apply", pull_ref="img:1.0.0",
                     run_id="x")
    sim.start_stage(spec)
    assert sim.stage_status(spec).phase == "running"
    sim.advance(10)
    st = sim.stage_status(spec)
    assert (st.phase, st.exit_code) == ("failed", 7)
    again = StageSpec(**{**spec.__dict__, "attempt": 2})
    sim.start_stage(again)
    sim.advance(10)
    assert sim.stage_status(again).phase == "succeeded"
    boot = sim.get_node("n1").boot_id
    reboot = StageSpec(recipe="r", node="n1", package="p", version="1.0.0", stage="interrupt", pull_ref="",
                       run_id="x", interrupt=Interrupt(type="reboot"))
    sim.start_stage(reboot)
    sim.advance(2)
    assert sim.get_node("n1").ready is False
    sim.advance(100)
    n = sim.get_node("n1")
    assert n.ready is True and n.boot_id != boot


def test_crash_after_n_writes_and_save_roundtrip(tmp_path: Path) -> None:
    sim = _fleet()
    sim.crash_after = 2
    sim.patch_node("n1", annotations={"a": "1"})
    with pytest.raises(CrashInjected):
        sim.patch_node("n2", unschedulable=True)
    out = tmp_path / "fleet.yaml"
    sim.save(str(out))
    again = SimFleet.from_file(str(out))
    assert again.get_node("n2").unschedulable and again.get_node("n1").annotations["a"] == "1"


def test_active_deadline_pods_succeed_after_their_deadline() -> None:
    objs = [make_node("n1", {}), make_pod("ml", "t", "n1", owner=("Job", "t"), active_deadline=100)]
    sim = SimFleet(objs)
    sim.advance(99)
    assert sim.get_pod("ml", "t").phase == "Running"  # type: ignore[union-attr]
    sim.advance(2)
    assert sim.get_pod("ml", "t").phase == "Succeeded"  # type: ignore[union-attr]


def test_bad_fleet_file_is_an_input_error(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("items: [\n")
    with pytest.raises(InputError) as e:
        SimFleet.from_file(str(f))
    assert str(f) in str(e.value)


def test_saved_fleet_resumes_pending_stage_reboot_and_termination(tmp_path: Path) -> None:
    objs = [make_node("n1", {}), make_node("n2", {}),
            make_pod("web", "w", "n2", labels={"app": "w"}, owner=("ReplicaSet", "w"), grace=20)]
    sim = SimFleet(objs, SimConfig(stageSeconds=100, rebootSeconds=50, maxTerminationSeconds=60))
    stage = StageSpec(recipe="r", node="n2", package="p", version="1.0.0", stage="apply", pull_ref="i", run_id="x")
    reboot = StageSpec(recipe="r", node="n1", package="p", version="1.0.0", stage="interrupt", pull_ref="",
                       run_id="x", interrupt=Interrupt(type="reboot"))
    sim.start_stage(stage)
    sim.start_stage(reboot)
    sim.evict_pod("web", "w", sim.get_pod("web", "w").uid, None)  # type: ignore[union-attr]
    sim.advance(10)
    boot = sim.get_node("n1").boot_id
    assert sim.get_node("n1").ready is False
    out = tmp_path / "f.yaml"
    sim.save(str(out))
    again = SimFleet.from_file(str(out), SimConfig(stageSeconds=100, rebootSeconds=50))
    assert again.get_pod("web", "w") is not None  # still terminating
    assert again.stage_status(stage).phase == "running"
    again.advance(15)
    assert again.get_pod("web", "w") is None  # removed 20 s after the eviction, across the save
    again.advance(100)
    assert again.stage_status(stage).phase == "succeeded"
    n1 = again.get_node("n1")
    assert n1.ready is True and n1.boot_id != boot
    assert not any(p.namespace == "node-reconciler" for p in again.list_pods())


def test_stage_pods_are_the_kube_adapters_pods_read_by_its_interpreter() -> None:
    """Issue 13: the simulated kubelet runs the Pod build_stage_pod makes (as KubeCluster creates
    it) and writes a kubelet's status into it; stage_status_from_pod reads it back."""
    from reconciler.adapters.kube.stagepod import build_stage_pod, stage_status_from_pod
    from reconciler.adapters.sim.saved import STAGE_NS

    sim = _fleet(failures=[StageFailure(node="n1", package="p", stage="apply", exitCode=7, times=1),
                           StageFailure(node="n2", package="p", stage="apply", reason="ErrImagePull", times=1)],
                 stageSeconds=10)
    specs = {n: StageSpec(recipe="r", node=n, package="p", version="1.0.0", stage="apply", pull_ref="img:1.0.0",
                          run_id="x", config_map={"a.conf": "x=1"}) for n in ("n1", "n2", "n3")}
    for s in specs.values():
        sim.start_stage(s)
    pod = sim.stage_pod(specs["n1"].pod_name)
    assert pod is not None
    assert {k: v for k, v in pod.items() if k != "status"} | {"metadata": {
        k: v for k, v in pod["metadata"].items() if k != "creationTimestamp"}} == build_stage_pod(
        specs["n1"], namespace=STAGE_NS)
    assert pod["status"]["phase"] == "Pending" and stage_status_from_pod(pod)[0].phase == "running"
    sim.advance(10)
    failed = sim.stage_pod(specs["n1"].pod_name)
    assert failed is not None
    st, container = stage_status_from_pod(failed)
    assert (st.phase, st.exit_code, st.reason, container) == ("failed", 7, "Error", "p-apply")
    assert failed["status"]["phase"] == "Failed"
    assert "simulated failure (exit 7)" in sim.stage_status(specs["n1"], log=True).log_tail
    assert sim.stage_status(specs["n1"]).log_tail == ""  # as the kube adapter: the log only when asked
    pulling = sim.stage_status(specs["n2"])  # waits on the pull; the executor's pull grace decides
    assert (pulling.phase, pulling.reason) == ("pending", "ErrImagePull")
    done = sim.stage_pod(specs["n3"].pod_name)
    assert done is not None and done["status"]["phase"] == "Running"
    assert stage_status_from_pod(done)[0].phase == "succeeded" == sim.stage_status(specs["n3"]).phase

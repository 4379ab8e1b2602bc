"""``reconciler import`` (issue #8 item 6): a fleet half-way through a NodeWright rollout moves to
node-reconciler without re-running packages — complete nodes stay untouched, the erroring node and
the node interrupted in the middle of its interrupt continue where they were, the cordon the old
operator held is released by us, a cordon someone else placed stays."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.adapters.sim.fleet import SimFleet
from reconciler.model.nodestate import (
    CordonRecord,
    PackageState,
    cordon_key,
    dump_state,
    parse_model,
    parse_state,
    state_key,
    status_key,
)
from reconciler.model.observed import NodeInfo
from reconciler.ops.migrate import import_node, plan_import
from reconciler.ops.nodeops import IGNORE_LABEL
from reconciler.testing import builders
from reconciler.testing.fleetgen import make_node
from tests.unit.ops.conftest import RunCli, load_fleet, write_fleet

NAME = "gpu-setup"
OLD = "skyhook.nvidia.com"
SHA = "sha256:" + "d" * 64
SKYHOOK = f"""\
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: {NAME}
spec:
  nodeSelectors: {{matchLabels: {{pool: gpu}}}}
  interruptionBudget: {{count: 2}}
  packages:
    base:
      version: 1.0.0
      image: ghcr.io/acme/base
      containerSHA: {SHA}
    tune:
      version: 2.0.0
      image: ghcr.io/acme/tune
      containerSHA: {SHA}
      dependsOn: {{base: 1.0.0}}
      interrupt: {{type: reboot}}
"""


def entry(name: str, version: str, stage: str, state: str, restarts: int = 0) -> PackageState:
    return PackageState(name=name, version=version, image=f"ghcr.io/acme/{name}", stage=stage,  # type: ignore[arg-type]
                        state=state, restarts=restarts)  # type: ignore[arg-type]


def old_state(*entries: PackageState) -> str:
    return dump_state({e.key: e for e in entries})


BASE_DONE = entry("base", "1.0.0", "config", "complete")
TUNE_DONE = entry("tune", "2.0.0", "post-interrupt", "complete")


def old_node(name: str, state: str | None, status: str = "", *, cordon: bool = False, unschedulable: bool = False,
             ignore: bool = False) -> dict[str, object]:
    ann: dict[str, str] = {}
    labels = {"pool": "gpu"}
    if state is not None:
        ann[f"{OLD}/nodeState_{NAME}"] = state
        ann[f"{OLD}/version_{NAME}"] = "v0.15.0"
    if status:
        ann[f"{OLD}/status_{NAME}"] = status
        labels[f"{OLD}/status_{NAME}"] = status
    if cordon:
        ann[f"{OLD}/cordon_{NAME}"] = "true"
    if ignore:
        labels[f"{OLD}/ignore"] = "true"
    return make_node(name, labels, annotations=ann, unschedulable=unschedulable)


@pytest.fixture
def halfway(tmp_path: Path) -> Path:
    """Six nodes of a NodeWright rollout stopped half-way."""
    objs = [
        old_node("n1", old_state(BASE_DONE, TUNE_DONE), "complete"),
        old_node("n2", old_state(BASE_DONE, TUNE_DONE), "complete"),
        # tune's apply keeps failing (NodeWright retries forever)
        old_node("n3", old_state(BASE_DONE, entry("tune", "2.0.0", "apply", "erroring", 3)), "erroring"),
        # the operator was stopped while tune's reboot was in progress; it holds the cordon
        old_node("n4", old_state(BASE_DONE, entry("tune", "2.0.0", "interrupt", "in_progress")), "in_progress",
                 cordon=True, unschedulable=True),
        old_node("n5", None),  # not reached yet
        # complete, but an administrator cordoned it for an unrelated reason
        old_node("n6", old_state(BASE_DONE, TUNE_DONE), "complete", unschedulable=True),
    ]
    return write_fleet(tmp_path / "fleet.yaml", objs)


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    p = tmp_path / "skyhook.yaml"
    p.write_text(SKYHOOK)
    return p


def _plan(cli: RunCli, recipe: Path, fleet: Path) -> dict[str, object]:
    rc, out, err = cli("plan", str(recipe), "--cluster", f"sim:{fleet}", "-o", "json")
    assert rc == 0, err
    doc: dict[str, object] = json.loads(out)
    return doc


def test_import_then_plan_shows_only_the_remaining_work(halfway: Path, recipe: Path, cli: RunCli) -> None:
    before = _plan(cli, recipe, halfway)
    assert any("n4 is already cordoned by someone else" in w for w in before["warnings"])  # type: ignore[union-attr]

    rc, out, _ = cli("import", "--from", "skyhook", "--name", NAME, "--cluster", f"sim:{halfway}", "--dry-run")
    assert rc == 0 and "5 node(s) to write" in out and "dry run: nothing was written" in out
    assert "PATCH node/n4" in out and "cordon taken over" in out

    rc, out, _ = cli("import", "--from", "nodewright", "--name", NAME, "--cluster", f"sim:{halfway}", "-y",
                     "-o", "json")
    doc = json.loads(out)
    assert rc == 0 and doc["written"] == 5 and {n["node"] for n in doc["nodes"]} == {"n1", "n2", "n3", "n4", "n6"}
    assert {n["node"]: n["source"] for n in doc["nodes"]}["n1"] == OLD  # nodewright falls back to skyhook keys
    nodes = load_fleet(halfway)
    n4 = nodes["n4"]["metadata"]
    assert parse_model(CordonRecord, n4["annotations"][cordon_key(NAME)]).runId == f"import-nodewright-{NAME}"
    assert n4["labels"][status_key(NAME)] == "in_progress"
    assert cordon_key(NAME) not in nodes["n6"]["metadata"]["annotations"]  # not the old operator's cordon
    st = parse_state(nodes["n3"]["metadata"]["annotations"][state_key(NAME)])
    assert (st["tune|2.0.0"].stage, st["tune|2.0.0"].state, st["tune|2.0.0"].restarts) == ("apply", "erroring", 3)
    assert f"{OLD}/nodeState_{NAME}" in nodes["n1"]["metadata"]["annotations"]  # old state kept by default

    after = _plan(cli, recipe, halfway)
    work = {n["name"]: n for n in after["nodes"] if n["batch"] > 0}  # type: ignore[union-attr,index]
    assert set(work) == {"n3", "n4", "n5"}  # n1, n2, n6 are done: nothing runs there again
    assert after["summary"]["nodesChanging"] == 3  # type: ignore[index]
    def steps(node: str) -> list[tuple[str, list[str]]]:
        return [(s["package"], s["stages"]) for s in work[node]["steps"]]

    assert steps("n3") == [("tune", ["apply", "config", "post-interrupt"])]  # resumes tune at apply; base is done
    assert steps("n4") == [("tune", ["post-interrupt"])]  # the interrupt runs again, then post-interrupt
    assert work["n4"]["interrupt"] == {"type": "reboot", "services": []} and work["n4"]["cordon"]
    assert {s["package"] for s in work["n5"]["steps"]} == {"base", "tune"}
    assert not any(n["imported"] for n in after["nodes"])  # type: ignore[union-attr]
    assert not any("n4 is already cordoned" in w for w in after["warnings"])  # type: ignore[union-attr]
    assert any("n6 is already cordoned" in w for w in after["warnings"])  # type: ignore[union-attr]

    # the rollout finishes the remaining work without re-running anything NodeWright completed
    sim = SimFleet.from_file(str(halfway))
    from reconciler.execute.rollout import Rollout
    from reconciler.load import load_inputs, policy_for
    from reconciler.observe.snapshot import observe
    from reconciler.plan.planner import compute_plan

    inputs = load_inputs([str(recipe)])
    (r,) = inputs.recipes
    pol = policy_for(r, inputs)
    res = Rollout(r, pol, compute_plan(r, pol, observe(sim)), sim, sim, run_id="run-import",
                  poll_seconds=5.0).run()
    assert res.result == "succeeded", [n.to_dict() for n in res.nodes]
    started = {(node, pkg, stage) for _, ev, node, pkg, _, stage in sim.stage_log if ev == "start"}
    assert not [s for s in started if s[0] in ("n1", "n2", "n6")]
    assert {s for s in started if s[0] == "n4"} == {("n4", "tune", "interrupt"), ("n4", "tune", "post-interrupt")}
    assert ("n3", "base", "apply") not in started and ("n3", "tune", "apply") in started
    final = {n.name: n for n in sim.list_nodes()}
    assert not final["n4"].unschedulable and final["n6"].unschedulable  # ours released, theirs kept
    assert cordon_key(NAME) not in final["n4"].annotations


def test_import_node_rules() -> None:
    def mk(ann: dict[str, str], labels: dict[str, str] | None = None, unschedulable: bool = False) -> NodeInfo:
        return builders.node("n", labels=labels, annotations=ann, unschedulable=unschedulable, resource_version="3")

    s = old_state(BASE_DONE)
    assert import_node(mk({}), NAME, "skyhook") is None
    nw = import_node(mk({f"nodewright.nvidia.com/nodeState_{NAME}": s, f"{OLD}/nodeState_{NAME}": "{bad"}), NAME,
                     "nodewright", recipe="ours")
    assert nw is not None and nw.prefix == "nodewright.nvidia.com" and nw.patch is not None
    assert set(nw.patch.annotations) == {state_key("ours")}
    bad = import_node(mk({f"{OLD}/nodeState_{NAME}": "{bad"}), NAME, "skyhook")
    assert bad is not None and bad.patch is None and "not JSON" in bad.error
    have = import_node(mk({f"{OLD}/nodeState_{NAME}": s, state_key(NAME): "{}"}), NAME, "skyhook")
    assert have is not None and have.patch is None and "--overwrite" in have.notes[0]
    over = import_node(mk({f"{OLD}/nodeState_{NAME}": s, state_key(NAME): "{}"}), NAME, "skyhook", overwrite=True)
    assert over is not None and over.patch is not None
    stale = import_node(mk({f"{OLD}/nodeState_{NAME}": s, f"{OLD}/cordon_{NAME}": "true",
                            f"{OLD}/status_{NAME}": "paused"}, {f"{OLD}/ignore": "true"}), NAME, "skyhook")
    assert stale is not None and stale.patch is not None and not stale.cordon and stale.ignore
    assert stale.patch.labels == {IGNORE_LABEL: "true"}
    assert any("schedulable" in n for n in stale.notes) and any("'paused'" in n for n in stale.notes)
    rm = import_node(mk({f"{OLD}/nodeState_{NAME}": s, f"{OLD}/version_{NAME}": "v0.15.0",
                         f"{OLD}/status_{NAME}": "complete"}, {f"{OLD}/status_{NAME}": "complete"}),
                     NAME, "skyhook", remove_legacy=True)
    assert rm is not None and rm.patch is not None
    assert rm.patch.annotations[f"{OLD}/nodeState_{NAME}"] is None
    assert rm.patch.annotations[f"{OLD}/version_{NAME}"] is None
    assert rm.patch.labels[f"{OLD}/status_{NAME}"] is None and rm.patch.labels[status_key(NAME)] == "complete"
    assert [i.node for i in plan_import([mk({}), mk({f"{OLD}/nodeState_{NAME}": s})], NAME, "skyhook")] == ["n"]


def test_import_cli_errors(halfway: Path, cli: RunCli) -> None:
    rc, _, err = cli("import", "--from", "skyhook", "--name", "nope", "--cluster", f"sim:{halfway}", "-y")
    assert rc == 2 and "skyhook.nvidia.com/nodeState_nope" in err
    rc, _, err = cli("import", "--from", "skyhook", "--name", NAME, "--cluster", f"sim:{halfway}")
    assert rc == 2 and "pass -y/--yes" in err

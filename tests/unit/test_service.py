"""The library API (issue 15): the application service carries every safety check, so a Python
caller cannot run a paused recipe, a stale plan, an unpinned package or a second run by going
around the CLI."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

import reconciler
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.errors import InputError, LeaseHeldError, PlanMismatchError
from reconciler.execute.lock import LeaseLock
from reconciler.ops.controls import control_patch, store_for

ROOT = Path(__file__).resolve().parents[2]
RECIPE = str(ROOT / "recipes" / "gpu-training-tuning.yaml")
POLICIES = str(ROOT / "policies")
FLEET = str(ROOT / "examples" / "fleets" / "gpu-24.yaml")
SETTINGS = reconciler.ApplySettings(holder="test/1", workers=1)


def _node_writes(sim: SimFleet) -> list[tuple[str, str]]:
    return [c for c in sim.calls if not c[0].endswith("-lease")]


def test_the_public_names_are_exported() -> None:
    assert set(reconciler.__all__) >= {"apply_recipes", "plan_recipes", "load_inputs", "ApplySettings",
                                       "ApplyResult", "Observer", "__version__"}
    for name in reconciler.__all__:
        assert getattr(reconciler, name) is not None


def test_the_api_page_example_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "docs" / "api.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", text, re.S)
    monkeypatch.chdir(ROOT)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/api.md", "exec"), {})
    assert "succeeded: True" in out.getvalue()


def test_apply_end_to_end_on_the_simulated_fleet_with_observers() -> None:
    inputs = reconciler.load_inputs([RECIPE], [POLICIES], locked=True)
    sim = SimFleet.from_file(FLEET)
    seen: list[str] = []

    class Recorder:
        def tainted(self, nodes: object) -> None: seen.append("tainted")
        def skipped(self, recipe: object, reason: str) -> None: seen.append("skipped")
        def started(self, recipe: object, plan: object, run_id: str) -> None: seen.append("started")
        def event(self, plan: object, event: object) -> None: seen.append("event")
        def finished(self, recipe: object, plan: object, result: object) -> None: seen.append("finished")
        def failed(self, recipe: object, error: object, run_id: str) -> None: seen.append("failed")

    res = reconciler.apply_recipes(inputs, sim, sim, SETTINGS, [Recorder()])
    assert res.succeeded and len(res.results) == 1 and res.results[0].result == "succeeded"
    assert seen[0] == "started" and seen[-1] == "finished" and "event" in seen
    assert not sim.leases  # released
    again = reconciler.plan_recipes(inputs, sim)
    assert again[0].summary.nodesChanging == 0


def test_a_paused_recipe_is_refused_through_the_library_too() -> None:
    inputs = reconciler.load_inputs([RECIPE], [POLICIES], locked=True)
    sim = SimFleet.from_file(FLEET)
    patch, _, _ = control_patch(sim, "gpu-training-tuning", "pause", reason="freeze", by="sre")
    assert patch is not None
    store = store_for(sim)
    assert store is not None
    patch.write(store)
    before = len(_node_writes(sim))
    res = reconciler.apply_recipes(inputs, sim, sim, SETTINGS)
    assert not res.results and "paused" in res.skipped["gpu-training-tuning"]
    assert len(_node_writes(sim)) == before  # nothing written to any node


def test_a_stale_reviewed_plan_and_a_held_lease_are_refused_before_any_write() -> None:
    inputs = reconciler.load_inputs([RECIPE], [POLICIES], locked=True)
    sim = SimFleet.from_file(FLEET)
    stale = reconciler.ApplySettings(holder="test/1", workers=1, expected_hashes={"gpu-training-tuning": "0" * 64})
    with pytest.raises(PlanMismatchError, match="stale"):
        reconciler.apply_recipes(inputs, sim, sim, stale)
    assert not _node_writes(sim) and not sim.leases
    LeaseLock(sim, sim, "gpu-training-tuning", "another-run@elsewhere/1").acquire()
    with pytest.raises(LeaseHeldError, match="another-run"):
        reconciler.apply_recipes(inputs, sim, sim, SETTINGS)
    assert not _node_writes(sim)


def test_locked_mode_is_enforced_by_the_service(tmp_path: Path) -> None:
    text = Path(RECIPE).read_text()
    unpinned = re.sub(r"\n\s*containerSHA:.*", "", text)
    assert unpinned != text
    f = tmp_path / "unpinned.yaml"
    f.write_text(unpinned)
    inputs = reconciler.load_inputs([str(f)], [POLICIES], locked=False)  # a caller that forgot
    sim = SimFleet.from_file(FLEET)
    with pytest.raises(InputError):
        reconciler.apply_recipes(inputs, sim, sim, SETTINGS)  # settings.locked defaults to True
    assert not _node_writes(sim)

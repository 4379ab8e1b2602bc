"""``reconciler apply`` and ``reconciler status`` on the simulated fleet, through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.cli.main import main
from reconciler.testing.fleetgen import make_node, make_pdb, make_pod, write_fleet

SHA = "sha256:" + "b" * 64
RECIPE = f"""\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: NodeRecipe
metadata: {{name: kernel-fix}}
spec:
  version: 2026.11.1
  nodeSelector: {{matchLabels: {{pool: gpu}}}}
  podNonInterruptLabels: {{matchLabels: {{workload: training}}}}
  interruptionBudget: {{count: 1}}
  packages:
    base:
      version: 1.0.0
      image: ghcr.io/example/base
      containerSHA: {SHA}
    fix:
      version: 2.1.0
      image: ghcr.io/example/fix
      containerSHA: {SHA}
      dependsOn: {{base: 1.0.0}}
      interrupt: {{type: reboot}}
"""


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    objs = [make_node(f"n{i}", {"pool": "gpu"}) for i in (1, 2, 3)]
    objs += [make_pod("web", "w-1", "n1", labels={"app": "w"}, owner=("ReplicaSet", "w")),
             make_pod("web", "w-2", "n2", labels={"app": "w"}, owner=("ReplicaSet", "w")),
             make_pdb("web", "w", {"app": "w"}, max_unavailable=1)]
    fleet = tmp_path / "fleet.yaml"
    write_fleet(fleet, objs)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE)
    return fleet, recipe


def test_apply_json_result_document(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    fleet, recipe = files
    rc = main(["apply", str(recipe), "--cluster", f"sim:{fleet}", "-o", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["result"] == "succeeded"
    assert {n["name"]: n["state"] for n in doc["nodes"]} == {"n1": "complete", "n2": "complete", "n3": "complete"}
    assert doc["compartments"][0]["batches"][0]["nodes"] == ["n1"]
    events = {e["event"] for e in doc["timeline"]}
    assert {"cordon", "evict", "drained", "stage-start", "stage-end", "interrupt", "rebooted", "uncordon"} <= events


def test_crash_then_resume_from_the_saved_fleet(files: tuple[Path, Path], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    fleet, recipe = files
    saved = tmp_path / "saved.yaml"
    rc = main(["apply", str(recipe), "--cluster", f"sim:{fleet}", "--sim-crash-after", "12",
               "--sim-save", str(saved), "-o", "json"])
    assert rc == 137
    capsys.readouterr()
    assert main(["status", "--cluster", f"sim:{saved}", "-o", "json"]) == 0
    mid = json.loads(capsys.readouterr().out)
    assert any(n["cordonedByUs"] for n in mid["nodes"])
    rc = main(["apply", str(recipe), "--cluster", f"sim:{saved}", "--sim-save", str(saved), "-o", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["result"] == "succeeded"
    assert any(e["event"] == "resume" for e in doc["timeline"])
    assert main(["status", "--cluster", f"sim:{saved}", "-o", "json"]) == 0
    end = json.loads(capsys.readouterr().out)
    for n in end["nodes"]:
        assert not n["unschedulable"] and not n["cordonedByUs"]
        assert {(p["name"], p["version"], p["state"]) for p in n["packages"]} == {
            ("base", "1.0.0", "complete"), ("fix", "2.1.0", "complete")}


def test_stale_plan_is_refused_and_nothing_is_written(files: tuple[Path, Path], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    fleet, recipe = files
    plan = tmp_path / "plan.json"
    assert main(["plan", str(recipe), "--cluster", f"sim:{fleet}", "-o", "json"]) in (0, 3)
    plan.write_text(capsys.readouterr().out)
    recipe.write_text(RECIPE.replace("2.1.0", "2.1.1"))
    saved = tmp_path / "after.yaml"
    rc = main(["apply", str(recipe), "--cluster", f"sim:{fleet}", "--plan", str(plan), "--sim-save", str(saved)])
    assert rc == 2
    assert "stale" in capsys.readouterr().err
    assert not saved.exists()


def test_bad_recipe_exits_2_with_file_and_line(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    fleet, recipe = files
    recipe.write_text(RECIPE.replace("version: 2.1.0", "version: two"))
    assert main(["apply", str(recipe), "--cluster", f"sim:{fleet}"]) == 2
    err = capsys.readouterr().err
    assert f"{recipe}:" in err and "Traceback" not in err


def test_locked_apply_refuses_a_downgrade_without_uninstall_steps(files: tuple[Path, Path], tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    fleet, recipe = files
    saved = tmp_path / "after.yaml"
    assert main(["apply", str(recipe), "--cluster", f"sim:{fleet}", "--sim-save", str(saved), "-o", "json"]) == 0
    capsys.readouterr()
    recipe.write_text(RECIPE.replace("version: 2.1.0", "version: 2.0.0"))
    again = tmp_path / "again.yaml"
    rc = main(["apply", str(recipe), "--cluster", f"sim:{saved}", "--sim-save", str(again)])
    err = capsys.readouterr().err
    assert rc == 2 and "downgrade fix 2.1.0 -> 2.0.0" in err and "uninstall.enabled" in err
    assert not again.exists()
    rc = main(["apply", str(recipe), "--no-locked", "--cluster", f"sim:{saved}", "-o", "json"])
    assert rc == 0 and json.loads(capsys.readouterr().out)["result"] == "succeeded"


def test_a_reviewed_multi_recipe_plan_admits_applying_one_of_its_recipes(
        files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fleet, recipe = files
    other = tmp_path / "other.yaml"
    other.write_text(RECIPE.replace("name: kernel-fix", "name: other-fix"))
    assert main(["plan", str(recipe), str(other), "--cluster", f"sim:{fleet}", "-o", "json"]) in (0, 3)
    plan = tmp_path / "plan.json"
    plan.write_text(capsys.readouterr().out)
    assert main(["apply", str(recipe), "--cluster", f"sim:{fleet}", "--plan", str(plan), "-o", "json"]) == 0
    capsys.readouterr()
    third = tmp_path / "third.yaml"
    third.write_text(RECIPE.replace("name: kernel-fix", "name: third-fix"))
    assert main(["apply", str(third), "--cluster", f"sim:{fleet}", "--plan", str(plan)]) == 2
    assert "no plan for recipe third-fix" in capsys.readouterr().err


def test_a_simulated_fleet_and_a_kubeconfig_together_are_refused(tmp_path: Path) -> None:
    """A new user's mix-up: both named, the kubeconfig was silently ignored."""
    from reconciler.cli.main import main

    root = Path(__file__).resolve().parents[3]
    rc = main(["plan", str(root / "recipes"), "--cluster", f"sim:{root / 'examples' / 'fleets' / 'gpu-24.yaml'}",
               "--kubeconfig", str(tmp_path / "nokube")])
    assert rc == 2


def test_a_missing_kubeconfig_file_is_bad_input_naming_the_option(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from reconciler.cli.main import main

    root = Path(__file__).resolve().parents[3]
    rc = main(["plan", str(root / "recipes"), "--kubeconfig", str(tmp_path / "nokube")])
    err = capsys.readouterr().err
    assert rc == 2 and "--kubeconfig" in err and "no such file" in err and "Traceback" not in err


@pytest.mark.parametrize("verb", ["plan", "apply", "status"])
def test_no_cluster_at_all_is_bad_input_that_says_how_to_name_one(
        verb: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """No --cluster, --kubeconfig, $KUBECONFIG, ~/.kube/config nor in-cluster service account: a
    new user's first command. Exit 2 naming the options, not the client's "Invalid kube-config"."""
    from reconciler.cli.main import main

    for var in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    root = Path(__file__).resolve().parents[3]
    rc = main([verb] + ([] if verb == "status" else [str(root / "recipes")]))
    err = capsys.readouterr().err
    assert rc == 2 and "no cluster given" in err and "--cluster sim:FILE" in err and "--kubeconfig" in err
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text("apiVersion: v1\nkind: Config\n")  # one exists: the client's turn
    rc = main([verb] + ([] if verb == "status" else [str(root / "recipes")]))
    assert rc == 4 and "no cluster given" not in capsys.readouterr().err

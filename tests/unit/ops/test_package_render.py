"""ConfigMap data of a package version and node metadata files (issue #8 item 1), pure functions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from reconciler.load import load_inputs
from reconciler.model.recipe import Recipe
from reconciler.packages.render import (
    config_map_name,
    dns_label,
    image_tag,
    metadata_config_map_name,
    missing_config_files,
    node_metadata_config_map,
    node_metadata_files,
    package_config_map,
    stage_files,
)
from reconciler.testing import builders
from reconciler.testing.fleetgen import make_node
from tests.unit.ops.conftest import RunCli, write_fleet
from tests.unit.ops.test_package_config import make_package, step

SHA = "sha256:" + "c" * 64
RECIPE = f"""\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: NodeRecipe
metadata: {{name: gpu-tuning}}
spec:
  version: 2026.11.1
  nodeSelector: {{matchLabels: {{pool: gpu}}}}
  interruptionBudget: {{count: 1}}
  packages:
    sysctl-shell:
      version: 1.0.0+build.7
      image: ghcr.io/example/sysctl-shell
      containerSHA: {SHA}
      agentImageOverride: ghcr.io/nvidia/skyhook/agent:6.4.1
      interrupt: {{type: service, services: [containerd]}}
      configInterrupts:
        "sysctl*": {{type: restartAllServices}}
      configMap:
        apply.sh: "sysctl -w vm.max_map_count=262144"
        sysctl.conf: "vm.max_map_count=262144"
    plain:
      version: 2.0.0
      image: ghcr.io/example/plain
      containerSHA: {SHA}
"""


@pytest.fixture
def recipe_file(tmp_path: Path) -> Path:
    p = tmp_path / "recipe.yaml"
    p.write_text(RECIPE)
    return p


@pytest.fixture
def recipe(recipe_file: Path) -> Recipe:
    (r,) = load_inputs([str(recipe_file)]).recipes
    return r


NODE = builders.node("gpu-a-001", labels={"pool": "gpu", "zone": "a"}, annotations={"x/y": "1"})


def test_package_config_map_holds_the_configmap_files(recipe: Recipe) -> None:
    cm = package_config_map(recipe, recipe.packages["sysctl-shell"])
    assert cm["metadata"]["name"] == config_map_name("gpu-tuning", "sysctl-shell", "1.0.0+build.7")
    assert cm["metadata"]["name"].startswith("gpu-tuning-sysctl-shell-1-0-0-build-7-")  # changed → digest suffix
    assert len(cm["metadata"]["name"]) <= 63 and cm["metadata"]["namespace"] == "node-reconciler"
    assert cm["data"] == {"apply.sh": "sysctl -w vm.max_map_count=262144", "sysctl.conf": "vm.max_map_count=262144"}
    ann = cm["metadata"]["annotations"]
    assert ann["reconciler.nodewright.dev/Package.Name"] == "sysctl-shell"
    assert ann["reconciler.nodewright.dev/Package.Version"] == "1.0.0+build.7"
    assert config_map_name("r", "p", "1.0.0") != config_map_name("r", "p", "1.0.0+b")


def test_node_metadata_files(recipe: Recipe) -> None:
    files = node_metadata_files(NODE, recipe, "6.4.1")
    assert set(files) == {"labels.json", "annotations.json", "packages.json"}
    assert json.loads(files["labels.json"]) == {"pool": "gpu", "zone": "a"}
    assert json.loads(files["annotations.json"]) == {"x/y": "1"}
    pk = json.loads(files["packages.json"])
    assert pk["agentVersion"] == "6.4.1"
    assert pk["packages"]["plain"] == {"name": "plain", "version": "2.0.0", "image": "ghcr.io/example/plain"}
    s = pk["packages"]["sysctl-shell"]
    assert s["interrupt"] == {"type": "service", "services": ["containerd"]}
    assert s["configInterrupts"] == {"sysctl*": {"type": "restartAllServices"}}
    assert s["agentImageOverride"] == "ghcr.io/nvidia/skyhook/agent:6.4.1"
    assert node_metadata_files(NODE, recipe, "6.4.1") == files  # deterministic


def test_stage_files_and_metadata_config_map(recipe: Recipe) -> None:
    files = stage_files(NODE, recipe, "sysctl-shell", "6.4.1")
    assert sorted(files) == ["configmaps/apply.sh", "configmaps/sysctl.conf", "node-metadata/annotations.json",
                             "node-metadata/labels.json", "node-metadata/packages.json"]
    cm = node_metadata_config_map(NODE, recipe, "6.4.1", namespace="ops")
    assert cm["metadata"]["namespace"] == "ops" and cm["data"]["labels.json"] == files["node-metadata/labels.json"]
    name = metadata_config_map_name("a" * 40, "b" * 40)
    assert len(name) <= 63 and "-metadata-" in name
    assert metadata_config_map_name("r", "n1") != metadata_config_map_name("r", "n2")
    with pytest.raises(KeyError):
        stage_files(NODE, recipe, "nope", "1")


def test_small_helpers() -> None:
    assert image_tag("ghcr.io/nvidia/skyhook/agent:6.4.1") == "6.4.1"
    assert image_tag("registry:5000/agent") == "latest"
    assert image_tag("agent@sha256:abc") == "sha256:abc"
    assert dns_label("ok-name") == "ok-name" and dns_label("Not_OK").startswith("not-ok-")
    assert missing_config_files(("a.sh", "b.sh"), {"a.sh": ""}) == ["b.sh"]


def test_cli_package_render(recipe_file: Path, tmp_path: Path, cli: RunCli) -> None:
    fleet = write_fleet(tmp_path / "fleet.yaml", [make_node("gpu-a-001", {"pool": "gpu"})])
    rc, out, err = cli("package", "render", str(recipe_file), "--package", "sysctl-shell",
                       "--node", "gpu-a-001", "--cluster", f"sim:{fleet}")
    docs = list(YAML(typ="safe", pure=True).load_all(out))
    assert rc == 0 and not err and [d["kind"] for d in docs] == ["ConfigMap", "ConfigMap"]
    assert json.loads(docs[1]["data"]["packages.json"])["agentVersion"] == "6.4.1"
    # --check compares the package directory with the recipe: version and expected_config_files
    pkg = make_package(tmp_path / "pkg", {"apply": [step("a", "a.sh")], "apply-check": [step("c", "a_check.sh")]},
                       files=("a.sh", "a_check.sh"), expected_config_files=["apply.sh", "missing.conf"])
    rc, out, err = cli("package", "render", str(recipe_file), "--package", "sysctl-shell", "--check", str(pkg),
                       "-o", "json")
    assert rc == 2 and json.loads(out)["items"][0]["kind"] == "ConfigMap"
    assert "package_version 1.2.3 but the recipe pins sysctl-shell 1.0.0+build.7" in err
    assert "missing.conf missing from the recipe's configMap" in err and "apply.sh" not in err

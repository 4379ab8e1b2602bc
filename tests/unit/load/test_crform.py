"""NodeRecipe objects as the API server returns them are loaded as their files would be
(reconciler.load.load_objects, reconciler.load.crform): server metadata and status ignored,
errors naming the object; a file saved from the cluster is a recipe file."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.errors import InputError
from reconciler.load import load_inputs, load_objects

ROOT = Path(__file__).resolve().parents[3]
FILE = ROOT / "recipes" / "gpu-training-tuning.yaml"


def as_stored(doc: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    meta = out["metadata"]
    meta.setdefault("annotations", {})["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
    meta.update(uid="0b1d", resourceVersion="812", generation=4, creationTimestamp="2026-11-30T12:00:00Z",
                managedFields=[{"manager": "kubectl", "operation": "Apply"}])
    out["status"] = {"observedGeneration": 3, "conditions": []}
    return out


def test_a_stored_object_loads_as_its_file() -> None:
    doc = yaml.safe_load(FILE.read_text())
    from_file = load_inputs([str(FILE)], [str(ROOT / "policies")], locked=True).recipes[0]
    from_object = load_objects([as_stored(doc)], [str(ROOT / "policies")], locked=True).recipes[0]
    assert from_object.version == from_file.version == "2026.11.2"
    assert from_object.model_dump(exclude={"source"}) == from_file.model_dump(exclude={"source"})
    assert from_object.source == "NodeRecipe/gpu-training-tuning"


def test_the_release_given_twice_and_different_is_an_error(tmp_path: Path) -> None:
    text = FILE.read_text().replace("  name: gpu-training-tuning\n", "  name: gpu-training-tuning\n"
                                    "  annotations: {reconciler.nodewright.dev/version: '9'}\n")
    f = tmp_path / "r.yaml"
    f.write_text(text)
    with pytest.raises(InputError, match=r"r\.yaml:\d+:\d+: metadata\.annotations.*disagree"):
        load_inputs([str(f)], [str(ROOT / "policies")])


def test_an_error_in_an_object_names_the_object_and_the_field() -> None:
    doc = as_stored(yaml.safe_load(FILE.read_text()))
    doc["spec"]["packages"]["base-tools"]["version"] = "1.x"
    with pytest.raises(InputError) as e:
        load_objects([doc], [str(ROOT / "policies")])
    assert str(e.value).startswith("NodeRecipe/gpu-training-tuning: spec.packages.base-tools.version:")


def test_an_unknown_spec_field_of_an_object_is_refused() -> None:
    doc = as_stored(yaml.safe_load(FILE.read_text()))
    doc["spec"]["drainz"] = {}
    with pytest.raises(InputError, match=r"NodeRecipe/gpu-training-tuning: spec\.drainz"):
        load_objects([doc], [str(ROOT / "policies")])


def _saved(tmp_path: Path, data: Any) -> str:
    """``data`` written as ``kubectl get -o yaml`` prints it (block YAML, server fields and all)."""
    f = tmp_path / "saved.yaml"
    f.write_text(yaml.safe_dump(data, sort_keys=True))
    return str(f)


def test_an_object_saved_as_kubectl_get_prints_it_is_a_recipe_file(tmp_path: Path) -> None:
    """Every reader of files (validate, plan, apply, the controller's --source directory) takes a
    NodeRecipe exactly as the API server returned it: server metadata and status ignored."""
    from reconciler.controller.source import DirectorySource

    doc = yaml.safe_load(FILE.read_text())
    stored = as_stored(doc)
    stored["metadata"].update(namespace="", selfLink="/apis/x", finalizers=["a/b"])
    path = _saved(tmp_path, stored)
    from_file = load_inputs([str(FILE)], [str(ROOT / "policies")], locked=True).recipes[0]
    got = load_inputs([path], [str(ROOT / "policies")], locked=True).recipes[0]
    assert got.model_dump(exclude={"source"}) == from_file.model_dump(exclude={"source"})
    desired = DirectorySource([str(tmp_path)], [str(ROOT / "policies")]).current()
    assert [r.name for r in desired.inputs.recipes] == ["gpu-training-tuning"]


def test_a_list_as_kubectl_get_prints_it_loads_each_item(tmp_path: Path) -> None:
    doc = yaml.safe_load(FILE.read_text())
    second = copy.deepcopy(doc)
    second["metadata"]["name"] = "gpu-training-tuning-b"
    listed = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
              "items": [as_stored(doc), as_stored(second)]}
    got = load_inputs([_saved(tmp_path, listed)], [str(ROOT / "policies")], locked=True)
    assert sorted(r.name for r in got.recipes) == ["gpu-training-tuning", "gpu-training-tuning-b"]


def test_an_error_in_a_list_item_points_at_its_line(tmp_path: Path) -> None:
    doc = as_stored(yaml.safe_load(FILE.read_text()))
    doc["spec"]["priority"] = "high"
    path = _saved(tmp_path, {"apiVersion": "v1", "kind": "List", "items": [doc]})
    with pytest.raises(InputError) as e:
        load_inputs([path], [str(ROOT / "policies")])
    line = next(i for i, t in enumerate(Path(path).read_text().splitlines(), 1) if "priority: high" in t)
    assert e.value.pos is not None and e.value.pos.line == line and e.value.field == "spec.priority"


def test_a_list_without_items_is_refused(tmp_path: Path) -> None:
    path = _saved(tmp_path, {"apiVersion": "v1", "kind": "List", "items": {"a": 1}})
    with pytest.raises(InputError, match=r"items: a List needs items"):
        load_inputs([path])


def test_an_unknown_metadata_field_is_still_refused(tmp_path: Path) -> None:
    doc = yaml.safe_load(FILE.read_text())
    doc["metadata"]["lables"] = {"a": "b"}
    with pytest.raises(InputError, match=r"unknown field 'lables' in metadata; did you mean 'labels'"):
        load_inputs([_saved(tmp_path, doc)], [str(ROOT / "policies")])

"""LIST pages are decoded pruned (:func:`reconciler.load.snapshotfast.list_page_decoder`): the
records made from them are the ones made from the whole objects, for objects the real control
plane served (``tests/data/kube``) and for the builders' objects with every field the converters
read; a page the pruned shape does not take is decoded whole, and a body that is not JSON is
still a TransientError."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from reconciler.adapters.kube.api import decode as _decode
from reconciler.adapters.kube.api import decode_page as _decode_page
from reconciler.adapters.kube.objects import node_from, pdb_from, pod_from
from reconciler.errors import TransientError
from reconciler.testing.fleetgen import make_node, make_pdb, make_pod

DATA = Path(__file__).resolve().parents[2] / "data" / "kube"


def _captured(name: str) -> dict[str, Any]:
    obj: dict[str, Any] = json.loads((DATA / f"{name}.json").read_text())
    return obj


def _objects() -> list[tuple[Any, dict[str, Any]]]:
    node = make_node("n1", {"pool": "gpu"}, uid="u1", boot_id="b1", resource_version="7")
    node["metadata"]["annotations"] = {"reconciler.nodewright.dev/nodeState_r": '{"a|1.0.0": {"state": "complete"}}'}
    node["spec"]["taints"] = [{"key": "k", "value": "v", "effect": "NoSchedule", "timeAdded": "2026-12-01T00:00:00Z"}]
    node["status"]["conditions"].append({"type": "Validated", "status": "False", "reason": "R", "message": "m"})
    node["status"]["images"] = [{"names": ["x"], "sizeBytes": 1}]
    pod = make_pod("apps", "web-1", "n1", labels={"app": "web"}, owner=("ReplicaSet", "web"), emptydir=True,
                   active_deadline=60, deletion=1.8e9, tolerations=[{"operator": "Exists"}],
                   annotations={"kubernetes.io/config.mirror": "x"})
    pod["spec"]["containers"] = [{"name": "c", "image": "i", "env": [{"name": "A", "value": "1"}]}]
    pod["metadata"]["managedFields"] = [{"manager": "m", "fieldsV1": {"f:spec": {}}}]
    return [(node_from, node), (node_from, _captured("node")),
            (pod_from, pod), (pod_from, _captured("pod-web")), (pod_from, _captured("pod-pending")),
            (pdb_from, make_pdb("apps", "web", {"app": "web"}, max_unavailable="50%")),
            (pdb_from, _captured("pdb-web"))]


@pytest.mark.parametrize(("convert", "obj"), _objects())
def test_records_from_a_pruned_page_are_the_records_from_the_whole_objects(convert: Any, obj: dict[str, Any]) -> None:
    body = orjson.dumps({"kind": "List", "metadata": {"continue": "t1", "resourceVersion": "9"},
                         "items": [obj, obj]})
    pruned, whole = _decode_page(body, "list"), _decode(body, "list")
    assert pruned["metadata"] == {"continue": "t1", "resourceVersion": "9"}
    assert [convert(i) for i in pruned["items"]] == [convert(i) for i in whole["items"]]
    assert len(orjson.dumps(pruned)) < len(body)  # something was left out (managedFields, images, ...)


@pytest.mark.parametrize("body", [
    b'{"items": [{"metadata": ["not", "an", "object"]}]}',  # a kept field of another shape
    b'{"items": {"a": 1}}',
    b'{"items": [{"metadata": {"name": "n1"}}], "metadata": {"continue": ""}}',
    b'[1, 2]',
])
def test_a_page_the_pruned_shape_does_not_take_is_decoded_whole(body: bytes) -> None:
    assert _decode_page(body, "list") == _decode(body, "list")


def test_a_body_that_is_not_json_is_a_transient_error() -> None:
    with pytest.raises(TransientError, match="not JSON"):
        _decode_page(b"<html>proxy error</html>", "list nodes")

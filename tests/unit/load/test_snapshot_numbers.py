"""A number no Kubernetes object can hold (a float that overflows, an integer outside int64) is
refused by the strict snapshot reader with its line:column and, like every validation error, the
object and field it is in (issue 14), in JSON and in YAML, whatever the layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.errors import InputError
from reconciler.load.snapshot import load_snapshot

NODE_A = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a"}}


def _node_b(value: str) -> str:
    return ('{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "b", "labels": {"x": "1e400"}},\n'
            f' "status": {{"capacity": {{"cpu": {value}}}}}}}')


CASES = [
    # (file name, text, the value as written (its position is the error's), field label, message piece)
    ("list.json", '{"apiVersion": "v1", "kind": "List", "items": [\n' + json.dumps(NODE_A) + ",\n"
     + _node_b("1e400") + "]}\n", ": 1e400}", "items[1] (Node/b) status.capacity.cpu", "1e400 overflows"),
    ("int.json", '{"kind": "List", "items": [' + json.dumps(NODE_A) + ", " + _node_b("-92233720368547758090")
     + "]}", ": -92233720368547758090}", "items[1] (Node/b) status.capacity.cpu", "outside int64"),
    ("one.json", json.dumps({**NODE_A, "spec": {"podCIDR": 10**30}}), ": 1000000000000000000000000000000}",
     "document (Node/a) spec.podCIDR", "31 digits"),
    ("array.json", "[" + json.dumps(NODE_A) + ", " + _node_b("1e999") + "]", ": 1e999}",
     "[1] (Node/b) status.capacity.cpu", "1e999 overflows"),
    ("list.yaml", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: a}}\n"
     "- apiVersion: v1\n  kind: Node\n  metadata: {name: b}\n  status:\n    capacity: {cpu: 1e400}\n",
     ": 1e400}", "items[1] (Node/b) status.capacity.cpu", "not a finite number"),
    ("docs.yaml", "kind: Node\napiVersion: v1\nmetadata: {name: a}\n---\nkind: Node\napiVersion: v1\n"
     "metadata: {name: b}\nspec:\n  taints: [{key: k, effect: NoSchedule, n: 123456789012345678901234}]\n",
     ": 123456789012345678901234}", "document 2 (Node/b) spec.taints[0].n", "outside int64"),
]


@pytest.mark.parametrize(("name", "text", "value", "field", "message"), CASES, ids=[c[0] for c in CASES])
def test_a_number_out_of_range_names_its_position_object_and_field(tmp_path: Path, name: str, text: str, value: str,
                                                                   field: str, message: str) -> None:
    start = text.index(value) + 2  # the number itself, past ": "
    at = f"{text.count(chr(10), 0, start) + 1}:{start - text.rfind(chr(10), 0, start)}"
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError) as got:
        load_snapshot(str(path))
    e = got.value
    assert e.pos is not None and f"{e.pos.line}:{e.pos.column}" == at, str(e)
    assert e.field == field and message in e.message, str(e)


def test_a_bad_namespace_is_not_named_as_the_default(tmp_path: Path) -> None:
    path = tmp_path / "ns.json"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": 7}, "spec": {"nodeName": "a"}}
    path.write_text(json.dumps({"kind": "List", "items": [NODE_A, pod]}))
    with pytest.raises(InputError) as got:
        load_snapshot(str(path))
    assert got.value.field.startswith("items[1] (Pod/p) metadata.namespace"), str(got.value)


def test_past_the_size_bound_the_error_keeps_its_position_without_the_field(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from reconciler.load import snapshotfile

    name, text, value, _, message = CASES[0]
    monkeypatch.setattr(snapshotfile, "NUMBER_FIELD_MAX_CHARS", len(text) - 1)
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError) as got:
        load_snapshot(str(path))
    assert got.value.field == "" and message in got.value.message and got.value.pos is not None
    assert got.value.pos.line == text.count("\n", 0, text.index(value)) + 1

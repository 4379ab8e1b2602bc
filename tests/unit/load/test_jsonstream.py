"""The windowed JSON snapshot reader (reconciler.load.jsonstream) decides exactly as the whole-file
reader: the same documents, or the same error (message and position), for every JSON file of the
bad-snapshot corpus, for generated fleets cut at every window size, and for fuzzed documents
(random values, kubectl's 4-space layout or compact, damaged text). The first window is made tiny
so items, keys, numbers and escapes are cut by window ends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reconciler.load.jsonstream as js
import reconciler.load.snapshotfile as sf
from reconciler.adapters.sim.write import dumps_list
from reconciler.errors import InputError
from reconciler.testing.fleetgen import make_node, make_pdb, make_pod

CORPUS = Path(__file__).resolve().parents[2] / "data" / "bad" / "snapshots"


def _read(path: Path, *, stream: bool, chunk: int = 7) -> tuple[str, Any]:
    """("ok", docs) or ("error", message with position), read windowed or whole."""
    old_stream, old_chunk = sf.STREAM_BYTES, js.CHUNK
    sf.STREAM_BYTES, js.CHUNK = (0 if stream else 1 << 62), chunk
    try:
        snap = sf.read_snapshot(str(path))
        if stream and path.read_bytes().lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"["):
            assert snap.text is None or snap.fmt == "json"
        return "ok", snap.docs
    except InputError as e:
        return "error", str(e)
    finally:
        sf.STREAM_BYTES, js.CHUNK = old_stream, old_chunk


def _fleet(n: int = 3) -> list[dict[str, Any]]:
    state = json.dumps({"pkg|1.0.0": {"name": "pkg", "version": "1.0.0", "state": "complete"}})
    out: list[dict[str, Any]] = []
    for i in range(n):
        out.append(make_node(f"n{i}", {"pool": "gpu"}, annotations={"reconciler.nodewright.dev/nodeState_r": state,
                                                                     "big": "x" * 200}))
        out.append(make_pod("web", f"web-{i}", f"n{i}", labels={"app": "web"}, owner=("ReplicaSet", "web-7")))
    out.append(make_pdb("web", "web", {"app": "web"}, max_unavailable="50%"))
    return out


@pytest.mark.parametrize("path", sorted(p for p in CORPUS.iterdir() if p.suffix == ".json"), ids=lambda p: p.name)
def test_corpus_file_reads_the_same_windowed(path: Path) -> None:
    assert _read(path, stream=True) == _read(path, stream=False)


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 64, 1000, 1 << 20])
def test_generated_fleet_reads_the_same_at_every_window_size(tmp_path: Path, chunk: int) -> None:
    path = tmp_path / "fleet.json"
    path.write_text(dumps_list(_fleet(), "json"), encoding="utf-8")
    got = _read(path, stream=True, chunk=chunk)
    assert got[0] == "ok" and got == _read(path, stream=False)
    snap_items = got[1][0]["items"]
    nodes = [o for o in snap_items if o["kind"] == "Node"]
    # equal long annotation values are one string after a windowed read
    assert nodes[0]["metadata"]["annotations"]["big"] is nodes[2]["metadata"]["annotations"]["big"]


@pytest.mark.parametrize("text", [
    '{"kind": "List", "items": [{"a": 12345678901234567890}]}',  # outside int64, cut anywhere
    '{"kind": "List", "items": [{"a": 1234}], "x": 5}',
    '{"kind": "List", "items": [{"a": "\\ud800"}]}',
    '{"kind": "List", "items": [{"a": "\\ud83d\\ude00"}]}',
    '\ufeff{"kind": "List", "items": []}',
    '{"kind": "List", "items": [{"a": 1},]}',
    '{"kind": "List", "items": [{"a": 1}],}',
    '{"kind": "List", "items": [{"a": 1}], "items": [{"b": 2}]}',
    '{"kind": "List", "items": [{"a": NaN}]}',
    '{"kind": "List", "items": [{"a": 1e400}]}',
    '{"kind": "List", "items": [1, 2.5, "x", null, true]}',
    '[{"kind": "Node"}, {"kind": "Pod"}] x',
    '{"kind": "List", "items": [' + "[" * 97 + "]" * 97 + "]}",
    '{"kind": "List", "items": [' + "[" * 98 + "]" * 98 + "]}",
    '{"kind": "List", "items": [' + "[" * 99 + "]" * 99 + "]}",
    '{"kind": "List", "items": [' + "[" * 5000 + "]" * 5000 + "]}",
    '{"kind": "List", "items": [{"a": "\x01"}]}',
    '{"kind": "List", "items": [{"a": 1}]',
    '{"kind": "List" "items": []}',
    "{}", "[]", "[1]", "{\n}",
])
def test_edge_cases_read_the_same(tmp_path: Path, text: str) -> None:
    path = tmp_path / "s.json"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    whole = _read(path, stream=False)
    for chunk in (1, 2, 3, 4, 8, 1 << 20):
        assert _read(path, stream=True, chunk=chunk) == whole


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(items=st.lists(json_values, max_size=5), indent=st.sampled_from([None, 4, 2]),
       chunk=st.integers(min_value=1, max_value=40), cut=st.integers(min_value=0, max_value=400),
       damage=st.sampled_from(["none", "cut", "splice"]))
def test_fuzzed_documents_read_the_same(tmp_path: Path, items: list[Any], indent: int | None, chunk: int, cut: int,
                                       damage: str) -> None:
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=indent)
    if damage == "cut":
        text = text[:cut]
    elif damage == "splice":
        text = text[:cut] + text[cut // 2:]
    path = tmp_path / "f.json"
    path.write_text(text, encoding="utf-8")
    assert _read(path, stream=True, chunk=chunk) == _read(path, stream=False)


def test_error_positions_of_a_windowed_read_come_from_the_file(tmp_path: Path) -> None:
    from reconciler.load.snapshot import load_snapshot

    objs = _fleet(4)
    objs[5]["metadata"]["name"] = "Bad_Name"  # a Pod: refused by validation, after the windowed read
    path = tmp_path / "fleet.json"
    path.write_text(dumps_list(objs, "json"), encoding="utf-8")
    old = sf.STREAM_BYTES
    try:
        sf.STREAM_BYTES = 0
        with pytest.raises(InputError) as streamed:
            load_snapshot(str(path))
        sf.STREAM_BYTES = 1 << 62
        with pytest.raises(InputError) as whole:
            load_snapshot(str(path))
    finally:
        sf.STREAM_BYTES = old
    assert str(streamed.value) == str(whole.value)
    assert f"{path}:" in str(streamed.value) and "metadata.name" in str(streamed.value)

"""The planner's fast paths give exactly what the plain code gives: the orjson-written plan JSON and
hash parts are ``json.dumps``'s text (non-ASCII, DEL, control characters, floats), a memoised diff
moved to another node equals ``dataclasses.replace``."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.diff import NodeDiff, PackageChange
from reconciler.jsonsafe import dumps_sorted
from reconciler.model.plan import canonical_json
from reconciler.model.recipe import Interrupt
from reconciler.plan.planner import _canonical, _canonical_part, _for_node

texts = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=12)
values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1) | texts
    | st.floats(allow_nan=False, allow_infinity=False, min_value=-1e15, max_value=1e15).filter(
        lambda f: f == 0 or abs(f) >= 1e-4),  # written without an exponent by repr and orjson alike
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(doc=values)
def test_dumps_sorted_is_json_dumps(doc: Any) -> None:
    assert dumps_sorted(doc) == json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str)
    assert dumps_sorted(doc, indent=True) == json.dumps(doc, sort_keys=True, indent=2, default=str)
    assert canonical_json(doc) == json.dumps(doc, sort_keys=True, indent=2) + "\n"


@pytest.mark.parametrize("doc", [
    {"a": "\u2192 é \x7f \x00 \x1f \ud83d\ude00 \U0010ffff"},
    {"lone": "\ud800"},  # orjson refuses it: json.dumps writes it
    {1: "int key"},
    {"big": 2**64},
    {"f": [1e16, 1e-05, 0.5, -0.0]},
    [],
    {},
])
def test_dumps_sorted_odd_values(doc: Any) -> None:
    expected = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str)
    if "f" in doc:  # a float repr writes with an exponent: the same number, spelled otherwise
        assert json.loads(dumps_sorted(doc)) == json.loads(expected)
    else:
        assert dumps_sorted(doc) == expected


@pytest.mark.parametrize("created", [0.0, 1795000000.0, 1795000000.25, 1e16, 1e-05, 123456789012345678.0, 7])
@pytest.mark.parametrize("value", ["plain", '{"a":"\\"q\\""}', "caf\u00e9 \u2192", "del\x7f", "nl\n\t"])
def test_hash_part_bytes_are_json_dumps(created: float, value: str) -> None:
    part = {"name": "n1", "labels": {"pool": "gpu", "z": value}, "unschedulable": False, "taints": [value],
            "created": created, "annotations": {"reconciler.nodewright.dev/nodeState_r": value},
            "waitFor": [], "evict": ["ns/p@u"], "drainBlockers": []}
    assert _canonical_part(part) == _canonical(part).encode()


def test_for_node_equals_replace() -> None:
    change = PackageChange(package="p", action="upgrade", from_="1.0.0", to="1.1.0", stages=("apply", "config"),
                           reason="1.0.0 \u2192 1.1.0", interrupt=Interrupt(type="reboot"))
    d = NodeDiff(node="a", changes=(change,), imported=True, state_source="k", cordoned_by_us=True,
                 state_error="", problems=("x",))
    moved = _for_node(d, "b")
    assert moved == replace(d, node="b") and moved.node == "b" and d.node == "a"
    assert moved.changes is d.changes and type(moved) is NodeDiff

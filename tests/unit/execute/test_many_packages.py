"""Many packages on a node (issue 36): apply's work grows with packages x nodes, not faster.

The node's package state is one annotation holding every package's entry, written again at every
stage start and end. The entries are serialised once each (their text is kept on the frozen
entry) and a node's looks at its running stages copy nothing; these tests count that work, so they
fail on a quadratic path whatever the machine's speed (the times are on docs/benchmarks.md).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from reconciler.execute.memory import Memory
from reconciler.model.nodestate import (
    ConfigDigest,
    PackageState,
    dump_config_digests,
    dump_state,
    parse_config_digests,
    parse_state,
    state_key,
)
from reconciler.model.vocab import PackageStatus, Stage
from reconciler.plan.nodework import _kahn
from reconciler.testing.builders import package, recipe
from reconciler.testing.fleetgen import make_node

from .harness import GPU, ONE_AT_A_TIME, SHA, apply

N = 80


def _many(n: int, *, chain: bool = False, config: bool = False) -> Any:
    pkgs = [package(f"p{i:03d}x", sha=SHA, depends_on={f"p{i - 1:03d}x": "1.0.0"} if chain and i else None,
                    config={"a.conf": str(i)} if config else None)
            for i in range(n)]
    return recipe("many", *pkgs, selector=GPU)


def _reference(state: dict[str, PackageState]) -> str:
    """The state annotation as it was written before the entries kept their text."""
    return json.dumps({k: state[k].model_dump(exclude_none=True) for k in sorted(state)}, sort_keys=True,
                      separators=(",", ":"))


def test_state_text_is_the_canonical_json_of_its_entries() -> None:
    state = {}
    for i, name in enumerate(["b", "a", "\u00e9t\u00e9", 'q"x', "z\\y"]):
        e = PackageState(name=name, version=f"1.{i}.0", image="img" if i % 2 else "", stage=Stage.APPLY,
                         containerSHA=None if i % 2 else "sha256:" + "b" * 64, state=PackageStatus.COMPLETE,
                         restarts=i)
        state[e.key] = e
    assert dump_state(state) == _reference(state)
    assert parse_state(dump_state(state)) == state
    odd = {"not-its-key": state["a|1.1.0"]}  # keyed otherwise: still the same JSON
    assert dump_state(odd) == _reference(odd)


def test_a_changed_copy_of_an_entry_is_written_with_its_new_fields() -> None:
    e = PackageState(name="a", version="1.0.0", stage=Stage.APPLY, state=PackageStatus.IN_PROGRESS)
    assert dump_state({e.key: e})  # the text is kept on e
    f = e.model_copy(update={"state": PackageStatus.COMPLETE, "version": "2.0.0"})
    assert dump_state({f.key: f}) == _reference({f.key: f})
    assert f.key == "a|2.0.0"
    d = ConfigDigest(configMap={"k": "1"})
    assert dump_config_digests({"a": d})
    d2 = d.model_copy(update={"env": "x"})
    assert json.loads(dump_config_digests({"a": d2}))["a"]["env"] == "x"
    assert parse_config_digests(dump_config_digests({"a": d2, "b": d})) == {"a": d2, "b": d}


def test_config_digests_text_is_the_canonical_json() -> None:
    d = {"z": ConfigDigest(configMap={"b": "1", "a": "2"}, env="e"), "\u00fc": ConfigDigest()}
    assert dump_config_digests(d) == json.dumps({k: d[k].model_dump() for k in sorted(d)}, sort_keys=True,
                                                separators=(",", ":"))


@pytest.mark.parametrize("config", [False, True], ids=["plain", "with-config"])
def test_each_entry_is_serialised_a_bounded_number_of_times(monkeypatch: pytest.MonkeyPatch, config: bool) -> None:
    """Before: every stage start and end serialised every entry of the node (about 5 x N x N
    ``model_dump`` calls for N packages; 127 s of CPU for 1,000 packages on 3 nodes)."""
    dumps = [0]
    real = PackageState.model_dump

    def counting(self: PackageState, *a: Any, **kw: Any) -> Any:
        dumps[0] += 1
        return real(self, *a, **kw)

    monkeypatch.setattr(PackageState, "model_dump", counting)
    run = apply([make_node("n0", GPU)], _many(N, config=config), ONE_AT_A_TIME)
    assert run.node("n0").state == "complete"
    state = parse_state(run.sim.get_node("n0").annotations[state_key("many")])
    assert len(state) == N and all(e.done for e in state.values())
    assert dumps[0] <= 8 * N, dumps[0]  # a few entries per package (in progress, complete per stage)


def test_looking_at_running_stages_copies_no_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: each look at each running stage copied the node's whole memory (every package's
    entry and run), quadratic in the packages running together."""
    copied = [0]
    real = Memory.copy

    def counting(self: Memory) -> Memory:
        copied[0] += len(self.state) + len(self.runs)
        return real(self)

    monkeypatch.setattr(Memory, "copy", counting)
    run = apply([make_node("n0", GPU)], _many(N), ONE_AT_A_TIME)
    assert run.node("n0").state == "complete"
    starts = len(run.events("n0", "stage-start"))
    assert starts == 2 * N  # apply and config
    # checkpoints only for decisions that write (about three per stage: its start, its end), each
    # copying the node's N entries and N runs; the looks between them none (before: 193,400 here)
    assert copied[0] <= 3 * starts * 2 * N, copied[0]


def test_dependency_order_is_linear_in_the_steps() -> None:
    """Before: each step taken off the queue went through every step to find its dependents."""
    n = 3000
    visited = [0]

    class Counting(list[str]):
        def __iter__(self) -> Any:
            for x in super().__iter__():
                visited[0] += 1
                yield x

    names = Counting(f"p{i:04d}" for i in range(n))
    after = {f"p{i:04d}": [f"p{i - 1:04d}"] if i else [] for i in range(n)}
    order = _kahn(names, after, lambda s: (0, s))
    assert order == list(names)
    assert visited[0] <= 10 * n, visited[0]


def test_a_dependency_chain_rolls_out_in_order() -> None:
    run = apply([make_node("n0", GPU)], _many(30, chain=True), ONE_AT_A_TIME)
    assert run.node("n0").state == "complete"
    starts = [e.detail.split()[0] for e in run.events("n0", "stage-start")]
    assert starts == sorted(starts)

"""The heap is frozen while a rollout runs (issue 17, reconciler/execute/heap.py): what was alive
when it started is out of the garbage collector's passes, and handed back at the end — unless the
caller had frozen something itself, nested or concurrent runs counted."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from reconciler.adapters.sim.fleet import SimFleet
from reconciler.execute.heap import frozen_heap
from reconciler.execute.rollout import Rollout
from reconciler.model.run import Event
from reconciler.observe.snapshot import observe
from reconciler.plan.planner import compute_plan
from reconciler.testing.builders import package, policy, recipe
from reconciler.testing.fleetgen import make_node

from .harness import GPU, SHA


class Cycle:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    gc.unfreeze()  # whatever an earlier test in this process froze
    yield
    gc.unfreeze()


def _collected(make_garbage_inside: bool) -> tuple[bool, bool]:
    """A cycle made before the block (or inside it), dropped inside it: (freed by a collection
    inside the block, freed by one after it)."""
    import weakref

    box: list[Cycle] = []
    if not make_garbage_inside:
        box.append(Cycle())
    with frozen_heap():
        if make_garbage_inside:
            box.append(Cycle())
        ref = weakref.ref(box.pop())
        gc.collect()
        inside = ref() is None
    gc.collect()
    return inside, ref() is None


@pytest.mark.parametrize(("made_inside", "freed_inside"), [(False, False), (True, True)])
def test_what_was_alive_before_is_out_of_the_collectors_sight_until_the_end(made_inside: bool,
                                                                            freed_inside: bool) -> None:
    assert _collected(made_inside) == (freed_inside, True)
    assert gc.get_freeze_count() == 0


def test_restored_on_error() -> None:
    with pytest.raises(RuntimeError), frozen_heap():
        assert gc.get_freeze_count() > 0
        raise RuntimeError("boom")
    assert gc.get_freeze_count() == 0


def test_nested_the_outer_exit_unfreezes() -> None:
    with frozen_heap():
        with frozen_heap():
            pass
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


def test_a_callers_own_freeze_is_kept() -> None:
    keep = [Cycle()]
    gc.freeze()
    before = gc.get_freeze_count()
    with frozen_heap():
        pass
    assert gc.get_freeze_count() >= before > 0
    del keep


def test_concurrent_runs_the_last_exit_unfreezes() -> None:
    first_in, first_out, second_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, int] = {}

    def first() -> None:
        with frozen_heap():
            first_in.set()
            second_out.wait(5)  # leave only once the second run is inside too
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with frozen_heap():
            second_out.set()
            first_out.wait(5)
            seen["after the first left"] = gc.get_freeze_count()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen["after the first left"] > 0
    assert gc.get_freeze_count() == 0


def test_a_rollout_runs_with_the_heap_frozen_and_hands_it_back() -> None:
    sim = SimFleet([make_node(f"n{i}", {"pool": "gpu"}) for i in range(1, 4)])
    r = recipe("tune", package("tuned", sha=SHA, interrupt="reboot"), selector=GPU)
    p = policy(count=2, default_strategy="fixed")
    plan = compute_plan(r, p, observe(sim))
    counts: list[int] = []

    def on_event(ev: Event) -> None:
        counts.append(gc.get_freeze_count())

    result = Rollout(r, p, plan, sim, sim, on_event=on_event).run()
    assert result.result == "succeeded"
    assert counts and min(counts) > 0
    assert gc.get_freeze_count() == 0

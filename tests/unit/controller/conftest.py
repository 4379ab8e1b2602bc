"""Shared pieces of the controller tests: NodeRecipe objects made from recipes/*.yaml, a status
writer that stores what it writes back on the object (as the API server would), a controller on
the simulated fleet."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from reconciler.adapters.sim.config import SimConfig
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.controller.loop import Controller, ControllerSettings
from reconciler.controller.source import ObjectSource
from reconciler.ports import ClusterPorts
from reconciler.session import Session

ROOT = Path(__file__).resolve().parents[3]
FLEET = str(ROOT / "examples" / "fleets" / "gpu-24.yaml")
POLICIES = str(ROOT / "policies")


def recipe_object(file: str, generation: int = 1, **spec: Any) -> dict[str, Any]:
    """recipes/<file> as the API server returns the NodeRecipe object (the file as it stands, plus
    the server's metadata)."""
    doc = yaml.safe_load((ROOT / "recipes" / file).read_text())
    meta = doc["metadata"]
    meta.update(generation=generation, uid="u-" + meta["name"], resourceVersion=str(10 + generation),
                creationTimestamp="2026-11-30T12:00:00Z")
    doc["spec"].update(spec)
    return doc


class Writer:
    """StatusWriter that records each status and puts it on the source's object; ``hook`` is
    called after each write with (name, status)."""

    def __init__(self, source: ObjectSource) -> None:
        self.source = source
        self.written: list[tuple[str, dict[str, Any]]] = []
        self.hook: Callable[[str, dict[str, Any]], None] | None = None

    def write_status(self, name: str, status: Any) -> None:
        status = copy.deepcopy(dict(status))
        self.written.append((name, status))
        obj = self.source.get(name)
        assert obj is not None
        self.source.observe("MODIFIED", {**obj, "status": status})
        if self.hook is not None:
            self.hook(name, status)

    def last(self, name: str) -> dict[str, Any]:
        return [s for n, s in self.written if n == name][-1]

    def object(self, name: str) -> dict[str, Any]:
        obj = self.source.get(name)
        assert obj is not None
        return obj


def conditions(status: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in status["conditions"]}


class Events:
    """EventSink that records ``(name, reason, message, type)``."""

    def __init__(self) -> None:
        self.emitted: list[tuple[str, str, str, str]] = []

    def emit(self, name: str, uid: str, reason: str, message: str, type_: str = "Normal") -> None:
        self.emitted.append((name, reason, message, type_))


def make(objects: list[dict[str, Any]], config: SimConfig | None = None, *, policies: tuple[str, ...] = (POLICIES,),
         events: Events | None = None) -> tuple[Controller, SimFleet, Writer]:
    sim = SimFleet.from_file(FLEET, config)
    source = ObjectSource(list(policies))
    source.replace(objects)
    writer = Writer(source)
    ctl = Controller(source, Session(ClusterPorts.of(sim), sim, sim=sim),
                     ControllerSettings(holder="test/1", workers=1, wait_for_lock=0.0),
                     status=(writer, source), events=(events, source) if events is not None else None)
    return ctl, sim, writer

"""Behaviour of the simulated fleet (``--sim-config FILE``), all durations in simulated seconds.

Minimal form (issue #3 §4)::

    stageSeconds: 30            # every stage (or a map: {apply: 60, config: 10, default: 30})
    rebootSeconds: 120
    failures:                   # injected stage failures
    - {node: gpu-a-003, package: nvidia-tuned, stage: apply, exitCode: 3, times: 99}
    neverReturns: [gpu-b-007]   # nodes that never come back from a reboot

Extensions: ``failures[].reason`` (``ImagePullBackOff`` = the image never pulls), ``failures[].node``
may be ``"*"``; ``podStartSeconds`` (a recreated pod becomes Ready), ``rescheduleSeconds`` (a
controller recreates an evicted pod), ``maxTerminationSeconds`` (cap of a pod's grace period while
terminating), ``interruptSeconds`` (service/restartAllServices/noop interrupts), ``startTime``
(RFC 3339 wall time of simulated second 0; default: the newest timestamp in the fleet file);
``validator`` (a simulated external validator for a recipe's ``readinessGate``, :class:`SimValidator`)::

    validator: {conditionType: example.com/Validated, labels: {validated: "true"}, afterSeconds: 60,
                failsOn: [gpu-a-004]}
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, Strict, StringConstraints, field_validator

from reconciler.load.kubeshapes import DNS_SUBDOMAIN, NAME_OR_PACKAGE, REASON, RFC3339, Labels, QualifiedName
from reconciler.model.base import Frozen
from reconciler.model.nodestate import IGNORE_LABEL
from reconciler.model.recipe import Recipe
from reconciler.model.utctime import SIM_START_WORDS, from_rfc3339, sim_start_ok

#: Longest simulated duration accepted for one step (seconds; about 31 years).
MAX_SECONDS = 1e9

Seconds = Annotated[float, Strict(), Field(ge=0, le=MAX_SECONDS)]
Count = Annotated[int, Strict()]
StageName = Literal["apply", "config", "interrupt", "post-interrupt", "upgrade", "uninstall", "uninstall-interrupt"]
NodeName = Annotated[str, Strict(), StringConstraints(pattern=DNS_SUBDOMAIN, max_length=253)]
# pydantic patterns (Rust regex: ``$`` is the end of the text): a node or package name to match,
# and a Kubernetes reason (CamelCase word) for an injected failure
NAME_PATTERN, REASON_PATTERN = NAME_OR_PACKAGE, REASON
Pattern = Literal["*"] | Annotated[str, Strict(), StringConstraints(pattern=NAME_PATTERN, max_length=253)]


class _Strict(Frozen):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, allow_inf_nan=False)


class StageFailure(_Strict):
    """Make ``stage`` of ``package`` on ``node`` fail ``times`` times with ``exitCode``
    (or never pull its image when ``reason`` is ``ImagePullBackOff``). ``node`` and ``package``
    are names or ``*``; ``stage`` a stage name or ``*``."""

    node: Pattern = "*"
    package: Pattern = "*"
    stage: StageName | Literal["*"] = "*"
    exitCode: Count = Field(default=1, ge=1, le=255)
    times: Count = Field(default=1, ge=1, le=1_000_000)
    reason: Annotated[str, Strict(), StringConstraints(pattern=REASON_PATTERN)] = "Error"
    logTail: Annotated[str, Strict(), Field(max_length=64 * 1024)] = ""

    def matches(self, node: str, package: str, stage: str) -> bool:
        """Whether this rule applies to (node, package, stage); ``*`` matches anything."""
        return all(pat in ("*", val) for pat, val in ((self.node, node), (self.package, package), (self.stage, stage)))


class SimValidator(_Strict):
    """A simulated external validator (as NVIDIA's NVCRE would be on a real cluster): every stage
    pod that starts on a node (and every reboot) makes the validator start over there — the
    condition ``conditionType`` goes ``False`` and its ``labels`` are removed — and
    ``afterSeconds`` after the node's last stage pod succeeded (or it came back from a reboot)
    it sets the condition ``True`` and the labels, except on the nodes in ``failsOn``. It follows
    the readiness gate's protocol (docs/how-to/readiness-gate.md): a gate's request on the node
    (``validate_<recipe>``) is echoed (``validated_<recipe>``) by a validation after it."""

    conditionType: Annotated[QualifiedName, Strict()] | None = None
    labels: Labels = Field(default_factory=dict)
    afterSeconds: Seconds = 60.0
    failsOn: tuple[NodeName, ...] = Field(default=(), max_length=1_000_000)


class SimConfig(_Strict):
    """Simulated fleet behaviour; see the module docstring. Durations are finite seconds in
    ``[0, MAX_SECONDS]``; ``stageSeconds`` as a map takes stage names and ``default``."""

    stageSeconds: Seconds | dict[StageName | Literal["default"], Seconds] = 30.0
    rebootSeconds: Seconds = 120.0
    interruptSeconds: Seconds = 5.0
    podStartSeconds: Seconds = 5.0
    rescheduleSeconds: Seconds = 2.0
    maxTerminationSeconds: Seconds = 30.0
    failures: tuple[StageFailure, ...] = Field(default=(), max_length=10_000)
    neverReturns: tuple[NodeName, ...] = Field(default=(), max_length=1_000_000)
    startTime: Annotated[str, Strict(), StringConstraints(pattern=RFC3339)] | None = None
    validator: SimValidator | None = None

    @field_validator("startTime")
    @classmethod
    def _start_in_range(cls, value: str | None) -> str | None:
        """The simulated clock starts within :data:`reconciler.model.utctime.SIM_START_RANGE`."""
        if value is not None:
            epoch = from_rfc3339(value)
            if epoch is None or not sim_start_ok(epoch):
                raise ValueError(f"a simulated rollout starts {SIM_START_WORDS} (its times must stay within "
                                 "RFC 3339's years 0001-9999)")
        return value

    def for_estimate(self, recipe: Recipe) -> SimConfig:
        """The config an *estimate* of ``recipe`` runs with (``simulate``, the plan's and the PR
        comment's estimate, ``apply``'s ETA): when the recipe has a ``readinessGate`` and no
        ``validator`` is configured, a validator that passes every node at once (the condition
        True and the gate's ``matchLabels`` plus, for each ``In``/``Exists`` expression, its first
        value or ``"true"``) — the estimate does not know the validator's time. Otherwise ``self``.
        A simulated fleet used for ``apply`` itself has only the validator it is given."""
        gate = recipe.readinessGate
        if gate is None or self.validator is not None:
            return self
        labels: dict[str, str] = {}
        if gate.labelSelector is not None:
            labels.update(gate.labelSelector.matchLabels)
            for r in gate.labelSelector.matchExpressions:
                if r.operator == "In":
                    labels[r.key] = r.values[0]
                elif r.operator == "Exists":
                    labels[r.key] = "true"
        return self.model_copy(update={"validator": SimValidator(conditionType=gate.conditionType, labels=labels,
                                                                 afterSeconds=0.0)})

    def names(self) -> bool:
        """Whether the config names any node or package (something :meth:`unknown_names` checks)."""
        return bool(self.neverReturns or any(f.node != "*" or f.package != "*" for f in self.failures)
                    or (self.validator is not None and self.validator.failsOn))

    def unknown_names(self, nodes: Callable[[], Collection[str]], packages: Collection[str],
                      runs: Callable[[str], Collection[str]] | None = None) -> list[tuple[tuple[str | int, ...], str]]:
        """The node and package names of this config that are not in the fleet (``nodes()``,
        called only when a node is named) or in any of the recipes run (``packages``): each as
        ``(field path, message)``, e.g. ``(("failures", 0, "node"), "no node 'gpu-zz-1' in the
        fleet (did you mean 'gpu-a-001'?)")``. A typo there would otherwise make the what-if
        silently succeed. With ``runs`` (node → the packages the recipes run would run on it;
        empty for a node none of them selects), also the names that exist but never meet: a
        failure of a package on a node no recipe runs it on, and a node of ``neverReturns`` or
        ``validator.failsOn`` no recipe selects — a what-if that could never happen passes as
        silently. Pure."""
        out: list[tuple[tuple[str | int, ...], str]] = []
        if not self.names():
            return out
        fleet = nodes()

        def miss(kind: str, name: str, known: Collection[str]) -> str:
            close = difflib.get_close_matches(name, list(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            where = "the fleet" if kind == "node" else "the recipes given"
            return f"no {kind} {name!r} in {where}{hint}"

        def unselected(name: str, what: str) -> str:
            return (f"no recipe given selects node {name!r} (their nodeSelector, or the node is labelled "
                    f"{IGNORE_LABEL}=true): {what}")

        never = "this failure could never happen"
        for i, f in enumerate(self.failures):
            node_known = f.node == "*" or f.node in fleet
            package_known = f.package == "*" or f.package in packages
            if not node_known:
                out.append((("failures", i, "node"), miss("node", f.node, fleet)))
            if not package_known:
                out.append((("failures", i, "package"), miss("package", f.package, packages)))
            if runs is None or f.node == "*" or not (node_known and package_known):
                continue
            ran = runs(f.node)
            if not ran:
                out.append((("failures", i, "node"), unselected(f.node, never)))
            elif f.package != "*" and f.package not in ran:
                out.append((("failures", i, "node"),
                            f"no recipe given runs package {f.package!r} on node {f.node!r} (none of those with it "
                            f"selects the node): {never}"))
        for i, n in enumerate(self.neverReturns):
            if n not in fleet:
                out.append((("neverReturns", i), miss("node", n, fleet)))
            elif runs is not None and not runs(n):
                out.append((("neverReturns", i),
                            unselected(n, "none of them reboots it, so its never coming back changes nothing")))
        if self.validator is not None:
            for i, n in enumerate(self.validator.failsOn):
                if n not in fleet:
                    out.append((("validator", "failsOn", i), miss("node", n, fleet)))
                elif runs is not None and not runs(n):
                    out.append((("validator", "failsOn", i),
                                unselected(n, "no readiness gate of theirs waits on it, so the validator failing "
                                              "there changes nothing")))
        return out

    def stage_duration(self, stage: str) -> float:
        """Seconds one stage (with its check) takes."""
        if isinstance(self.stageSeconds, dict):
            return float(self.stageSeconds.get(stage, self.stageSeconds.get("default", 30.0)))  # type: ignore[call-overload]
        return float(self.stageSeconds)

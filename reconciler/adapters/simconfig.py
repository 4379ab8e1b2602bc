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
(RFC 3339 wall time of simulated second 0; default: the newest timestamp in the fleet file).
"""

from __future__ import annotations

from pydantic import Field

from reconciler.model.base import Frozen


class StageFailure(Frozen):
    """Make ``stage`` of ``package`` on ``node`` fail ``times`` times with ``exitCode``
    (or never pull its image when ``reason`` is ``ImagePullBackOff``)."""

    node: str = "*"
    package: str = "*"
    stage: str = "*"
    exitCode: int = Field(default=1, ge=1, le=255)
    times: int = Field(default=1, ge=1)
    reason: str = "Error"
    logTail: str = ""

    def matches(self, node: str, package: str, stage: str) -> bool:
        """Whether this rule applies to (node, package, stage); ``*`` matches anything."""
        return all(pat in ("*", val) for pat, val in ((self.node, node), (self.package, package), (self.stage, stage)))


class SimConfig(Frozen):
    """Simulated fleet behaviour; see the module docstring."""

    stageSeconds: float | dict[str, float] = 30.0
    rebootSeconds: float = Field(default=120.0, ge=0)
    interruptSeconds: float = Field(default=5.0, ge=0)
    podStartSeconds: float = Field(default=5.0, ge=0)
    rescheduleSeconds: float = Field(default=2.0, ge=0)
    maxTerminationSeconds: float = Field(default=30.0, ge=0)
    failures: tuple[StageFailure, ...] = ()
    neverReturns: tuple[str, ...] = ()
    startTime: str | None = None

    def stage_duration(self, stage: str) -> float:
        """Seconds one stage (with its check) takes."""
        if isinstance(self.stageSeconds, dict):
            return float(self.stageSeconds.get(stage, self.stageSeconds.get("default", 30.0)))
        return float(self.stageSeconds)

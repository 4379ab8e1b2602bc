"""Recipe and package models: the desired state of host packages on a set of nodes.

Our ``NodeRecipe`` format (architecture.md §3.1) and the NodeWright/Skyhook custom resources are
both converted into :class:`Recipe`. Field names follow NodeWright's ``Skyhook`` spec
(semantics-nodewright.md §1.1) so users of either read the same words.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from reconciler.model.base import Frozen
from reconciler.model.policy import Budget
from reconciler.model.selector import LabelSelector, Toleration, check_selector
from reconciler.model.versions import parse_version

InterruptType = Literal["reboot", "restartAllServices", "service", "noop"]

#: Merge priority of interrupt types, highest first (NodeWright ``fudgeInterruptWithPriority``).
INTERRUPT_PRIORITY: dict[str, int] = {"reboot": 3, "restartAllServices": 2, "service": 1, "noop": 0}

PACKAGE_NAME = re.compile(r"^[a-z][-a-z0-9]{0,41}[a-z]$")
SHA256 = re.compile(r"^sha256:[0-9a-f]{64}$")


class Interrupt(Frozen):
    """What must happen to the node after a package's stages: ``reboot``, restart ``services``
    (systemd units, for ``type: service``), ``restartAllServices`` or ``noop`` (cordon and drain
    happen, nothing is executed)."""

    type: InterruptType
    services: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _services_only_for_service(self) -> Interrupt:
        if self.type == "service" and not self.services:
            raise ValueError("interrupt type 'service' needs at least one entry in services")
        if self.type != "service" and self.services:
            raise ValueError(f"interrupt type {self.type!r} takes no services")
        return self


QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?\d+)?$")
ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")


class Resources(Frozen):
    """CPU/memory for stage containers; all four or none (NodeWright admission rule 7); each a
    Kubernetes quantity (``500m``, ``2``, ``1Gi``) so the stage pod is never refused by the API."""

    cpuRequest: str
    cpuLimit: str
    memoryRequest: str
    memoryLimit: str

    @field_validator("cpuRequest", "cpuLimit", "memoryRequest", "memoryLimit")
    @classmethod
    def _quantity(cls, v: str) -> str:
        if not QUANTITY.match(v):
            raise ValueError(f"{v!r} is not a Kubernetes quantity (e.g. 500m, 2, 256Mi, 1Gi)")
        return v


class EnvVar(Frozen):
    """A container environment variable passed to the package's stage containers."""

    name: str
    value: str | None = None
    valueFrom: dict[str, dict[str, str]] | None = None

    @field_validator("name")
    @classmethod
    def _env_name(cls, v: str) -> str:
        if not ENV_NAME.match(v):
            raise ValueError(f"environment variable name {v!r} must match {ENV_NAME.pattern}")
        return v


class Uninstall(Frozen):
    """Explicit uninstall switches (NodeWright HEAD): ``enabled`` = the package ships uninstall
    steps; ``apply`` = uninstall it now from every target node."""

    enabled: bool = False
    apply: bool = False

    @model_validator(mode="after")
    def _apply_needs_enabled(self) -> Uninstall:
        if self.apply and not self.enabled:
            raise ValueError("uninstall.apply: true requires uninstall.enabled: true")
        return self


class Package(Frozen):
    """One host package: an OCI image at an exact version, with its stages' inputs.

    ``image`` is the repository without tag; a tag, if present, must equal ``version`` (the loader
    strips it; only a tag after the last ``/`` counts, so registry ports survive, NodeWright PR #280).
    ``dependsOn`` maps package name → exact version of another package in the same recipe.
    ``gracefulShutdown`` is a Go duration (e.g. ``30s``).
    """

    name: str
    version: str
    image: str
    containerSHA: str | None = None
    agentImageOverride: str | None = None
    dependsOn: dict[str, str] = Field(default_factory=dict)
    interrupt: Interrupt | None = None
    configMap: dict[str, str] = Field(default_factory=dict)
    configInterrupts: dict[str, Interrupt] = Field(default_factory=dict)
    env: tuple[EnvVar, ...] = ()
    resources: Resources | None = None
    gracefulShutdown: str | None = None
    uninstall: Uninstall | None = None

    @field_validator("name")
    @classmethod
    def _name_shape(cls, v: str) -> str:
        if not PACKAGE_NAME.match(v):
            raise ValueError(
                f"package name {v!r} must match {PACKAGE_NAME.pattern} (2-43 chars, lower case, "
                "start and end with a letter)"
            )
        return v

    @field_validator("version")
    @classmethod
    def _version_semver(cls, v: str) -> str:
        parse_version(v)
        return v

    @field_validator("containerSHA")
    @classmethod
    def _sha_shape(cls, v: str | None) -> str | None:
        if v is not None and not SHA256.match(v):
            raise ValueError(f"containerSHA {v!r} must be sha256:<64 lower-case hex digits>")
        return v

    @field_validator("dependsOn")
    @classmethod
    def _dep_versions(cls, v: dict[str, str]) -> dict[str, str]:
        for name, ver in v.items():
            if not ver:
                raise ValueError(f"dependsOn.{name} needs an exact version")
            parse_version(ver)
        return v

    @field_validator("gracefulShutdown")
    @classmethod
    def _duration(cls, v: str | None) -> str | None:
        if v is not None:
            parse_duration(v)
        return v

    @property
    def key(self) -> str:
        """The node-state key ``name|version`` (NodeWright nodeState shape)."""
        return f"{self.name}|{self.version}"

    @property
    def pull_ref(self) -> str:
        """What a stage pod pulls: ``image@containerSHA`` when pinned, else ``image:version``."""
        return f"{self.image}@{self.containerSHA}" if self.containerSHA else f"{self.image}:{self.version}"


class DrainOptions(Frozen):
    """How a node is drained, mirroring ``kubectl drain`` flags (drain-and-scenarios.md §1.3).

    Defaults are kubectl's, except ``ignoreDaemonSets`` (True: DaemonSet pods are never evicted,
    the drain is not refused for them) and ``timeoutSeconds`` (30 min instead of "no limit", so a
    drain never hangs: the node fails with DrainTimeout). ``gracePeriodSeconds`` None means the
    pod's own ``terminationGracePeriodSeconds``. ``skipWaitForDeleteTimeoutSeconds`` > 0 treats pods
    whose deletionTimestamp is older than that as gone (dead kubelet). ``evictionRetrySeconds`` is
    the pause after a PodDisruptionBudget 429 (kubectl: 5 s). Eviction is always used; there is no
    DELETE fallback, so PodDisruptionBudgets are always honoured.
    """

    timeoutSeconds: int = Field(default=1800, ge=1, le=7 * 24 * 3600)
    deleteEmptyDirData: bool = False
    force: bool = False
    ignoreDaemonSets: bool = True
    gracePeriodSeconds: int | None = Field(default=None, ge=0, le=24 * 3600)
    skipWaitForDeleteTimeoutSeconds: int = Field(default=0, ge=0, le=24 * 3600)
    evictionRetrySeconds: float = Field(default=5.0, ge=1.0, le=600.0)
    podSelector: LabelSelector | None = None


class Timeouts(Frozen):
    """Time limits of the node lifecycle, in seconds.

    ``waitNonInterrupt``: how long a node waits for protected pods before it is released as
    Blocked (uncordoned if we cordoned it; retried in a later pass). ``stage``: one stage pod
    (including image pull and start). ``reboot``: from the reboot request to a new bootID and
    Ready. ``stageRetries``: attempts per stage beyond the first; ``retryBackoff``: the first
    pause between attempts (doubles each time, capped at 300 s).
    """

    waitNonInterrupt: int = Field(default=3600, ge=0, le=7 * 24 * 3600)
    stage: int = Field(default=1800, ge=1, le=7 * 24 * 3600)
    reboot: int = Field(default=900, ge=1, le=24 * 3600)
    stageRetries: int = Field(default=2, ge=0, le=20)
    retryBackoff: float = Field(default=10.0, ge=0.0, le=3600.0)


class Recipe(Frozen):
    """A version-locked set of host packages for the nodes a selector picks.

    ``name`` and ``version`` identify the recipe release (recorded in status). ``deploymentPolicy``
    names a policy (loaded from ``policies/``); without one, ``interruptionBudget`` (default 100 %)
    gives NodeWright's legacy single ``__default__`` compartment with a fixed strategy.
    ``origin`` says which input kind it came from; ``source`` is the file it was read from.
    """

    name: str
    version: str = ""
    origin: Literal["NodeRecipe", "NodeWright", "Skyhook"] = "NodeRecipe"
    source: str = ""
    nodeSelector: LabelSelector = Field(default_factory=LabelSelector)
    podNonInterruptLabels: LabelSelector | None = None
    deploymentPolicy: str | None = None
    interruptionBudget: Budget | None = None
    runtimeRequired: bool = False
    autoTaintNewNodes: bool = False
    priority: int = Field(default=200, ge=1)
    sequencing: Literal["node", "all"] = "node"
    additionalTolerations: tuple[Toleration, ...] = ()
    drain: DrainOptions = Field(default_factory=DrainOptions)
    timeouts: Timeouts = Field(default_factory=Timeouts)
    packages: dict[str, Package] = Field(default_factory=dict)

    @field_validator("nodeSelector", "podNonInterruptLabels")
    @classmethod
    def _selector_labels(cls, v: LabelSelector | None) -> LabelSelector | None:
        return check_selector(v) if v is not None else v

    @model_validator(mode="after")
    def _policy_xor_budget(self) -> Recipe:
        if self.deploymentPolicy and self.interruptionBudget:
            raise ValueError("deploymentPolicy and interruptionBudget are mutually exclusive")
        return self


_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns))+$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_duration(text: str) -> float:
    """Parse a Go duration (``30s``, ``1m30s``, ``500ms``) into seconds.

    Raises:
        ValueError: not a Go duration.
    """
    if not _DURATION.match(text):
        raise ValueError(f"{text!r} is not a duration like 30s, 2m or 1h30m")
    return sum(float(n) * _UNIT[u] for n, u in _DURATION_PART.findall(text))

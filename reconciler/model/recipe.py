"""Recipe and package models: the desired state of host packages on a set of nodes.

Our ``NodeRecipe`` format (architecture.md §3.1) and the NodeWright/Skyhook custom resources are
both converted into :class:`Recipe`. Field names follow NodeWright's ``Skyhook`` spec
(semantics-nodewright.md §1.1) so users of either read the same words.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator

from reconciler.errors import shown
from reconciler.model.base import Frozen, StrictBool, StrictFloat, StrictInt
from reconciler.model.nodestate import RUNTIME_REQUIRED_TAINT_KEY
from reconciler.model.policy import Budget
from reconciler.model.redact import redact_image
from reconciler.model.selector import (
    LabelSelector,
    Taint,
    Toleration,
    check_label_key,
    check_selector,
    check_toleration,
)
from reconciler.model.versions import parse_version
from reconciler.model.vocab import InterruptType

#: Merge priority of interrupt types, highest first (NodeWright ``fudgeInterruptWithPriority``).
INTERRUPT_PRIORITY: dict[str, int] = {"reboot": 3, "restartAllServices": 2, "service": 1, "noop": 0}

#: Highest recipe ``priority`` (int32, as NodeWright's CRD field; far more levels than needed).
MAX_PRIORITY = 2**31 - 1

# Every pattern here is matched with ``fullmatch``: Python's ``$`` also matches before a final
# newline, so ``^…$`` with ``match`` would accept "sha256:…\n" (tests/unit/load/test_patterns.py
# scans the code for that).
PACKAGE_NAME = re.compile(r"[a-z][-a-z0-9]{0,41}[a-z]")
SHA256 = re.compile(r"sha256:[0-9a-f]{64}")

#: An image repository without tag or digest (the ``name`` of the OCI distribution reference
#: grammar, ``distribution/reference``): optional registry host[:port], then lower-case path
#: components separated by ``/``; at most 255 characters.
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_PART = r"[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?"
_DOMAIN = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
IMAGE_NAME = re.compile(rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*")
#: A full image reference: name, optional ``:tag`` (``[\w][\w.-]{0,127}``), optional ``@sha256:…``.
IMAGE_REF = re.compile(rf"{IMAGE_NAME.pattern}(?::[\w][\w.-]{{0,127}})?(?:@sha256:[0-9a-f]{{64}})?")
MAX_IMAGE_NAME = 255
#: Names of recipes and policies: a DNS-1123 subdomain (what the API server takes as an object
#: name: dot-separated labels of lower-case letters, digits and '-', each starting and ending
#: alphanumeric) of at most 63 characters (Lease and object names are made from it).
OBJECT_NAME = re.compile(r"(?=.{1,63}\Z)[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*")
#: A recipe's name is also the tail of annotation and label keys on the nodes
#: (``reconciler.nodewright.dev/nodeState_<name>``, the longest, and NodeWright's
#: ``skyhook.nvidia.com/nodeState_<name>``), whose name part is at most 63 characters.
MAX_RECIPE_NAME = 63 - len("nodeState_")
#: A recipe release (``spec.version``): no control characters (it is recorded and printed).
_RELEASE = re.compile(r"[^\x00-\x1f\x7f-\x9f]+")

#: A systemd unit name (systemd.unit(5)): letters, digits, ``:-_.\@``, at most 255 characters.
UNIT_NAME = re.compile(r"[A-Za-z0-9:_.\\@-]{1,255}")

#: ConfigMap keys (Kubernetes ``IsConfigMapKey``): ``[-._a-zA-Z0-9]+``, at most 253 characters,
#: not ``.`` or ``..`` and not starting with ``..`` (the key becomes a file name in the mounted
#: volume: ``../../etc/cron.d/x`` must never be one).
CONFIG_MAP_KEY = re.compile(r"[-._a-zA-Z0-9]+")
MAX_CONFIG_MAP_KEY = 253
#: Total size of a ConfigMap's keys and values, in UTF-8 bytes (Kubernetes ``MaxSecretSize``,
#: also applied to ConfigMaps: 1 MiB); the package's configMap becomes one ConfigMap.
MAX_CONFIG_MAP_BYTES = 1024 * 1024


def configmap_key_problem(key: str) -> str | None:
    """Why ``key`` is not a Kubernetes ConfigMap key (``IsConfigMapKey``), or None when it is one."""
    if len(key) > MAX_CONFIG_MAP_KEY:
        return f"ConfigMap key {key[:100]!r}… is longer than {MAX_CONFIG_MAP_KEY} characters"
    if not CONFIG_MAP_KEY.fullmatch(key):
        return f"{key[:100]!r} is not a valid ConfigMap key (only [-._a-zA-Z0-9], no '/'): it becomes a file name"
    if key in (".", "..") or key.startswith(".."):
        return f"{key[:100]!r} is not a valid ConfigMap key (may not be '.' or '..' or start with '..')"
    return None


def check_image(image: str, *, full: bool = False) -> str:
    """An image repository (``full``: a whole reference with optional tag and digest) in the OCI
    distribution grammar, at most :data:`MAX_IMAGE_NAME` characters. Raises ValueError otherwise."""
    pattern = IMAGE_REF if full else IMAGE_NAME
    if len(image) > MAX_IMAGE_NAME + (200 if full else 0) or not pattern.fullmatch(image):
        what = "image reference" if full else "image repository"
        raise ValueError(
            f"{redact_image(image)[:120]!r} is not a valid {what} "
            "(registry/path in lower case, e.g. ghcr.io/org/package)"
        )
    return image


def check_package_name(name: str) -> str:
    """``name`` when it can name a package (:data:`PACKAGE_NAME`: 2-43 characters, lower case,
    starting and ending with a letter). Raises ValueError otherwise."""
    if not PACKAGE_NAME.fullmatch(name):
        raise ValueError(
            f"package name {name[:80]!r} must match {PACKAGE_NAME.pattern} (2-43 chars, lower case, "
            "start and end with a letter)"
        )
    return name


def _unitless(v: object) -> object:
    """A duration field given a bare number (YAML ``gracefulShutdown: 60``): the error says which
    unit to add (``"60s"``), not "quote it" (``"60"`` is no duration either)."""
    if isinstance(v, int | float) and not isinstance(v, bool):
        raise ValueError(f"{v!r} is a number; a duration needs a unit, e.g. \"{v}s\" ({v} seconds)")
    return v


class Interrupt(Frozen):
    """What must happen to the node after a package's stages: ``reboot``, restart ``services``
    (systemd units, for ``type: service``), ``restartAllServices`` or ``noop`` (cordon and drain
    happen, nothing is executed)."""

    type: InterruptType = Field(
        description="What the interrupt does: reboot the node, restart the listed systemd services (service), restart "
                    "all services (restartAllServices), or nothing (noop: cordon and drain still happen)."
    )
    services: tuple[str, ...] = Field(
        default=(), max_length=64,
        description="systemd units to restart, for type service only (at most 64)."
    )

    @field_validator("services")
    @classmethod
    def _unit_names(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for name in v:
            if not UNIT_NAME.fullmatch(name):
                raise ValueError(f"service {name[:80]!r} is not a systemd unit name ([A-Za-z0-9:_.\\@-], at most 255)")
        return v

    @model_validator(mode="after")
    def _services_only_for_service(self) -> Interrupt:
        if self.type == "service" and not self.services:
            raise ValueError("interrupt type 'service' needs at least one entry in services")
        if self.type != "service" and self.services:
            raise ValueError(f"interrupt type {self.type!r} takes no services")
        return self


QUANTITY = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?\d+)?")
ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
_SUFFIX = {
    **{s: Decimal(1024) ** (i + 1) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
    **{s: Decimal(10) ** e for s, e in (("n", -9), ("u", -6), ("m", -3), ("k", 3), ("M", 6), ("G", 9),
                                       ("T", 12), ("P", 15), ("E", 18))},
}
#: Largest quantity accepted, in base units (cores or bytes): what fits Kubernetes' int64 fields.
MAX_QUANTITY = Decimal(2**63 - 1)


def parse_quantity(text: str) -> Decimal:
    """A Kubernetes quantity (``500m``, ``2``, ``1.5Gi``, ``1e3``) in base units, as a Decimal.

    Bounds (ours, so every consumer can hold it): at most 64 characters, 0 to :data:`MAX_QUANTITY`
    base units (Kubernetes refuses negative requests and limits), exponent at most ±30.

    Raises:
        ValueError: not a quantity, or out of those bounds.
    """
    m = QUANTITY.fullmatch(text) if len(text) <= 64 else None
    if m is None:
        raise ValueError(f"{text[:80]!r} is not a Kubernetes quantity (e.g. 500m, 2, 256Mi, 1Gi)")
    number, suffix = m.group(1), m.group(3) or ""
    sign = -1 if text.startswith("-") else 1
    if suffix not in _SUFFIX and suffix[:1] in ("e", "E"):
        exp = int(suffix[1:])
        if abs(exp) > 30:
            raise ValueError(f"quantity {text!r} has an exponent beyond ±30")
        value = Decimal(number).scaleb(exp)
    else:
        value = Decimal(number) * _SUFFIX.get(suffix, Decimal(1))
    value *= sign
    if not 0 <= value <= MAX_QUANTITY:
        raise ValueError(f"quantity {text!r} must be between 0 and {MAX_QUANTITY} (cores or bytes)")
    return value


class Resources(Frozen):
    """CPU/memory for stage containers; all four or none (NodeWright admission rule 7); each a
    Kubernetes quantity (``500m``, ``2``, ``1Gi``) so the stage pod is never refused by the API."""

    cpuRequest: str = Field(
        description="CPU request of the stage containers (a Kubernetes quantity: 500m, 2); all four resources or none."
    )
    cpuLimit: str = Field(description="CPU limit of the stage containers; at least cpuRequest.")
    memoryRequest: str = Field(
        description="Memory request of the stage containers (a Kubernetes quantity: 256Mi, 1Gi)."
    )
    memoryLimit: str = Field(description="Memory limit of the stage containers; at least memoryRequest.")

    @field_validator("cpuRequest", "cpuLimit", "memoryRequest", "memoryLimit")
    @classmethod
    def _quantity(cls, v: str) -> str:
        parse_quantity(v)
        return v

    @model_validator(mode="after")
    def _request_within_limit(self) -> Resources:
        # Kubernetes: "must be less than or equal to <resource> limit" (ValidateResourceRequirements)
        pairs = (("cpu", self.cpuRequest, self.cpuLimit), ("memory", self.memoryRequest, self.memoryLimit))
        for what, req, lim in pairs:
            if parse_quantity(req) > parse_quantity(lim):
                raise ValueError(f"{what}Request {req} is more than {what}Limit {lim} (Kubernetes refuses that)")
        return self


class EnvVar(Frozen):
    """A container environment variable passed to the package's stage containers."""

    name: str = Field(description="Variable name ([-._a-zA-Z][-._a-zA-Z0-9]*, at most 253 characters).")
    value: str | None = Field(default=None, description="Literal value; excludes valueFrom.")
    valueFrom: dict[str, dict[str, str]] | None = Field(
        default=None,
        description="Kubernetes EnvVarSource with exactly one of configMapKeyRef, secretKeyRef, fieldRef, "
                    "resourceFieldRef; excludes value."
    )

    @field_validator("name")
    @classmethod
    def _env_name(cls, v: str) -> str:
        if not ENV_NAME.fullmatch(v) or len(v) > 253:
            raise ValueError(f"environment variable name {v[:80]!r} must match {ENV_NAME.pattern} (at most 253)")
        return v

    @model_validator(mode="after")
    def _one_source(self) -> EnvVar:
        # Kubernetes validateEnvVarValueFrom: value and valueFrom exclude each other, and
        # valueFrom names exactly one source
        if self.valueFrom is not None:
            if self.value:
                raise ValueError(f"env {self.name}: value and valueFrom may not both be set")
            unknown = sorted(set(self.valueFrom) - set(ENV_SOURCES))
            if unknown or len(self.valueFrom) != 1:
                raise ValueError(
                    f"env {self.name}: valueFrom needs exactly one of {', '.join(ENV_SOURCES)}"
                    + (f" (found {', '.join(repr(u[:40]) for u in unknown)})" if unknown else "")
                )
        return self


#: The sources of ``env[].valueFrom`` Kubernetes knows.
ENV_SOURCES = ("configMapKeyRef", "secretKeyRef", "fieldRef", "resourceFieldRef")


class Uninstall(Frozen):
    """Explicit uninstall switches (NodeWright HEAD): ``enabled`` = the package ships uninstall
    steps; ``apply`` = uninstall it now from every target node."""

    enabled: StrictBool = Field(
        default=False,
        description="The package ships uninstall steps: downgrades and removals may run them in locked mode."
    )
    apply: StrictBool = Field(
        default=False,
        description="Uninstall the package now from every node the recipe selects (needs enabled)."
    )

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
    ``gracefulShutdown`` is a Go duration (e.g. ``30s``), at most :data:`MAX_GRACEFUL_SHUTDOWN`
    (it becomes the stage pod's ``terminationGracePeriodSeconds``). ``configMap`` follows
    Kubernetes' ConfigMap rules (:func:`configmap_key_problem`, :data:`MAX_CONFIG_MAP_BYTES`).
    ``image`` is a repository (:data:`IMAGE_NAME`), ``agentImageOverride`` a full reference.
    """

    name: str = Field(
        description="Package name: the key under packages (2-43 characters, lower case, starting and ending with a "
                    "letter)."
    )
    version: str = Field(
        description="Exact semantic version (X.Y.Z) of the package; with locked mode the image is pinned by "
                    "containerSHA too."
    )
    image: str = Field(description="Image repository without tag (a tag, if given, must equal version).")
    containerSHA: str | None = Field(
        default=None,
        description="Image digest (sha256:<64 hex>) the stage pods pull; required in locked mode (the default)."
    )
    agentImageOverride: str | None = Field(
        default=None,
        description="Full image reference of the NodeWright agent that runs the stages, instead of the default."
    )
    dependsOn: dict[str, str] = Field(
        default_factory=dict,
        description="Packages of the same recipe (name: exact version) that must be complete on the node before this "
                    "one starts."
    )
    interrupt: Interrupt | None = Field(
        default=None,
        description="The interrupt the node needs after this package's stages; the interrupts of a node's packages "
                    "merge into one (reboot > restartAllServices > service > noop)."
    )
    configMap: dict[str, str] = Field(
        default_factory=dict,
        description="Files handed to the package's stages (key: file name, value: content), as one ConfigMap (1 MiB in "
                    "all); a change reconfigures the package."
    )
    configInterrupts: dict[str, Interrupt] = Field(
        default_factory=dict,
        description="Interrupt to use instead of interrupt when only matching configMap keys change (key: a glob over "
                    "configMap keys)."
    )
    env: tuple[EnvVar, ...] = Field(default=(), description="Environment variables of the stage containers.")
    resources: Resources | None = Field(
        default=None,
        description="CPU and memory of the stage containers (all four or none)."
    )
    gracefulShutdown: Annotated[str | None, BeforeValidator(_unitless)] = Field(
        default=None,
        description="Go duration (30s, 2m; at most 24h) the stage pod gets to stop: its terminationGracePeriodSeconds."
    )
    uninstall: Uninstall | None = Field(
        default=None,
        description="Uninstall switches: whether the package ships uninstall steps, and whether to uninstall it now."
    )

    @field_validator("name")
    @classmethod
    def _name_shape(cls, v: str) -> str:
        return check_package_name(v)

    @field_validator("version")
    @classmethod
    def _version_semver(cls, v: str) -> str:
        parse_version(v)
        return v

    @field_validator("image")
    @classmethod
    def _image_name(cls, v: str) -> str:
        return check_image(v)

    @field_validator("agentImageOverride")
    @classmethod
    def _agent_image(cls, v: str | None) -> str | None:
        return check_image(v, full=True) if v is not None else v

    @field_validator("configMap")
    @classmethod
    def _configmap(cls, v: dict[str, str]) -> dict[str, str]:
        for key in v:
            problem = configmap_key_problem(key)
            if problem:
                raise ValueError(problem)
        size = sum(len(k.encode("utf-8", "surrogatepass")) + len(x.encode("utf-8", "surrogatepass"))
                   for k, x in v.items())
        if size > MAX_CONFIG_MAP_BYTES:
            raise ValueError(
                f"configMap holds {size} bytes; Kubernetes caps a ConfigMap at {MAX_CONFIG_MAP_BYTES} bytes (1 MiB)"
            )
        return v

    @field_validator("containerSHA")
    @classmethod
    def _sha_shape(cls, v: str | None) -> str | None:
        if v is not None and not SHA256.fullmatch(v):
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
            parse_duration(v, maximum=MAX_GRACEFUL_SHUTDOWN)
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

    timeoutSeconds: StrictInt = Field(
        default=1800, ge=1, le=7 * 24 * 3600,
        description="Seconds the drain may take before the node fails with DrainTimeout (1 to 7 days; default 30 min)."
    )
    deleteEmptyDirData: StrictBool = Field(
        default=False,
        description="Evict pods with emptyDir volumes, losing their data (kubectl drain --delete-emptydir-data); "
                    "otherwise they refuse the drain."
    )
    force: StrictBool = Field(
        default=False,
        description="Evict pods no controller manages (kubectl drain --force); otherwise they refuse the drain."
    )
    ignoreDaemonSets: StrictBool = Field(
        default=True,
        description="Leave DaemonSet pods alone instead of refusing the drain (kubectl drain --ignore-daemonsets)."
    )
    gracePeriodSeconds: StrictInt | None = Field(
        default=None, ge=0, le=24 * 3600,
        description="Grace period given to each evicted pod; unset: the pod's own terminationGracePeriodSeconds."
    )
    skipWaitForDeleteTimeoutSeconds: StrictInt = Field(
        default=0, ge=0, le=24 * 3600,
        description="Treat pods whose deletionTimestamp is older than this many seconds as gone (a dead kubelet); 0: "
                    "always wait."
    )
    evictionRetrySeconds: StrictFloat = Field(
        default=5.0, ge=1.0, le=600.0,
        description="Seconds between retries of an eviction a PodDisruptionBudget refused with 429 (kubectl: 5)."
    )
    podSelector: LabelSelector | None = Field(
        default=None,
        description="Only pods matching this selector are evicted (kubectl drain --pod-selector)."
    )

    @field_validator("podSelector")
    @classmethod
    def _selector_labels(cls, v: LabelSelector | None) -> LabelSelector | None:
        return check_selector(v) if v is not None else v


class Timeouts(Frozen):
    """Time limits of the node lifecycle, in seconds.

    ``waitNonInterrupt``: how long a node waits for protected pods before it is released as
    Blocked (uncordoned if we cordoned it; retried in a later pass). ``stage``: one stage pod
    (including image pull and start). ``reboot``: from the reboot request to a new bootID and
    Ready. ``stageRetries``: attempts per stage beyond the first; ``retryBackoff``: the first
    pause between attempts (doubles each time, capped at 300 s). ``nodeReady``: how long a node
    that is not Ready is waited for, counted from its Ready condition's last transition (a GPU
    node joins NotReady for minutes while its drivers load): before its lifecycle starts, past it
    the node is left waiting (nothing started, its runtime-required taint kept; taken up again
    once Ready); in a lifecycle, past it the node fails ``NodeNotReady``, retried once its
    readiness changes.
    """

    waitNonInterrupt: StrictInt = Field(
        default=3600, ge=0, le=7 * 24 * 3600,
        description="Seconds a node waits for its protected pods (podNonInterruptLabels) before it is released as "
                    "blocked and retried in a later pass."
    )
    stage: StrictInt = Field(
        default=1800, ge=1, le=7 * 24 * 3600,
        description="Seconds one stage pod may take, image pull and start included, before the attempt fails with "
                    "StageTimeout."
    )
    reboot: StrictInt = Field(
        default=900, ge=1, le=24 * 3600,
        description="Seconds from the reboot request to a new bootID and Ready before the node fails with "
                    "RebootTimeout."
    )
    stageRetries: StrictInt = Field(
        default=2, ge=0, le=20,
        description="Attempts per stage beyond the first before the node fails."
    )
    retryBackoff: StrictFloat = Field(
        default=10.0, ge=0.0, le=3600.0,
        description="Seconds before the first retry of a stage; doubles each time, capped at 300."
    )
    nodeReady: StrictInt = Field(
        default=600, ge=0, le=7 * 24 * 3600,
        description="Seconds a node that is not Ready is waited for, from its Ready condition's last transition: "
                    "then a node not yet started is left waiting, a node in its lifecycle fails with NodeNotReady."
    )


#: Longest readiness-gate ``timeout``: seven days (as the other lifecycle timeouts).
MAX_GATE_TIMEOUT = 7 * 24 * 3600.0


class ReadinessGate(Frozen):
    """Hand-off to an external validator (such as NVIDIA's NVCRE): each node is held after its
    packages until the validator says it is ready.

    After the node's packages (and its interrupt and post-interrupt stages) are complete, the node
    keeps what the lifecycle holds — our cordon and the runtime-required taint — until the
    validator says it is ready, then it is uncordoned and completes. Ready means: the node
    condition ``conditionType`` has status ``"True"`` (when given) and the node's labels match
    ``labelSelector`` (when given); at least one of the two is required, both must hold when both
    are given. ``timeout`` is a Go duration
    (``30m``, ``2h``; at most 7 days) counted from when the node reached the gate, across
    restarts; past it the node fails (``ReadinessGateTimeout``) and stays cordoned.

    ``conditionType`` is a qualified name, as ``metav1.Condition.type`` is validated
    (``[prefix/]name``, Kubernetes API conventions); ``labelSelector`` keys and values are label
    keys and values (``metav1.LabelSelector``).
    """

    conditionType: Annotated[str, Field(strict=True)] | None = Field(
        default=None,
        description='Node condition ([prefix/]Name) the validator sets to "True" when the node is ready.'
    )
    labelSelector: LabelSelector | None = Field(
        default=None,
        description="Node labels the validator sets when the node is ready; with conditionType both must hold."
    )
    timeout: Annotated[str, BeforeValidator(_unitless), Field(strict=True)] = Field(
        default="1h",
        description="Go duration (30m, 2h; at most 7 days) a node may wait at the gate, counted from when it reached "
                    "it; then it fails with ReadinessGateTimeout and stays cordoned."
    )

    @field_validator("conditionType")
    @classmethod
    def _condition_type(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                check_label_key(v)
            except ValueError:
                raise ValueError(
                    f"conditionType {v[:100]!r} is not a condition type ([prefix/]Name: prefix a DNS subdomain, "
                    "name at most 63 characters of [-A-Za-z0-9_.] starting and ending alphanumeric)"
                ) from None
        return v

    @field_validator("labelSelector")
    @classmethod
    def _selector_labels(cls, v: LabelSelector | None) -> LabelSelector | None:
        if v is not None:
            check_selector(v)
            if not v.matchLabels and not v.matchExpressions:
                raise ValueError("labelSelector is empty: it would match every node (give matchLabels or "
                                 "matchExpressions)")
        return v

    @field_validator("timeout")
    @classmethod
    def _timeout(cls, v: str) -> str:
        seconds = parse_duration(v, maximum=MAX_GATE_TIMEOUT)
        if seconds < 1:
            raise ValueError(f"timeout {v!r} is shorter than 1 s")
        return v

    @model_validator(mode="after")
    def _something_to_wait_for(self) -> ReadinessGate:
        if self.conditionType is None and self.labelSelector is None:
            raise ValueError("readinessGate needs conditionType, labelSelector or both")
        return self

    @property
    def timeout_seconds(self) -> float:
        """``timeout`` in seconds."""
        return parse_duration(self.timeout, maximum=MAX_GATE_TIMEOUT)

    def describe(self) -> str:
        """One line for plans, status and the PR comment, e.g.
        ``condition nvidia.com/ValidatorReady=True, labels nvcre=pass (timeout 2h)``."""
        parts = []
        if self.conditionType is not None:
            parts.append(f"condition {self.conditionType}=True")
        if self.labelSelector is not None:
            parts.append(f"labels {self.labelSelector.kubectl_text()}")
        return f"{', '.join(parts)} (timeout {self.timeout})"


#: The runtime-required taints a recipe honours when it names none (``runtimeRequiredTaints``):
#: ours (any value; ``apply`` puts ``=true`` on joining nodes with ``autoTaintNewNodes``) and
#: NodeWright's operator default ``skyhook.nvidia.com=runtime-required`` (semantics §3.6), so nodes
#: provisioned for NodeWright are honoured and untainted too.
DEFAULT_RUNTIME_REQUIRED_TAINTS: tuple[Toleration, ...] = (
    Toleration(key=RUNTIME_REQUIRED_TAINT_KEY, operator="Exists"),
    Toleration(key="skyhook.nvidia.com", operator="Equal", value="runtime-required"),
)


class Recipe(Frozen):
    """A version-locked set of host packages for the nodes a selector picks.

    ``name`` and ``version`` (``metadata.name`` and ``spec.version`` of a NodeRecipe) identify the
    recipe release (recorded in status and on the nodes). ``deploymentPolicy``
    names a policy (loaded from ``policies/``); without one, ``interruptionBudget`` (default 100 %)
    gives NodeWright's legacy single ``__default__`` compartment with a fixed strategy.
    ``origin`` says which input kind it came from; ``source`` is the file it was read from.
    ``readinessGate``: hold each node after its packages until an external validator says it is
    ready (:class:`ReadinessGate`).
    """

    name: str = Field(
        description="Recipe name (metadata.name): a DNS-1123 subdomain of at most 53 characters; it ends the node "
                    "annotation keys."
    )
    version: str = Field(
        default="",
        description="Release of the recipe (any text, e.g. 2026.11.2), recorded in status and in each node's "
                    "records."
    )
    origin: Literal["NodeRecipe", "NodeWright", "Skyhook"] = Field(
        default="NodeRecipe",
        description="The input kind it was read from: NodeRecipe, NodeWright or Skyhook (set by the loader)."
    )
    source: str = Field(default="", description="The file it was read from, for messages (set by the loader).")
    nodeSelector: LabelSelector = Field(
        default_factory=LabelSelector,
        description="The nodes the recipe applies to; empty: every node."
    )
    podNonInterruptLabels: LabelSelector | None = Field(
        default=None,
        description="Pods (any namespace, Running or Pending) that must not be interrupted: a node carrying one waits, "
                    "cordoned, until it is gone before it is drained."
    )
    deploymentPolicy: str | None = Field(
        default=None,
        description="Name of the DeploymentPolicy (from policies/) that sets compartments, budgets and batch "
                    "strategies; excludes interruptionBudget."
    )
    interruptionBudget: Budget | None = Field(
        default=None,
        description="Nodes disrupted at once when no deploymentPolicy is named: one compartment with a fixed strategy "
                    "(default 100 %)."
    )
    runtimeRequired: StrictBool = Field(
        default=False,
        description="Selected nodes keep their runtime-required taints (runtimeRequiredTaints) until every "
                    "runtime-required recipe is complete on them."
    )
    autoTaintNewNodes: StrictBool = Field(
        default=False,
        description="With runtimeRequired: taint selected nodes that carry none of our records yet (nodes that join); "
                    "disruptive when adopting a running fleet."
    )
    priority: StrictInt = Field(
        default=200, ge=1, le=MAX_PRIORITY,
        description="Order among recipes on one node: lower runs first, ties by name (1 to 2^31-1)."
    )
    sequencing: Literal["node", "all"] = Field(
        default="node",
        description="How this recipe holds back recipes of later priority: node (until it is complete on that node) or "
                    "all (until it is complete on every node)."
    )
    additionalTolerations: tuple[Annotated[Toleration, AfterValidator(check_toleration)], ...] = Field(
        default=(), max_length=64,
        description="Tolerations added to every stage and interrupt pod (at most 64), for nodes with taints of "
                    "their own."
    )
    drain: DrainOptions = Field(
        default_factory=DrainOptions,
        description="How a node is drained before an interrupt: the kubectl drain options."
    )
    timeouts: Timeouts = Field(default_factory=Timeouts, description="Time limits of the node lifecycle.")
    readinessGate: ReadinessGate | None = Field(
        default=None,
        description="Hold each node after its packages, cordoned, until an external validator says it is ready."
    )
    runtimeRequiredTaints: tuple[Annotated[Toleration, AfterValidator(check_toleration)], ...] | None = Field(
        default=None,
        description="With runtimeRequired: the taints that hold a node until its runtime-required recipes are "
                    "complete, as tolerations match them (removed then; stage pods tolerate them). Unset: "
                    "reconciler.nodewright.dev/runtime-required (any value) and NodeWright's "
                    "skyhook.nvidia.com=runtime-required."
    )
    packages: dict[str, Package] = Field(
        default_factory=dict,
        description="The packages, by name: each an OCI image at an exact version with its configuration."
    )

    @field_validator("nodeSelector", "podNonInterruptLabels")
    @classmethod
    def _selector_labels(cls, v: LabelSelector | None) -> LabelSelector | None:
        return check_selector(v) if v is not None else v

    @field_validator("name")
    @classmethod
    def _recipe_name(cls, v: str) -> str:
        return check_recipe_name(v)

    @field_validator("deploymentPolicy")
    @classmethod
    def _policy_name(cls, v: str | None) -> str | None:
        if v is not None and not OBJECT_NAME.fullmatch(v):
            raise ValueError(
                f"deploymentPolicy {v[:80]!r} is not a policy name (lower-case letters, digits, '-' or '.', "
                "at most 63 characters)"
            )
        return v

    @field_validator("version")
    @classmethod
    def _release(cls, v: str) -> str:
        if v and (len(v) > 128 or v != v.strip() or not _RELEASE.fullmatch(v)):
            raise ValueError(
                f"recipe version {v[:80]!r} must be at most 128 characters, without control characters or "
                "surrounding whitespace"
            )
        return v

    def digest_dump(self) -> dict[str, Any]:
        """The recipe as hashed into the plan hash and the failure records' inputs digest: its JSON
        form without ``source`` and, when unset, without ``readinessGate`` (so recipes without a
        gate hash as they did before the field existed)."""
        exclude = {"source"} | {k for k in ("readinessGate", "runtimeRequiredTaints") if getattr(self, k) is None}
        return self.model_dump(mode="json", exclude=exclude)

    def required_taints(self) -> tuple[Toleration, ...]:
        """The runtime-required taint matchers of this recipe (``runtimeRequiredTaints`` or
        :data:`DEFAULT_RUNTIME_REQUIRED_TAINTS`)."""
        return DEFAULT_RUNTIME_REQUIRED_TAINTS if self.runtimeRequiredTaints is None else self.runtimeRequiredTaints

    def is_required_taint(self, taint: Taint) -> bool:
        """Whether ``taint`` is one of this recipe's runtime-required taints."""
        return any(m.tolerates(taint) for m in self.required_taints())

    @model_validator(mode="after")
    def _policy_xor_budget(self) -> Recipe:
        if self.deploymentPolicy and self.interruptionBudget:
            raise ValueError("deploymentPolicy and interruptionBudget are mutually exclusive")
        return self


_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns))+")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}

#: Longest Go duration (``time.Duration`` is int64 nanoseconds: about 292 years); Go's
#: ``ParseDuration`` refuses anything longer, so NodeWright would too.
MAX_GO_DURATION = (2**63 - 1) / 1e9
#: Longest ``gracefulShutdown``: one day (the stage pod's termination grace period; as
#: ``drain.gracePeriodSeconds``, a longer one only hides a stuck package).
MAX_GRACEFUL_SHUTDOWN = 24 * 3600.0


def check_recipe_name(name: str) -> str:
    """``name`` when it can name a recipe: a DNS-1123 subdomain (:data:`OBJECT_NAME`) of at most
    :data:`MAX_RECIPE_NAME` characters.

    Raises:
        ValueError: anything else (the message quotes at most 80 characters of it).
    """
    if not OBJECT_NAME.fullmatch(name) or len(name) > MAX_RECIPE_NAME:
        raise ValueError(f"recipe name {shown(name)} must be a DNS-1123 subdomain of at most {MAX_RECIPE_NAME} "
                         "characters (it is the end of node annotation keys such as "
                         "reconciler.nodewright.dev/nodeState_<name>)")
    return name


def parse_duration(text: str, *, maximum: float = MAX_GO_DURATION) -> float:
    """Parse a Go duration (``30s``, ``1m30s``, ``500ms``) into seconds, at most ``maximum``
    (default :data:`MAX_GO_DURATION`) and at most 64 characters.

    Raises:
        ValueError: not a Go duration, or longer than ``maximum``.
    """
    if len(text) > 64 or not _DURATION.fullmatch(text):
        unit = f" (a duration needs a unit: {text}s)" if re.fullmatch(r"[0-9]{1,20}(?:\.[0-9]{1,9})?", text) else ""
        raise ValueError(f"{text[:80]!r} is not a duration like 30s, 2m or 1h30m{unit}")
    seconds = sum(float(n) * _UNIT[u] for n, u in _DURATION_PART.findall(text))
    if not seconds <= maximum:  # also catches an overflow to inf
        raise ValueError(f"duration {text!r} is longer than the {_human(maximum)} allowed here")
    return seconds


def _human(seconds: float) -> str:
    if seconds >= 365 * 24 * 3600:
        return f"{seconds / (365 * 24 * 3600):.0f} years"
    if seconds >= 3600:
        return f"{seconds / 3600:g} h"
    return f"{seconds:g} s"

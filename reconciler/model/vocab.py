"""Closed vocabularies shared by the node lifecycle, its records and every renderer (issue 12).

Each is a ``StrEnum``: its members compare equal to, and serialise as, the strings written to
node records, JSON results and metrics, so records written before these enums existed read the
same. Consumers (status object, metrics, PR comment, CLI) use the members, never literals.
"""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    """Where a node's lifecycle is: one vocabulary for the in-memory machine and the persisted
    in-flight record (``InFlight.phase`` holds one of :data:`PERSISTED_PHASES`). ``START`` (the
    node has not been read yet) and ``FAILING`` (recording a failure the API refused) exist only in
    memory."""

    START = "start"
    PRE_CORDON = "pre-cordon"  # stages of packages without an interrupt, before the cordon (NodeWright's gating)
    CORDON = "cordon"
    WAIT = "wait"
    DRAIN = "drain"
    STAGES = "stages"
    INTERRUPT = "interrupt"
    POST_INTERRUPT = "post-interrupt"
    READINESS_GATE = "readiness-gate"  # packages complete: held until an external validator says ready
    UNCORDON = "uncordon"
    FAILING = "failing"


#: Phases written to node records (everything but the in-memory START and FAILING).
PERSISTED_PHASES: frozenset[Phase] = frozenset(Phase) - {Phase.START, Phase.FAILING}


class FailureReason(StrEnum):
    """Why a node failed (``FailureRecord.reason``, the Erroring condition's reason, results)."""

    NODE_NOT_READY = "NodeNotReady"
    DRAIN_REFUSED = "DrainRefused"  # kubectl drain's pre-eviction refusals (unmanaged pod, local data, ...)
    DRAIN_TIMEOUT = "DrainTimeout"
    MULTIPLE_PDBS = "MultiplePDBs"  # the Eviction API's 500 for a pod under several PodDisruptionBudgets
    EXTERNALLY_UNCORDONED = "ExternallyUncordoned"
    FORBIDDEN = "Forbidden"
    INVALID = "Invalid"  # the API rejected a request as invalid (400/422): never retried
    API_ERROR_PERSISTS = "ApiErrorPersists"  # retries exhausted (count or time) on one API error
    STAGE_FAILED = "StageFailed"
    STAGE_TIMEOUT = "StageTimeout"
    IMAGE_PULL_BACK_OFF = "ImagePullBackOff"
    ERR_IMAGE_PULL = "ErrImagePull"
    INVALID_IMAGE_NAME = "InvalidImageName"
    ERR_IMAGE_NEVER_PULL = "ErrImageNeverPull"
    INTERRUPT_FAILED = "InterruptFailed"
    REBOOT_TIMEOUT = "RebootTimeout"
    READINESS_GATE_TIMEOUT = "ReadinessGateTimeout"  # the recipe's readinessGate did not pass in time
    STAGE_POD_DELETED = "StagePodDeleted"  # someone else deleted the stage pod on its last attempt


#: Stage pod waiting reasons that mean the image cannot be pulled (kubelet's reasons).
IMAGE_PULL_REASONS: tuple[FailureReason, ...] = (
    FailureReason.IMAGE_PULL_BACK_OFF,
    FailureReason.ERR_IMAGE_PULL,
    FailureReason.INVALID_IMAGE_NAME,
    FailureReason.ERR_IMAGE_NEVER_PULL,
)


class EventKind(StrEnum):
    """Timeline event kinds of a run (``Event.event``): node events and batch/run events."""

    CORDON = "cordon"
    WAIT = "wait"
    BLOCKED = "blocked"
    EVICT = "evict"
    EVICT_REFUSED = "evict-refused"  # a pod's first 429 (PodDisruptionBudget or throttling) in a drain; retried
    DRAINED = "drained"
    STAGE_START = "stage-start"
    STAGE_END = "stage-end"
    STAGE_RETRY = "stage-retry"
    STAGE_LOST = "stage-lost"  # a stage pod disappeared before its end (deleted by someone else): an attempt
    INTERRUPT = "interrupt"
    REBOOTED = "rebooted"
    UNCORDON = "uncordon"
    COMPLETE = "complete"
    FAILED = "failed"
    LEFT = "left"
    REMOVED = "removed"
    BATCH_START = "batch-start"
    BATCH_END = "batch-end"
    HALTED = "halted"
    RESUME = "resume"
    STOPPED = "stopped"
    OWED = "owed"  # a node out of scope that still owes an interrupt: recorded and kept
    GATE = "gate"  # packages complete; held at the recipe's readiness gate
    GATE_PASSED = "gate-passed"  # the external validator said ready
    REPLACED = "replaced"  # another machine under the node's name (another UID): planned from scratch
    NOT_STARTED = "not-started"  # the node was not Ready within timeouts.nodeReady: nothing started, waiting
    SUPERSEDED = "superseded"  # a lifecycle of an older release: it finishes what its record owes first
    RELEASE = "release"  # at a safe point, a lifecycle took up the recipe's release


class Stage(StrEnum):
    """A package stage (each followed by its ``<stage>-check``), or the merged interrupt
    (semantics-nodewright.md §2)."""

    APPLY = "apply"
    CONFIG = "config"
    INTERRUPT = "interrupt"
    POST_INTERRUPT = "post-interrupt"
    UPGRADE = "upgrade"
    UNINSTALL = "uninstall"
    UNINSTALL_INTERRUPT = "uninstall-interrupt"


class PackageStatus(StrEnum):
    """A package entry's state in the node record (``PackageState.state``, NodeWright's names)."""

    IN_PROGRESS = "in_progress"
    COMPLETE = "complete"
    ERRORING = "erroring"
    SKIPPED = "skipped"
    UNKNOWN = "unknown"


class NodeStatus(StrEnum):
    """A recipe's status on a node (the ``status_<recipe>`` label and annotation)."""

    COMPLETE = "complete"
    IN_PROGRESS = "in_progress"
    ERRORING = "erroring"
    BLOCKED = "blocked"
    WAITING = "waiting"
    UNKNOWN = "unknown"


class InterruptType(StrEnum):
    """What an interrupt does to the node (NodeWright's interrupt types)."""

    REBOOT = "reboot"
    RESTART_ALL_SERVICES = "restartAllServices"
    SERVICE = "service"
    NOOP = "noop"


class Action(StrEnum):
    """What a plan step does to one package on one node."""

    INSTALL = "install"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    RECONFIGURE = "reconfigure"
    UNINSTALL = "uninstall"


class NodeResult(StrEnum):
    """How a node ended in one run (``NodeOutcome.state``)."""

    COMPLETE = "complete"
    FAILED = "failed"
    UNTOUCHED = "untouched"
    BLOCKED = "blocked"
    REMOVED = "removed"
    LEFT = "left"
    WAITING = "waiting"


class RunVerdict(StrEnum):
    """How a run ended (``RunResult.result``), first match wins:

    * ``HALTED`` — a compartment stopped (failure threshold, or the run was stopped);
    * ``FAILED`` — a node failed or stayed blocked, or was still running when the run gave up;
    * ``WAITING`` — nothing failed, but nodes did not start because an earlier recipe (by
      priority, NodeWright ``sequencing``) is not complete on them; a later run takes them up;
    * ``SUCCEEDED`` — every node is complete or had nothing to do.

    Only ``SUCCEEDED`` exits 0.
    """

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    HALTED = "halted"
    WAITING = "waiting"


class UnhealthyPodEvictionPolicy(StrEnum):
    """A PodDisruptionBudget's ``spec.unhealthyPodEvictionPolicy``: when a Running pod that is not
    Ready may be evicted. ``IF_HEALTHY_BUDGET`` (the default, also for an absent field) only while
    the budget is healthy; ``ALWAYS_ALLOW`` always. Source: Kubernetes API reference, policy/v1
    ``PodDisruptionBudgetSpec``."""

    IF_HEALTHY_BUDGET = "IfHealthyBudget"
    ALWAYS_ALLOW = "AlwaysAllow"

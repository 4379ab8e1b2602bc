"""The node lifecycle's vocabulary of effects, reads and observations, as data (issue 12).

:func:`reconciler.execute.machine.step` decides; it never calls a port. It returns a
:class:`Transition`: the effects to perform in order (:data:`Effect`), or the reads it needs before it
can decide (:data:`Read`). :mod:`reconciler.execute.lifecycle` is the one interpreter that performs
them through the ports and hands what it saw back as the next :class:`View`.

Rules the interpreter keeps (and the table tests of ``step`` rely on):

- Effects run in order. A cluster write that fails stops the rest; the step's memory becomes the
  snapshot taken when that write was decided (``Transition.rollbacks``) and the error comes back
  in :attr:`View.error`. An eviction's answer is never an error of the transition: it comes back in
  :attr:`View.evictions` (the drain decides what a 429 or a 500 means).
- :class:`Announce` and :class:`Log` touch no cluster; they take effect only when every write
  before them succeeded, and always on the rollout loop's thread.
- A read is performed only when asked for; every node GET is a new entry of :attr:`View.nodes`
  (consumed in order by the step that asked), so a decision about ownership is always made from a
  read of that decision's own cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Generic, TypeVar

from reconciler.errors import ClusterError
from reconciler.model.observed import NodeInfo, PdbInfo, PodInfo
from reconciler.model.selector import Taint
from reconciler.model.vocab import EventKind
from reconciler.ports import PodEviction, StageSpec, StageStatus

# ------------------------------------------------------------------------------------- effects


@dataclass(frozen=True)
class PatchNode:
    """Merge-patch the node: ``None`` values delete annotations/labels; ``unschedulable`` and
    ``taints`` (the whole list) are set when given. ``resource_version``: precondition (409 when the
    node changed since the read the decision was made from). ``uid``: precondition (409 when the
    node is another machine under the same name: another ``metadata.uid``)."""

    annotations: Mapping[str, str | None] | None = None
    labels: Mapping[str, str | None] | None = None
    unschedulable: bool | None = None
    taints: tuple[Taint, ...] | None = None
    resource_version: str | None = None
    uid: str | None = None


@dataclass(frozen=True)
class Evict(PodEviction):
    """POST an Eviction for ``namespace/name`` with a UID precondition (kubectl drain): the
    :class:`~reconciler.ports.PodEviction` itself (``namespace``, ``name``, ``uid``,
    ``grace_seconds``, ``ref``), as the effect the drain phase asks for; a row of them goes to
    :meth:`~reconciler.ports.PodPort.evict_pods` together."""


@dataclass(frozen=True)
class StartStage:
    """Create the stage pod (idempotent: an existing pod of that name is left alone)."""

    spec: StageSpec


@dataclass(frozen=True)
class DeleteStage:
    """Delete one stage pod: a stage given up on while its pod still runs."""

    spec: StageSpec


@dataclass(frozen=True)
class DeleteStages:
    """Delete the recipe's stage pods on the node (the node is complete)."""

    recipe: str


@dataclass(frozen=True)
class SetCondition:
    """Set the node condition ``type_`` (status ``"True"``/``"False"``)."""

    type_: str
    status: str
    reason: str
    message: str


@dataclass(frozen=True)
class EmitEvent:
    """A Kubernetes Event on the node. ``notice``: an account of what was done (cordon, drain,
    uncordon: :data:`NODE_EVENTS`), whose failed write is logged and leaves the lifecycle going;
    otherwise a failed write is the step's error, as every other write's."""

    reason: str
    message: str
    type_: str = "Normal"
    notice: bool = False


#: Timeline events that are also Events on the node, by their reason (``kubectl describe node``
#: shows who cordoned, drained and uncordoned it, and for which recipe).
NODE_EVENTS = {EventKind.CORDON: "Cordoned", EventKind.DRAINED: "Drained", EventKind.UNCORDON: "Uncordoned"}


@dataclass(frozen=True)
class Announce:
    """A timeline event (observers: terminal, status object, metrics). No cluster I/O."""

    kind: EventKind
    detail: str = ""


class LogLevel(Enum):
    """Level of a :class:`Log` effect."""

    INFO = "info"
    ERROR = "error"


@dataclass(frozen=True)
class Log:
    """A line for the process log. No cluster I/O."""

    level: LogLevel
    message: str


Effect = PatchNode | Evict | StartStage | DeleteStage | DeleteStages | SetCondition | EmitEvent | Announce | Log
WRITES = (PatchNode, StartStage, DeleteStage, DeleteStages, SetCondition, EmitEvent)

# --------------------------------------------------------------------------------------- reads


@dataclass(frozen=True)
class ReadNode:
    """GET the node. ``optional``: a 404 is an answer (``None`` in :attr:`View.nodes`), not an error."""

    optional: bool = False


@dataclass(frozen=True)
class ListPods:
    """LIST the node's pods."""


@dataclass(frozen=True)
class GetPod:
    """GET one pod (``None`` when it does not exist)."""

    namespace: str
    name: str


@dataclass(frozen=True)
class ListPdbs:
    """LIST the PodDisruptionBudgets."""


@dataclass(frozen=True)
class DaemonSetExists:
    """Does the DaemonSet exist (kubectl drain's orphaned DaemonSet pod rule)."""

    namespace: str
    name: str


@dataclass(frozen=True)
class ReadStage:
    """The stage pod's status; ``log``: with the failing container's log tail (a request on a real
    cluster: asked only for a failure record)."""

    spec: StageSpec
    log: bool = False


Read = ReadNode | ListPods | GetPod | ListPdbs | DaemonSetExists | ReadStage

# -------------------------------------------------------------------------------- observations


class EvictAnswer(Enum):
    """How the API server answered an eviction."""

    ACCEPTED = "accepted"
    NOT_FOUND = "not-found"
    CONFLICT = "conflict"
    TOO_MANY = "too-many-requests"
    SERVER = "server-error"
    FORBIDDEN = "forbidden"
    OTHER = "other"


@dataclass(frozen=True)
class EvictResult:
    """One eviction's answer. ``disruption_budget``: a 429 caused by a PodDisruptionBudget;
    ``retry_after``: the server's Retry-After (s); ``reason``: the API's reason (e.g.
    ``NamespaceTerminating``)."""

    answer: EvictAnswer
    message: str = ""
    retry_after: float | None = None
    disruption_budget: bool = False
    reason: str = ""


@dataclass(frozen=True)
class View:
    """What the interpreter saw for the step: answers to the reads the step asked for, the node as
    the last write of this cycle returned it (``fresh``), the answers to the last transition's
    evictions, and the error that stopped the last transition or read."""

    nodes: tuple[NodeInfo | None, ...] = ()
    fresh: NodeInfo | None = None
    pod_lists: tuple[tuple[PodInfo, ...], ...] = ()
    pods: Mapping[tuple[str, str], PodInfo | None] = field(default_factory=dict)
    pdbs: tuple[PdbInfo, ...] | None = None
    daemonsets: Mapping[tuple[str, str], bool] = field(default_factory=dict)
    stages: Mapping[str, StageStatus] = field(default_factory=dict)
    logs: Mapping[str, str] = field(default_factory=dict)  # pod name → log tail (ReadStage with log)
    evictions: Mapping[str, EvictResult] = field(default_factory=dict)
    error: ClusterError | None = None


M = TypeVar("M")


@dataclass(frozen=True)
class Transition(Generic[M]):
    """What one step decided.

    ``needs``: reads to perform, then step again with the same memory (nothing else is set).
    Otherwise ``memory`` is the node run's new memory, ``effects`` run in order, ``rollbacks[i]``
    is the memory to keep when write ``i`` fails, ``wake`` is the monotonic clock time to step again
    (``None``: the run has ended), ``again`` asks for the next step at once (in the same cycle,
    after the effects), and ``raise_`` is an error that stops the whole run.
    """

    memory: M
    effects: tuple[Effect, ...] = ()
    rollbacks: Mapping[int, M] = field(default_factory=dict)
    wake: float | None = None
    again: bool = False
    needs: tuple[Read, ...] = ()
    raise_: ClusterError | None = None

"""Per-node recorded state: the annotations the reconciler reads and writes on each node.

Our prefix is :data:`PREFIX`; values keep NodeWright's shape (decision (h)): the package state
annotation is a JSON map keyed ``name|version`` with ``{name, version, image, containerSHA?,
stage, state, restarts?}``. Besides it we keep, per recipe: a cordon-ownership record, an
in-flight operation record (exact resume), per-package config digests (reconfigure detection), a
failure record and a status label. Existing ``skyhook.nvidia.com/nodeState_<name>`` (and
``nodewright.nvidia.com/``) annotations are read for import.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from functools import cached_property, lru_cache
from operator import attrgetter
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator

from reconciler.errors import InputError
from reconciler.jsonsafe import parse_json
from reconciler.model.base import Frozen
from reconciler.model.redact import redact
from reconciler.model.utctime import to_rfc3339
from reconciler.model.vocab import PERSISTED_PHASES, FailureReason, PackageStatus, Phase, Stage

if TYPE_CHECKING:
    from reconciler.model.observed import NodeInfo
    from reconciler.model.policy import DeploymentPolicy
    from reconciler.model.recipe import Package, Recipe

PREFIX = "reconciler.nodewright.dev"
LEGACY_PREFIXES = ("skyhook.nvidia.com", "nodewright.nvidia.com")

State = PackageStatus  # the package entry's state (older name)


def state_key(recipe: str) -> str:
    """Annotation holding the package-state JSON map of ``recipe``."""
    return f"{PREFIX}/nodeState_{recipe}"


def config_key(recipe: str) -> str:
    """Annotation holding per-package config digests applied by ``recipe``."""
    return f"{PREFIX}/config_{recipe}"


def cordon_key(recipe: str) -> str:
    """Annotation present while ``recipe`` holds a cordon it placed (value: JSON owner record)."""
    return f"{PREFIX}/cordon_{recipe}"


def cordon_claims(annotations: Mapping[str, str], except_recipe: str, uid: str = "") -> tuple[str, ...]:
    """Other recipes holding a cordon claim in a node's ``annotations`` (their
    ``cordon_<recipe>`` annotation), sorted. With the node's ``uid``, a claim written on another
    machine (its recorded UID differs) is no claim (:func:`holds_claim`)."""
    prefix = cordon_key("")
    return tuple(sorted(k[len(prefix):] for k in annotations
                        if k.startswith(prefix) and k != cordon_key(except_recipe)
                        and holds_claim(annotations, k[len(prefix):], uid)))


def holds_claim(annotations: Mapping[str, str], recipe: str, uid: str = "") -> bool:
    """Whether ``recipe`` holds a cordon claim on the node with these ``annotations`` and ``uid``:
    its ``cordon_<recipe>`` annotation is there and was not written on another machine (a claim
    recording another UID is void: the node was replaced under the same name, and a cordon it
    registered with is not ours). A claim that cannot be read counts as held (we never lift a
    cordon we cannot account for, and never take one for ours without our claim)."""
    text = annotations.get(cordon_key(recipe))
    if text is None:
        return False
    rec = parse_model(CordonRecord, text)
    return rec is None or not (rec.uid and uid and rec.uid != uid)


def inflight_key(recipe: str) -> str:
    """Annotation recording the node step in flight (run id, plan hash, phase, started)."""
    return f"{PREFIX}/inflight_{recipe}"


def failure_key(recipe: str) -> str:
    """Annotation recording why the node failed (stage, package, exit code, log tail)."""
    return f"{PREFIX}/failure_{recipe}"


def validate_key(recipe: str) -> str:
    """Annotation written when a node reaches ``recipe``'s readiness gate: the gate's token (the
    recipe version and the lifecycle, ``<version>/<lifecycle>``), a request to the validator. A
    validator that echoes it in :func:`validated_key` once it validated the node afterwards says
    its validation is newer than the work the gate holds (docs/how-to/readiness-gate.md)."""
    return f"{PREFIX}/validate_{recipe}"


def validated_key(recipe: str) -> str:
    """Annotation a validator writes with the token of :func:`validate_key` it validated after."""
    return f"{PREFIX}/validated_{recipe}"


def status_key(recipe: str) -> str:
    """Label and annotation with the node's status for ``recipe`` (NodeStatus values)."""
    return f"{PREFIX}/status_{recipe}"


#: Annotation the operations verbs that change node records (``reset``, ``package rerun``,
#: ``reset --package``) set in the same write: a running ``reconciler controller`` takes a change
#: of it as a request for a pass, as Flux's ``reconcile.fluxcd.io/requestedAt`` (its value only
#: needs to differ from the last one: :func:`next_request`).
RECONCILE_REQUEST_KEY = f"{PREFIX}/reconcileRequest"


def next_request(annotations: Mapping[str, str], resource_version: str) -> str:
    """A value of :data:`RECONCILE_REQUEST_KEY` different from the current one: the node's
    ``resourceVersion`` (every write changes it), else the current value plus one."""
    current = annotations.get(RECONCILE_REQUEST_KEY, "")
    if resource_version and resource_version != current:
        return resource_version
    return str(int(current) + 1) if current.isdigit() else "1"


def recorded_status(labels: Mapping[str, str], annotations: Mapping[str, str], recipe: str) -> str:
    """The node's status for ``recipe`` (a :class:`~reconciler.model.vocab.NodeStatus` value, ``""``
    when none): the annotation (our record) first, else the label (its projection for ``kubectl
    -l``, which a person may have edited). The one precedence every reader uses."""
    key = status_key(recipe)
    return annotations.get(key) or labels.get(key) or ""


def recipe_keys(recipe: str) -> tuple[str, ...]:
    """Every annotation of ``recipe``'s records on a node: package state, config digests, cordon
    claim, in-flight record, failure record, status, the readiness gate's request."""
    return (state_key(recipe), config_key(recipe), cordon_key(recipe), inflight_key(recipe), failure_key(recipe),
            status_key(recipe), validate_key(recipe))


def of_another_machine(annotations: Mapping[str, str], recipe: str, uid: str) -> bool:
    """Whether ``recipe``'s records on a node were written on another machine than the one with
    ``uid`` (its in-flight record or cordon claim records another UID): the node object was
    replaced under the same name and our annotations came along (copied by a provisioner, or
    written by a run that did not know yet). Such records are void, every one of them
    (:func:`recipe_keys`): the node is planned from scratch. An unknown UID on either side is the
    same machine."""
    if not uid:
        return False
    fl = parse_model(InFlight, annotations.get(inflight_key(recipe)))
    if fl is not None and not fl.of_machine(uid):
        return True
    claim = parse_model(CordonRecord, annotations.get(cordon_key(recipe)))
    return claim is not None and bool(claim.uid) and claim.uid != uid


def condition_type(recipe: str, kind: Literal["Erroring", "NotReady"]) -> str:
    """Node condition type, NodeWright's ``<prefix>/<name>/<kind>`` shape."""
    return f"{PREFIX}/{recipe}/{kind}"


RUNTIME_REQUIRED_TAINT_KEY = f"{PREFIX}/runtime-required"

#: Annotation written with the runtime-required taint when ``apply`` taints a joining node itself
#: (``autoTaintNewNodes``): the taint is then ours to remove.
AUTO_TAINT_KEY = f"{PREFIX}/autoTaint"

#: Node label (value ``"true"``) that takes a node out of every rollout (NodeWright's
#: ``skyhook.nvidia.com/ignore``): never started; a node in progress is finished safely.
IGNORE_LABEL = f"{PREFIX}/ignore"


def is_ignored(labels: Mapping[str, str]) -> bool:
    """Whether a node carries the ignore label."""
    return labels.get(IGNORE_LABEL) == "true"


class _CanonicalText(Frozen):
    """A frozen record that keeps its own canonical JSON text once written (a
    :func:`functools.cached_property`, in the instance's ``__dict__``, beside the fields;
    :meth:`model_copy` with ``update`` drops it). Issue 36: a node's whole package-state
    annotation is written again at every stage start and end, so serialising every entry afresh
    made ``apply`` quadratic in the packages per node (1,000 packages on 3 nodes: 127 s of CPU,
    most of it ``model_dump`` and ``json.dumps`` of entries that had not changed)."""

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Any:
        """A copy (pydantic's); with ``update``, without the text cached of the old fields."""
        new = super().model_copy(update=update, deep=deep)
        if update:
            fields = type(self).model_fields
            for name in [k for k in new.__dict__ if k not in fields]:
                del new.__dict__[name]
        return new


class PackageState(_CanonicalText):
    """One entry of the node-state map (NodeWright ``nodeState`` value shape)."""

    name: str
    version: str
    image: str = ""
    containerSHA: str | None = None
    stage: Stage
    state: State
    restarts: int = Field(default=0, ge=0, le=1_000_000)  # cluster data: bounded so it prints and sums safely

    @cached_property
    def key(self) -> str:
        """``name|version``."""
        return f"{self.name}|{self.version}"

    @cached_property
    def member(self) -> str:
        """This entry as a member of the state map's canonical JSON: ``"name|version":{...}``
        (sorted keys, no spaces, empty optional fields left out), computed once."""
        return _JSON_KEY(self.key) + ":" + json.dumps(self.model_dump(exclude_none=True), sort_keys=True,
                                                        separators=(",", ":"))

    @property
    def done(self) -> bool:
        """True when this entry reports its stage complete."""
        return self.state == "complete"


class NodeStateError(ValueError):
    """A state annotation that is not valid JSON of the expected shape (names the node and key)."""


def parse_state(text: str | None, *, node: str = "", key: str = "") -> dict[str, PackageState]:
    """Parse a package-state annotation value into ``{"name|version": PackageState}``.

    ``None`` or empty means no state. Legacy NodeWright values may omit ``image``. Values are
    memoised by text (fleets repeat the same state on many nodes); the returned dict is a copy.

    Raises:
        NodeStateError: malformed JSON or entries (message names node and annotation).
    """
    if not text:
        return {}
    try:
        return dict(_parse_state_cached(text))
    except NodeStateError as e:
        text_ = str(e).replace("node ?:", f"node {node}:").replace("annotation ?", f"annotation {key}")
        raise NodeStateError(text_) from None


@lru_cache(maxsize=4096)
def _parse_state_cached(text: str) -> dict[str, PackageState]:
    return _parse_state(text, node="?", key="?")


def _parse_state(text: str | None, *, node: str = "", key: str = "") -> dict[str, PackageState]:
    """Parse a package-state annotation value into ``{"name|version": PackageState}``.

    ``None`` or empty means no state. Legacy NodeWright values may omit ``image``.

    Raises:
        NodeStateError: malformed JSON or entries (message names node and annotation).
    """
    if not text:
        return {}
    try:
        raw = parse_json(text, "annotation", allow_duplicates=True)
    except InputError as e:
        raise NodeStateError(f"node {node}: annotation {key} is not JSON ({e.message} at {_where(e)})") from None
    if not isinstance(raw, dict):
        raise NodeStateError(f"node {node}: annotation {key} must be a JSON object")
    out: dict[str, PackageState] = {}
    for k, v in raw.items():
        try:
            entry = PackageState.model_validate(v)
        except ValidationError as e:
            first = e.errors(include_url=False)[0]
            loc = ".".join(str(p) for p in first["loc"])
            raise NodeStateError(f"node {node}: annotation {key} entry {k[:80]!r}: {loc}: {first['msg']}") from None
        out[entry.key] = entry
    return out


_JSON_KEY: Callable[[str], str] = json.encoder.encode_basestring_ascii  # json.dumps of a str
_KEY = attrgetter("key")
_MEMBER = attrgetter("member")


def dump_state(state: Mapping[str, PackageState]) -> str:
    """Serialise a state map canonically (sorted keys, no spaces; omits empty optional fields):
    ``json.dumps({k: e.model_dump(exclude_none=True) ...}, sort_keys=True, separators=(",", ":"))``,
    joined from each entry's own text (:attr:`PackageState.member`) when every key is its entry's
    ``name|version``, as the reconciler keys them: no work per entry but the join."""
    keys = sorted(state)
    entries = list(map(state.__getitem__, keys))
    if list(map(_KEY, entries)) == keys:
        return "{" + ",".join(map(_MEMBER, entries)) + "}"
    return json.dumps({k: state[k].model_dump(exclude_none=True) for k in keys}, sort_keys=True,
                      separators=(",", ":"))


def digest(value: Any) -> str:
    """Short stable sha256 digest (16 hex chars) of a JSON-serialisable value."""
    blob = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


class ConfigDigest(_CanonicalText):
    """What configuration a package was last applied with: one digest per configMap key, one for
    env, one for resources. Per-key digests let the planner name the changed keys, which select
    the ``configInterrupts`` to run."""

    configMap: dict[str, str] = Field(default_factory=dict)
    env: str = ""
    resources: str = ""

    @cached_property
    def text(self) -> str:
        """This digest's canonical JSON (sorted keys, no spaces), computed once."""
        return json.dumps(self.model_dump(), sort_keys=True, separators=(",", ":"))


def parse_config_digests(text: str | None) -> dict[str, ConfigDigest]:
    """Parse the config-digest annotation ``{package: ConfigDigest}``; malformed → empty (logged by
    the caller as a warning; the planner then treats config as unchanged)."""
    if not text:
        return {}
    try:
        raw = parse_json(text, "annotation", allow_duplicates=True)
        return {k: ConfigDigest.model_validate(v) for k, v in raw.items()}
    except (InputError, ValidationError, AttributeError):
        return {}


def dump_config_digests(d: Mapping[str, ConfigDigest]) -> str:
    """Serialise config digests canonically: ``json.dumps({k: v.model_dump() ...}, sort_keys=True,
    separators=(",", ":"))``, joined from each digest's own text (:attr:`ConfigDigest.text`)."""
    return "{" + ",".join([_JSON_KEY(k) + ":" + d[k].text for k in sorted(d)]) + "}"




class CommittedStep(Frozen):
    """One package's work a node's lifecycle committed to (:attr:`InFlight.steps`): the plan step
    as it was when the lifecycle took it on. ``stages``: the stages still to run at the commit, in
    order, ``post-interrupt`` last when the step has its own interrupt (``interrupt``: it is one of
    the merged interrupt's packages); ``after``: packages whose steps finish first on the node;
    ``spec``: :func:`package_digest` of the recipe's package at the commit ("" when the recipe
    described no such package: the uninstall of a removed one). A later recipe whose package has
    another digest supersedes the step (docs/semantics.md, "The in-flight record is the
    contract")."""

    package: str
    action: str
    from_: str | None = Field(default=None, alias="from")
    to: str | None = None
    stages: tuple[str, ...] = ()
    interrupt: bool = False
    after: tuple[str, ...] = ()
    spec: str = ""


_PACKAGE_DIGESTS: dict[int, tuple[Any, str]] = {}


def package_digest(pkg: Package | None) -> str:
    """Short digest of everything a package's stages are made from (version, image and digest,
    configMap, env, resources, interrupts, dependencies, uninstall); "" for None. Memoised per
    package object (models are frozen)."""
    if pkg is None:
        return ""
    hit = _PACKAGE_DIGESTS.get(id(pkg))
    if hit is not None and hit[0] is pkg:
        return hit[1]
    if len(_PACKAGE_DIGESTS) > 4096:
        _PACKAGE_DIGESTS.clear()
    out = digest(pkg.model_dump(mode="json"))
    _PACKAGE_DIGESTS[id(pkg)] = (pkg, out)
    return out


def release_digest(recipe: Recipe) -> str:
    """The identity of a recipe's *release*: the digest of its packages (what a node is changed
    to; not its selectors, budget, drain options or timeouts, which apply to whatever lifecycle
    runs). Two recipes with the same release digest make the same changes on a node."""
    return digest({name: package_digest(pkg) for name, pkg in sorted(recipe.packages.items())})


class InFlight(Frozen):
    """The node step in flight for one recipe (annotation :func:`inflight_key`), written before the
    step's effect and cleared when the node's lifecycle ends, so a killed run resumes exactly.

    ``phase``: where the node is. ``interrupt``: the merged interrupt the node still owes (kept
    until the interrupt is confirmed; the planner adds it to the node's plan even when every
    package's stages are complete). ``interruptPackages``: packages whose ``post-interrupt``
    stage follows the interrupt. ``bootID``: the node's bootID recorded *before* a reboot was
    requested (reboot done = bootID changed, decision (f)). ``runId``/``planHash``: who wrote it
    last. ``lifecycle``: the run id that started this node's lifecycle; kept across resumed runs,
    it names the stage pods, so a resumed run finds the pods of the run it continues and never
    collides with older ones.

    Times are UTC instants in RFC 3339 (:mod:`reconciler.model.utctime`), so a record written by
    one process means the same to the next one on another host: ``since`` is when the current
    phase started; ``timers`` maps a phase (``wait``, ``drain``) to when it *first* started in this
    lifecycle, so the wait and drain timeouts count from their start across restarts;
    ``requestedAt`` is when the interrupt was requested (the reboot timeout counts from it).
    ``interruptOwner``: the package whose image runs the interrupt pod, fixed when the interrupt is
    requested, so a resumed run (whose new plan may hold other steps) looks for the same pod.
    ``requestedAt`` None means "not requested"; ``""`` means "requested at an unknown time" (a
    record written by an older version with a clock reading): the request is never sent twice
    and its timeout counts from when this run first saw it.
    ``reruns``: package → how many times an operations verb (``package rerun``, ``reset
    --package``) restarted it in this lifecycle (None: never). It is part of that package's stage
    pod names (:attr:`reconciler.ports.StageSpec.rerun`), so the next apply runs the package again
    instead of reading back the pods of its earlier run (kept, a failed one for its logs); written
    in the verb's one write, it survives a crash of the apply that follows. Only the rerun
    package's pods are renamed: the others (one still running, the interrupt) keep theirs, so
    nothing runs twice. A new lifecycle starts without it.

    The commitment (issue 34: the record is the contract), written with the lifecycle's first
    record and again only when it takes up a newer release at a safe point: ``release`` and
    ``recipeVersion`` (:func:`release_digest` and ``metadata.version`` of the recipe it is for),
    ``steps`` (per package the version and stages it committed to, :class:`CommittedStep`),
    ``interrupt``/``interruptPackages``/``interruptOwner`` (the merged interrupt, the packages
    whose post-interrupt stage follows it, the package whose image runs it), ``nodeUID`` (the
    machine: a node with another UID is another machine, and this record is void there) and
    ``bootID`` (the baseline, recorded again right before a reboot is requested). Records written
    before the commitment existed have ``steps`` None: they are resumed from the plan, as then.
    """

    runId: str
    planHash: str
    phase: Phase
    lifecycle: str = ""
    since: str = ""
    timers: dict[str, str] = Field(default_factory=dict)
    interrupt: dict[str, Any] | None = None
    interruptPackages: tuple[str, ...] = ()
    bootID: str = ""
    requestedAt: str | None = None
    interruptOwner: str = ""
    reruns: dict[str, Annotated[int, Field(ge=1, le=1_000_000)]] | None = None
    release: str = ""
    recipeVersion: str = ""
    steps: tuple[CommittedStep, ...] | None = None
    nodeUID: str = ""

    def of_machine(self, uid: str) -> bool:
        """Whether this record belongs to the machine with ``uid`` (an unknown UID on either side
        — a record written before UIDs were recorded, an adapter that gives none — counts as the
        same machine)."""
        return not (self.nodeUID and uid and self.nodeUID != uid)

    @property
    def lifecycle_id(self) -> str:
        """The lifecycle this record belongs to (``lifecycle``; older records: ``runId``)."""
        return self.lifecycle or self.runId

    def rerun_of(self, package: str) -> int:
        """How many times ``package`` was restarted in this lifecycle (:attr:`reruns`; 0: never)."""
        return (self.reruns or {}).get(package, 0)

    def with_rerun(self, package: str) -> InFlight:
        """This record with ``package`` restarted once more (:attr:`reruns`; ``lifecycle`` written
        out, so an older record's lifecycle keeps its name)."""
        return self.model_copy(update={"lifecycle": self.lifecycle_id,
                                       "reruns": {**(self.reruns or {}), package: self.rerun_of(package) + 1}})

    @property
    def owes(self) -> str:
        """The interrupt type this record still owes ("" when none): it carries one and the lifecycle
        reached its stages or its interrupt (conservative: a stage may have run; a reboot requested
        but not yet confirmed is owed too). The one rule behind the plan's ``outOfScope``, ``reset``'s
        refusal and ``status`` (issue 12's scope rules)."""
        if not self.interrupt or self.phase not in (Phase.STAGES, Phase.INTERRUPT):
            return ""
        return str(self.interrupt.get("type") or "interrupt")

    @field_validator("phase")
    @classmethod
    def _persisted_phase(cls, v: Phase) -> Phase:
        if v not in PERSISTED_PHASES:
            raise ValueError(f"phase {v.value!r} is never written to a node record")
        return v

    @field_validator("since", "requestedAt", mode="before")
    @classmethod
    def _legacy_clock_reading(cls, v: Any) -> Any:
        # versions before 0.2 wrote clock readings (monotonic or simulated seconds): not comparable
        if isinstance(v, int | float) and not isinstance(v, bool):
            return ""
        return v


class CordonRecord(Frozen):
    """Value of :func:`cordon_key`: we cordoned this node (it was schedulable before). ``at`` is
    the UTC instant of the cordon (RFC 3339; ``""`` when unknown); ``uid`` the node's UID when the
    claim was written: on a node with another UID (another machine under the same name) the claim
    is not ours (:func:`claim_of`)."""

    runId: str
    at: str = ""
    uid: str = ""

    @field_validator("at", mode="before")
    @classmethod
    def _legacy_epoch(cls, v: Any) -> Any:
        if isinstance(v, int | float) and not isinstance(v, bool):
            return to_rfc3339(float(v)) if 1e8 < v < 253402300799 else ""
        return v


class FailureRecord(Frozen):
    """Value of :func:`failure_key`: why the node failed in a run (kept until a later run
    succeeds on the node or the node is reset). ``inputs`` is the digest of the recipe and policy
    the node failed with, ``uid`` the node's UID and ``ready`` its readiness (:func:`readiness`)
    when it failed (``""``: not recorded, a record of an older version): a later run with the same
    inputs leaves the node failed (it does not hammer a broken node) unless asked to retry failed
    nodes, the node is another machine (another UID) or, for a failure its readiness caused, its
    readiness changed (:func:`not_retried`)."""

    runId: str
    reason: str
    inputs: str = ""
    uid: str = ""
    ready: Literal["", "True", "False", "Unknown"] = ""
    stage: str = ""
    package: str = ""
    exitCode: int | None = None
    message: str = ""
    logTail: str = ""

    @field_validator("message", "logTail", mode="after")
    @classmethod
    def _masked(cls, v: str) -> str:
        """A stage's message and log are the cluster's text: secrets in them (a token in a clone URL,
        ``password=…``) are masked (:func:`reconciler.model.redact.redact`) before the record is
        written on the node (readable by everyone who can read nodes), shown or reported; a record
        written by someone else is masked when it is read."""
        return redact(v)


def failure_of(annotations: Mapping[str, str], recipe: str) -> FailureRecord | None:
    """The failure record of ``recipe`` in a node's ``annotations`` (:func:`failure_key`); None
    when there is none or it is unreadable (as :func:`parse_model`). Pure."""
    rec: FailureRecord | None = parse_model(FailureRecord, annotations.get(failure_key(recipe)))
    return rec


def inputs_digest(recipe: Recipe, policy: DeploymentPolicy) -> str:
    """Digest of what a node is changed *to*: the recipe and policy without their file paths
    (``FailureRecord.inputs``; :func:`not_retried` compares it)."""
    return digest({
        "recipe": recipe.digest_dump(),
        "policy": policy.model_dump(mode="json", exclude={"source"}),
    })


#: Failures the node's readiness caused (it was not Ready, or did not come back Ready from its
#: reboot): retried once its readiness differs from the one recorded (:func:`not_retried`).
READINESS_FAILURES: frozenset[str] = frozenset({FailureReason.NODE_NOT_READY, FailureReason.REBOOT_TIMEOUT})


def readiness(ready: bool | None) -> Literal["True", "False", "Unknown"]:
    """A node's readiness as its Ready condition's status says it (``NodeInfo.ready``)."""
    return "Unknown" if ready is None else ("True" if ready else "False")


def not_retried(node: NodeInfo, recipe: str, inputs: str, *,
                retry_failed: bool = False) -> FailureRecord | None:
    """The failure record that makes a run of ``recipe`` with ``inputs`` (:func:`inputs_digest`)
    leave ``node`` failed instead of starting it again, or None when the run may start it.

    A node that failed in an earlier run with these very inputs is not retried (it would fail
    the same way: a run does not hammer a broken node) unless ``retry_failed``
    (``--retry-failed``). The node itself is part of the inputs: a record of another machine
    (another UID under the same name: replaced) does not hold it, nor does a failure its
    readiness caused (:data:`READINESS_FAILURES`) once its readiness differs from the one
    recorded (a node that joined NotReady, or did not come back from a reboot, and is Ready
    now). A record from other inputs (the recipe or policy changed since), or an unreadable one,
    does not hold the node. The one rule behind ``apply``'s "not retried" (the rollout, on its
    fresh read of each node of a batch) and the plan's ``notRetried`` nodes (left out of every
    batch), so ``plan`` says what ``apply`` will do. Pure."""
    if retry_failed:
        return None
    rec = failure_of(node.annotations, recipe)
    if rec is None or rec.inputs != inputs:
        return None
    if rec.uid and node.uid and rec.uid != node.uid:
        return None
    if rec.reason in READINESS_FAILURES and rec.ready != readiness(node.ready):
        return None
    return rec


def not_retried_message(rec: FailureRecord, recipe: str = "", node: str = "", *, controller: bool = False) -> str:
    """How a node held failed by :func:`not_retried` is reported (the run's result, the plan's
    node note): the failed run, the hint, the failure's own message. With ``recipe`` and ``node``
    the hint also names the other way on when the failure names a package stage the failed
    lifecycle can run again: ``package rerun`` (from the package's first stage, or its
    post-interrupt stage); not for a failure of the node itself (drain, interrupt, readiness).
    ``controller``: the run is a ``reconciler controller`` pass, which has no ``--retry-failed``:
    the hint is ``reset`` of that node (a running controller takes the reset as a request)."""
    rerun = ""
    if recipe and node and rec.package and rec.stage not in (Stage.INTERRUPT, Stage.UNINSTALL_INTERRUPT):
        stage = f" --stage {Stage.POST_INTERRUPT}" if rec.stage == Stage.POST_INTERRUPT else ""
        rerun = (f", or `reconciler package rerun {rec.package} --recipe {recipe} --node {node}{stage} --force` "
                 f"to run {rec.package} again")
    if controller:
        node_reset = f"`reconciler reset {recipe} -l kubernetes.io/hostname={node}`" if recipe and node else "`reset`"
        return (f"failed in run {rec.runId} with the same inputs (not retried; {node_reset} starts it again{rerun}): "
                f"{rec.message}")
    return f"failed in run {rec.runId} with the same inputs (not retried; use --retry-failed{rerun}): {rec.message}"


def parse_model(model: type[Frozen], text: str | None) -> Any:
    """Parse a JSON annotation into ``model``; None when absent or malformed (callers report a
    malformed record by its annotation key, e.g. the planner's "annotation … is malformed and was
    ignored"). Read through :func:`reconciler.jsonsafe.parse_json`: bounded depth, no
    NaN/Infinity, no integer beyond 64 bits, no duplicate keys; never raises. Memoised by
    (model, text), as :func:`parse_state` (issue 17: a node's lifecycle reads the same in-flight
    record at most of its steps); the models are frozen, so a parsed record is shared."""
    if not text:
        return None
    return _parse_model_cached(model, text)


@lru_cache(maxsize=1024)
def _parse_model_cached(model: type[Frozen], text: str) -> Any:
    try:
        return model.model_validate(parse_json(text, "annotation", allow_duplicates=True))
    except (InputError, ValidationError):
        return None


def check_model(model: type[Frozen], text: str, *, node: str, key: str) -> Any:
    """Parse the JSON annotation ``key`` of ``node`` into ``model``, or say why not.

    Raises:
        NodeStateError: not usable JSON or not the record's shape; the message names node,
            annotation and the first bad field.
    """
    try:
        return model.model_validate(parse_json(text, "annotation", allow_duplicates=True))
    except InputError as e:
        raise NodeStateError(f"node {node}: annotation {key} is not JSON ({e.message} at {_where(e)})") from None
    except ValidationError as e:
        first = e.errors(include_url=False)[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(record)"
        raise NodeStateError(f"node {node}: annotation {key}: {loc}: {first['msg']}") from None


def _where(e: InputError) -> str:
    pos = e.pos
    return f"line {pos.line} column {pos.column}" if pos is not None and pos.line else "its start"


def dump_model(value: Frozen) -> str:
    """Compact canonical JSON of a record model."""
    return json.dumps(value.model_dump(mode="json", exclude_none=True, by_alias=True), sort_keys=True,
                      separators=(",", ":"))

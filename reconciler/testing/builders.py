"""Small builders for recipes, policies, nodes, pods and fleets, for tests (ours and users').

Everything returns the same frozen models the loader and the observer produce, so a test can
describe a fleet in a few lines without YAML or a cluster. Nodes, pods and PDBs are built as
Kubernetes objects by :mod:`reconciler.testing.fleetgen` and read by the adapters' parser
(:mod:`reconciler.adapters.kube.objects`): a record built here is what an adapter would observe
from that object::

    pkg = package("tuned", "1.0.0", interrupt="reboot")
    r = recipe("gpu", pkg, selector={"pool": "gpu"})
    n1 = node("n1", labels={"pool": "gpu"}, recipe="gpu", installed=[package("tuned", "0.9.0")])
    fl = fleet([n1], pods=[pod("web-1", node="n1")])

``node(..., installed=[...])`` writes what the executor writes after a complete install of those
packages: a ``complete`` entry (at ``post-interrupt`` when the package has an interrupt, else
``config``) plus the package's config digest. ``state=[entry(...)]`` adds raw entries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reconciler.adapters.kube.objects import format_time, node_from, pdb_from, pod_from
from reconciler.diff import config_digest
from reconciler.model.nodestate import (
    LEGACY_PREFIXES,
    ConfigDigest,
    CordonRecord,
    FailureRecord,
    InFlight,
    PackageState,
    State,
    config_key,
    cordon_key,
    dump_config_digests,
    dump_model,
    dump_state,
    failure_key,
    inflight_key,
    state_key,
)
from reconciler.model.observed import NodeCondition, NodeInfo, ObservedFleet, PdbInfo, PodInfo
from reconciler.model.policy import (
    Budget,
    Compartment,
    DefaultCompartment,
    DeploymentPolicy,
    ExponentialParams,
    FixedParams,
    LinearParams,
    Strategy,
)
from reconciler.model.recipe import (
    DrainOptions,
    EnvVar,
    Interrupt,
    Package,
    Recipe,
    Resources,
    Uninstall,
)
from reconciler.model.selector import LabelSelector, Taint
from reconciler.model.vocab import PackageStatus, Stage
from reconciler.testing.fleetgen import make_node, make_pdb, make_pod

InterruptLike = Interrupt | str | Mapping[str, Any] | None


def as_interrupt(spec: InterruptLike) -> Interrupt | None:
    """``"reboot"``, ``"service:containerd,kubelet"``, a ``{type, services}`` mapping or an
    :class:`Interrupt` → :class:`Interrupt` (None stays None)."""
    if spec is None or isinstance(spec, Interrupt):
        return spec
    if isinstance(spec, str):
        kind, _, svcs = spec.partition(":")
        return Interrupt.model_validate({"type": kind, "services": tuple(s for s in svcs.split(",") if s)})
    return Interrupt.model_validate(dict(spec))


def package(
    name: str,
    version: str = "1.0.0",
    *,
    image: str | None = None,
    sha: str | None = None,
    interrupt: InterruptLike = None,
    depends_on: Mapping[str, str] | None = None,
    config: Mapping[str, str] | None = None,
    config_interrupts: Mapping[str, InterruptLike] | None = None,
    env: Mapping[str, str] | None = None,
    resources: Resources | None = None,
    uninstall: bool | None = None,
    **kw: Any,
) -> Package:
    """A :class:`Package`; ``image`` defaults to ``ghcr.io/example/<name>``; ``interrupt`` as
    for :func:`as_interrupt`. ``uninstall=True`` sets ``uninstall.enabled`` and
    ``uninstall.apply``; ``False`` only ``enabled``. Other keywords go to :class:`Package`."""
    cis = {k: as_interrupt(v) for k, v in (config_interrupts or {}).items()}
    return Package(
        name=name,
        version=version,
        image=image or f"ghcr.io/example/{name}",
        containerSHA=sha,
        interrupt=as_interrupt(interrupt),
        dependsOn=dict(depends_on or {}),
        configMap=dict(config or {}),
        configInterrupts={k: v for k, v in cis.items() if v is not None},
        env=tuple(EnvVar(name=k, value=v) for k, v in (env or {}).items()),
        resources=resources,
        uninstall=None if uninstall is None else Uninstall(enabled=True, apply=uninstall),
        **kw,
    )


def as_selector(labels: Mapping[str, str] | LabelSelector | None = None) -> LabelSelector:
    """``{"pool": "gpu"}`` → ``LabelSelector(matchLabels=...)``; None → the empty selector."""
    if isinstance(labels, LabelSelector):
        return labels
    return LabelSelector(matchLabels=dict(labels or {}))


def recipe(
    name: str = "demo",
    *packages: Package,
    selector: Mapping[str, str] | LabelSelector | None = None,
    protect: Mapping[str, str] | LabelSelector | None = None,
    drain: DrainOptions | None = None,
    budget: Budget | None = None,
    policy: str | None = None,
    version: str = "1",
    **kw: Any,
) -> Recipe:
    """A :class:`Recipe` with ``packages``; ``selector`` picks nodes by labels; ``protect`` =
    ``podNonInterruptLabels``; ``budget`` = ``interruptionBudget``; ``policy`` =
    ``deploymentPolicy``. Other keywords go to :class:`Recipe`."""
    return Recipe(
        name=name,
        version=version,
        nodeSelector=as_selector(selector),
        podNonInterruptLabels=as_selector(protect) if protect is not None else None,
        drain=drain or DrainOptions(),
        interruptionBudget=budget,
        deploymentPolicy=policy,
        packages={p.name: p for p in packages},
        **kw,
    )


def budget(*, percent: int | None = None, count: int | None = None) -> Budget:
    """A :class:`Budget` (exactly one of ``percent``/``count``)."""
    return Budget(percent=percent, count=count)


def strategy(kind: str = "fixed", **params: Any) -> Strategy:
    """``strategy("exponential", initialBatch=1, growthFactor=2)`` → :class:`Strategy`.

    Raises:
        ValueError: unknown kind.
    """
    if kind == "fixed":
        return Strategy(fixed=FixedParams(**params))
    if kind == "linear":
        return Strategy(linear=LinearParams(**params))
    if kind == "exponential":
        return Strategy(exponential=ExponentialParams(**params))
    raise ValueError(f"unknown strategy {kind!r}")


def compartment(
    name: str,
    labels: Mapping[str, str] | LabelSelector,
    budget: Budget,
    strategy: Strategy | None = None,
) -> Compartment:
    """A named :class:`Compartment` selecting nodes by ``labels``."""
    return Compartment(name=name, selector=as_selector(labels), budget=budget, strategy=strategy)


def policy(
    name: str = "policy",
    *,
    default_budget: Budget | None = None,
    default_strategy: Strategy | str | None = None,
    compartments: Sequence[Compartment] = (),
    count: int | None = None,
    percent: int | None = None,
    **params: Any,
) -> DeploymentPolicy:
    """A :class:`DeploymentPolicy`; the default compartment defaults to 100 % with no strategy.

    ``count``/``percent`` stand for ``default_budget=budget(count=...)``/``budget(percent=...)``;
    ``default_strategy`` may be a kind, built by :func:`strategy` with ``params``::

        policy(count=2, default_strategy="fixed", initialBatch=2)

    Raises:
        ValueError: a budget given both ways, ``params`` without a strategy kind, or an unknown kind.
    """
    if count is not None or percent is not None:
        if default_budget is not None:
            raise ValueError("give default_budget or count/percent, not both")
        default_budget = budget(percent=percent, count=count)
    if isinstance(default_strategy, str):
        default_strategy = strategy(default_strategy, **params)
    elif params:
        raise ValueError(f"strategy parameters {sorted(params)} need default_strategy as a kind")
    return DeploymentPolicy(
        name=name,
        default=DefaultCompartment(budget=default_budget or Budget(percent=100), strategy=default_strategy),
        compartments=tuple(compartments),
    )


def entry(
    name: str,
    version: str,
    stage: Stage = Stage.CONFIG,
    state: State = PackageStatus.COMPLETE,
    *,
    restarts: int = 0,
    image: str | None = None,
    sha: str | None = None,
) -> PackageState:
    """One node-state entry."""
    return PackageState(
        name=name,
        version=version,
        image=image if image is not None else f"ghcr.io/example/{name}",
        containerSHA=sha,
        stage=stage,
        state=state,
        restarts=restarts,
    )


def complete_entry(pkg: Package) -> PackageState:
    """The entry the executor leaves after a complete install of ``pkg``."""
    stage = Stage.POST_INTERRUPT if pkg.interrupt is not None else Stage.CONFIG
    return entry(pkg.name, pkg.version, stage, PackageStatus.COMPLETE, image=pkg.image, sha=pkg.containerSHA)


def state_annotations(
    recipe_name: str,
    *,
    installed: Iterable[Package] = (),
    state: Iterable[PackageState] = (),
    digests: Mapping[str, ConfigDigest] | None = None,
    inflight: InFlight | None = None,
    cordoned_by_us: bool = False,
    failure: FailureRecord | None = None,
    legacy: str | None = None,
) -> dict[str, str]:
    """The annotations of one recipe on a node (what the executor writes).

    ``installed`` packages get a complete entry and their config digest; ``state`` entries are
    added as given (overriding same keys); ``digests`` override recorded digests. ``legacy``
    (``"skyhook.nvidia.com"`` or ``"nodewright.nvidia.com"``) writes only a NodeWright-style
    state annotation under that prefix (no digests, nothing of ours).
    """
    installed = list(installed)
    entries = {e.key: e for e in (complete_entry(p) for p in installed)}
    entries.update({e.key: e for e in state})
    if legacy is not None:
        if legacy not in LEGACY_PREFIXES:
            raise ValueError(f"legacy prefix must be one of {LEGACY_PREFIXES}")
        return {f"{legacy}/nodeState_{recipe_name}": dump_state(entries)}
    ann: dict[str, str] = {}
    if entries:
        ann[state_key(recipe_name)] = dump_state(entries)
    dg = {p.name: config_digest(p) for p in installed}
    dg.update(digests or {})
    if dg:
        ann[config_key(recipe_name)] = dump_config_digests(dg)
    if inflight is not None:
        ann[inflight_key(recipe_name)] = dump_model(inflight)
    if cordoned_by_us:
        ann[cordon_key(recipe_name)] = dump_model(CordonRecord(runId="run-0"))
    if failure is not None:
        ann[failure_key(recipe_name)] = dump_model(failure)
    return ann


def inflight(
    phase: str = "stages",
    *,
    interrupt: InterruptLike = None,
    packages: Sequence[str] = (),
    run_id: str = "run-0",
    plan_hash: str = "0" * 64,
    boot_id: str = "",
) -> InFlight:
    """An :class:`InFlight` record owing ``interrupt`` for ``packages``."""
    intr = as_interrupt(interrupt)
    return InFlight.model_validate(
        {
            "runId": run_id,
            "planHash": plan_hash,
            "phase": phase,
            "interrupt": intr.model_dump(mode="json") if intr is not None else None,
            "interruptPackages": tuple(packages),
            "bootID": boot_id,
        }
    )


def node(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    recipe: str | None = None,
    installed: Iterable[Package] = (),
    state: Iterable[PackageState] = (),
    digests: Mapping[str, ConfigDigest] | None = None,
    inflight: InFlight | None = None,
    cordoned_by_us: bool = False,
    failure: FailureRecord | None = None,
    legacy: str | None = None,
    unschedulable: bool | None = None,
    taints: Iterable[Taint | str] = (),
    created: float = 0.0,
    ready: bool | None = True,
    boot_id: str = "boot-1",
    uid: str | None = None,
    resource_version: str = "",
    conditions: Iterable[NodeCondition] = (),
) -> NodeInfo:
    """A :class:`NodeInfo`: a Node object (:func:`reconciler.testing.fleetgen.make_node`) read as
    the adapters read one (:func:`reconciler.adapters.kube.objects.node_from`), so it is what they
    would observe (the Ready condition among ``conditions``; none when ``ready`` is None).

    With ``recipe``, the state/record keywords are written as that recipe's annotations (see
    :func:`state_annotations`). ``unschedulable`` defaults to ``cordoned_by_us``; taints may be
    given as ``key[=value]:Effect`` strings; ``uid`` defaults to ``uid-<name>``; ``labels`` are
    exactly the node's (no kubelet labels); ``created`` (epoch seconds) is kept at second
    precision, as ``creationTimestamp`` is. ``resource_version`` is ``metadata.resourceVersion``
    ("" = none); ``conditions`` come after Ready in ``conditions`` (an external validator's)."""
    ann = dict(annotations or {})
    if recipe is not None:
        ann.update(
            state_annotations(
                recipe,
                installed=installed,
                state=state,
                digests=digests,
                inflight=inflight,
                cordoned_by_us=cordoned_by_us,
                failure=failure,
                legacy=legacy,
            )
        )
    parsed = [Taint.parse(t) if isinstance(t, str) else t for t in taints]
    return node_from(make_node(
        name,
        dict(labels or {}),
        created=created,
        annotations=ann,
        unschedulable=cordoned_by_us if unschedulable is None else unschedulable,
        taints=[t.model_dump(exclude_defaults=True) for t in parsed],
        ready=ready,
        uid=f"uid-{name}" if uid is None else uid,
        boot_id=boot_id,
        kubelet_labels=False,
        resource_version=resource_version or None,
        conditions=[_condition_obj(c) for c in conditions],
    ))


def _condition_obj(c: NodeCondition) -> dict[str, str]:
    """A :class:`NodeCondition` as a ``status.conditions`` entry (empty reason/message left out;
    ``since`` as ``lastTransitionTime``, second precision as the API keeps it)."""
    obj = {"type": c.type, "status": c.status}
    if c.reason:
        obj["reason"] = c.reason
    if c.message:
        obj["message"] = c.message
    if c.since is not None:
        obj["lastTransitionTime"] = format_time(c.since)
    return obj


def pod(
    name: str,
    *,
    node: str = "n1",
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    phase: str = "Running",
    owner: str | None = "ReplicaSet",
    emptydir: bool = False,
    mirror: bool = False,
    uid: str | None = None,
    deleting: bool = False,
    ready: bool = True,
) -> PodInfo:
    """A :class:`PodInfo`: a Pod object (:func:`reconciler.testing.fleetgen.make_pod`) read as the
    adapters read one (:func:`reconciler.adapters.kube.objects.pod_from`).

    ``owner`` is the controller's kind (its name ``<name>-owner``; None = a bare pod); ``mirror``
    adds the ``kubernetes.io/config.mirror`` annotation (a static pod's mirror); ``deleting`` sets
    a ``deletionTimestamp`` (epoch 1 s); ``ready`` is the Ready condition whatever the phase;
    ``uid`` defaults to ``uid-<namespace>-<name>``. No ``startTime`` (none observed)."""
    return pod_from(make_pod(
        namespace,
        name,
        node,
        labels=dict(labels or {}),
        owner=(owner, f"{name}-owner") if owner else None,
        phase=phase,
        ready=ready,
        emptydir=emptydir,
        start=None,
        annotations={"kubernetes.io/config.mirror": "x"} if mirror else None,
        uid=uid or f"uid-{namespace}-{name}",
        deletion=1.0 if deleting else None,
    ))


def pdb(
    name: str,
    labels: Mapping[str, str],
    *,
    namespace: str = "default",
    allowed: int = 1,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    unhealthy_policy: str | None = None,
    current_healthy: int | None = None,
    desired_healthy: int | None = None,
    expected_pods: int | None = None,
) -> PdbInfo:
    """A :class:`PdbInfo` selecting pods by ``labels`` (``matchLabels``) with
    ``status.disruptionsAllowed = allowed`` and the other status counts as given
    (``currentHealthy``, ``desiredHealthy``, ``expectedPods``; None: not written, read as 0): a
    PodDisruptionBudget object (:func:`reconciler.testing.fleetgen.make_pdb`) read as the adapters
    read one (:func:`reconciler.adapters.kube.objects.pdb_from`). ``unhealthy_policy`` is
    ``spec.unhealthyPodEvictionPolicy`` (a string or the enum; None: unset)."""
    return pdb_from(make_pdb(namespace, name, dict(labels), min_available=min_available,
                             max_unavailable=max_unavailable, unhealthy_policy=unhealthy_policy,
                             disruptions_allowed=allowed, current_healthy=current_healthy,
                             desired_healthy=desired_healthy, expected_pods=expected_pods))


def fleet(
    nodes: Iterable[NodeInfo],
    pods: Iterable[PodInfo] = (),
    pdbs: Iterable[PdbInfo] = (),
) -> ObservedFleet:
    """An :class:`ObservedFleet` snapshot."""
    return ObservedFleet.build(list(nodes), list(pods), list(pdbs))

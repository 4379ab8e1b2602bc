"""The library's front door: :func:`connect` (a real cluster) and :func:`simulate` (a simulated
fleet from a file) give a :class:`Session` with :meth:`~Session.plan`, :meth:`~Session.apply`,
:meth:`~Session.status` and the operations (pause/resume, disable/enable, node ignore/unignore,
reset), each carrying every safety check the CLI verb of the same name has (the CLI verbs are
shells over it: parse, call, render).

The checks: a kubeconfig that names no cluster or is malformed is bad input naming file and line;
a ``selector`` that matches no node, a recipe name no node and no control switch knows, a package
no record knows are bad input; ``apply`` takes the Lease of every recipe before anything is
observed, fences every write with it, refuses a plan whose hash differs from the reviewed one and,
in locked mode, unpinned packages (:func:`reconciler.service.apply_recipes`); a paused or disabled
recipe is planned with a warning and skipped by ``apply``.

No thread rules for the caller: a session may be used from any thread, one call at a time. Results
are typed (pydantic models and frozen dataclasses). Errors: :class:`~reconciler.errors.InputError`
(bad input, nothing changed), :class:`~reconciler.errors.PlanMismatchError`,
:class:`~reconciler.errors.LeaseHeldError`, :class:`~reconciler.errors.ClusterError`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.errors import PATH_LIMIT, InputError, clip
from reconciler.load import Inputs, load_inputs
from reconciler.model.observed import NodeInfo
from reconciler.model.plan import Plan
from reconciler.model.selector import LabelSelector
from reconciler.ops.controls import Action, Control, control_patch, read_controls, store_for
from reconciler.ops.names import require_package, require_recipe
from reconciler.ops.nodeops import ignore_patch, rerun_patch, reset_package_patch, reset_patch
from reconciler.ops.patches import (
    ConfigMapPatch,
    NodeOp,
    NodePatch,
    NodeRefused,
    plan_node_patches,
    select_nodes,
    write_node_patches,
)
from reconciler.ops.status import NodeStatus, node_status
from reconciler.ports import ChangeFeed, Clock, ClusterPorts
from reconciler.service import ApplyResult, ApplySettings, Observer, apply_recipes, plan_recipes

if TYPE_CHECKING:
    from reconciler.adapters.kube.cluster import KubeCluster
    from reconciler.adapters.sim.config import SimConfig
    from reconciler.adapters.sim.fleet import SimFleet

Paths = Sequence[str | Path]


@dataclass(frozen=True)
class Operation:
    """An operation prepared and checked, not yet written: ``changes`` (typed patches, in order)
    and ``notes``; :meth:`write` sends them (conditional writes: a node changed meanwhile is read
    again and its patch made again) and returns the number of objects written."""

    changes: tuple[NodePatch | ConfigMapPatch, ...]
    notes: tuple[str, ...]
    _write: Callable[[], int] = field(repr=False, compare=False)
    #: nodes the operation leaves alone, each with why (``reset`` of a node that still owes an
    #: interrupt, without ``force``); :meth:`write` adds those a re-read after a conflict refuses
    refused: list[NodeRefused] = field(default_factory=list)

    def write(self) -> int:
        """Send the changes; the number of objects written. Raises ClusterError."""
        return self._write() if self.changes else 0


class Session:
    """One cluster's roles, its clock and change feed (module docstring). Make it with
    :func:`connect` or :func:`simulate`; close it (or use ``with``) to stop its watch streams.

    Attributes: ``cluster`` (the cluster's roles: ``cluster.nodes.list_nodes()``, ...),
    ``clock``, ``changes`` (None: the clock's waits cannot tell what changed), ``description``,
    ``poll_seconds`` (fallback poll interval), ``kube`` (the real cluster's adapter, None when
    simulated), ``sim`` (the simulated fleet, None on a real cluster) and ``sim_config`` (its
    configuration when one was given)."""

    def __init__(self, cluster: ClusterPorts, clock: Clock, *, changes: ChangeFeed | None = None,
                 description: str = "", poll_seconds: float = 5.0, kube: KubeCluster | None = None,
                 sim: SimFleet | None = None, sim_config: SimConfig | None = None,
                 on_close: Callable[[], None] | None = None) -> None:
        self.cluster, self.clock, self.changes = cluster, clock, changes
        self.description, self.poll_seconds = description, poll_seconds
        self.kube, self.sim, self.sim_config = kube, sim, sim_config
        self._on_close = on_close

    def wall(self) -> float:
        """UTC epoch seconds now (the simulated instant on a simulated fleet)."""
        return self.clock.utc()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the watch streams and release the connection (nothing to do when simulated)."""
        if self._on_close is not None:
            close, self._on_close = self._on_close, None
            close()

    # ------------------------------------------------------------------ plan / apply
    def inputs(self, recipes: Inputs | Paths, policies: Paths = (), *, locked: bool = False) -> Inputs:
        """Recipes and policies: ``recipes`` loaded already, or files/directories to load (with
        ``policies``; ``locked``: refuse unpinned packages with their file and line). Raises
        InputError."""
        if isinstance(recipes, Inputs):
            return recipes
        return load_inputs([str(p) for p in recipes], [str(p) for p in policies], locked=locked)

    def plan(self, recipes: Inputs | Paths, policies: Paths = (), *, selector: str | LabelSelector | None = None,
             retry_failed: bool = False, locked: bool = False, revision: str = "") -> list[Plan]:
        """One :class:`~reconciler.model.plan.Plan` per recipe from one observation (reads only),
        the plans ``apply`` with the same options carries out; a paused or disabled recipe's plan
        says so in its ``warnings``. Raises InputError (bad inputs, a selector matching no node),
        ClusterError."""
        inputs = self.inputs(recipes, policies, locked=locked)
        only = self.selector(selector)
        plans = plan_recipes(inputs, self.cluster, revision=revision, only=only, retry_failed=retry_failed)
        controls = read_controls(self.cluster)
        out = []
        for p in plans:
            held = controls[p.recipe.name].describe() if p.recipe.name in controls and \
                controls[p.recipe.name].active else ""
            out.append(p.model_copy(update={"warnings": (*p.warnings, f"recipe {p.recipe.name} is {held}: apply "
                                                         "skips it until it is resumed/enabled")}) if held else p)
        return out

    def apply(self, recipes: Inputs | Paths, policies: Paths = (), *,
              reviewed: Sequence[Plan] | Mapping[str, str] | None = None,
              selector: str | LabelSelector | None = None, retry_failed: bool = False, locked: bool = True,
              run_id: str | None = None, workers: int | None = None, wait_for_lock: float = 0.0,
              lease_duration: int = 60, holder: str | None = None, plan_source: str = "the reviewed plan",
              poll_seconds: float | None = None, observers: Sequence[Observer] = (), controller: bool = False,
              superseded: frozenset[str] = frozenset()) -> ApplyResult:
        """Carry out every recipe, batch by batch, with every safety check (module docstring).
        ``reviewed``: the plans a reviewer approved (or their hashes by recipe name; ``apply
        --plan``): each recipe's current plan must have the same hash. ``workers``: nodes
        advanced at once (a real cluster only; default: the largest batch the budget allows).
        ``poll_seconds``: fallback interval between looks at the cluster (default: the
        session's). ``observers`` are told what happens, on the calling thread. ``controller`` and
        ``superseded``: a ``reconciler controller`` pass (:class:`~reconciler.service.ApplySettings`).
        Raises InputError or PlanMismatchError (nothing changed), LeaseHeldError, ClusterError."""
        from reconciler.adapters.host import process_identity

        inputs = self.inputs(recipes, policies, locked=locked)
        settings = ApplySettings(
            holder=holder or process_identity(), run_id=run_id, locked=locked,
            expected_hashes=_hashes(reviewed),
            plan_source=plan_source, retry_failed=retry_failed,
            workers=1 if self.sim is not None else workers, poll_seconds=poll_seconds or self.poll_seconds,
            lease_duration=lease_duration, wait_for_lock=wait_for_lock, only=self.selector(selector),
            controller=controller, superseded=superseded)
        return apply_recipes(inputs, self.cluster, self.clock, settings, observers, changes=self.changes)

    def selector(self, selector: str | LabelSelector | None, nodes: Sequence[NodeInfo] | None = None
                 ) -> LabelSelector | None:
        """``selector`` (kubectl's ``-l`` syntax or parsed), checked to match at least one of
        ``nodes`` (default: every node). Raises InputError."""
        if selector is None:
            return None
        if isinstance(selector, str):
            from reconciler.model.selectorsyntax import SelectorSyntaxError, parse_selector

            text = selector
            try:
                selector = parse_selector(text)
            except SelectorSyntaxError as e:
                raise InputError(f"selector {clip(text)}: {e}") from None
        nodes = self.cluster.nodes.list_nodes() if nodes is None else nodes
        if not any(selector.matches(n.labels) for n in nodes):
            raise InputError(f"-l/--selector {clip(selector.kubectl_text())}: no node has these labels "
                             f"({len(nodes)} node(s) looked at)")
        return selector

    # ------------------------------------------------------------------ status
    def status(self, recipe: str | None = None, *, selector: str | LabelSelector | None = None) -> list[NodeStatus]:
        """Every node's recorded state (``recipe``: only that one, which must be known). Raises
        InputError."""
        return [node_status(n, recipe) for n in self.nodes(selector, recipe=recipe)]

    def nodes(self, selector: str | LabelSelector | None = None, *, recipe: str | None = None,
              package: str | None = None) -> list[NodeInfo]:
        """Every node (one LIST), or those ``selector`` matches (there must be some), once
        ``recipe`` (a recipe the cluster knows) and ``package`` (recorded on some node, for
        ``recipe`` when given) are checked. Raises InputError."""
        nodes = self.cluster.nodes.list_nodes()
        if recipe is not None:
            require_recipe(recipe, self.cluster, nodes)
        if package is not None:
            require_package(package, nodes, recipe)
        only = self.selector(selector, nodes)
        return [n for n in nodes if only is None or only.matches(n.labels)]

    def controls(self) -> dict[str, Control]:
        """Every recipe's pause/disable switches."""
        return read_controls(self.cluster)

    # ------------------------------------------------------------------ operations
    def pause(self, recipe: str, *, reason: str = "", by: str = "", new: bool = False) -> Operation:
        """Pause ``recipe``: ``apply`` skips it and holds back later recipes on its nodes.
        ``new``: a recipe that has not run on this cluster yet (else an unknown name is bad input)."""
        return self._switch(recipe, "pause", reason, by, new)

    def resume(self, recipe: str, *, by: str = "") -> Operation:
        """Clear ``recipe``'s pause."""
        return self._switch(recipe, "resume", "", by, False)

    def disable(self, recipe: str, *, reason: str = "", by: str = "", new: bool = False) -> Operation:
        """Disable ``recipe``: ``apply`` skips it and later recipes go on."""
        return self._switch(recipe, "disable", reason, by, new)

    def enable(self, recipe: str, *, by: str = "") -> Operation:
        """Clear ``recipe``'s disable."""
        return self._switch(recipe, "enable", "", by, False)

    def _switch(self, recipe: str, action: Action, reason: str, by: str, new: bool) -> Operation:
        if new:
            from reconciler.model.recipe import check_recipe_name

            try:  # the name becomes a key of the controls ConfigMap and matches recipes: it must be one
                check_recipe_name(recipe)
            except ValueError as e:
                raise InputError(f"{action} --new: {e}") from None
        else:
            setting = action in ("pause", "disable")
            hint = (f" (to {action} a recipe before its first apply, pass --new)" if setting
                    else " (so nothing is paused or disabled under that name: a recipe switched with --new before "
                         "its first apply leaves no trace once its switches are cleared)")
            require_recipe(recipe, self.cluster, self.cluster.nodes.list_nodes(), hint=hint)
        at = datetime.fromtimestamp(self.clock.utc(), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        patch, before, after = control_patch(self.cluster, recipe, action, reason=reason, by=by, at=at)
        store = store_for(self.cluster)

        def write() -> int:
            assert patch is not None and store is not None
            patch.write(store)
            return 1

        notes = (f"recipe {recipe} is {before.describe() or 'active'}; after: {after.describe() or 'active'}",)
        return Operation((patch,) if patch else (), notes, write)

    def ignore(self, nodes: Sequence[str] = (), *, selector: str | LabelSelector | None = None) -> Operation:
        """Label ``nodes`` (names or whole-name regular expressions, or ``selector``) to be left
        alone by every recipe."""
        return self._nodes_op(nodes, selector, partial(ignore_patch, ignore=True), "ignore")

    def unignore(self, nodes: Sequence[str] = (), *, selector: str | LabelSelector | None = None) -> Operation:
        """Remove the ignore label from ``nodes``."""
        return self._nodes_op(nodes, selector, partial(ignore_patch, ignore=False), "unignore")

    def reset(self, recipe: str, nodes: Sequence[str] = (), *, selector: str | LabelSelector | None = None,
              package: str | None = None, force: bool = False, ignore_not_found: bool = False) -> Operation:
        """Forget ``recipe``'s records on ``nodes`` (every node when neither ``nodes`` nor
        ``selector`` is given) and release the cordons it holds; ``package``: only that package's
        state. ``force``: even on a node that still owes an interrupt (it is then dropped)."""
        listed = self.cluster.nodes.list_nodes()
        if not ignore_not_found:
            require_recipe(recipe, self.cluster, listed)
        op: NodeOp
        if package is not None:
            require_package(package, listed, recipe)
            op = partial(reset_package_patch, recipe=recipe, package=package, force=force)
        else:
            op = partial(reset_patch, recipe=recipe, force=force)
        return self._nodes_op(nodes, selector, op, "reset", listed=listed, every=True)

    def rerun(self, recipe: str, package: str, nodes: Sequence[str] = (), *,
              selector: str | LabelSelector | None = None, stage: str | None = None, version: str | None = None,
              force: bool = False) -> Operation:
        """Run ``package`` of ``recipe`` again on ``nodes`` (or ``selector``): its entry goes to
        ``stage`` in progress with fresh attempts (None: removed, the package restarts from apply)
        and the node's failure record is dropped; a failed lifecycle (with ``force``, one in
        flight) resumes, the package counted as restarted in it
        (:func:`~reconciler.ops.nodeops.rerun_patch`)."""
        listed = self.cluster.nodes.list_nodes()
        require_recipe(recipe, self.cluster, listed)
        require_package(package, listed, recipe)
        op = partial(rerun_patch, recipe=recipe, package=package, stage=stage, version=version, force=force)
        return self._nodes_op(nodes, selector, op, "rerun", listed=listed,
                              untouched=f"no entry of {package} for recipe {recipe} on")

    def _nodes_op(self, names: Sequence[str], selector: str | LabelSelector | None, op: NodeOp, verb: str, *,
                  listed: list[NodeInfo] | None = None, every: bool = False,
                  untouched: str = "nothing to change on") -> Operation:
        nodes = listed if listed is not None else self.cluster.nodes.list_nodes()
        only = self.selector(selector, nodes)
        if only is not None:
            nodes = [n for n in nodes if only.matches(n.labels)]
        if not names and only is None and not every:
            raise InputError(f"node {verb}: name the nodes (NODE...) or select them with -l/--selector")
        scope = f"-l {clip(only.kubectl_text())} selects" if only is not None else ""
        chosen = select_nodes(nodes, list(names), scope=scope) if names else nodes
        refused: list[NodeRefused] = []  # issue 34: a node reset refuses leaves the others to be reset
        patches = plan_node_patches(chosen, op, refused)
        left = [n.name for n in chosen if n.name not in {p.node for p in patches}]
        notes = [f"{untouched} {', '.join(left)}"] if left and verb != "reset" else []
        uncordon = sum(1 for p in patches if p.unschedulable is False)
        if verb == "reset" and uncordon:
            notes.append(f"{uncordon} node(s) to uncordon (cordon held by the recipe)")

        def write() -> int:
            done = write_node_patches(self.cluster.nodes, patches, op)
            refused.extend(done.refused)
            return len(done.written)

        return Operation(tuple(patches), tuple(notes), write, refused)


def _hashes(reviewed: Sequence[Plan] | Mapping[str, str] | None) -> Mapping[str, str] | None:
    if reviewed is None or isinstance(reviewed, Mapping):
        return reviewed
    return {p.recipe.name: p.planHash for p in reviewed}


# ---------------------------------------------------------------------- construction


def connect(kubeconfig: str | Path | None = None, context: str | None = None, *, namespace: str | None = None,
            request_timeout: float = 30.0, workers: int = 128, impersonate: str | None = None,
            impersonate_group: str | None = None) -> Session:
    """A session on a real cluster through the official client: ``kubeconfig`` (None:
    ``$KUBECONFIG``, ``~/.kube/config``, else the pod's service account) and ``context``;
    ``namespace`` of the reconciler's own objects (default ``node-reconciler``); ``impersonate``
    (and ``impersonate_group``): the user every request acts as (kubectl's ``--as``). Its watch
    streams start with the first ``apply`` and end with :meth:`Session.close`.

    Raises:
        InputError: the kubeconfig names no file, is malformed (file:line), or nothing names a cluster.
        ClusterError: the credentials cannot be had (an exec plugin failed).
    """
    from reconciler.adapters.host import SystemClock
    from reconciler.adapters.kube.cache import WatchStore
    from reconciler.adapters.kube.cluster import DEFAULT_POOL_SIZE, KubeCluster
    from reconciler.ops.controls import DEFAULT_NAMESPACE

    path = str(kubeconfig) if kubeconfig is not None else None
    check_kubeconfig(path, context)
    ns = namespace or DEFAULT_NAMESPACE
    # one connection per worker thread, plus the two watch streams, the lease renewer and the caller
    who = (impersonate, impersonate_group) if impersonate else None
    if impersonate_group and not impersonate:
        raise InputError("impersonate_group needs a user to impersonate (impersonate=USER)")
    kube = KubeCluster.from_kubeconfig(path, context, pool_size=max(DEFAULT_POOL_SIZE, workers + 8), impersonate=who,
                                       store=WatchStore(ns), namespace=ns, request_timeout=request_timeout)
    watch = kube.watch()

    def close() -> None:
        watch.close()
        kube.close()

    return Session(kube.ports, SystemClock(), changes=watch, description="kubernetes cluster", poll_seconds=15.0,
                   kube=kube, on_close=close)


def simulate(path: str | Path, *, config: SimConfig | None = None, read_only: bool = False,
             crash_after: int | None = None) -> Session:
    """A session on the simulated fleet of ``path`` (a kubectl YAML or JSON dump of nodes, pods
    and PodDisruptionBudgets; the file is not written back: :meth:`SimFleet.save` does that).
    ``config``: the simulator's timings and failures; ``read_only``: only the fields ``plan``
    reads are loaded (the session must not write).

    Raises:
        InputError: the file cannot be read or is not such a dump (file:line).
    """
    from reconciler.adapters.sim.config import SimConfig as _SimConfig
    from reconciler.adapters.sim.fleet import SimFleet
    from reconciler.load.snapshotfile import paused_gc

    with paused_gc():  # frozen before the collector runs again: it never scans the snapshot
        fleet = SimFleet.from_file(str(path), config or _SimConfig(), crash_after=crash_after,
                                   **({"read_only": True} if read_only else {}))
    return Session(ClusterPorts.of(fleet), fleet, description=f"simulated fleet {path}", poll_seconds=5.0,
                   sim=fleet, sim_config=config)


def check_kubeconfig(path: str | None, context: str | None = None) -> None:
    """A ``kubeconfig`` that names no file is bad input (exit 2), not a cluster error.

    So is no cluster at all: no ``--kubeconfig``, no ``$KUBECONFIG``, no ``~/.kube/config`` and
    not in a pod (``KUBERNETES_SERVICE_HOST``), where the client would only say "Invalid
    kube-config file" (the same places the client looks, in that order).

    The kubeconfig files themselves (``path``, else each file of ``$KUBECONFIG`` that exists,
    else ``~/.kube/config``) are checked as inputs
    (:func:`reconciler.load.kubeconfigfile.check_kubeconfig_file`: syntax, shape, base64 data and,
    for a single file, the ``context`` used), so a malformed one is bad input at its line.

    Raises:
        InputError: ``path`` is given and is not a file, nothing names a cluster, or a
            kubeconfig file is malformed.
    """
    from reconciler.fileio.reading import MISSING, regular_file_problem

    problem = regular_file_problem(path) if path else None
    if path and problem:
        hint = (" (give the path of a kubeconfig, or leave it out to use $KUBECONFIG, ~/.kube/config or the "
                "in-cluster service account)") if problem == MISSING else ""
        raise InputError(f"--kubeconfig {clip(path, PATH_LIMIT)}: {'no such file' if problem == MISSING else problem}"
                         f"{hint}")
    default = os.path.expanduser("~/.kube/config")

    def existing(where: str, f: str) -> bool:
        """``f`` is a regular file (False: missing, which the client skips too); anything else
        (a FIFO, a device, a directory) is refused: the client would block or fail on it."""
        problem = regular_file_problem(f)
        if problem in (None, MISSING):
            return problem is None
        raise InputError(f"{where} {clip(f, PATH_LIMIT)}: {problem}")

    if path:
        files = [path]
    elif os.environ.get("KUBECONFIG"):
        files = [f for f in os.environ["KUBECONFIG"].split(os.pathsep) if f and existing("$KUBECONFIG entry", f)]
    elif os.path.lexists(default):
        files = [default] if existing("kubeconfig", default) else []
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        files = []  # in a pod: the service account
    else:
        raise InputError("no cluster given: use --cluster sim:FILE for a simulated fleet (e.g. "
                         "sim:examples/fleets/gpu-24.yaml, or a kubectl get nodes,pods,pdb -A -o json dump), or "
                         "--kubeconfig FILE / $KUBECONFIG / ~/.kube/config for a real cluster")
    from reconciler.load.kubeconfigfile import check_kubeconfig_file

    for f in files:
        check_kubeconfig_file(f, context=context, whole=len(files) == 1)


__all__ = ["Operation", "Session", "check_kubeconfig", "connect", "simulate"]

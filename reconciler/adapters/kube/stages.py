"""The stage runner role (``StageRunner``) on a real API server: stage and interrupt pods and the
objects a run shares between them.

Objects (all in ``namespace``, default ``node-reconciler``, labelled
``app.kubernetes.io/managed-by: node-reconciler``):

* ``ConfigMap run-<run id>``: the *run owner*, created on a run's first :meth:`KubeStages.start_stage`;
  every stage pod and stage ConfigMap of that run has an ownerReference to it, so deleting it
  (:meth:`KubeStages.delete_run`) lets the garbage collector remove whatever the run left behind.
* ``Pod <StageSpec.pod_name>``: a stage pod in NodeWright's package-pod shape (semantics-nodewright.md
  §3.1) or an interrupt pod (§3.2): :func:`~reconciler.adapters.kube.stagepod.build_stage_pod`,
  read back by :func:`~reconciler.adapters.kube.stagepod.stage_status_from_pod`.
* ``ConfigMap <pod name>-cm``: the package's ``configMap`` data (only when non-empty).
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from typing import Any

from reconciler.adapters.kube.api import KubeApi, q
from reconciler.adapters.kube.cache import WatchStore
from reconciler.adapters.kube.nodes import rfc3339
from reconciler.adapters.kube.stagepod import (
    COMPONENT,
    DEFAULT_AGENT_IMAGE,
    DEFAULT_COPY_DIR_ROOT,
    DEFAULT_LOG_DIR_ROOT,
    DEFAULT_PAUSE_IMAGE,
    MANAGED_BY_LABEL,
    NODE_LABEL,
    RECIPE_LABEL,
    RUN_ID_LABEL,
    STAGE_LABEL,
    build_stage_pod,
    config_map_name,
    label_value,
    run_owner_name,
    stage_labels,
    stage_status_from_pod,
)
from reconciler.errors import ClusterError, ConflictError, NotFoundError
from reconciler.model.redact import redact
from reconciler.ports import StageSpec, StageStatus

Obj = dict[str, Any]
LOG_TAIL_LINES = 20


class Namespace:
    """The reconciler's namespace, created on first need (one GET, a POST when missing)."""

    def __init__(self, api: KubeApi, name: str) -> None:
        self.api, self.name = api, name
        self._ready = False

    def ensure(self) -> None:
        """Make sure the namespace exists (once per instance). Raises ClusterError."""
        if self._ready:
            return
        try:
            self.api.send("GET", f"/api/v1/namespaces/{q(self.name)}", f"get namespace {self.name}")
        except NotFoundError:
            body = {"metadata": {"name": self.name, "labels": {MANAGED_BY_LABEL: COMPONENT}}}
            with contextlib.suppress(ConflictError):
                self.api.send("POST", "/api/v1/namespaces", f"create namespace {self.name}", body=body,
                              content_type="application/json")
        self._ready = True


class KubeStages:
    """``StageRunner`` over ``api`` in ``namespace``; stage pods read from ``store`` when it holds
    them. ``fetch_logs``: read the failing container's log tail in :meth:`stage_status`."""

    def __init__(self, api: KubeApi, namespace: Namespace, store: WatchStore | None = None, *,
                 agent_image: str = DEFAULT_AGENT_IMAGE, pause_image: str = DEFAULT_PAUSE_IMAGE,
                 copy_dir_root: str = DEFAULT_COPY_DIR_ROOT, log_dir_root: str = DEFAULT_LOG_DIR_ROOT,
                 image_pull_secret: str | None = None, fetch_logs: bool = True) -> None:
        self.api, self.ns, self.store = api, namespace, store
        self._build = functools.partial(build_stage_pod, agent_image=agent_image, pause_image=pause_image,
                                        copy_dir_root=copy_dir_root, log_dir_root=log_dir_root,
                                        image_pull_secret=image_pull_secret)
        self.fetch_logs = fetch_logs
        self._lock = threading.Lock()
        self._run_owners: dict[str, Obj] = {}
        self._config_maps: set[str] = set()  # shared package ConfigMaps known to exist
        self._log_tails: dict[tuple[str, str], str] = {}  # (pod UID, container) → log tail read

    def _path(self, kind: str, name: str = "") -> str:
        return f"/api/v1/namespaces/{q(self.ns.name)}/{kind}" + (f"/{q(name)}" if name else "")

    def _run_owner(self, run_id: str) -> Obj:
        """The ownerReference to the run's ``run-<id>`` ConfigMap, creating it on first use."""
        with self._lock:
            if run_id in self._run_owners:
                return self._run_owners[run_id]
        name = run_owner_name(run_id)
        body = {"metadata": {"name": name, "namespace": self.ns.name,
                             "labels": {MANAGED_BY_LABEL: COMPONENT, RUN_ID_LABEL: label_value(run_id)}},
                "data": {"runId": run_id, "created": rfc3339(time.time())}}
        try:
            obj = self.api.json("POST", self._path("configmaps"), f"create configmap {self.ns.name}/{name}",
                                body=body, content_type="application/json")
        except ConflictError:
            obj = self.api.json("GET", self._path("configmaps", name), f"get configmap {name}")
        ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": obj["metadata"]["uid"], "controller": True}
        with self._lock:
            self._run_owners[run_id] = ref
        return ref

    def start_stage(self, spec: StageSpec) -> None:
        """Create the stage (or interrupt) pod of ``spec``; no-op when a pod of that name already
        exists and is not terminating. Usually one request (two with a non-empty
        ``spec.config_map``); the first call also ensures the namespace, the first of a run creates
        ``run-<run id>``.

        Raises:
            ConflictError: a pod of that name is still terminating (retry after it is gone).
            ForbiddenError, TransientError, ClusterError: as the API answers.
        """
        self.ns.ensure()
        owner = self._run_owner(spec.run_id)
        ns = self.ns.name
        if spec.config_map:
            cm_name = config_map_name(spec)
            if cm_name not in self._config_maps:
                labels = {k: v for k, v in stage_labels(spec).items() if k not in (NODE_LABEL, STAGE_LABEL)}
                cm = {"metadata": {"name": cm_name, "namespace": ns, "labels": labels, "ownerReferences": [owner]},
                      "data": dict(spec.config_map)}
                # the name carries the data's digest: an existing object already holds this data
                with contextlib.suppress(ConflictError):
                    self.api.send("POST", self._path("configmaps"), f"create configmap {ns}/{cm_name}", body=cm,
                                  content_type="application/json")
                with self._lock:
                    self._config_maps.add(cm_name)
        pod = self._build(spec, namespace=ns, owner=owner)
        try:
            self._keep(self.api.json("POST", self._path("pods"), f"create stage pod {ns}/{spec.pod_name}",
                                     query=[("fieldManager", COMPONENT)], body=pod, content_type="application/json"))
        except ConflictError as e:
            if e.reason != "AlreadyExists":
                raise
            existing = self._read(spec.pod_name)
            if (existing.get("metadata") or {}).get("deletionTimestamp"):
                raise ConflictError(f"stage pod {ns}/{spec.pod_name} is still terminating; start it again when it "
                                    "is gone", 409, "Terminating") from None

    def _read(self, name: str) -> Obj:
        return self._keep(self.api.json("GET", self._path("pods", name), f"get pod {self.ns.name}/{name}"))

    def _keep(self, obj: Obj) -> Obj:
        if self.store is not None and obj.get("kind") == "Pod":
            self.store.put_pod(obj)
        return obj

    def stage_status(self, spec: StageSpec, *, log: bool = False) -> StageStatus:
        """The stage pod's state (from the store when it holds it, else one GET; with ``log``, plus
        one log read the first time it is seen failed), ``missing`` when there is no such pod.
        ``log_tail``: with ``log``, the last 20 lines of the failing container's log, best effort
        (empty when logs are unavailable, e.g. on kwok nodes)."""
        hit, pod = self.store.stage_pod(spec.pod_name) if self.store is not None else (False, None)
        if hit and pod is None:
            return StageStatus("missing")
        if pod is None:
            try:
                pod = self._read(spec.pod_name)
            except NotFoundError:
                return StageStatus("missing")
        st, container = stage_status_from_pod(pod)
        if log and st.phase == "failed" and container and self.fetch_logs:
            # a terminated container's log no longer changes: read it once per pod (by UID)
            uid = str((pod.get("metadata") or {}).get("uid") or "")
            tail = self._log_tails.get((uid, container)) if uid else None
            if tail is None:
                tail = self._log_tail(spec.pod_name, container)
                if uid:
                    with self._lock:
                        if len(self._log_tails) >= 1024:
                            self._log_tails.clear()
                        self._log_tails[(uid, container)] = tail
            if tail:
                st = StageStatus(st.phase, st.exit_code, st.reason, redact(tail), st.started, st.deleting)
        return st

    def _log_tail(self, pod: str, container: str) -> str:
        try:
            data = self.api.send("GET", self._path("pods", pod) + "/log", f"log of {pod}/{container}",
                                 query=[("container", container), ("limitBytes", 16384),
                                        ("tailLines", LOG_TAIL_LINES)], timeout=(5, 10))
        except ClusterError:
            return ""
        return "\n".join(data.decode("utf-8", "replace").splitlines()[-LOG_TAIL_LINES:])

    def delete_stage(self, spec: StageSpec) -> None:
        """Delete the stage pod (background propagation; absent is fine). It may take its grace
        period to disappear: :meth:`start_stage` with the same spec raises ConflictError until then."""
        with contextlib.suppress(NotFoundError):
            self._keep(self.api.json("DELETE", self._path("pods", spec.pod_name),
                                     f"delete pod {self.ns.name}/{spec.pod_name}"))

    def delete_stages(self, recipe: str, node: str) -> None:
        """Delete every stage and interrupt pod of ``recipe`` on ``node`` with one delete-collection
        by labels (managed-by, recipe, node). The shared package ConfigMaps stay (other nodes use
        them); the run owner's deletion collects them. Nothing to delete is fine."""
        sel = f"{MANAGED_BY_LABEL}={COMPONENT},{RECIPE_LABEL}={label_value(recipe)},{NODE_LABEL}={label_value(node)}"
        with contextlib.suppress(NotFoundError):
            self.api.send("DELETE", self._path("pods"), f"delete stage pods of {recipe} on {node}",
                          query=[("labelSelector", sel)])

    def lifecycles(self) -> set[str]:
        """The run ids of the run-owner ConfigMaps in the namespace (one LIST by labels)."""
        found = self.api.json("GET", self._path("configmaps"), "list run owners",
                              query=[("labelSelector", f"{MANAGED_BY_LABEL}={COMPONENT},{RUN_ID_LABEL}")])
        out = set()
        for cm in found.get("items") or ():
            meta, data = cm.get("metadata") or {}, cm.get("data") or {}
            run_id = data.get("runId")
            if isinstance(run_id, str) and meta.get("name") == run_owner_name(run_id):
                out.add(run_id)
        return out

    def end_run(self, run_id: str, *, if_unused: bool = False) -> None:
        """:meth:`delete_run`; with ``if_unused`` only when no stage pod labelled with the lifecycle
        and not already being deleted is left in the namespace (one LIST by labels)."""
        if if_unused:
            sel = f"{MANAGED_BY_LABEL}={COMPONENT},{RUN_ID_LABEL}={label_value(run_id)}"
            left = self.api.json("GET", self._path("pods"), f"list stage pods of run {run_id}",
                                 query=[("labelSelector", sel)])
            if any(not (p.get("metadata") or {}).get("deletionTimestamp") for p in left.get("items") or ()):
                return  # a pod not being deleted is left (a failed node's logs): keep the lifecycle
        self.delete_run(run_id)

    def delete_run(self, run_id: str) -> None:
        """Delete the run-owner ConfigMap ``run-<run id>`` (background propagation: the garbage
        collector then deletes the run's remaining stage pods and ConfigMaps). Absent is fine."""
        name = run_owner_name(run_id)
        with contextlib.suppress(NotFoundError):
            self.api.send("DELETE", self._path("configmaps", name), f"delete configmap {self.ns.name}/{name}",
                          query=[("propagationPolicy", "Background")])
        with self._lock:
            self._run_owners.pop(run_id, None)
            self._config_maps.clear()

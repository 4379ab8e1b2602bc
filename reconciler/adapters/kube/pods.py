"""The pod role (``PodPort``) on a real API server: pods, PodDisruptionBudgets, DaemonSet existence
and evictions (policy/v1 Eviction with a UID precondition, as ``kubectl drain``;
drain-and-scenarios.md §1.4/§1.6).

A node's pods and every pod by node come from the
:class:`~reconciler.adapters.kube.cache.WatchStore` when it can answer (see its rules), else from
a paginated LIST (``fieldSelector spec.nodeName``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reconciler.adapters.kube.api import KubeApi, q
from reconciler.adapters.kube.cache import WatchStore
from reconciler.adapters.kube.objects import pdb_from, pod_from
from reconciler.errors import ClusterError, NotFoundError
from reconciler.model.observed import PdbInfo, PodInfo, group_pods
from reconciler.ports import PodEviction, evict_one_by_one

Obj = dict[str, Any]


def eviction_body(namespace: str, name: str, uid: str, grace_seconds: int | None) -> Obj:
    """The policy/v1 Eviction body (UID precondition, grace period when given)."""
    delete_options: Obj = {"preconditions": {"uid": uid}}
    if grace_seconds is not None:
        delete_options["gracePeriodSeconds"] = grace_seconds
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": delete_options}


class KubePods:
    """``PodPort`` over ``api``, reading from ``store`` when it can. Raises ClusterError subclasses."""

    def __init__(self, api: KubeApi, store: WatchStore | None = None) -> None:
        self.api, self.store = api, store

    def list_pods(self, node_name: str | None = None, label_selector: str | None = None) -> list[PodInfo]:
        """Pods of every namespace (as kubectl drain lists them), optionally only those with
        ``spec.nodeName=<node_name>`` and/or matching ``label_selector`` (a selector is always
        passed to the server). A node's pods come from the store when it can answer them."""
        if node_name and label_selector is None and self.store is not None:
            held = self.store.pods_on(node_name)
            if held is not None:
                return held
        query = [(k, v) for k, v in (("fieldSelector", f"spec.nodeName={node_name}" if node_name else None),
                                     ("labelSelector", label_selector)) if v]
        return self.api.list_all("/api/v1/pods", f"list pods on {node_name}" if node_name else "list pods", pod_from,
                             query=query)

    def pods_by_node(self) -> dict[str, tuple[PodInfo, ...]]:
        """Every bound pod by node (from the store when in sync, else one paginated LIST, grouped)."""
        held = self.store.pods_by_node() if self.store is not None else None
        return held if held is not None else group_pods(self.list_pods())

    def get_pod(self, namespace: str, name: str) -> PodInfo | None:
        """One pod (one GET), or None when it does not exist."""
        try:
            return pod_from(self.api.json("GET", f"/api/v1/namespaces/{q(namespace)}/pods/{q(name)}",
                                          f"get pod {namespace}/{name}"))
        except NotFoundError:
            return None

    def list_pdbs(self) -> list[PdbInfo]:
        """All policy/v1 PodDisruptionBudgets (paginated LIST)."""
        return self.api.list_all("/apis/policy/v1/poddisruptionbudgets", "list poddisruptionbudgets", pdb_from)

    def daemonset_exists(self, namespace: str, name: str) -> bool:
        """Whether ``apps/v1 DaemonSet namespace/name`` exists (kubectl drain's orphan check)."""
        try:
            self.api.send("GET", f"/apis/apps/v1/namespaces/{q(namespace)}/daemonsets/{q(name)}",
                          f"get daemonset {namespace}/{name}")
        except NotFoundError:
            return False
        return True

    def evict_pods(self, evictions: Sequence[PodEviction]) -> list[ClusterError | None]:
        """:meth:`evict_pod` for each, in order (``PodPort.evict_pods``)."""
        return evict_one_by_one(self.evict_pod, evictions)

    def evict_pod(self, namespace: str, name: str, uid: str, grace_seconds: int | None) -> None:
        """POST a policy/v1 Eviction for the pod with ``deleteOptions.preconditions.uid`` (and the
        grace period when given).

        Raises: NotFoundError (pod gone), ConflictError (UID precondition failed: a different pod
        now has that name), TooManyRequestsError (``disruption_budget`` True when a
        PodDisruptionBudget forbids it; otherwise throttling or a stale PDB status, with
        ``retry_after``), ServerError (500: more than one PDB selects the pod), ForbiddenError
        (``reason`` NamespaceTerminating, or RBAC), TransientError.
        """
        self.api.send("POST", f"/api/v1/namespaces/{q(namespace)}/pods/{q(name)}/eviction",
                      f"evict pod {namespace}/{name}", body=eviction_body(namespace, name, uid, grace_seconds),
                      content_type="application/json")

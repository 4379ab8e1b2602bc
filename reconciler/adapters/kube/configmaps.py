"""``ConfigMapStore`` (reconciler.ports) on a real API server: the control store role of
:class:`reconciler.adapters.kube.cluster.KubeCluster` (the recipe control switches of
``reconciler pause``/``disable``, ConfigMap ``node-reconciler-controls`` in the reconciler's
namespace). RBAC needed: ``get``, ``create``, ``patch`` on ``configmaps`` in that namespace.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from reconciler.adapters.kube.api import KubeApi, q
from reconciler.errors import ClusterError, NotFoundError

MERGE_PATCH = "application/merge-patch+json"
MANAGED_BY = {"app.kubernetes.io/managed-by": "node-reconciler"}


class KubeConfigMaps:
    """ConfigMaps over ``api``; every method is one request (``patch_config_map``: two when the
    ConfigMap does not exist yet, a failed patch then a create). ``dry_run`` is asked before each
    write (True: ``dryRun=All``, server-side dry run: validated and admitted, not persisted)."""

    def __init__(self, api: KubeApi, *, dry_run: Callable[[], bool] | None = None) -> None:
        self.api = api
        self._dry_run = dry_run or (lambda: False)

    def _dry(self) -> list[tuple[str, str]]:
        return [("dryRun", "All")] if self._dry_run() else []

    def get_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        """The ConfigMap's ``data`` (empty dict when it has none), or None when it does not exist."""
        try:
            obj = self.api.json("GET", f"/api/v1/namespaces/{q(namespace)}/configmaps/{q(name)}",
                                f"get configmap {namespace}/{name}")
        except NotFoundError:
            return None
        data = obj.get("data")
        return {str(k): str(v) for k, v in (data if isinstance(data, dict) else {}).items()}

    def patch_config_map(self, namespace: str, name: str, data: Mapping[str, str | None]) -> None:
        """Merge-patch ``data`` (None removes a key); create the ConfigMap when it does not exist.

        Raises:
            ClusterError: the API refused (e.g. the namespace does not exist, RBAC).
        """
        what = f"patch configmap {namespace}/{name}"
        path = f"/api/v1/namespaces/{q(namespace)}/configmaps"

        def patch() -> None:
            self.api.send("PATCH", f"{path}/{q(name)}", what, query=self._dry(), body={"data": dict(data)},
                          content_type=MERGE_PATCH)

        try:
            patch()
            return
        except NotFoundError:
            pass
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": namespace, "labels": dict(MANAGED_BY)},
                "data": {k: v for k, v in data.items() if v is not None}}
        try:
            self.api.send("POST", path, f"create configmap {namespace}/{name}", query=self._dry(), body=body,
                          content_type="application/json")
        except ClusterError as e:
            if e.status != 409:  # 409: created concurrently; patch it
                raise
            patch()

"""``ConfigMapStore`` (reconciler.ports) on a real API server: ConfigMaps read and merge-patched with
the official client, next to (not inside) :class:`reconciler.adapters.kube.cluster.KubeCluster`.

Used for the recipe control switches (``reconciler pause``/``disable``, ConfigMap
``node-reconciler-controls`` in the reconciler's namespace).
:meth:`reconciler.adapters.kube.cluster.KubeCluster.config_map_store` builds one sharing a
``KubeCluster``'s API client. Errors are translated with the kube adapter's
:func:`~reconciler.adapters.kube.send.translate_api_error`.
RBAC needed: ``get``, ``create``, ``patch`` on ``configmaps`` in that namespace.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.adapters.kube.conn import unreachable
from reconciler.errors import ClusterError, NotFoundError, TransientError

MERGE_PATCH = "application/merge-patch+json"
MANAGED_BY = {"app.kubernetes.io/managed-by": "node-reconciler"}


class KubeConfigMaps:
    """ConfigMaps in one cluster; every method is one request (``patch_config_map``: two when the
    ConfigMap does not exist yet, a failed patch then a create)."""

    def __init__(self, api_client: client.ApiClient, request_timeout: float = 30.0, *,
                 dry_run: Callable[[], bool] | None = None) -> None:
        """``request_timeout``: read timeout per request in seconds (connect timeout 10 s).
        ``dry_run``: asked before each write; True sends it with ``dryRun=All`` (server-side dry
        run: validated and admitted, not persisted)."""
        self._dry_run = dry_run or (lambda: False)
        self._api = api_client
        self._server = str(api_client.configuration.host or "")
        self.request_timeout = request_timeout

    @functools.cached_property
    def _core(self) -> client.CoreV1Api:
        # made on the first write: importing the generated CoreV1Api costs about 1.3 s of CPU, which
        # a ``plan`` (one read of the control switches) should not pay
        return client.CoreV1Api(self._api)

    def _call(self, fn: Callable[..., Any], what: str, *args: Any, **kwargs: Any) -> Any:
        from reconciler.adapters.kube.send import translate_api_error

        kwargs.setdefault("_request_timeout", (10, self.request_timeout))
        try:
            resp = fn(*args, _preload_content=False, **kwargs)
            try:
                raw = bytes(resp.data or b"")
            finally:
                resp.release_conn()
        except ApiException as e:
            raise translate_api_error(int(e.status or 0), e.body, dict(e.headers or {}), what) from None
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise unreachable(e, what, self._server) from None
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            raise TransientError(f"{what}: answer is not JSON") from None

    def _dry(self) -> dict[str, str]:
        return {"dry_run": "All"} if self._dry_run() else {}

    def get_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        """The ConfigMap's ``data`` (empty dict when it has none), or None when it does not exist."""
        from reconciler.adapters.kube.send import send_request, thin_requests

        what = f"get configmap {namespace}/{name}"
        try:
            if thin_requests(self._api):
                raw = send_request(self._api, "GET",
                                   f"/api/v1/namespaces/{quote(namespace, safe='')}/configmaps/{quote(name, safe='')}",
                                   what, timeout=(10, self.request_timeout))
                try:
                    obj = json.loads(raw) if raw else {}
                except ValueError:
                    raise TransientError(f"{what}: answer is not JSON") from None
            else:
                obj = self._call(self._core.read_namespaced_config_map, what, name, namespace)
        except NotFoundError:
            return None
        data = obj.get("data") if isinstance(obj, dict) else None
        return {str(k): str(v) for k, v in (data or {}).items()}

    def patch_config_map(self, namespace: str, name: str, data: Mapping[str, str | None]) -> None:
        """Merge-patch ``data`` (None removes a key); create the ConfigMap when it does not exist.

        Raises:
            ClusterError: the API refused (e.g. the namespace does not exist, RBAC).
        """
        what = f"patch configmap {namespace}/{name}"
        try:
            self._call(self._core.patch_namespaced_config_map, what, name, namespace, {"data": dict(data)},
                       _content_type=MERGE_PATCH, **self._dry())
            return
        except NotFoundError:
            pass
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(MANAGED_BY)},
            "data": {k: v for k, v in data.items() if v is not None},
        }
        try:
            self._call(self._core.create_namespaced_config_map, f"create configmap {namespace}/{name}",
                       namespace, body, **self._dry())
        except ClusterError as e:
            if e.status != 409:  # 409: created concurrently; patch it
                raise
            self._call(self._core.patch_namespaced_config_map, what, name, namespace, {"data": dict(data)},
                       _content_type=MERGE_PATCH, **self._dry())

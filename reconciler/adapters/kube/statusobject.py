"""Create/update ``NodeRecipeRollout`` objects (``reconciler.nodewright.dev/v1alpha1``, cluster
scoped) with the official client's ``CustomObjectsApi``.

The object's shape is built by :mod:`reconciler.report.status` (pure); this adapter only reads
and writes it: ``spec`` with a JSON merge patch (bumps ``metadata.generation`` when it changes),
``status`` through the ``/status`` subresource. API errors become
:class:`~reconciler.errors.ClusterError` subclasses (:func:`reconciler.adapters.kube.api.translate_api_error`).
The CRD must be installed (``charts/node-reconciler/crds/nodereciperollouts.yaml``); without it every call
raises NotFoundError naming the missing resource.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.adapters.kube.api import translate_api_error
from reconciler.adapters.kube.conn import unreachable
from reconciler.errors import NotFoundError
from reconciler.report.status import GROUP, PLURAL, VERSION

Obj = dict[str, Any]


def rfc3339_now() -> str:
    """The current UTC time as RFC 3339 (``2026-11-30T12:00:00Z``), for condition transitions."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class StatusObjects:
    """Read and write ``NodeRecipeRollout`` objects through ``api_client``."""

    def __init__(self, api_client: client.ApiClient, *, request_timeout: float = 30.0) -> None:
        self.api = client.CustomObjectsApi(api_client)
        self._server = str(api_client.configuration.host or "")
        self.timeout = request_timeout

    def _call(self, what: str, fn: Any, *args: Any, **kw: Any) -> Obj:
        try:
            out: Obj = fn(GROUP, VERSION, PLURAL, *args, _request_timeout=self.timeout, **kw)
            return out
        except ApiException as e:
            raise translate_api_error(e.status or 0, e.body, e.headers, what) from None
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise unreachable(e, what, self._server) from None

    def get(self, name: str) -> Obj | None:
        """The object ``name``, or None when it does not exist."""
        try:
            return self._call(f"get NodeRecipeRollout {name}", self.api.get_cluster_custom_object, name)
        except NotFoundError:
            return None

    def ensure(self, obj: Mapping[str, Any]) -> Obj:
        """Create ``obj`` (name from ``metadata.name``) or merge-patch its ``spec`` and labels so
        they match; returns the object as stored (with its ``metadata.generation``)."""
        name = str(obj["metadata"]["name"])
        current = self.get(name)
        if current is None:
            return self._call(f"create NodeRecipeRollout {name}", self.api.create_cluster_custom_object, dict(obj))
        patch: Obj = {}
        if current.get("spec") != obj.get("spec"):
            patch["spec"] = obj.get("spec")
        labels = obj.get("metadata", {}).get("labels") or {}
        if any(current.get("metadata", {}).get("labels", {}).get(k) != v for k, v in labels.items()):
            patch["metadata"] = {"labels": labels}
        if not patch:
            return current
        return self._call(f"patch NodeRecipeRollout {name}", self.api.patch_cluster_custom_object, name, patch)

    def write_status(self, name: str, status: Mapping[str, Any]) -> Obj:
        """Replace the object's ``status`` (merge patch on the ``/status`` subresource)."""
        return self._call(
            f"patch NodeRecipeRollout {name} status",
            self.api.patch_cluster_custom_object_status,
            name,
            {"status": dict(status)},
        )

"""Write the status subresource of NodeRecipe objects (``reconciler.nodewright.dev/v1alpha1``,
cluster-scoped) with the official client's ``CustomObjectsApi``: a JSON merge patch of
``/status`` (``status.conditions`` is replaced as a whole; ``metadata.generation`` is untouched).
The status itself is built by :mod:`reconciler.controller.recipestatus` (pure). API errors become
:class:`~reconciler.errors.ClusterError` subclasses."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.adapters.kube.api import translate_api_error
from reconciler.adapters.kube.conn import unreachable

GROUP, VERSION, PLURAL = "reconciler.nodewright.dev", "v1alpha1", "noderecipes"


class NodeRecipeStatus:
    """``write_status`` of :class:`reconciler.controller.recipestatus.StatusWriter` for a real cluster."""

    def __init__(self, api_client: client.ApiClient, *, request_timeout: float = 30.0) -> None:
        self.api = client.CustomObjectsApi(api_client)
        self._server = str(api_client.configuration.host or "")
        self.timeout = request_timeout

    def write_status(self, name: str, status: Mapping[str, Any]) -> None:
        """Merge-patch the ``status`` of NodeRecipe ``name``. Raises ClusterError (NotFoundError: gone)."""
        what = f"patch NodeRecipe {name} status"
        try:
            self.api.patch_cluster_custom_object_status(GROUP, VERSION, PLURAL, name, {"status": dict(status)},
                                                        _request_timeout=self.timeout)
        except ApiException as e:
            raise translate_api_error(e.status or 0, e.body, e.headers, what) from None
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise unreachable(e, what, self._server) from None


class NodeRecipeEvents:
    """``emit`` of :class:`reconciler.controller.recipeevents.EventSink` for a real cluster: a core/v1
    Event in namespace ``default`` (cluster-scoped objects' events live there, as for nodes) with
    ``involvedObject`` the NodeRecipe (apiVersion, kind, name, uid), so ``kubectl describe
    noderecipe NAME`` lists it; ``source.component``/``reportingComponent`` ``node-reconciler``."""

    def __init__(self, api_client: client.ApiClient, *, instance: str = "", request_timeout: float = 30.0) -> None:
        self.core = client.CoreV1Api(api_client)
        self._server = str(api_client.configuration.host or "")
        self.instance = instance
        self.timeout = request_timeout

    def emit(self, name: str, uid: str, reason: str, message: str, type_: str = "Normal") -> None:
        """Create the Event. Raises ClusterError."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        event = {
            "metadata": {"name": f"{name[:200]}.{time.time_ns():x}{os.urandom(2).hex()}", "namespace": "default"},
            "involvedObject": {"apiVersion": f"{GROUP}/{VERSION}", "kind": "NodeRecipe", "name": name, "uid": uid},
            "reason": reason, "message": message[:1024], "type": type_, "count": 1,
            "firstTimestamp": now, "lastTimestamp": now,
            "source": {"component": "node-reconciler"}, "reportingComponent": "node-reconciler",
            "reportingInstance": self.instance[:128],
        }
        what = f"create event {reason} on NodeRecipe {name}"
        try:
            self.core.create_namespaced_event("default", client.CoreV1Event.model_validate(event),
                                              _request_timeout=self.timeout)
        except ApiException as e:
            raise translate_api_error(e.status or 0, e.body, e.headers, what) from None
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise unreachable(e, what, self._server) from None

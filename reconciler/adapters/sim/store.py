"""The simulated fleet's Leases (:mod:`reconciler.execute.lock`) and ConfigMaps (the recipe
controls of :mod:`reconciler.ops.controls`), as the kube adapter keeps them.
"""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.adapters.sim.core import SimCore
from reconciler.adapters.sim.saved import STAGE_NS
from reconciler.errors import ConflictError, NotFoundError
from reconciler.ports import LeaseInfo, LeaseSpec


class SimStore(SimCore):
    """Leases and ConfigMaps of the simulated fleet (part of ``SimFleet``)."""

    def get_lease(self, name: str) -> LeaseInfo | None:
        """The Lease ``name`` or None (leases are not saved with the fleet)."""
        return self.leases.get(name)

    def create_lease(self, name: str, spec: LeaseSpec) -> LeaseInfo:
        """One write: create the Lease. Raises ConflictError (409 AlreadyExists) when it exists."""
        if name in self.leases:
            raise ConflictError(f"create lease {name}: leases.coordination.k8s.io \"{name}\" already exists",
                                409, "AlreadyExists")
        self._write("create-lease", f"lease/{name}")
        return self._put_lease(name, spec)

    def replace_lease(self, name: str, spec: LeaseSpec, resource_version: str) -> LeaseInfo:
        """One write: replace the Lease's spec if its resourceVersion is ``resource_version``.
        Raises NotFoundError (absent), ConflictError (changed), as kube-apiserver does."""
        self._lease_precondition("update", name, resource_version)
        self._write("update-lease", f"lease/{name}")
        return self._put_lease(name, spec)

    def delete_lease(self, name: str, resource_version: str) -> None:
        """One write: delete the Lease if its resourceVersion is ``resource_version``. Raises
        NotFoundError (absent), ConflictError (changed)."""
        self._lease_precondition("delete", name, resource_version)
        self._write("delete-lease", f"lease/{name}")
        del self.leases[name]
        self._after_write()

    def _lease_precondition(self, verb: str, name: str, resource_version: str) -> None:
        cur = self.leases.get(name)
        if cur is None:
            raise NotFoundError(f"{verb} lease {name}: leases.coordination.k8s.io \"{name}\" not found", 404,
                                "NotFound")
        if cur.resource_version != resource_version:
            raise ConflictError(f"{verb} lease {name}: Operation cannot be fulfilled on leases.coordination.k8s.io "
                                f"\"{name}\": the object has been modified; please apply your changes to the latest "
                                "version and try again", 409, "Conflict")

    def _put_lease(self, name: str, spec: LeaseSpec) -> LeaseInfo:
        self._rv += 1
        self.leases[name] = LeaseInfo(name, STAGE_NS, spec.holder, spec.duration_seconds, spec.acquired, spec.renewed,
                                      spec.transitions, str(self._rv))
        self._after_write()
        return self.leases[name]

    def get_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        """The ``data`` of a ConfigMap, or None."""
        cm = self.config_maps.get((namespace, name))
        return None if cm is None else {str(k): str(v) for k, v in (cm.get("data") or {}).items()}

    def patch_config_map(self, namespace: str, name: str, data: Mapping[str, str | None]) -> None:
        """One write: merge ``data`` (None removes a key), creating the ConfigMap when absent."""
        self._write("patch-configmap", f"configmap/{namespace}/{name}")
        cm = self.config_maps.setdefault((namespace, name), {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": namespace, "name": name,
                         "labels": {"app.kubernetes.io/managed-by": "node-reconciler"}},
        })
        cur = cm.setdefault("data", {}) or {}
        cm["data"] = cur
        for k, v in data.items():
            if v is None:
                cur.pop(k, None)
            else:
                cur[k] = v
        self._bump(cm)
        self._after_write()

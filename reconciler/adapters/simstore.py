"""The simulated fleet's Leases (:mod:`reconciler.execute.lock`) and ConfigMaps (the recipe
controls of :mod:`reconciler.ops.controls`), as the kube adapter keeps them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from dataclasses import field as dc_field

from reconciler.adapters.simcore import SimCore
from reconciler.adapters.simsaved import STAGE_NS
from reconciler.errors import LeaseHeldError, NotFoundError


@dataclass(frozen=True)
class SimLease:
    """A Lease in the simulated fleet (the ``reconciler.ports.LeaseInfo`` shape); epoch seconds."""

    name: str
    holder: str
    duration_seconds: int
    acquired: float | None
    renewed: float | None
    transitions: int
    resource_version: str
    wall: Callable[[], float] | None = dc_field(default=None, compare=False, repr=False)

    def expires_in(self, now: float | None = None) -> float:
        """Seconds until expiry at epoch ``now`` (default: the fleet's simulated time; negative: expired)."""
        base = self.renewed or self.acquired or 0.0
        if now is None:
            now = self.wall() if self.wall is not None else base
        return base + self.duration_seconds - now


class SimStore(SimCore):
    """Leases and ConfigMaps of the simulated fleet (part of ``SimFleet``)."""

    def get_lease(self, name: str) -> SimLease | None:
        """The Lease ``name`` or None (simulated wall time; leases are not saved with the fleet)."""
        return self.leases.get(name)

    def acquire_lease(self, name: str, holder: str, duration_seconds: int) -> SimLease:
        """One write: create the Lease, renew it for its holder, or take it over once expired
        (as ``KubeCluster.acquire_lease``). Raises LeaseHeldError while another holder's lease runs."""
        now = self.wall()
        cur = self.leases.get(name)
        if cur is not None and cur.holder and cur.holder != holder and cur.expires_in(now) > 0:
            raise LeaseHeldError(f"{STAGE_NS}/{name}", cur.holder, cur.expires_in(now))
        taking_over = cur is None or cur.holder != holder
        self._write("create-lease" if cur is None else "update-lease", f"lease/{name}")
        self._rv += 1
        self.leases[name] = SimLease(
            name, holder, duration_seconds,
            acquired=now if taking_over or cur is None else (cur.acquired or now), renewed=now,
            transitions=0 if cur is None else cur.transitions + (1 if taking_over and cur.holder else 0),
            resource_version=str(self._rv), wall=self.wall,
        )
        self._after_write()
        return self.leases[name]

    def renew_lease(self, name: str, holder: str, duration_seconds: int | None = None) -> SimLease:
        """One write: renewTime = now. Raises NotFoundError (no lease), LeaseHeldError (another holder)."""
        cur = self.leases.get(name)
        if cur is None:
            raise NotFoundError(f"lease {STAGE_NS}/{name} does not exist", 404, "NotFound")
        if cur.holder != holder:
            raise LeaseHeldError(f"{STAGE_NS}/{name}", cur.holder or "nobody", cur.expires_in(self.wall()))
        self._write("update-lease", f"lease/{name}")
        self._rv += 1
        self.leases[name] = replace(cur, duration_seconds=duration_seconds or cur.duration_seconds,
                                    renewed=self.wall(), resource_version=str(self._rv))
        self._after_write()
        return self.leases[name]

    def release_lease(self, name: str, holder: str) -> None:
        """One write: delete the Lease if ``holder`` holds it (otherwise nothing)."""
        cur = self.leases.get(name)
        if cur is None or cur.holder != holder:
            return
        self._write("delete-lease", f"lease/{name}")
        del self.leases[name]
        self._after_write()

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

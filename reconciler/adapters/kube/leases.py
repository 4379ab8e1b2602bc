"""The Lease store role (``LeaseStore``) on a real API server: coordination.k8s.io/v1 Leases in the
reconciler's namespace, without policy (who may take, renew or release one is decided in
:mod:`reconciler.execute.lock`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from reconciler.adapters.kube.api import KubeApi, q
from reconciler.adapters.kube.objects import parse_time
from reconciler.adapters.kube.stagepod import COMPONENT, MANAGED_BY_LABEL
from reconciler.adapters.kube.stages import Namespace
from reconciler.errors import NotFoundError
from reconciler.ports import LeaseInfo, LeaseSpec

Obj = dict[str, Any]


def micro_time(epoch: float) -> str:
    """metav1.MicroTime text (RFC 3339 with microseconds, UTC)."""
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_from(obj: Obj) -> LeaseInfo:
    """A Lease's JSON → :class:`~reconciler.ports.LeaseInfo`."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    return LeaseInfo(name=str(meta.get("name") or ""), namespace=str(meta.get("namespace") or ""),
                     holder=str(spec.get("holderIdentity") or ""),
                     duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
                     acquired=parse_time(spec.get("acquireTime")), renewed=parse_time(spec.get("renewTime")),
                     transitions=int(spec.get("leaseTransitions") or 0),
                     resource_version=str(meta.get("resourceVersion") or ""))


class KubeLeases:
    """``LeaseStore`` over ``api`` in ``namespace`` (created with the first Lease). Each method is
    one request; errors are ClusterError subclasses."""

    def __init__(self, api: KubeApi, namespace: Namespace) -> None:
        self.api, self.ns = api, namespace

    def _path(self, name: str = "") -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{q(self.ns.name)}/leases" + (f"/{q(name)}" if name else "")

    def _body(self, name: str, spec: LeaseSpec, resource_version: str | None = None) -> Obj:
        meta: Obj = {"name": name, "namespace": self.ns.name, "labels": {MANAGED_BY_LABEL: COMPONENT}}
        if resource_version is not None:
            meta["resourceVersion"] = resource_version
        body: Obj = {"holderIdentity": spec.holder, "leaseDurationSeconds": spec.duration_seconds,
                     "leaseTransitions": spec.transitions}
        if spec.acquired is not None:
            body["acquireTime"] = micro_time(spec.acquired)
        if spec.renewed is not None:
            body["renewTime"] = micro_time(spec.renewed)
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": body}

    def get_lease(self, name: str) -> LeaseInfo | None:
        """The Lease ``namespace/name``, or None."""
        try:
            return lease_from(self.api.json("GET", self._path(name), f"get lease {name}"))
        except NotFoundError:
            return None

    def create_lease(self, name: str, spec: LeaseSpec) -> LeaseInfo:
        """POST the Lease (creating the namespace first when it is missing). Raises ConflictError
        (409 AlreadyExists)."""
        self.ns.ensure()
        return lease_from(self.api.json("POST", self._path(), f"create lease {name}", body=self._body(name, spec),
                                        content_type="application/json"))

    def replace_lease(self, name: str, spec: LeaseSpec, resource_version: str) -> LeaseInfo:
        """PUT with ``metadata.resourceVersion`` (409 → ConflictError when it changed; 404 →
        NotFoundError)."""
        return lease_from(self.api.json("PUT", self._path(name), f"update lease {name}",
                                        body=self._body(name, spec, resource_version),
                                        content_type="application/json"))

    def delete_lease(self, name: str, resource_version: str) -> None:
        """DELETE with ``preconditions.resourceVersion`` (409 → ConflictError when it changed; 404 →
        NotFoundError)."""
        self.api.send("DELETE", self._path(name), f"delete lease {name}",
                      body={"preconditions": {"resourceVersion": resource_version}}, content_type="application/json")

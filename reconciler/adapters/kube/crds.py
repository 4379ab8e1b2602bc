"""Server-side apply of the reconciler's CustomResourceDefinitions (``reconciler crds apply``).

Helm installs a chart's ``crds/`` on ``helm install`` only and never upgrades or deletes them
(https://helm.sh/docs/chart_best_practices/custom_resource_definitions/), so a release whose
NodeRecipe schema changed needs another path: this one applies the CRDs the installed package
carries (:func:`reconciler.load.crd.all_crds`, the same objects as the chart's ``crds/``) with
server-side apply, field manager ``node-reconciler``, forcing conflicts (the fields were Helm's or
kubectl's), then waits until each is ``Established``. It needs ``get`` and ``patch`` on
``customresourcedefinitions`` (``create`` for a missing one): the cluster admin's rights, never
the chart's ServiceAccount.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from typing import Any, NamedTuple

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.adapters.kube.api import translate_api_error
from reconciler.adapters.kube.conn import unreachable
from reconciler.errors import ClusterError

FIELD_MANAGER = "node-reconciler"


class Action(StrEnum):
    """What applying one CRD did (kubectl's words)."""

    CREATED = "created"
    CONFIGURED = "configured"
    UNCHANGED = "unchanged"


class Applied(NamedTuple):
    """One CRD applied: its name and :class:`Action`."""

    name: str
    action: Action


def apply_crds(api_client: client.ApiClient, docs: Iterable[Mapping[str, Any]], *, dry_run: bool = False,
               timeout: float = 60.0, request_timeout: float = 30.0,
               sleep: Callable[[float], None] = time.sleep,
               monotonic: Callable[[], float] = time.monotonic) -> list[Applied]:
    """Server-side apply each CRD of ``docs``; unless ``dry_run`` (``dryRun=All``: the API server
    validates and reports, stores nothing), wait up to ``timeout`` seconds for all of them to be
    ``Established``. ``request_timeout``: seconds per API request.

    Raises:
        ClusterError: an API error (403 without the rights, 422 for a schema the server refuses:
            the server's message), the server unreachable, or a CRD not Established in time.
    """
    ext = client.ApiextensionsV1Api(api_client)
    server = str(api_client.configuration.host or "")
    out: list[Applied] = []
    for doc in docs:
        name = str(doc["metadata"]["name"])
        before = _read(ext, name, server, request_timeout)
        what = f"apply CustomResourceDefinition {name}"
        try:
            got = ext.patch_custom_resource_definition(
                name, dict(doc), field_manager=FIELD_MANAGER, force=True, dry_run="All" if dry_run else None,
                field_validation="Strict", _content_type="application/apply-patch+yaml",
                _request_timeout=request_timeout)
        except ApiException as e:
            raise translate_api_error(e.status or 0, e.body, e.headers, what) from None
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise unreachable(e, what, server) from None
        # the generation moves with the spec only (a dry run reports the one it would store)
        if before is None:
            action = Action.CREATED
        elif got.metadata is not None and got.metadata.generation == before.metadata.generation:
            action = Action.UNCHANGED
        else:
            action = Action.CONFIGURED
        out.append(Applied(name, action))
    if not dry_run:
        deadline = monotonic() + timeout
        for a in out:
            while not _established(_read(ext, a.name, server, request_timeout)):
                if monotonic() >= deadline:
                    raise ClusterError(f"CustomResourceDefinition {a.name} is not Established after {timeout:.0f} s "
                                       f"(kubectl describe crd {a.name})")
                sleep(0.2)
    return out


def _read(ext: client.ApiextensionsV1Api, name: str, server: str, request_timeout: float) -> Any:
    """The CRD ``name`` as the server has it, or None when there is none."""
    what = f"read CustomResourceDefinition {name}"
    try:
        return ext.read_custom_resource_definition(name, _request_timeout=request_timeout)
    except ApiException as e:
        if e.status == 404:
            return None
        raise translate_api_error(e.status or 0, e.body, e.headers, what) from None
    except (urllib3.exceptions.HTTPError, OSError) as e:
        raise unreachable(e, what, server) from None


def _established(crd: Any) -> bool:
    conditions = (crd.status.conditions if crd is not None and crd.status else None) or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)

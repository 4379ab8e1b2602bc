"""The ``Cluster`` port on a real Kubernetes API server, with the official ``kubernetes`` client.

Reads go through the generated API methods with ``_preload_content=False`` and are converted from
their JSON form by :mod:`reconciler.adapters.kube.objects` (the client's model deserialisation is
slow on big pod lists and not needed). Every ``ApiException``/connection error is translated at this
boundary into the :mod:`reconciler.errors` vocabulary by :func:`translate_api_error`.

Objects this adapter creates (all in ``namespace``, default ``node-reconciler``, all labelled
``app.kubernetes.io/managed-by: node-reconciler``):

* ``ConfigMap run-<run id>``: the *run owner*. Created on a run's first :meth:`KubeCluster.start_stage`;
  every stage pod and stage ConfigMap of that run has an ownerReference to it, so deleting it
  (:meth:`KubeCluster.delete_run`) lets the garbage collector remove whatever the run left behind.
* ``Pod <StageSpec.pod_name>``: a stage pod in NodeWright's package-pod shape (semantics-nodewright.md
  §3.1) or an interrupt pod (§3.2); see :func:`reconciler.adapters.kube.stagepod.build_stage_pod` (the pod
  shape and :func:`~reconciler.adapters.kube.stagepod.stage_status_from_pod`, its reading, are pure and
  live there).
* ``ConfigMap <pod name>-cm``: the package's ``configMap`` data, mounted at
  ``/skyhook-package/configmaps`` in the package-copy container (only when non-empty).
* ``Lease`` objects (coordination.k8s.io/v1) for run exclusion,
  stored by the ``LeaseStore`` methods (the take-over policy is in ``reconciler.execute.lock``).

Events go to namespace ``default`` (where the kubelet puts node events) with
``involvedObject {kind: Node, name: <node>, uid: <node>}``, the convention ``kubectl describe node``
searches for.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar, cast
from urllib.parse import quote

import urllib3
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from reconciler.adapters.kube import auth as kubeauth
from reconciler.adapters.kube import greenio
from reconciler.adapters.kube import transport as kubehttp
from reconciler.adapters.kube.cache import NODES, PODS, WatchCache
from reconciler.adapters.kube.configmaps import KubeConfigMaps
from reconciler.adapters.kube.conn import unreachable
from reconciler.adapters.kube.objects import node_from, parse_time, pdb_from, pod_from
from reconciler.adapters.kube.send import (
    decode,
    decode_page,
    exception_headers,
    send_all,
    send_request,
    thin_requests,
    translate_api_error,
)
from reconciler.adapters.kube.stagepod import (
    COMPONENT,
    DEFAULT_AGENT_IMAGE,
    DEFAULT_COPY_DIR_ROOT,
    DEFAULT_LOG_DIR_ROOT,
    DEFAULT_NAMESPACE,
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
from reconciler.errors import (
    ClusterError,
    ConflictError,
    NotFoundError,
)
from reconciler.execute.jobs import ThreadJobPool
from reconciler.model.observed import NodeInfo, PdbInfo, PodInfo, group_pods
from reconciler.model.redact import redact
from reconciler.model.selector import Taint
from reconciler.ports import JobPool, LeaseInfo, LeaseSpec, PodEviction, StageSpec, StageStatus, evict_one_by_one

Obj = dict[str, Any]
_T = TypeVar("_T")

# The client's config loaders carry no annotations; call them through typed names.
_new_client_from_config: Callable[..., client.ApiClient] = config.new_client_from_config
_load_incluster_config: Callable[..., None] = config.load_incluster_config

DEFAULT_POOL_SIZE = 32  # HTTP connections kept open (the client's default is 5 x CPUs)
LOG_TAIL_LINES = 20

_MERGE_PATCH = "application/merge-patch+json"
#: Keyword arguments of the generated ``list_*`` methods → their query parameter.
_LIST_PARAMS = {"limit": "limit", "_continue": "continue", "field_selector": "fieldSelector",
                "label_selector": "labelSelector"}
_STRATEGIC_PATCH = "application/strategic-merge-patch+json"


# ------------------------------------------------------------------------------------------------
# leases


def _micro_time(epoch: float) -> str:
    """metav1.MicroTime text (RFC 3339 with microseconds, UTC)."""
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _rfc3339(epoch: float) -> str:
    """metav1.Time text (RFC 3339, seconds, UTC)."""
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _lease_from(obj: Obj) -> LeaseInfo:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    return LeaseInfo(
        name=str(meta.get("name") or ""),
        namespace=str(meta.get("namespace") or ""),
        holder=str(spec.get("holderIdentity") or ""),
        duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
        acquired=parse_time(spec.get("acquireTime")),
        renewed=parse_time(spec.get("renewTime")),
        transitions=int(spec.get("leaseTransitions") or 0),
        resource_version=str(meta.get("resourceVersion") or ""),
    )


def _eviction(namespace: str, name: str, uid: str, grace_seconds: int | None) -> Obj:
    """The policy/v1 Eviction body of the thin path (UID precondition, grace period when given)."""
    delete_options: Obj = {"preconditions": {"uid": uid}}
    if grace_seconds is not None:
        delete_options["gracePeriodSeconds"] = grace_seconds
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": delete_options}


class _GcPause:
    """Process-wide pause of the cyclic garbage collector, nestable and shared between threads.

    Why: decoding a LIST page allocates tens of thousands of fresh dicts and lists at once, each a
    container the collector tracks; the allocation count trips generation-0 collections every few
    hundred objects and, as survivors pile up, full collections that walk every tracked object of
    the process (measured: 14 full passes, 3.5-4.5 s of a 10.8 s ``plan`` against 5,000 nodes).
    None of it is garbage with cycles: a page's dicts are freed by reference counting once its
    items are converted. The collector is off from the first holder's entry to the last holder's
    exit and restored to its previous state then (still off if someone else had disabled it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._was_enabled = False

    def __enter__(self) -> None:
        with self._lock:
            if self._holders == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._holders += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._holders -= 1
            if self._holders == 0 and self._was_enabled:
                gc.enable()


_GC_PAUSE = _GcPause()


def _gc_paused() -> _GcPause:
    """The shared :class:`_GcPause` (``with _gc_paused(): ...``)."""
    return _GC_PAUSE


def _configuration(pool_size: int) -> client.Configuration:
    """A client Configuration whose urllib3 pool keeps ``pool_size`` connections (>= 1)."""
    cfg = client.Configuration()
    cfg.connection_pool_maxsize = max(1, pool_size)
    return cfg


def _proxy_settled(cfg: client.Configuration) -> client.Configuration:
    """``cfg`` with its proxy, taken from the environment, no longer looked up again on every
    request. Why (issue 17): the kubeconfig and in-cluster loaders of the ``kubernetes`` client
    install a token refresh hook that runs before *every* request and sets ``host`` again, and the
    ``host`` setter of a Configuration whose proxy came from the environment re-reads every
    environment variable (``urllib.request.getproxies``): about a third of the client-side CPU of
    a node PATCH (0.5 of 1.5 ms). The environment does not change while we run and the proxy was
    resolved for this host when the loader set it; a proxy given in the kubeconfig
    (``proxy-url``) is still set by the hook as before. Clients without that mechanism are left
    as they are."""
    if getattr(cfg, "_proxy_from_env", False):
        object.__setattr__(cfg, "_proxy_from_env", False)
    return cfg


# ------------------------------------------------------------------------------------------------
# the adapter


class KubeCluster:
    """``Cluster`` (reconciler.ports) on a Kubernetes API server, via the official client.

    Construct with :meth:`from_kubeconfig` (``--kubeconfig``/``--context``; ``path`` None = the
    ``KUBECONFIG`` variable or ``~/.kube/config``), :meth:`in_cluster` (service-account token of
    the pod) or directly from an ``ApiClient``. Thread-safe: the executor may call it from several
    threads. Each port method is one API request unless its docstring says otherwise.

    Beyond the port:

    * ``list_nodes(label_selector=...)``, ``list_pods(node_name, label_selector=...)``: selectors
      are passed to the server; LISTs are paginated (``page_size``, ``continue``; a 410 on an
      expired continue token restarts the list).
    * :meth:`delete_run`: delete a run's owner ConfigMap (GC removes its leftover stage pods).
    * :meth:`delete_stages` (port) deletes a recipe's stage pods on one node by label selector.
    * :meth:`get_lease`, :meth:`create_lease`, :meth:`replace_lease`, :meth:`delete_lease`:
      coordination.k8s.io/v1 Leases in ``namespace`` for "one run per recipe" exclusion.
    * :meth:`close` / context manager: release the HTTP connection pool.

    Errors: every method raises only :class:`reconciler.errors.ClusterError` subclasses for API
    and transport failures (see :func:`translate_api_error`).
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        agent_image: str = DEFAULT_AGENT_IMAGE,
        pause_image: str = DEFAULT_PAUSE_IMAGE,
        copy_dir_root: str = DEFAULT_COPY_DIR_ROOT,
        log_dir_root: str = DEFAULT_LOG_DIR_ROOT,
        image_pull_secret: str | None = None,
        request_timeout: float = 30.0,
        page_size: int = 500,
        fetch_logs: bool = True,
        cache: WatchCache | None = None,
    ) -> None:
        """``request_timeout``: read timeout per request in seconds (connect timeout 10 s).
        ``page_size``: ``limit`` of each LIST page. ``fetch_logs``: read the failing container's
        log tail in :meth:`stage_status`. ``cache``: a WatchCache fed by a WatchClock on the same
        cluster; :meth:`get_node` and :meth:`stage_status` then answer from it for the nodes and
        stage pods already read or written (no request), see :mod:`reconciler.adapters.kube.cache`."""
        self.api_client = api_client
        self.namespace = namespace
        self.agent_image = agent_image
        self.pause_image = pause_image
        self.copy_dir_root = copy_dir_root
        self.log_dir_root = log_dir_root
        self.image_pull_secret = image_pull_secret
        self.request_timeout = request_timeout
        self.page_size = page_size
        self.fetch_logs = fetch_logs
        self.cache = cache
        self._lock = threading.Lock()
        self._namespace_ready = False
        self._run_owners: dict[str, Obj] = {}
        self._config_maps: set[str] = set()  # shared package ConfigMaps known to exist
        self._log_tails: dict[tuple[str, str], str] = {}  # (pod UID, container) → log tail read
        self._instance = f"{socket.gethostname()}-{os.getpid()}"
        #: True: :meth:`patch_node` and the ConfigMap store's writes are sent with ``dryRun=All``
        #: (the API server validates and admits them, persists nothing): ``--dry-run=server``
        self.server_dry_run = False

    # The generated API classes are made on first use: importing one costs the kubernetes client
    # (v31+, pydantic-validated methods) about 1.3 s of CPU and 20 MB for CoreV1Api alone, which a
    # ``plan`` (three LISTs, see :meth:`_lister`) never needs.

    @functools.cached_property
    def _core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api_client)

    @functools.cached_property
    def _apps(self) -> client.AppsV1Api:
        return client.AppsV1Api(self.api_client)

    @functools.cached_property
    def _policy(self) -> client.PolicyV1Api:
        return client.PolicyV1Api(self.api_client)

    @functools.cached_property
    def _coordination(self) -> client.CoordinationV1Api:
        return client.CoordinationV1Api(self.api_client)

    def _lister(self, resource_path: str, generated: Callable[[], Callable[..., Any]]) -> Callable[..., Any]:
        """The LIST call for ``resource_path`` (e.g. ``/api/v1/nodes``), as ``_raw`` calls the
        generated ``list_*`` methods: keyword ``limit``, ``_continue``, ``field_selector``,
        ``label_selector``, ``_request_timeout``, ``_preload_content=False``; returns the
        urllib3 response of a 2xx answer, raises ApiException otherwise. Built on the ApiClient's
        own ``param_serialize``/``call_api`` (same URL, headers and authentication, token refresh
        included) without importing the generated API module; with a client too old to have them,
        the generated method from ``generated()``."""
        api = self.api_client
        if not (hasattr(api, "param_serialize") and hasattr(ApiException, "from_response")):
            return generated()

        def call(*, _preload_content: bool = False, _request_timeout: Any = None, **params: Any) -> Any:
            query = [(_LIST_PARAMS[k], v) for k, v in params.items() if v is not None]
            # gzip (kube-apiserver compresses answers over 128 KB): a page of 500 pods is a tenth of
            # the bytes, so a tenth of the chunks http.client parses in Python (issue 17: reading
            # the chunked body cost more CPU than decoding it); urllib3 inflates it in C
            req = api.param_serialize(method="GET", resource_path=resource_path, query_params=query,
                                      header_params={"Accept": "application/json", "Accept-Encoding": "gzip"},
                                      auth_settings=["BearerToken"])
            transport = kubehttp.transport_for(api)
            if transport is not None and isinstance(_request_timeout, tuple):
                # over the keep-alive transport too (a multiplexed rollout's thread never blocks on
                # urllib3's pool: reconciler/adapters/kube/greenio.py; the request bytes the API client
                # would send)
                with contextlib.suppress(kubehttp.Unsupported):
                    answer = transport.request(req[0], req[1], req[2], None, _request_timeout)
                    if not 200 <= answer.status <= 299:
                        e = ApiException(status=answer.status, reason=None)
                        e.body, e.headers = answer.data.decode("utf-8", "replace"), answer.headers
                        raise e
                    return _Fetched(answer.data)
            resp = api.call_api(*req, _request_timeout=_request_timeout)
            if not 200 <= resp.status <= 299:
                read: Callable[[], Any] = resp.read
                read()
                raise ApiException.from_response(http_resp=resp, body=None, data=None)
            return resp.response

        return call

    def job_pool(self, size: int) -> JobPool:
        """Where a rollout's node I/O runs (``ProvidesJobPool``, issue 17): multiplexed in greenlets
        on the calling thread (:class:`~reconciler.adapters.kube.greenio.GreenPool`) when every request
        of a node run goes over the keep-alive transport (:func:`kubehttp.transport_for` gives one
        and the client has the thin path), else a thread per job in flight
        (:class:`~reconciler.execute.jobs.ThreadJobPool`: a urllib3 request would block every
        greenlet of the thread)."""
        if self._thin and kubehttp.transport_for(self.api_client) is not None and not greenio.pool_running():
            return greenio.GreenPool(size)
        return ThreadJobPool(size)

    def config_map_store(self) -> KubeConfigMaps:
        """A :class:`~reconciler.adapters.kube.configmaps.KubeConfigMaps` (``ConfigMapStore``) sharing
        this cluster's API client and request timeout (the recipe control switches,
        :func:`reconciler.ops.controls.store_for`)."""
        return KubeConfigMaps(self.api_client, self.request_timeout, dry_run=lambda: self.server_dry_run)

    # -- construction ---------------------------------------------------------------------------

    @classmethod
    def from_kubeconfig(
        cls, path: str | None = None, context: str | None = None, *, pool_size: int = DEFAULT_POOL_SIZE, **kwargs: Any
    ) -> KubeCluster:
        """From a kubeconfig file (``path`` None: ``$KUBECONFIG`` or ``~/.kube/config``) and
        optional ``context``; ``kwargs`` go to the constructor. ``pool_size``: HTTP connections
        kept open to the API server; give at least the number of threads that call the cluster at
        once plus one per watch stream, or surplus connections are closed after each request and
        the next one pays a new TLS handshake. With neither ``path``, ``context``,
        ``$KUBECONFIG`` nor ``~/.kube/config`` but ``KUBERNETES_SERVICE_HOST`` set (running in a
        pod, e.g. an Argo CD hook Job), the pod's service account is used (:meth:`in_cluster`), as
        client-go does.

        Raises:
            ClusterError: the kubeconfig is missing or invalid (message names the problem), or the
                user's credential command (``exec`` plugin, gcp ``cmd-path``) failed (message names
                the user, the command and how it failed, never its arguments or output; see
                :mod:`reconciler.adapters.kube.auth`).
        """
        if (
            path is None
            and context is None
            and not os.environ.get("KUBECONFIG")
            and not os.path.exists(os.path.expanduser("~/.kube/config"))
            and os.environ.get("KUBERNETES_SERVICE_HOST")
        ):
            return cls.in_cluster(pool_size=pool_size, **kwargs)
        # a credential command's failure is said in our words, never quoting what it wrote
        # (reconciler.adapters.kube.auth): the client logs an exec plugin's stderr, and goes on
        # without a credential; we stop here as kubectl does
        kubeauth.install_filter()
        try:
            with kubeauth.collecting() as failures:
                api = _new_client_from_config(config_file=path, context=context, persist_config=False,
                                              client_configuration=_configuration(pool_size))
        except (ConfigException, OSError, ValueError, TypeError, KeyError, AttributeError, IndexError,
                yaml.YAMLError) as e:
            # the CLI checks the file first (reconciler.load.kubeconfigfile); this is the library's
            # net: never a traceback. A YAML error's text quotes the line it is on (a token, a
            # key): only its problem and position are kept
            if failures:
                raise ClusterError(kubeauth.describe(failures[0], kubeauth.Command.EXEC, path, context)) from None
            if isinstance(e, ConfigException) and kubeauth.is_command_error(str(e)):
                raise ClusterError(kubeauth.describe(kubeauth.plugin_failure(str(e)), kubeauth.Command.CMD_PATH,
                                                     path, context)) from None
            if isinstance(e, yaml.MarkedYAMLError):
                mark = e.problem_mark
                at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
                why = f"YAML error: {e.problem or 'malformed'}{at}"
            elif isinstance(e, yaml.YAMLError):
                why = "YAML error"
            else:
                why = f"{type(e).__name__}: {e}" if not isinstance(e, ConfigException) else str(e)
            raise ClusterError(f"kubeconfig {path or '(default)'}: {why}"[:300]) from None
        if failures:
            raise ClusterError(kubeauth.describe(failures[0], kubeauth.Command.EXEC, path, context))
        _proxy_settled(api.configuration)
        return cls(api, **kwargs)

    @classmethod
    def in_cluster(cls, *, pool_size: int = DEFAULT_POOL_SIZE, **kwargs: Any) -> KubeCluster:
        """From the pod's service account (``KUBERNETES_SERVICE_HOST`` + mounted token);
        ``pool_size`` as in :meth:`from_kubeconfig`.

        Raises:
            ClusterError: not running in a pod (or the token is unreadable).
        """
        cfg = _configuration(pool_size)
        try:
            _load_incluster_config(client_configuration=cfg)
        except (ConfigException, OSError) as e:
            raise ClusterError(f"in-cluster config: {e}") from None
        return cls(client.ApiClient(_proxy_settled(cfg)), **kwargs)

    def close(self) -> None:
        """Close the HTTP connection pool and the keep-alive connections of :func:`send_request`."""
        kubehttp.close_transport(self.api_client)
        closer: Callable[[], None] = self.api_client.close
        closer()

    def __enter__(self) -> KubeCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transport ------------------------------------------------------------------------------

    def _raw(self, fn: Callable[..., Any], what: str, *args: Any, **kwargs: Any) -> bytes:
        """Call a generated API method without deserialisation; return the body bytes."""
        kwargs.setdefault("_request_timeout", (10, self.request_timeout))
        try:
            resp = fn(*args, _preload_content=False, **kwargs)
            try:
                return bytes(resp.data or b"")
            finally:
                resp.release_conn()
        except ApiException as e:
            raise translate_api_error(int(e.status or 0), e.body, exception_headers(e), what) from None
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise unreachable(e, what, str(self.api_client.configuration.host or "")) from None

    def _json(self, fn: Callable[..., Any], what: str, *args: Any, **kwargs: Any) -> Obj:
        return decode(self._raw(fn, what, *args, **kwargs), what)

    @functools.cached_property
    def _thin(self) -> bool:
        """Whether :meth:`_send` can use the ApiClient's ``param_serialize``/``call_api`` (client
        v31+); with an older client every request goes through the generated methods."""
        return thin_requests(self.api_client)

    def _send(self, method: str, path: str, what: str, *, query: list[tuple[str, Any]] | None = None,
              body: Obj | None = None, content_type: str | None = None,
              timeout: tuple[float, float] | None = None) -> bytes:
        """:func:`send_request` on this cluster's ApiClient (default timeout: connect 10 s, read
        ``request_timeout``)."""
        return send_request(self.api_client, method, path, what, query=query, body=body, content_type=content_type,
                            timeout=timeout or (10, self.request_timeout))

    def _list(
        self, fn: Callable[..., Any], what: str, convert: Callable[[Obj], _T], *args: Any, **kwargs: Any
    ) -> list[_T]:
        """A paginated LIST, each page's items converted by ``convert`` as the page arrives: at most
        one page's bytes and decoded dicts are alive at a time, never the whole list (at 5,000 nodes
        and 25,000 pods the decoded pods alone are several hundred MB; their records a few tens).
        A 410 on an expired continue token restarts the list (up to 3 times), dropping what was
        converted. Decoding and conversion run with the cyclic garbage collector paused
        (:func:`_gc_paused`). Raises ClusterError (TransientError for an answer that is not JSON)."""
        out: list[_T] = []
        token: str | None = None
        restarts = 0
        with _gc_paused():
            while True:
                try:
                    data = self._raw(fn, what, *args, limit=self.page_size, _continue=token, **kwargs)
                except ClusterError as e:
                    if e.status == 410 and token and restarts < 3:  # continue token expired: start over
                        out, token, restarts = [], None, restarts + 1
                        continue
                    raise
                page = decode_page(data, what)
                del data
                out.extend(convert(i) for i in page.get("items") or () if isinstance(i, dict))
                meta = page.get("metadata")
                token = (meta.get("continue") if isinstance(meta, dict) else None) or None
                del page
                if not token:
                    return out

    # -- reads ----------------------------------------------------------------------------------

    def server_version(self) -> dict[str, str]:
        """The API server's build (``GET /version``, as ``kubectl version`` shows it): the string
        fields of its answer, e.g. ``{"gitVersion": "v1.36.3", "platform": "linux/amd64", ...}``.
        Needs no RBAC rule (``system:public-info-viewer`` allows it). Raises ClusterError."""
        obj = self._json(client.VersionApi(self.api_client).get_code, "get server version")
        return {k: v for k, v in obj.items() if isinstance(v, str)}

    def list_nodes(self, label_selector: str | None = None, *, unschedulable_only: bool = False) -> list[NodeInfo]:
        """All nodes (paginated LIST), optionally filtered by a label selector string; with
        ``unschedulable_only`` the cordoned ones only (field selector ``spec.unschedulable=true``:
        one small LIST)."""
        if unschedulable_only:
            return self._list(
                self._lister("/api/v1/nodes", lambda: self._core.list_node), "list unschedulable nodes", node_from,
                field_selector="spec.unschedulable=true", label_selector=label_selector,
            )
        return self._list(self._lister("/api/v1/nodes", lambda: self._core.list_node), "list nodes", node_from,
                          label_selector=label_selector)

    def get_node(self, name: str) -> NodeInfo:
        """One node, current as of the last watch event (from the cache when it tracks the node,
        else one GET). Raises NotFoundError."""
        hit, info = self._cached(NODES, name)
        if hit:
            if info is None:
                raise NotFoundError(f"get node {name}: node {name} not found (deleted)", 404, "NotFound")
            return cast(NodeInfo, info)
        what = f"get node {name}"
        if self._thin:
            return self._node_answer(decode(self._send("GET", f"/api/v1/nodes/{_q(name)}", what), what))
        return self._node_answer(self._json(self._core.read_node, what, name))

    def forget_node(self, name: str) -> None:
        """Port ``NodeInterest.forget_node``: the cache stops tracking the node and its stage pods
        (:meth:`~reconciler.adapters.kube.cache.WatchCache.forget_node`), so their watch events and
        those of the pods on the node are skipped undecoded; no request."""
        if self.cache is not None:
            self.cache.forget_node(name)

    def _cached(self, kind: str, key: Any) -> tuple[bool, Any]:
        """``(True, value)`` when the cache answers (value None: known deleted); otherwise
        ``(False, None)`` and ``key`` is tracked, so the answer of the request that follows is kept."""
        if self.cache is None:
            return False, None
        hit, value = self.cache.lookup(kind, key)
        if not hit:
            self.cache.track(kind, key)
        return hit, value

    def _track(self, kind: str, key: Any) -> None:
        """Track ``key`` before a write whose answer is kept (see kubecache)."""
        if self.cache is not None:
            self.cache.track(kind, key)

    def _node_answer(self, obj: Obj) -> NodeInfo:
        """A node the API server returned: kept in the cache (when tracked) and parsed once."""
        kept = self.cache.store(NODES, obj) if self.cache is not None and obj else None
        return cast(NodeInfo, kept) if kept is not None else node_from(obj)

    def list_pods(self, node_name: str | None = None, label_selector: str | None = None) -> list[PodInfo]:
        """Pods of every namespace (paginated LIST, as kubectl drain lists them), optionally only
        those with ``spec.nodeName=<node_name>`` (field selector) and/or matching ``label_selector``."""
        fs = f"spec.nodeName={node_name}" if node_name else None
        what = f"list pods on {node_name}" if node_name else "list pods"
        return self._list(
            self._lister("/api/v1/pods", lambda: self._core.list_pod_for_all_namespaces), what, pod_from,
            field_selector=fs, label_selector=label_selector,
        )

    def pods_by_node(self) -> dict[str, tuple[PodInfo, ...]]:
        """Every bound pod by node (:meth:`list_pods` of all namespaces, one paginated LIST, grouped)."""
        return group_pods(self.list_pods())

    def get_pod(self, namespace: str, name: str) -> PodInfo | None:
        """One pod, or None when it does not exist."""
        try:
            return pod_from(self._read_pod(namespace, name))
        except NotFoundError:
            return None

    def _read_pod(self, namespace: str, name: str) -> Obj:
        """GET one pod as JSON (NotFoundError when absent)."""
        what = f"get pod {namespace}/{name}"
        if self._thin:
            return decode(self._send("GET", f"/api/v1/namespaces/{_q(namespace)}/pods/{_q(name)}", what), what)
        return self._json(self._core.read_namespaced_pod, what, name, namespace)

    def list_pdbs(self) -> list[PdbInfo]:
        """All policy/v1 PodDisruptionBudgets (paginated LIST)."""
        return self._list(
            self._lister("/apis/policy/v1/poddisruptionbudgets",
                         lambda: self._policy.list_pod_disruption_budget_for_all_namespaces),
            "list poddisruptionbudgets", pdb_from,
        )

    def daemonset_exists(self, namespace: str, name: str) -> bool:
        """Whether ``apps/v1 DaemonSet namespace/name`` exists (kubectl drain's orphan check)."""
        try:
            self._raw(self._apps.read_namespaced_daemon_set, f"get daemonset {namespace}/{name}", name, namespace)
        except NotFoundError:
            return False
        return True

    # -- node writes ----------------------------------------------------------------------------

    def patch_node(
        self,
        name: str,
        *,
        annotations: Mapping[str, str | None] | None = None,
        labels: Mapping[str, str | None] | None = None,
        unschedulable: bool | None = None,
        taints: tuple[Taint, ...] | None = None,
        resource_version: str | None = None,
        uid: str | None = None,
    ) -> NodeInfo:
        """One JSON merge patch (RFC 7386) of the node: annotations/labels merged (None deletes the
        key), ``spec.unschedulable`` set, ``spec.taints`` replaced as a whole. With
        ``resource_version`` the body carries ``metadata.resourceVersion``, which the API server
        enforces (409 → ConflictError when the node changed). With ``uid`` the body carries
        ``metadata.uid``: the API server refuses a patch that would change an object's UID (422
        "field is immutable", as the kubelet's UID-preconditioned status patches rely on), so the
        write never lands on another machine registered under the same name; that refusal is
        raised as ConflictError (reason ``UIDPrecondition``). Returns the node as written. With
        nothing to change it only reads the node.

        ``taints`` replaces the whole list: pass every taint the node should keep (read them with
        :meth:`get_node` and pass its ``resource_version`` so a concurrent change is not lost).
        Taints are written without ``timeAdded`` (our Taint model has none); a NoExecute taint
        re-written by this call restarts its tolerationSeconds clock.
        """
        meta: Obj = {}
        if annotations:
            meta["annotations"] = dict(annotations)
        if labels:
            meta["labels"] = dict(labels)
        spec: Obj = {}
        if unschedulable is not None:
            spec["unschedulable"] = unschedulable
        if taints is not None:
            spec["taints"] = [
                {"key": t.key, "effect": t.effect, **({"value": t.value} if t.value else {})} for t in taints
            ]
        if not meta and not spec:
            return self.get_node(name)
        if resource_version:
            meta["resourceVersion"] = resource_version
        if uid:
            meta["uid"] = uid
        body: Obj = {}
        if meta:
            body["metadata"] = meta
        if spec:
            body["spec"] = spec
        self._track(NODES, name)
        what = f"patch node {name}"
        try:
            return self._patch_node(name, body, what)
        except ClusterError as e:
            if uid and e.status == 422 and "metadata.uid" in str(e):
                raise ConflictError(f"node {name} is another object now (UID precondition {uid} failed)", 409,
                                    reason="UIDPrecondition") from None
            raise

    def _patch_node(self, name: str, body: Obj, what: str) -> NodeInfo:
        if self._thin:
            query: list[tuple[str, Any]] = [("fieldManager", COMPONENT)]
            if self.server_dry_run:
                query.append(("dryRun", "All"))
            return self._node_answer(decode(self._send("PATCH", f"/api/v1/nodes/{_q(name)}", what, query=query,
                                                        body=body, content_type=_MERGE_PATCH), what))
        obj = self._json(
            self._core.patch_node, what, name, body, field_manager=COMPONENT,
            _content_type=_MERGE_PATCH, **({"dry_run": "All"} if self.server_dry_run else {}),
        )
        return self._node_answer(obj)

    def set_node_condition(self, name: str, type_: str, status: str, reason: str, message: str) -> None:
        """Add or replace (by type) one ``status.conditions`` entry with a strategic-merge patch of
        ``nodes/status``. One read (to keep ``lastTransitionTime`` when the status is unchanged)
        and one write. Raises NotFoundError when the node is gone."""
        node = self._json(self._core.read_node_status, f"get node {name}", name)
        now = _rfc3339(time.time())
        transition = now
        for c in (node.get("status") or {}).get("conditions") or ():
            if c.get("type") == type_ and c.get("status") == status and c.get("lastTransitionTime"):
                transition = c["lastTransitionTime"]
        cond = {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message[:1024],
            "lastHeartbeatTime": now,
            "lastTransitionTime": transition,
        }
        self._track(NODES, name)
        self._node_answer(self._json(
            self._core.patch_node_status,
            f"set condition {type_} on node {name}",
            name,
            {"status": {"conditions": [cond]}},
            field_manager=COMPONENT,
            _content_type=_STRATEGIC_PATCH,
        ))

    def evict_pods(self, evictions: Sequence[PodEviction]) -> list[ClusterError | None]:
        """:meth:`evict_pod` for each (see :meth:`reconciler.ports.PodPort.evict_pods`): on the thin
        path over the keep-alive transport, written together and their answers read after
        (:func:`send_all`: a node's evictions take one answer's time, as ``kubectl drain``'s
        parallel evictions, and much less client CPU than one at a time); otherwise one after
        another."""
        if self._thin and len(evictions) > 1:
            return send_all(self.api_client, [
                ("POST", f"/api/v1/namespaces/{_q(e.namespace)}/pods/{_q(e.name)}/eviction",
                 f"evict pod {e.namespace}/{e.name}", _eviction(e.namespace, e.name, e.uid, e.grace_seconds))
                for e in evictions], timeout=(10, self.request_timeout))
        return evict_one_by_one(self.evict_pod, evictions)

    def evict_pod(self, namespace: str, name: str, uid: str, grace_seconds: int | None) -> None:
        """POST a policy/v1 Eviction for the pod with ``deleteOptions.preconditions.uid`` (and the
        grace period when given), as ``kubectl drain`` does (drain-and-scenarios.md §1.4/§1.6).

        Raises: NotFoundError (pod gone), ConflictError (UID precondition failed: a different pod
        now has that name), TooManyRequestsError (``disruption_budget`` True when a
        PodDisruptionBudget forbids it; otherwise throttling or a stale PDB status, with
        ``retry_after``), ServerError (500: more than one PDB selects the pod), ForbiddenError
        (``reason`` NamespaceTerminating, or RBAC), TransientError.
        """
        what = f"evict pod {namespace}/{name}"
        if self._thin:
            self._send("POST", f"/api/v1/namespaces/{_q(namespace)}/pods/{_q(name)}/eviction", what,
                       body=_eviction(namespace, name, uid, grace_seconds), content_type="application/json")
            return
        body = client.V1Eviction(
            api_version="policy/v1",
            kind="Eviction",
            metadata=client.V1ObjectMeta(name=name, namespace=namespace),
            delete_options=client.V1DeleteOptions(
                grace_period_seconds=grace_seconds, preconditions=client.V1Preconditions(uid=uid)
            ),
        )
        self._raw(self._core.create_namespaced_pod_eviction, what, name, namespace, body)

    def emit_event(self, node: str, reason: str, message: str, type_: str = "Normal") -> None:
        """Create a core/v1 Event about the node in namespace ``default``: involvedObject
        ``{kind: Node, name, uid: <name>}`` (kubelet and ``kubectl describe node`` convention),
        ``source.component`` and ``reportingComponent`` ``node-reconciler``."""
        now = _rfc3339(time.time())
        event = {
            # kubelet-style unique name <node>.<hex nanoseconds>, plus 4 random hex (parallel threads)
            "metadata": {"name": f"{node[:200]}.{time.time_ns():x}{os.urandom(2).hex()}", "namespace": "default"},
            "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node},
            "reason": reason,
            "message": message[:1024],
            "type": type_,
            "count": 1,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self._instance[:128],
        }
        self._raw(
            self._core.create_namespaced_event,
            f"create event {reason} on node {node}",
            "default",
            client.CoreV1Event.model_validate(event),
        )

    # -- stage pods -----------------------------------------------------------------------------

    def _ensure_namespace(self) -> None:
        with self._lock:
            if self._namespace_ready:
                return
        try:
            self._raw(self._core.read_namespace, f"get namespace {self.namespace}", self.namespace)
        except NotFoundError:
            body = client.V1Namespace.model_validate(
                {"metadata": {"name": self.namespace, "labels": {MANAGED_BY_LABEL: COMPONENT}}}
            )
            with contextlib.suppress(ConflictError):
                self._raw(self._core.create_namespace, f"create namespace {self.namespace}", body)
        with self._lock:
            self._namespace_ready = True

    def _run_owner(self, run_id: str) -> Obj:
        """The ownerReference to the run's ``run-<id>`` ConfigMap, creating it on first use."""
        with self._lock:
            if run_id in self._run_owners:
                return self._run_owners[run_id]
        name = run_owner_name(run_id)
        body = {
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": {MANAGED_BY_LABEL: COMPONENT, RUN_ID_LABEL: label_value(run_id)},
            },
            "data": {"runId": run_id, "created": _rfc3339(time.time())},
        }
        what = f"create configmap {self.namespace}/{name}"
        try:
            obj = self._json(
                self._core.create_namespaced_config_map, what, self.namespace, client.V1ConfigMap.model_validate(body)
            )
        except ConflictError:
            obj = self._json(self._core.read_namespaced_config_map, f"get configmap {name}", name, self.namespace)
        ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": obj["metadata"]["uid"], "controller": True}
        with self._lock:
            self._run_owners[run_id] = ref
        return ref

    def start_stage(self, spec: StageSpec) -> None:
        """Create the stage (or interrupt) pod of ``spec`` (see :func:`build_stage_pod`); no-op when a
        pod of that name already exists and is not terminating.

        Requests: usually one (the pod) or two (plus the ``<pod>-cm`` ConfigMap when
        ``spec.config_map`` is non-empty; an existing one is replaced). The first call of an
        instance also ensures the namespace, and the first call of a run creates ``run-<run id>``.

        Raises:
            ConflictError: a pod of that name is still terminating (retry after it is gone).
            ForbiddenError, TransientError, ClusterError: as the API answers.
        """
        self._ensure_namespace()
        owner = self._run_owner(spec.run_id)
        ns = self.namespace
        if spec.config_map:
            cm_name = config_map_name(spec)
            if cm_name not in self._config_maps:
                labels = {k: v for k, v in stage_labels(spec).items() if k not in (NODE_LABEL, STAGE_LABEL)}
                cm = client.V1ConfigMap.model_validate(
                    {
                        "metadata": {"name": cm_name, "namespace": ns, "labels": labels, "ownerReferences": [owner]},
                        "data": dict(spec.config_map),
                    }
                )
                # the name carries the data's digest: an existing object already holds this data
                with contextlib.suppress(ConflictError):
                    self._raw(self._core.create_namespaced_config_map, f"create configmap {ns}/{cm_name}", ns, cm)
                with self._lock:
                    self._config_maps.add(cm_name)
        pod = build_stage_pod(
            spec,
            namespace=ns,
            agent_image=self.agent_image,
            pause_image=self.pause_image,
            copy_dir_root=self.copy_dir_root,
            log_dir_root=self.log_dir_root,
            owner=owner,
            image_pull_secret=self.image_pull_secret,
        )
        self._track(PODS, (ns, spec.pod_name))
        what = f"create stage pod {ns}/{spec.pod_name}"
        try:
            if self._thin:
                self._pod_answer(decode(self._send("POST", f"/api/v1/namespaces/{_q(ns)}/pods", what,
                                                    query=[("fieldManager", COMPONENT)], body=pod,
                                                    content_type="application/json"), what))
            else:
                self._pod_answer(self._json(self._core.create_namespaced_pod, what, ns,
                                            client.V1Pod.model_validate(pod), field_manager=COMPONENT))
        except ConflictError as e:
            if e.reason != "AlreadyExists":
                raise
            existing = self._pod_answer(self._read_pod(ns, spec.pod_name))
            if (existing.get("metadata") or {}).get("deletionTimestamp"):
                raise ConflictError(
                    f"stage pod {ns}/{spec.pod_name} is still terminating; start it again when it is gone",
                    409,
                    "Terminating",
                ) from None

    def stage_status(self, spec: StageSpec) -> StageStatus:
        """Read the stage pod (from the cache when it tracks the pod, else one GET; plus one log read
        the first time it is seen failed) and interpret it with
        :func:`stage_status_from_pod`; ``missing`` when there is no such pod. ``log_tail`` holds the
        last 20 lines of the failing container's log, best effort (empty when logs are unavailable,
        e.g. on kwok nodes)."""
        ns = self.namespace
        hit, pod = self._cached(PODS, (ns, spec.pod_name))
        if hit and pod is None:
            return StageStatus("missing")
        if not hit:
            try:
                pod = self._pod_answer(self._read_pod(ns, spec.pod_name))
            except NotFoundError:
                return StageStatus("missing")
        st, container = stage_status_from_pod(pod)
        if st.phase == "failed" and container and self.fetch_logs:
            # a terminated container's log no longer changes: read it once per pod (by UID)
            uid = str((pod.get("metadata") or {}).get("uid") or "")
            memo_key = (uid, container)
            tail = self._log_tails.get(memo_key) if uid else None
            if tail is None:
                tail = self._log_tail(spec.pod_name, container)
                if uid:
                    with self._lock:
                        if len(self._log_tails) >= 1024:
                            self._log_tails.clear()
                        self._log_tails[memo_key] = tail
            if tail:
                st = StageStatus(st.phase, st.exit_code, st.reason, redact(tail), st.started)
        return st

    def _log_tail(self, pod: str, container: str) -> str:
        what = f"log of {pod}/{container}"
        try:
            if self._thin:
                data = self._send("GET", f"/api/v1/namespaces/{_q(self.namespace)}/pods/{_q(pod)}/log", what,
                                  query=[("container", container), ("limitBytes", 16384),
                                         ("tailLines", LOG_TAIL_LINES)], timeout=(5, 10))
            else:
                data = self._raw(self._core.read_namespaced_pod_log, what, pod, self.namespace, container=container,
                                 tail_lines=LOG_TAIL_LINES, limit_bytes=16384, _request_timeout=(5, 10))
        except ClusterError:
            return ""
        lines = data.decode("utf-8", "replace").splitlines()[-LOG_TAIL_LINES:]
        return "\n".join(lines)

    def delete_stage(self, spec: StageSpec) -> None:
        """Delete the stage pod and its ``<pod>-cm`` ConfigMap (background propagation); absent
        objects are fine. The pod may take its grace period to disappear: :meth:`start_stage` with
        the same spec raises ConflictError until it is gone."""
        ns = self.namespace
        what = f"delete pod {ns}/{spec.pod_name}"
        with contextlib.suppress(NotFoundError):
            if self._thin:
                self._pod_answer(decode(self._send("DELETE", f"/api/v1/namespaces/{_q(ns)}/pods/{_q(spec.pod_name)}",
                                                    what), what))
            else:
                self._pod_answer(self._json(self._core.delete_namespaced_pod, what, spec.pod_name, ns))

    def _pod_answer(self, obj: Obj) -> Obj:
        """A pod the API server returned: kept in the cache (when tracked)."""
        if self.cache is not None and obj.get("kind") == "Pod":
            self.cache.store(PODS, obj)
        return obj

    def delete_stages(self, recipe: str, node: str) -> None:
        """Delete every stage and interrupt pod of ``recipe`` on ``node`` with one delete-collection
        by labels (managed-by, recipe, node) in ``namespace``. The shared package ConfigMaps stay
        (other nodes use them); the run owner's deletion collects them. Nothing to delete is fine."""
        ns = self.namespace
        sel = f"{MANAGED_BY_LABEL}={COMPONENT},{RECIPE_LABEL}={label_value(recipe)},{NODE_LABEL}={label_value(node)}"
        what = f"delete stage pods of {recipe} on {node}"
        with contextlib.suppress(NotFoundError):
            if self._thin:
                self._send("DELETE", f"/api/v1/namespaces/{_q(ns)}/pods", what, query=[("labelSelector", sel)])
            else:
                self._raw(self._core.delete_collection_namespaced_pod, what, ns, label_selector=sel)

    def lifecycles(self) -> set[str]:
        """Port ``lifecycles``: the run ids of the run-owner ConfigMaps in the namespace (one LIST
        by the managed-by label; the owners carry ``data.runId``)."""
        found = self._json(self._core.list_namespaced_config_map, "list run owners", self.namespace,
                           label_selector=f"{MANAGED_BY_LABEL}={COMPONENT},{RUN_ID_LABEL}")
        out = set()
        for cm in found.get("items") or ():
            meta, data = cm.get("metadata") or {}, cm.get("data") or {}
            run_id = data.get("runId")
            if isinstance(run_id, str) and meta.get("name") == run_owner_name(run_id):
                out.add(run_id)
        return out

    def end_run(self, run_id: str, *, if_unused: bool = False) -> None:
        """Port ``end_run``: :meth:`delete_run`; with ``if_unused`` only when no stage pod labelled
        with the lifecycle and not already being deleted is left in the namespace (one LIST by labels)."""
        if if_unused:
            sel = f"{MANAGED_BY_LABEL}={COMPONENT},{RUN_ID_LABEL}={label_value(run_id)}"
            left = self._json(self._core.list_namespaced_pod, f"list stage pods of run {run_id}", self.namespace,
                              label_selector=sel)
            if any(not (p.get("metadata") or {}).get("deletionTimestamp") for p in left.get("items") or ()):
                return  # a pod not being deleted is left (a failed node's logs): keep the lifecycle
        self.delete_run(run_id)

    def delete_run(self, run_id: str) -> None:
        """Delete the run-owner ConfigMap ``run-<run id>`` (background propagation: the garbage
        collector then deletes the run's remaining stage pods and ConfigMaps). Absent is fine."""
        name = run_owner_name(run_id)
        with contextlib.suppress(NotFoundError):
            self._raw(
                self._core.delete_namespaced_config_map,
                f"delete configmap {self.namespace}/{name}",
                name,
                self.namespace,
                propagation_policy="Background",
            )
        with self._lock:
            self._run_owners.pop(run_id, None)
            self._config_maps.clear()

    # -- leases ---------------------------------------------------------------------------------

    def get_lease(self, name: str) -> LeaseInfo | None:
        """The Lease ``namespace/name``, or None."""
        try:
            return _lease_from(
                self._json(self._coordination.read_namespaced_lease, f"get lease {name}", name, self.namespace)
            )
        except NotFoundError:
            return None

    def _lease_body(self, name: str, spec: LeaseSpec, resource_version: str | None = None) -> Any:
        meta: Obj = {"name": name, "namespace": self.namespace, "labels": {MANAGED_BY_LABEL: COMPONENT}}
        if resource_version is not None:
            meta["resourceVersion"] = resource_version
        body: Obj = {"holderIdentity": spec.holder, "leaseDurationSeconds": spec.duration_seconds,
                     "leaseTransitions": spec.transitions}
        if spec.acquired is not None:
            body["acquireTime"] = _micro_time(spec.acquired)
        if spec.renewed is not None:
            body["renewTime"] = _micro_time(spec.renewed)
        return client.V1Lease.model_validate({"metadata": meta, "spec": body})

    def create_lease(self, name: str, spec: LeaseSpec) -> LeaseInfo:
        """Port ``LeaseStore.create_lease``: POST the Lease (creating the namespace first when it
        is missing). Raises ConflictError (409 AlreadyExists)."""
        self._ensure_namespace()
        return _lease_from(self._json(self._coordination.create_namespaced_lease, f"create lease {name}",
                                      self.namespace, self._lease_body(name, spec)))

    def replace_lease(self, name: str, spec: LeaseSpec, resource_version: str) -> LeaseInfo:
        """Port ``LeaseStore.replace_lease``: PUT with ``metadata.resourceVersion`` (the API server
        answers 409 → ConflictError when it changed; 404 → NotFoundError)."""
        return _lease_from(self._json(self._coordination.replace_namespaced_lease, f"update lease {name}", name,
                                      self.namespace, self._lease_body(name, spec, resource_version)))

    def delete_lease(self, name: str, resource_version: str) -> None:
        """Port ``LeaseStore.delete_lease``: DELETE with ``preconditions.resourceVersion`` (409 →
        ConflictError when it changed; 404 → NotFoundError)."""
        preconditions = client.V1Preconditions(resource_version=resource_version)
        self._raw(self._coordination.delete_namespaced_lease, f"delete lease {name}", name, self.namespace,
                  body=client.V1DeleteOptions(preconditions=preconditions))


class _Fetched:
    """A whole answer body read over the keep-alive transport, as ``_raw`` reads a urllib3
    response (``data``, ``release_conn``)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def release_conn(self) -> None:
        """Nothing to release: the transport keeps its connection."""


def _q(part: str) -> str:
    """One path segment, percent-encoded as the generated methods do (nothing left unescaped but
    the unreserved characters)."""
    return quote(part, safe="")

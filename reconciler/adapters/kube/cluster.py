"""The real cluster: the official ``kubernetes`` client's connection, and the role adapters that
play the cluster ports on it (:class:`KubeCluster`).

Every request goes through the client (:class:`~reconciler.adapters.kube.api.KubeApi`); API and
transport failures become the :mod:`reconciler.errors` vocabulary at that one place. The roles:
:class:`~reconciler.adapters.kube.nodes.KubeNodes` and
:class:`~reconciler.adapters.kube.nodes.KubeEvents`, :class:`~reconciler.adapters.kube.pods.KubePods`,
:class:`~reconciler.adapters.kube.stages.KubeStages`, :class:`~reconciler.adapters.kube.leases.KubeLeases`
and :class:`~reconciler.adapters.kube.configmaps.KubeConfigMaps` (the control store), bundled as
:attr:`KubeCluster.ports`. With a :class:`~reconciler.adapters.kube.cache.WatchStore`, the node, pod
and stage roles read what the watch streams (:meth:`KubeCluster.watch`) already hold.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.config.config_exception import ConfigException

from reconciler.adapters.kube import auth as kubeauth
from reconciler.adapters.kube.api import KubeApi
from reconciler.adapters.kube.cache import WatchStore
from reconciler.adapters.kube.configmaps import KubeConfigMaps
from reconciler.adapters.kube.leases import KubeLeases
from reconciler.adapters.kube.nodes import KubeEvents, KubeNodes
from reconciler.adapters.kube.pods import KubePods
from reconciler.adapters.kube.stagepod import (
    DEFAULT_AGENT_IMAGE,
    DEFAULT_COPY_DIR_ROOT,
    DEFAULT_LOG_DIR_ROOT,
    DEFAULT_NAMESPACE,
    DEFAULT_PAUSE_IMAGE,
)
from reconciler.adapters.kube.stages import KubeStages, Namespace
from reconciler.adapters.kube.watch import KubeWatch
from reconciler.errors import ClusterError
from reconciler.ports import ClusterPorts

# The client's config loaders carry no annotations; call them through typed names.
_new_client_from_config: Callable[..., client.ApiClient] = config.new_client_from_config
_load_incluster_config: Callable[..., None] = config.load_incluster_config

DEFAULT_POOL_SIZE = 32  # HTTP connections kept open (the client's default is 5 x CPUs)


def _configuration(pool_size: int) -> client.Configuration:
    """A client Configuration whose urllib3 pool keeps ``pool_size`` connections (>= 1)."""
    cfg = client.Configuration()
    cfg.connection_pool_maxsize = max(1, pool_size)
    return cfg


def impersonate_on(api: client.ApiClient, user: str, group: str | None = None) -> None:
    """Make every request of ``api`` act as ``user`` (and ``group``): the ``Impersonate-User`` and
    ``Impersonate-Group`` headers kubectl's ``--as``/``--as-group`` send (the Kubernetes API's user
    impersonation; the kubeconfig's user needs the ``impersonate`` verb). One group: the client
    sends a header once per name."""
    headers: dict[str, str] = api.default_headers
    headers["Impersonate-User"] = user
    if group:
        headers["Impersonate-Group"] = group


class KubeCluster:
    """A Kubernetes API server through the official client, and the roles played on it.

    Construct with :meth:`from_kubeconfig` (``--kubeconfig``/``--context``; ``path`` None = the
    ``KUBECONFIG`` variable or ``~/.kube/config``), :meth:`in_cluster` (service-account token of
    the pod) or directly from an ``ApiClient``. Thread-safe.

    Attributes: ``nodes``, ``pods``, ``stages``, ``leases``, ``events``, ``controls`` (the roles),
    :attr:`ports` (them bundled), ``store`` (None: every read is a request), ``namespace``,
    ``server_dry_run`` (True: node and control-store writes go with ``dryRun=All``).
    """

    def __init__(self, api_client: client.ApiClient, *, namespace: str = DEFAULT_NAMESPACE,
                 agent_image: str = DEFAULT_AGENT_IMAGE, pause_image: str = DEFAULT_PAUSE_IMAGE,
                 copy_dir_root: str = DEFAULT_COPY_DIR_ROOT, log_dir_root: str = DEFAULT_LOG_DIR_ROOT,
                 image_pull_secret: str | None = None, request_timeout: float = 30.0, page_size: int = 500,
                 fetch_logs: bool = True, store: WatchStore | None = None) -> None:
        """``request_timeout``: read timeout per request in seconds (connect timeout 10 s).
        ``page_size``: ``limit`` of each LIST page. ``fetch_logs``: read the failing container's
        log tail of a failed stage. ``store``: what the watch streams hold (:meth:`watch` feeds it)."""
        self.api = KubeApi(api_client, request_timeout, page_size)
        self.namespace, self.store = namespace, store
        self.server_dry_run = False
        ns = Namespace(self.api, namespace)
        self.nodes = KubeNodes(self.api, store, dry_run=lambda: self.server_dry_run)
        self.pods = KubePods(self.api, store)
        self.stages = KubeStages(self.api, ns, store, agent_image=agent_image, pause_image=pause_image,
                                 copy_dir_root=copy_dir_root, log_dir_root=log_dir_root,
                                 image_pull_secret=image_pull_secret, fetch_logs=fetch_logs)
        self.leases = KubeLeases(self.api, ns)
        self.events = KubeEvents(self.api)
        self.controls = KubeConfigMaps(self.api, dry_run=lambda: self.server_dry_run)

    @property
    def api_client(self) -> client.ApiClient:
        """The client's ApiClient (its configuration: server, TLS, proxy, credentials)."""
        return self.api.api_client

    @property
    def ports(self) -> ClusterPorts:
        """Every cluster role, as the core takes them."""
        return ClusterPorts(nodes=self.nodes, pods=self.pods, stages=self.stages, leases=self.leases,
                            events=self.events, controls=self.controls, namespace=self.namespace)

    def watch(self, *, max_sleep: float = 30.0) -> KubeWatch:
        """The watch streams feeding :attr:`store`, as the run's change feed (``max_sleep``: its
        longest single wait); they start with its first wait (or ``start()``). Close it when done.
        Raises ClusterError when this cluster keeps no store."""
        if self.store is None:
            raise ClusterError("this cluster keeps no watch store (make it with store=WatchStore(namespace))")
        return KubeWatch(self.api, self.store, max_sleep=max_sleep)

    def server_version(self) -> dict[str, str]:
        """The API server's build (``GET /version``, as ``kubectl version`` shows it): its string
        fields, e.g. ``{"gitVersion": "v1.36.3", "platform": "linux/amd64", ...}``. Needs no RBAC
        rule (``system:public-info-viewer`` allows it). Raises ClusterError."""
        obj = self.api.json("GET", "/version", "get server version")
        return {k: v for k, v in obj.items() if isinstance(v, str)}

    @classmethod
    def from_kubeconfig(
        cls, path: str | None = None, context: str | None = None, *, pool_size: int = DEFAULT_POOL_SIZE,
        impersonate: tuple[str, str | None] | None = None, **kwargs: Any
    ) -> KubeCluster:
        """From a kubeconfig file (``path`` None: ``$KUBECONFIG`` or ``~/.kube/config``) and
        optional ``context``; ``kwargs`` go to the constructor. ``pool_size``: HTTP connections
        kept open to the API server; give at least the number of threads that call the cluster at
        once plus one per watch stream, or surplus connections are closed after each request and
        the next one pays a new TLS handshake. ``impersonate``: (user, group or None) every request
        acts as (kubectl's ``--as``/``--as-group``, :func:`impersonate_on`). With neither ``path``, ``context``,
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
        # $KUBECONFIG read now, as kubectl does (the client reads it once, when it is imported)
        path = path or os.environ.get("KUBECONFIG") or None
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
        if impersonate is not None:
            impersonate_on(api, *impersonate)
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
        return cls(client.ApiClient(cfg), **kwargs)

    def close(self) -> None:
        """Close the client's HTTP connection pool."""
        closer: Callable[[], None] = self.api_client.close
        closer()

    def __enter__(self) -> KubeCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

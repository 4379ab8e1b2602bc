"""Launch a real Kubernetes control plane on loopback for the e2e tests (no Docker, no downloads).

Recipe: /work/shared/design/controlplane.md §1.6 (flags, readiness, teardown) and §3 (kwok stages).
Binaries come from ``tests/controlplane/build.sh`` (``$K8S_TESTBIN`` or
``~/.cache/k8s-testbin/v1.36.3``, subdirectory ``bin``): etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kwok.

What :class:`ControlPlane` does, in order:

1. a working directory in ``/dev/shm`` (tmpfs: fsync is free), free loopback ports (bind to port 0);
2. credentials: a CA and an apiserver serving certificate (``cryptography`` when importable, else the
   apiserver's own self-signed pair from ``--cert-dir``), a service-account RSA key (``cryptography``
   or the ``openssl`` CLI), a token file with ``test-admin`` (group ``system:masters``) and
   ``reconciler`` (no groups; for RBAC tests: bind roles to user ``reconciler``);
3. etcd → kube-apiserver → kube-controller-manager → kube-scheduler → kwok, each logging to
   ``<workdir>/logs/<name>.log``, each waited for (etcd ``/health``, apiserver ``/readyz``, KCM and
   scheduler ``/healthz``);
4. a smoke check proving the controllers work end to end: a kwok node becomes Ready (kwok), a
   one-replica Deployment gets a pod (KCM) that is scheduled (scheduler) and Running (kwok), and a
   PodDisruptionBudget gets ``status.observedGeneration`` (KCM disruption controller);
5. teardown stops exactly the processes it started, newest first, SIGTERM then SIGKILL after 10 s,
   also when start-up failed half way; then removes the working directory (unless ``keep``).

Test-only helper :class:`RebootEmulator` plays the part of the kubelet/host for reboot interrupts
(see its docstring). Manual use::

    python -m tests.controlplane.cluster up [--nodes 12] [--keep]

prints the kubeconfig path and runs until Ctrl-C.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

K8S_VERSION = "v1.36.3"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kubectl")

#: Audit policy of the test control plane: writes only, request metadata only, once per request.
AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [create, update, patch, delete, deletecollection]
  - level: None
"""
HERE = Path(__file__).resolve().parent
STAGES_FILE = HERE / "kwok-stages.yaml"

#: KCM controllers (canonical IDs, cmd/kube-controller-manager/names). Deliberately without
#: node-lifecycle (its not-ready taints would fight simulated reboots) and taint-eviction.
KCM_CONTROLLERS = (
    "disruption-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "replicaset-controller",
    "deployment-controller",
    "daemonset-controller",
    "statefulset-controller",
    "job-controller",
    "ttl-after-finished-controller",
    "pod-garbage-collector-controller",
    "root-ca-certificate-publisher-controller",
)

#: Label of interrupt pods (set by reconciler.adapters.kube.cluster) and the reboot type's value.
INTERRUPT_TYPE_LABEL = "reconciler.nodewright.dev/interrupt-type"
MANAGED_BY = "app.kubernetes.io/managed-by=node-reconciler"


class ControlPlaneError(RuntimeError):
    """The control plane could not be started; the message names the component and quotes its log."""


def binaries_dir() -> Path:
    """Where build.sh puts the binaries: ``$K8S_TESTBIN/bin`` or ``~/.cache/k8s-testbin/<ver>/bin``."""
    root = os.environ.get("K8S_TESTBIN") or str(Path.home() / ".cache" / "k8s-testbin" / K8S_VERSION)
    return Path(root) / "bin"


def missing_binaries(bin_dir: Path | None = None) -> list[str]:
    """Names of the required binaries that are absent (or not executable) in ``bin_dir``."""
    d = bin_dir or binaries_dir()
    return [b for b in BINARIES if not os.access(d / b, os.X_OK)]


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1 (bind to 0, read it, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _load_prctl() -> Any:
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux/glibc: no parent-death signal
        return None


_PRCTL = _load_prctl()
_PR_SET_PDEATHSIG = 1
_SIGTERM = int(signal.SIGTERM)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Ask Linux to SIGTERM the child when its parent dies (prctl PR_SET_PDEATHSIG), so a killed
    pytest leaves no apiserver behind. Only calls a function resolved before the fork (no imports,
    no locks in the child)."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, _SIGTERM)


# ------------------------------------------------------------------------------------------------
# credentials


def _write_credentials(w: Path) -> tuple[Path, Path | None, Path | None]:
    """Write ``sa.key`` and, when ``cryptography`` is importable, ``pki/ca.crt`` plus
    ``pki/apiserver.{crt,key}`` (SANs 127.0.0.1, localhost, kubernetes.default.svc).

    Returns (sa_key, serving_cert or None, serving_key or None); None means "let the apiserver
    self-sign into --cert-dir" (then ``pki/apiserver.crt`` holds the cert followed by its CA).
    """
    pki = w / "pki"
    pki.mkdir(parents=True, exist_ok=True)
    sa_key = w / "sa.key"
    try:
        import datetime as dt
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError:
        subprocess.run(["openssl", "genrsa", "-out", str(sa_key), "2048"], check=True, capture_output=True)
        return sa_key, None, None

    def pem_key(k: rsa.RSAPrivateKey) -> bytes:
        return k.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        )

    sa_key.write_bytes(pem_key(rsa.generate_private_key(public_exponent=65537, key_size=2048)))
    now = dt.datetime.now(dt.UTC)
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "node-reconciler-e2e-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=7))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=7))
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    x509.DNSName("localhost"),
                    x509.DNSName("kubernetes.default.svc"),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    (pki / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (pki / "apiserver.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (pki / "apiserver.key").write_bytes(pem_key(key))
    return sa_key, pki / "apiserver.crt", pki / "apiserver.key"


def _kubeconfig(server: str, ca: Path, token: str, user: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user}}],
        "current-context": "e2e",
    }


# ------------------------------------------------------------------------------------------------
# processes


@dataclass
class _Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path


@dataclass
class ControlPlane:
    """One control plane on 127.0.0.1. Use as a context manager, or call :meth:`start`/:meth:`stop`.

    Attributes after :meth:`start`: ``kubeconfig`` (admin, group system:masters),
    ``reconciler_kubeconfig`` (user ``reconciler``, no groups, no permissions until a test binds
    some), ``server`` (https URL), ``workdir``, ``logs`` (directory of per-process logs),
    ``ports`` (component → port), ``start_seconds`` (wall time of :meth:`start`).
    """

    bin_dir: Path = field(default_factory=binaries_dir)
    stages_file: Path = STAGES_FILE
    keep: bool = False
    base_dir: str | None = None
    workdir: Path = field(init=False, default=Path())
    kubeconfig: Path = field(init=False, default=Path())
    reconciler_kubeconfig: Path = field(init=False, default=Path())
    server: str = field(init=False, default="")
    ca_file: Path = field(init=False, default=Path())
    admin_token: str = field(init=False, default="")
    reconciler_token: str = field(init=False, default="")
    ports: dict[str, int] = field(init=False, default_factory=dict)
    start_seconds: float = field(init=False, default=0.0)
    _procs: list[_Proc] = field(init=False, default_factory=list)

    @property
    def logs(self) -> Path:
        """Directory holding ``<component>.log``."""
        return self.workdir / "logs"

    @property
    def audit_log(self) -> Path:
        """kube-apiserver's audit log (JSON lines, one per write request; :data:`AUDIT_POLICY`)."""
        return self.workdir / "logs" / "audit.jsonl"

    def audit_events(self) -> list[dict[str, Any]]:
        """Every audit event written so far (a line cut short at the end of the file is skipped)."""
        out: list[dict[str, Any]] = []
        if not self.audit_log.exists():
            return out
        for line in self.audit_log.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds (user + system) each running component has used so far, by name (from
        ``/proc/<pid>/stat``; empty where /proc is unavailable)."""
        tick = os.sysconf("SC_CLK_TCK")
        out: dict[str, float] = {}
        for p in self._procs:
            try:
                fields = Path(f"/proc/{p.popen.pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[p.name] = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        return out

    # -- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout: float = 120.0) -> None:
        """Start every component and wait until the smoke check passes.

        Raises:
            ControlPlaneError: a binary is missing, a process exited, or readiness timed out
                (message quotes the tail of that component's log). Everything already started
                is stopped before raising.
        """
        missing = missing_binaries(self.bin_dir)
        if missing:
            raise ControlPlaneError(
                f"control-plane binaries missing in {self.bin_dir}: {', '.join(missing)} "
                "(build them with tests/controlplane/build.sh)"
            )
        t0 = time.monotonic()
        deadline = t0 + timeout
        base = self.base_dir or ("/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
        self.workdir = Path(tempfile.mkdtemp(prefix="reconciler-e2e-", dir=base))
        self.logs.mkdir()
        atexit.register(self.stop)  # safety net if the caller never reaches stop()
        try:
            self._start(deadline)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - t0

    def _start(self, deadline: float) -> None:
        w = self.workdir
        p = {k: free_port() for k in ("etcd", "etcd-peer", "apiserver", "kcm", "scheduler")}
        self.ports = p
        sa_key, cert, key = _write_credentials(w)
        self.admin_token = secrets.token_hex(24)
        self.reconciler_token = secrets.token_hex(24)
        tokens = w / "tokens.csv"
        tokens.write_text(
            f'{self.admin_token},test-admin,test-admin,"system:masters"\n'
            f"{self.reconciler_token},reconciler,reconciler\n"
        )
        tokens.chmod(0o600)

        # etcd
        etcd_url = f"http://127.0.0.1:{p['etcd']}"
        peer_url = f"http://127.0.0.1:{p['etcd-peer']}"
        self._spawn(
            "etcd",
            [
                "--name=n0",
                f"--data-dir={w / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=n0={peer_url}",
                "--listen-metrics-urls=",
                "--logger=zap",
                "--log-level=warn",
                "--unsafe-no-fsync",
            ],
        )
        self._wait("etcd", deadline, lambda: b'"health":"true"' in _http_get(f"{etcd_url}/health"))

        # kube-apiserver (controlplane.md §1.6 step 3)
        tls = [f"--tls-cert-file={cert}", f"--tls-private-key-file={key}"] if cert and key else []
        # an audit log of every write (Metadata level): the server's own witness of who wrote what
        # when, for tests that count writes after a lost Lease (tests/e2e/test_fence_e2e.py)
        audit_policy = w / "audit-policy.yaml"
        audit_policy.write_text(AUDIT_POLICY)
        self._spawn(
            "kube-apiserver",
            [
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={p['apiserver']}",
                f"--cert-dir={w / 'pki'}",
                *tls,
                f"--token-auth-file={tokens}",
                "--authorization-mode=RBAC",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-account-key-file={sa_key}",
                f"--service-account-signing-key-file={sa_key}",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--endpoint-reconciler-type=none",
                "--allow-privileged=true",
                "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
                f"--audit-policy-file={audit_policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-maxsize=0",
                # /debug/pprof for looking into the apiserver's CPU (bench/controlplane.py BENCH_PPROF)
                f"--profiling={'true' if os.environ.get('CONTROLPLANE_PROFILING') else 'false'}",
                "--v=1",
            ],
        )
        self.server = f"https://127.0.0.1:{p['apiserver']}"
        self.ca_file = w / "pki" / ("ca.crt" if cert else "apiserver.crt")
        self._wait("kube-apiserver", deadline, lambda: self._api_get("/readyz") == b"ok")

        self.kubeconfig = w / "kubeconfig"
        self.kubeconfig.write_text(json.dumps(_kubeconfig(self.server, self.ca_file, self.admin_token, "admin")))
        self.reconciler_kubeconfig = w / "kubeconfig-reconciler"
        self.reconciler_kubeconfig.write_text(
            json.dumps(_kubeconfig(self.server, self.ca_file, self.reconciler_token, "reconciler"))
        )
        for f in (self.kubeconfig, self.reconciler_kubeconfig):
            f.chmod(0o600)

        # kube-controller-manager (step 5) and kube-scheduler (step 6)
        self._spawn(
            "kube-controller-manager",
            [
                f"--kubeconfig={self.kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={p['kcm']}",
                "--leader-elect=false",
                f"--controllers={','.join(KCM_CONTROLLERS)}",
                f"--service-account-private-key-file={sa_key}",
                f"--root-ca-file={self.ca_file}",
                "--v=1",
            ],
        )
        self._spawn(
            "kube-scheduler",
            [
                f"--kubeconfig={self.kubeconfig}",
                f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={p['scheduler']}",
                "--leader-elect=false",
                "--v=1",
            ],
        )
        self._wait("kube-controller-manager", deadline, lambda: _https_healthz(p["kcm"]))
        self._wait("kube-scheduler", deadline, lambda: _https_healthz(p["scheduler"]))

        # kwok (step 7): HOME=workdir so no developer ~/.kwok/kwok.yaml leaks in; no server port.
        self._spawn(
            "kwok",
            [
                f"--kubeconfig={self.kubeconfig}",
                f"--config={self.stages_file}",
                "--manage-all-nodes=true",
                "--cidr=10.244.0.0/16",
                "--node-ip=127.0.0.1",
                "--v=INFO",
            ],
            env={"HOME": str(w)},
        )
        self._smoke(deadline)

    def _spawn(self, name: str, args: list[str], env: Mapping[str, str] | None = None) -> None:
        log = self.logs / f"{name}.log"
        full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.workdir), **(env or {})}
        with open(log, "wb") as out:
            popen = subprocess.Popen(
                [str(self.bin_dir / name), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=full_env,
                cwd=self.workdir,
                preexec_fn=_die_with_parent,  # only prctl between fork and exec
            )
        self._procs.append(_Proc(name, popen, log))

    def _wait(self, name: str, deadline: float, ready: Any) -> None:
        """Poll ``ready()`` every 0.2 s until it is true; fail when the process exits or time is up."""
        last = ""
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                if ready():
                    return
            except Exception as e:  # not up yet: connection refused, 503, TLS not ready...
                last = f"{type(e).__name__}: {e}"
            time.sleep(0.2)
        raise ControlPlaneError(f"{name} not ready before the deadline (last probe: {last})\n{self.log_tail(name)}")

    def check_alive(self) -> None:
        """Raise ControlPlaneError (quoting its log) if a started component has exited."""
        for proc in self._procs:
            rc = proc.popen.poll()
            if rc is not None:
                raise ControlPlaneError(f"{proc.name} exited with code {rc}\n{self.log_tail(proc.name)}")

    def log_tail(self, name: str, lines: int = 25) -> str:
        """The last ``lines`` lines of a component's log, indented, for error messages."""
        try:
            text = (self.logs / f"{name}.log").read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return "    (no log)"
        return "\n".join(f"    {x}" for x in text)

    def _api_get(self, path: str) -> bytes:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        req = urllib.request.Request(self.server + path, headers={"Authorization": f"Bearer {self.admin_token}"})
        with urllib.request.urlopen(req, context=ctx, timeout=5) as r:
            return bytes(r.read())

    def stop(self) -> None:
        """Stop every process this object started, newest first: SIGTERM, then SIGKILL after 10 s.
        Removes the working directory unless ``keep`` (logs are then left in ``logs``)."""
        for proc in reversed(self._procs):
            if proc.popen.poll() is None:
                proc.popen.send_signal(signal.SIGTERM)
                try:
                    proc.popen.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.popen.kill()
                    proc.popen.wait(timeout=10)
        self._procs.clear()
        atexit.unregister(self.stop)
        if not self.keep and self.workdir != Path() and self.workdir.exists():
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- API helpers (kubernetes client, tests only) ----------------------------------------

    def api_client(self, reconciler_user: bool = False) -> Any:
        """A fresh ``kubernetes.client.ApiClient`` for the admin (or the ``reconciler`` user)."""
        from kubernetes import config

        path = self.reconciler_kubeconfig if reconciler_user else self.kubeconfig
        return config.new_client_from_config(config_file=str(path), persist_config=False)

    def create_nodes(self, names: list[str], labels: Mapping[str, str] | None = None, wait: float = 30.0) -> None:
        """Create kwok nodes (annotation ``kwok.x-k8s.io/node: fake``) and wait until each is Ready."""
        from kubernetes import client

        with self.api_client() as api:
            core = client.CoreV1Api(api)
            for n in names:
                core.create_node(
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "metadata": {
                            "name": n,
                            "labels": {"kubernetes.io/hostname": n, "kubernetes.io/os": "linux", **(labels or {})},
                            "annotations": {"kwok.x-k8s.io/node": "fake"},
                        },
                        "spec": {"providerID": f"kwok://{n}"},
                    }
                )
            end = time.monotonic() + wait
            pending = set(names)
            while pending and time.monotonic() < end:
                self.check_alive()
                for n in list(pending):
                    node = core.read_node(n)
                    conds = node.status.conditions or []
                    if any(c.type == "Ready" and c.status == "True" for c in conds) and node.status.node_info:
                        pending.discard(n)
                if pending:
                    time.sleep(0.2)
            if pending:
                raise ControlPlaneError(f"kwok did not make nodes Ready: {sorted(pending)}\n{self.log_tail('kwok')}")

    def _smoke(self, deadline: float) -> None:
        """kwok node Ready; Deployment pod created (KCM), scheduled (scheduler), Running (kwok);
        PDB status observed (KCM disruption controller). Cleans up after itself."""
        from kubernetes import client

        ns, node = "controlplane-smoke", "controlplane-smoke-node"
        self.create_nodes([node], wait=max(1.0, deadline - time.monotonic()))
        with self.api_client() as api:
            core, apps, policy = client.CoreV1Api(api), client.AppsV1Api(api), client.PolicyV1Api(api)
            core.create_namespace({"metadata": {"name": ns}})
            labels = {"app": "smoke"}
            apps.create_namespaced_deployment(
                ns,
                {
                    "metadata": {"name": "smoke"},
                    "spec": {
                        "replicas": 1,
                        "selector": {"matchLabels": labels},
                        "template": {
                            "metadata": {"labels": labels},
                            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
                        },
                    },
                },
            )
            policy.create_namespaced_pod_disruption_budget(
                ns, {"metadata": {"name": "smoke"}, "spec": {"minAvailable": 0, "selector": {"matchLabels": labels}}}
            )

            def pod_running() -> bool:
                pods = core.list_namespaced_pod(ns).items
                return any(p.status.phase == "Running" and p.spec.node_name == node for p in pods)

            def pdb_observed() -> bool:
                b = policy.read_namespaced_pod_disruption_budget("smoke", ns)
                return bool(b.status and b.status.observed_generation == b.metadata.generation)

            self._wait("kube-scheduler", deadline, pod_running)
            self._wait("kube-controller-manager", deadline, pdb_observed)
            core.delete_namespace(ns)
            # delete the node only once its pod is gone: kwok stops managing pods of deleted nodes
            self._wait("kwok", deadline, lambda: not core.list_namespaced_pod(ns).items)
            core.delete_node(node)


def _http_get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=3) as r:
        return bytes(r.read())


def _https_healthz(port: int) -> bool:
    """``/healthz`` of KCM or scheduler (self-signed in-memory serving cert on loopback: not verified)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=ctx, timeout=3) as r:
            return bytes(r.read()) == b"ok"
    except urllib.error.URLError:
        return False


# ------------------------------------------------------------------------------------------------
# reboot emulation (the part a real kubelet + host would play)


class RebootEmulator:
    """Background thread standing in for the host during ``reboot`` interrupts on kwok nodes.

    On a real node the interrupt pod's agent runs ``reboot``: the host goes down, the container dies
    with exit code 143, and the node comes back with a new ``status.nodeInfo.bootID``. A kwok pod
    Stage cannot touch its node, so this thread polls (every ``interval`` s) for pods labelled
    ``app.kubernetes.io/managed-by=node-reconciler`` and ``reconciler.nodewright.dev/interrupt-type=
    reboot`` that are bound to a node and not terminating, and once per (node, pod name):

    1. annotates the node ``sim.test/reboot: requested`` (+ ``sim.test/reboot-for``): the kwok
       stages turn it NotReady, then Ready with a fresh bootID (kwok-stages.yaml);
    2. annotates the pod ``sim.test/outcome: fail``, ``sim.test/exit-code: "143"``,
       ``sim.test/run-for: <reboot_for>``: kwok fails its interrupt container with 143 at about the
       time the node is back.

    ``reboots`` lists (node, pod) pairs handled, in order. Lives under tests/ only.
    """

    def __init__(self, cp: ControlPlane, reboot_for: str = "2s", interval: float = 0.3) -> None:
        self.cp = cp
        self.reboot_for = reboot_for
        self.interval = interval
        self.reboots: list[tuple[str, str]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reboot-emulator", daemon=True)

    def start(self) -> RebootEmulator:
        """Start the thread; returns self."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread and wait for it (at most a few seconds)."""
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        """The polling loop. Answers are read as raw JSON (orjson), not as ``kubernetes`` client
        models: this thread runs in the test's (or the bench's) process, and model conversion of
        every in-flight interrupt pod three times a second held the GIL longer than the
        reconciler's own threads did (py-spy, 500-node bench), inflating what they measured."""
        import orjson
        from kubernetes import client

        seen: set[tuple[str, str]] = set()
        with self.cp.api_client() as api:
            core = client.CoreV1Api(api)
            while not self._stop.wait(self.interval):
                try:
                    raw = core.list_pod_for_all_namespaces(
                        label_selector=f"{MANAGED_BY},{INTERRUPT_TYPE_LABEL}=reboot", _request_timeout=5,
                        _preload_content=False,
                    )
                    try:
                        pods = orjson.loads(raw.data).get("items") or []
                    finally:
                        raw.release_conn()
                    for pod in pods:
                        meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
                        node = spec.get("nodeName")
                        key = (node or "", meta.get("name", ""))
                        if not node or key in seen or meta.get("deletionTimestamp") is not None:
                            continue
                        if status.get("phase") not in ("Pending", "Running"):
                            continue
                        seen.add(key)
                        core.patch_node(
                            node,
                            {
                                "metadata": {
                                    "annotations": {
                                        "sim.test/reboot": "requested",
                                        "sim.test/reboot-for": self.reboot_for,
                                    }
                                }
                            },
                            _preload_content=False,
                        ).drain_conn()
                        core.patch_namespaced_pod(
                            meta["name"],
                            meta["namespace"],
                            {
                                "metadata": {
                                    "annotations": {
                                        "sim.test/outcome": "fail",
                                        "sim.test/exit-code": "143",
                                        "sim.test/run-for": self.reboot_for,
                                    }
                                }
                            },
                            _preload_content=False,
                        ).drain_conn()
                        self.reboots.append(key)
                except Exception as e:  # keep running; the tests see .errors
                    self.errors.append(f"{type(e).__name__}: {str(e)[:300]}")


class BootIdRecorder:
    """Background watch recording every ``status.nodeInfo.bootID`` each node showed, in order (the
    witness that an emulated reboot changes a node's boot ID exactly once). Use as a context
    manager; :meth:`changes` counts a node's boot-ID changes since the recorder started.

    The first value of a node is the one the initial list showed; every later distinct value is a
    change. Lives under tests/ only.
    """

    def __init__(self, cp: ControlPlane, label_selector: str = "") -> None:
        self.cp = cp
        self.label_selector = label_selector
        self.boots: dict[str, list[str]] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._synced = threading.Event()
        self._thread = threading.Thread(target=self._run, name="boot-id-recorder", daemon=True)

    def __enter__(self) -> BootIdRecorder:
        self._thread.start()
        if not self._synced.wait(30):
            raise ControlPlaneError(f"boot-ID recorder did not list the nodes: {self.errors}")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def changes(self, node: str) -> int:
        """How many times ``node``'s boot ID changed since the recorder started."""
        return max(0, len(self.boots.get(node, [])) - 1)

    def _see(self, obj: Mapping[str, Any]) -> None:
        name = (obj.get("metadata") or {}).get("name", "")
        boot = ((obj.get("status") or {}).get("nodeInfo") or {}).get("bootID")
        seen = self.boots.setdefault(name, [])
        if boot and (not seen or seen[-1] != boot):
            seen.append(boot)

    def _run(self) -> None:
        import orjson
        from kubernetes import client
        from kubernetes.watch.watch import iter_resp_lines

        with self.cp.api_client() as api:
            core = client.CoreV1Api(api)
            rv = ""
            while not self._stop.is_set():
                try:
                    if not rv:
                        raw = core.list_node(label_selector=self.label_selector, _preload_content=False)
                        doc = orjson.loads(raw.data)
                        for item in doc.get("items") or []:
                            self._see(item)
                        rv = doc["metadata"]["resourceVersion"]
                        self._synced.set()
                    resp = core.list_node(label_selector=self.label_selector, watch=True, resource_version=rv,
                                          allow_watch_bookmarks=True, timeout_seconds=5, _preload_content=False)
                    try:
                        for line in iter_resp_lines(resp):
                            if not line.strip():
                                continue
                            ev = orjson.loads(line)
                            obj = ev.get("object") or {}
                            if ev.get("type") == "ERROR":
                                rv = ""  # expired: list again
                                break
                            rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                            if ev.get("type") in ("ADDED", "MODIFIED"):
                                self._see(obj)
                    finally:
                        resp.release_conn()
                except Exception as e:  # keep watching; the tests see .errors
                    self.errors.append(f"{type(e).__name__}: {str(e)[:300]}")
                    time.sleep(0.2)


# ------------------------------------------------------------------------------------------------
# manual use


@contextlib.contextmanager
def running(nodes: int = 0, keep: bool = False, reboot_emulator: bool = True) -> Iterator[ControlPlane]:
    """Context manager: a started control plane with ``nodes`` kwok nodes ``node-00``... and a
    running :class:`RebootEmulator`; everything is stopped on exit."""
    cp = ControlPlane(keep=keep)
    cp.start()
    emu: RebootEmulator | None = None
    try:
        if nodes:
            cp.create_nodes([f"node-{i:02d}" for i in range(nodes)])
        if reboot_emulator:
            emu = RebootEmulator(cp).start()
        yield cp
    finally:
        if emu:
            emu.stop()
        cp.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.controlplane.cluster up [--nodes N] [--keep]``: start, print, wait for Ctrl-C."""
    ap = argparse.ArgumentParser(prog="python -m tests.controlplane.cluster")
    ap.add_argument("command", choices=["up", "check"], help="up: run until Ctrl-C; check: start, report, stop")
    ap.add_argument("--nodes", type=int, default=12, help="kwok nodes to create (default 12)")
    ap.add_argument("--keep", action="store_true", help="keep the working directory (logs) after stopping")
    args = ap.parse_args(argv)
    missing = missing_binaries()
    if missing:
        print(
            f"missing binaries in {binaries_dir()}: {', '.join(missing)}; run tests/controlplane/build.sh",
            file=sys.stderr,
        )
        return 3
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with running(nodes=args.nodes, keep=args.keep) as cp:
        print(f"control plane up in {cp.start_seconds:.1f} s; {args.nodes} kwok nodes")
        print(f"export KUBECONFIG={cp.kubeconfig}")
        print(f"reconciler (no-permission) user: {cp.reconciler_kubeconfig}")
        print(f"logs: {cp.logs}")
        sys.stdout.flush()
        if args.command == "up":
            with contextlib.suppress(KeyboardInterrupt):
                while not stop.wait(1.0):
                    pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

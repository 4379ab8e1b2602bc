"""Stage pods as Kubernetes objects (pure): the Pod a stage or interrupt runs in, NodeWright's
package-pod shape (semantics-nodewright.md §3.1/§3.2), and what a stage pod's status means.

:func:`build_stage_pod` makes the Pod (JSON dict) :class:`reconciler.adapters.kube.cluster.KubeCluster`
creates; :func:`stage_status_from_pod` reads a stage pod back as a
:class:`reconciler.ports.StageStatus`. Names and labels: :func:`stage_labels`,
:func:`config_map_name`, :func:`run_owner_name`, :func:`label_value`, :func:`dns_name`. No I/O; the
kube adapter re-exports every public name here.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import replace
from typing import Any

from reconciler.adapters.kube.objects import parse_time
from reconciler.model.nodestate import PREFIX, RUNTIME_REQUIRED_TAINT_KEY
from reconciler.model.redact import redact
from reconciler.model.selector import UNSCHEDULABLE_TAINT_KEY
from reconciler.ports import StageSpec, StageStatus

Obj = dict[str, Any]

DEFAULT_NAMESPACE = "node-reconciler"
DEFAULT_AGENT_IMAGE = "nvcr.io/nvidia/skyhook/agent:v6.4.1"
DEFAULT_PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
#: Host directory under which package files are copied (NodeWright ``COPY_DIR_ROOT``).
DEFAULT_COPY_DIR_ROOT = "/var/lib/skyhook"
#: Host directory for agent step logs (NodeWright ``AGENT_LOG_ROOT``).
DEFAULT_LOG_DIR_ROOT = "/var/log/skyhook"
COMPONENT = "node-reconciler"

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
RECIPE_LABEL = f"{PREFIX}/recipe"
PACKAGE_LABEL = f"{PREFIX}/package"
STAGE_LABEL = f"{PREFIX}/stage"
NODE_LABEL = f"{PREFIX}/node"
RUN_ID_LABEL = f"{PREFIX}/run-id"
#: On interrupt pods only: the recipe's interrupt type (reboot, service, restartAllServices, noop).
INTERRUPT_TYPE_LABEL = f"{PREFIX}/interrupt-type"
#: JSON summary of the StageSpec a pod was made from.
SPEC_ANNOTATION = f"{PREFIX}/stage-spec"

INTERRUPT_STAGES = frozenset({"interrupt", "uninstall-interrupt"})
#: Our interrupt types → the agent's (semantics-nodewright.md §3.2/§3.3).
AGENT_INTERRUPT_TYPES = {
    "reboot": "node_restart",
    "service": "service_restart",
    "restartAllServices": "restart_all_services",
    "noop": "no_op",
}
#: Container waiting reasons that mean the image cannot be pulled or used.
IMAGE_PULL_FAILURES = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def label_value(text: str) -> str:
    """``text`` as a valid label value: unchanged when valid; otherwise characters outside
    ``[A-Za-z0-9_.-]`` become ``-``, the result is cut to 54 characters and ``-`` + 8 hex of the
    original's SHA-256 is appended (so distinct inputs stay distinct)."""
    text = str(text)  # a closed-vocabulary value (StrEnum) becomes its plain text
    if len(text) <= 63 and _LABEL_VALUE.fullmatch(text):
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    clean = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[:54].strip("-_.")
    return f"{clean}-{digest}" if clean else digest


def dns_name(text: str, limit: int = 63) -> str:
    """A DNS-1123 label (lower case, ``[a-z0-9-]``, ≤ ``limit``) derived from ``text``, hashed when cut."""
    clean = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    if len(clean) <= limit and clean == text:
        return clean
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{clean[: limit - 9].strip('-')}-{digest}"


def run_owner_name(run_id: str) -> str:
    """Name of the run-owner ConfigMap of ``run_id``: ``run-<run id>`` (sanitised, ≤ 63); an id
    that already starts with ``run-`` is used as it is."""
    return dns_name(run_id if run_id.startswith("run-") else f"run-{run_id}")


def config_map_name(spec: StageSpec) -> str:
    """Name of the ConfigMap holding ``spec.config_map``, shared by every stage pod of that package
    version and configuration (NodeWright keeps one ``<skyhook>-<pkg>-<version>`` ConfigMap too):
    ``<recipe>-<package>-<version>-<8 hex of the data's digest>``, so a configuration change gets a
    new object and a stage never reads another's data. Created once per run, not once per node."""
    data = json.dumps(dict(spec.config_map), sort_keys=True).encode()
    h = hashlib.sha256(data).hexdigest()[:8]
    return f"{dns_name(f'{spec.recipe}-{spec.package}-{spec.version}', 54)}-{h}"


def copy_dir(spec: StageSpec, root: str = DEFAULT_COPY_DIR_ROOT) -> str:
    """Host directory the package files are copied to: ``<root>/<recipe>/<package>-<version>``."""
    return f"{root.rstrip('/')}/{spec.recipe}/{spec.package}-{spec.version}"


def interrupt_argument(spec: StageSpec) -> str:
    """The agent's 4th interrupt argument: base64 of compact JSON ``{"type", "services"}`` with the
    agent's type names (``node_restart``...), semantics-nodewright.md §3.2.

    Raises:
        ValueError: ``spec.interrupt`` is None.
    """
    if spec.interrupt is None:
        raise ValueError(f"stage {spec.stage} of {spec.package} on {spec.node} has no interrupt")
    payload = {"type": AGENT_INTERRUPT_TYPES[spec.interrupt.type], "services": list(spec.interrupt.services)}
    return base64.b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode()


def is_interrupt(spec: StageSpec) -> bool:
    """True for interrupt pods (stage ``interrupt``/``uninstall-interrupt``)."""
    return spec.stage in INTERRUPT_STAGES


def stage_labels(spec: StageSpec) -> dict[str, str]:
    """Labels of a stage pod and its ConfigMap (values made label-safe)."""
    labels = {
        MANAGED_BY_LABEL: COMPONENT,
        RECIPE_LABEL: label_value(spec.recipe),
        PACKAGE_LABEL: label_value(spec.package),
        STAGE_LABEL: label_value(spec.stage),
        NODE_LABEL: label_value(spec.node),
        RUN_ID_LABEL: label_value(spec.run_id),
    }
    if is_interrupt(spec) and spec.interrupt is not None:
        labels[INTERRUPT_TYPE_LABEL] = str(spec.interrupt.type)
    return labels


def spec_summary(spec: StageSpec, agent_image: str) -> str:
    """JSON stored in the pod's ``stage-spec`` annotation (what the pod was made from)."""
    summary: Obj = {
        "recipe": spec.recipe,
        "package": spec.package,
        "version": spec.version,
        "stage": spec.stage,
        "node": spec.node,
        "image": spec.pull_ref,
        "agentImage": agent_image,
        "runId": spec.run_id,
        "attempt": spec.attempt,
    }
    if spec.rerun:
        summary["rerun"] = spec.rerun
    if spec.interrupt is not None:
        summary["interrupt"] = spec.interrupt.model_dump(exclude_defaults=True)
    if spec.config_map:
        summary["configDigest"] = hashlib.sha256(
            json.dumps(dict(spec.config_map), sort_keys=True).encode()
        ).hexdigest()[:16]
    return json.dumps(summary, sort_keys=True, separators=(",", ":"))


def build_stage_pod(
    spec: StageSpec,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    agent_image: str = DEFAULT_AGENT_IMAGE,
    pause_image: str = DEFAULT_PAUSE_IMAGE,
    copy_dir_root: str = DEFAULT_COPY_DIR_ROOT,
    log_dir_root: str = DEFAULT_LOG_DIR_ROOT,
    owner: Obj | None = None,
    image_pull_secret: str | None = None,
) -> Obj:
    """The Pod (JSON dict) running ``spec`` on its node, NodeWright's shape (semantics §3.1/§3.2).

    * ``spec.nodeName`` pinned (no scheduler); hostPID, hostNetwork; every container privileged;
      ``restartPolicy: Never`` (a retry is a new pod with the next ``attempt``); no service-account
      token; ``terminationGracePeriodSeconds`` from ``spec.grace_seconds``.
    * Tolerations: ``node.kubernetes.io/unschedulable`` and the runtime-required taint (Exists, any
      effect), ``node.kubernetes.io/not-ready``/``unreachable`` NoExecute (Exists, as DaemonSet pods:
      an interrupt pod must survive its own reboot), plus ``spec.tolerations``.
    * Volume ``host-root``: hostPath ``/`` at ``/root`` (HostToContainer propagation).
    * Stage pod init containers: ``<pkg>-init`` (package image, copies ``/skyhook-package/*`` to
      ``/root<copyDir>``), ``<pkg>-<stage>`` (agent ``[<stage>, /root, <copyDir>]``),
      ``<pkg>-<stage>check`` (agent ``[<stage>-check, /root, <copyDir>]``). With a non-empty
      ``config_map`` the ConfigMap ``<pod>-cm`` is mounted at ``/skyhook-package/configmaps`` in the
      copy container, so it lands in ``<copyDir>/configmaps``.
    * Interrupt pod (stage interrupt/uninstall-interrupt): one init container ``interrupt`` (agent
      ``[interrupt, /root, <copyDir>, <base64 JSON>]``), see :func:`interrupt_argument`.
    * Main container: pause image (100m/20Mi), keeps the pod alive once the init containers are done.
    * Agent env: package ``env`` + ``SKYHOOK_LOG_DIR``, ``SKYHOOK_ROOT_DIR``, ``COPY_RESOLV=false``,
      ``SKYHOOK_RESOURCE_ID=<recipe>-<run id>_<package>_<version>`` (the agent runs each interrupt
      once per resource ID, so a re-created interrupt pod of the same run does not reboot twice).
    * ``spec.resources`` → requests/limits of the package and agent containers.

    Raises:
        ValueError: an interrupt stage without ``spec.interrupt``.
    """
    agent = spec.agent_image or agent_image
    cdir = copy_dir(spec, copy_dir_root)
    privileged = {"privileged": True}
    root_mount = {"name": "host-root", "mountPath": "/root", "mountPropagation": "HostToContainer"}
    env: list[Obj] = []
    for e in spec.env:
        item: Obj = {"name": e.name}
        if e.valueFrom is not None:
            item["valueFrom"] = e.valueFrom
        else:
            item["value"] = e.value or ""
        env.append(item)
    env += [
        {"name": "SKYHOOK_LOG_DIR", "value": f"{log_dir_root.rstrip('/')}/{spec.recipe}"},
        {"name": "SKYHOOK_ROOT_DIR", "value": f"{copy_dir_root.rstrip('/')}/{spec.recipe}"},
        {"name": "COPY_RESOLV", "value": "false"},
        {"name": "SKYHOOK_RESOURCE_ID", "value": f"{spec.recipe}-{spec.run_id}_{spec.package}_{spec.version}"},
    ]
    resources: Obj = {}
    if spec.resources is not None:
        r = spec.resources
        resources = {
            "requests": {"cpu": r.cpuRequest, "memory": r.memoryRequest},
            "limits": {"cpu": r.cpuLimit, "memory": r.memoryLimit},
        }

    def agent_container(name: str, args: list[str]) -> Obj:
        c: Obj = {
            "name": name[:63],
            "image": agent,
            "imagePullPolicy": "IfNotPresent",
            "args": args,
            "env": env,
            "securityContext": privileged,
            "volumeMounts": [root_mount],
        }
        if resources:
            c["resources"] = resources
        return c

    volumes: list[Obj] = [{"name": "host-root", "hostPath": {"path": "/", "type": "Directory"}}]
    if is_interrupt(spec):
        init = [agent_container("interrupt", ["interrupt", "/root", cdir, interrupt_argument(spec)])]
    else:
        copy: Obj = {
            "name": f"{spec.package}-init"[:63],
            "image": spec.pull_ref,
            "imagePullPolicy": "IfNotPresent",
            "command": [
                "/bin/sh",
                "-c",
                'set -e; mkdir -p "/root${COPY_DIR}"; cp -r /skyhook-package/* "/root${COPY_DIR}"',
            ],
            "env": [{"name": "COPY_DIR", "value": cdir}],
            "securityContext": privileged,
            "volumeMounts": [root_mount],
        }
        if resources:
            copy["resources"] = resources
        if spec.config_map:
            volumes.append({"name": "package-config", "configMap": {"name": config_map_name(spec)}})
            copy["volumeMounts"] = [root_mount, {"name": "package-config", "mountPath": "/skyhook-package/configmaps"}]
        stage = str(spec.stage)
        init = [
            copy,
            agent_container(f"{spec.package}-{stage}", [stage, "/root", cdir]),
            agent_container(f"{spec.package}-{stage}check", [f"{stage}-check", "/root", cdir]),
        ]
    tolerations: list[Obj] = [
        {"key": UNSCHEDULABLE_TAINT_KEY, "operator": "Exists"},
        {"key": RUNTIME_REQUIRED_TAINT_KEY, "operator": "Exists"},
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    ]
    for t in spec.tolerations:
        tolerations.append({k: v for k, v in t.model_dump().items() if v not in (None, "")})
    pod_spec: Obj = {
        "nodeName": spec.node,
        "hostPID": True,
        "hostNetwork": True,
        "dnsPolicy": "ClusterFirstWithHostNet",
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "tolerations": tolerations,
        "volumes": volumes,
        "initContainers": init,
        "containers": [
            {
                "name": "pause",
                "image": pause_image,
                "imagePullPolicy": "IfNotPresent",
                "resources": {
                    "requests": {"cpu": "100m", "memory": "20Mi"},
                    "limits": {"cpu": "100m", "memory": "20Mi"},
                },
            }
        ],
    }
    if spec.grace_seconds is not None:
        pod_spec["terminationGracePeriodSeconds"] = spec.grace_seconds
    if image_pull_secret:
        pod_spec["imagePullSecrets"] = [{"name": image_pull_secret}]
    meta: Obj = {
        "name": spec.pod_name,
        "namespace": namespace,
        "labels": stage_labels(spec),
        "annotations": {SPEC_ANNOTATION: spec_summary(spec, agent)},
    }
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}


#: What :func:`deleted_by` says of a pod deleted by a plain delete request: the API keeps no record
#: of who sent it on the pod (its ``managedFields`` record writes, not deletes), only the audit log.
PLAIN_DELETE = "a delete request (the API records no deleter on the pod; the cluster's audit log does)"


def deleted_by(pod: Obj) -> str:
    """Who can be seen deleting ``pod`` (``""`` when it has no ``metadata.deletionTimestamp``): the
    reason and message of its ``DisruptionTarget`` condition, which the component that deletes it
    sets — the Eviction API (``EvictionByEvictionAPI``), the pod garbage collector
    (``DeletionByPodGC``), the taint manager (``DeletionByTaintManager``), the scheduler's
    preemption (``PreemptionByScheduler``), the kubelet (``TerminationByKubelet``) — else
    :data:`PLAIN_DELETE`. Cluster text: masked (:func:`~reconciler.model.redact.redact`) and cut."""
    meta = pod.get("metadata") or {}
    if not isinstance(meta, dict) or not meta.get("deletionTimestamp"):
        return ""
    for c in (pod.get("status") or {}).get("conditions") or ():
        if isinstance(c, dict) and c.get("type") == "DisruptionTarget" and c.get("status") == "True":
            reason, msg = str(c.get("reason") or "DisruptionTarget"), str(c.get("message") or "").strip()
            return redact(f"{reason}: {msg}"[:300] if msg else reason)
    return PLAIN_DELETE


def stage_status_from_pod(pod: Obj) -> tuple[StageStatus, str]:
    """:func:`_stage_status` with who is deleting the pod (:func:`deleted_by`) when it is being deleted."""
    st, container = _stage_status(pod)
    who = deleted_by(pod)
    return (replace(st, deleting=who) if who else st), container


def _stage_status(pod: Obj) -> tuple[StageStatus, str]:
    """Interpret a stage pod (JSON dict) → (StageStatus without log tail, failing container name or "").

    * succeeded: phase Succeeded, or every init container terminated with exit code 0;
    * failed: the first init container that terminated non-zero (its exact exit code and reason);
      phase Failed for another reason (e.g. ``DeadlineExceeded``, node shutdown; the first
      terminated container's code if any);
    * pending with the waiting reason as ``reason`` and its message as ``log_tail``: an init
      container waiting with an image failure (``ErrImagePull``, ``ImagePullBackOff``,
      ``InvalidImageName``, ``ErrImageNeverPull``; the kubelet retries the pull, the executor fails
      the stage after its image-pull grace, decision (e));
    * running: some container started; pending otherwise.
    """
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    phase = status.get("phase") or "Pending"
    started = parse_time(status.get("startTime"))
    inits = [s for s in status.get("initContainerStatuses") or () if isinstance(s, dict)]
    for s in inits:
        state = s.get("state") or {}
        term = state.get("terminated")
        if term and int(term.get("exitCode", 0)) != 0:
            reason = str(term.get("reason") or "Error")
            msg = str(term.get("message") or "").strip()
            return (
                StageStatus(
                    "failed",
                    exit_code=int(term["exitCode"]),
                    reason=redact(f"{reason}: {msg}"[:300] if msg else reason),
                    started=started,
                ),
                str(s.get("name") or ""),
            )
        waiting = state.get("waiting")
        if waiting and waiting.get("reason") in IMAGE_PULL_FAILURES:
            # the kubelet keeps retrying a pull: pending with the waiting reason, so the stage fails
            # once the executor's image-pull grace is over (reconciler.execute.decide.judge_stage)
            msg = str(waiting.get("message") or "").strip()
            return StageStatus("pending", None, str(waiting["reason"]), redact(msg[:2000]), started=started), ""
    if phase == "Succeeded":
        return StageStatus("succeeded", 0, started=started), ""
    n_init = len(spec.get("initContainers") or ())
    done = [s for s in inits if ((s.get("state") or {}).get("terminated") or {}).get("exitCode") == 0]
    if n_init and len(done) >= n_init:
        return StageStatus("succeeded", 0, started=started), ""
    if phase == "Failed":
        code: int | None = None
        name = ""
        for s in (*inits, *(status.get("containerStatuses") or ())):
            term = (s.get("state") or {}).get("terminated")
            if term and int(term.get("exitCode", 0)) != 0:
                code, name = int(term["exitCode"]), str(s.get("name") or "")
                break
        reason = str(status.get("reason") or "Failed")
        msg = str(status.get("message") or "").strip()
        return StageStatus("failed", code, redact(f"{reason}: {msg}"[:300] if msg else reason), started=started), name
    any_started = any(
        (s.get("state") or {}).get("running") or (s.get("state") or {}).get("terminated")
        for s in (*inits, *(status.get("containerStatuses") or ()))
    )
    if phase == "Running" or any_started:
        return StageStatus("running", started=started), ""
    return StageStatus("pending", started=started), ""

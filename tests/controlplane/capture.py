"""Objects and error answers captured from the real control plane, as fixtures for the table tests
of the pure kube functions (issue 13): ``node_from``, ``pod_from``, ``pdb_from``,
``stage_status_from_pod`` and ``translate_api_error`` read what kube-apiserver, the controllers
and kwok really write, not what a test author thinks they write.

    python -m tests.controlplane.capture [--out tests/data/kube]   # starts its own control plane

writes one JSON file per capture into ``--out``. Objects are the API server's JSON exactly as
served (``managedFields`` dropped: they carry nothing the reconciler reads and change with every
field manager); an error answer is ``{"status": int, "headers": {...}, "body": <Status JSON>}``
with the headers the reconciler reads (``Content-Type``, ``Retry-After``). ``capture(cp, out)``
does the same on a running :class:`~tests.controlplane.cluster.ControlPlane` (the e2e test
re-captures into a temporary directory and checks the same expectations, so the fixtures in the
repository stay what this Kubernetes version serves).

What is captured (namespace ``capture``, one kwok node ``capture-node``):
* ``node.json``: the kwok node, Ready, with a bootID.
* ``pod-web.json``: a Deployment's pod, Running and Ready (owner: its ReplicaSet).
* ``pod-pending.json``: a bare pod kwok leaves alone (``sim.test/frozen``): Pending, not Ready.
* ``pdb-web.json``: ``minAvailable: 2`` over the two pods, status computed by the disruption
  controller (0 disruptions allowed).
* ``error-evict-429.json``: evicting a pod the budget protects; ``error-evict-500.json``: the same
  with a second budget selecting the pod; ``error-get-404.json``; ``error-patch-409.json`` (a
  node PATCH with a stale resourceVersion); ``error-create-409.json`` (AlreadyExists);
  ``error-create-422.json`` (an invalid pod name).
* ``stagepod-succeeded.json``, ``stagepod-failed.json`` (exit code 3), ``stagepod-pullerror.json``:
  stage pods from ``build_stage_pod`` on the kwok node, as kwok's stages (kwok-stages.yaml) leave
  them.
"""

from __future__ import annotations

import argparse
import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.controlplane.cluster import ControlPlane, ControlPlaneError

Obj = dict[str, Any]
NS = "capture"
NODE = "capture-node"
HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE.parent / "data" / "kube"
KEPT_HEADERS = ("Content-Type", "Retry-After")


class _Api:
    """Raw HTTPS calls as the admin: (status, headers, body bytes); no client models in between."""

    def __init__(self, cp: ControlPlane) -> None:
        self.server = cp.server
        self.token = cp.admin_token
        self.ctx = ssl.create_default_context(cafile=str(cp.ca_file))

    def call(self, method: str, path: str, body: Obj | None = None,
             content_type: str = "application/json") -> tuple[int, dict[str, str], bytes]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=30) as resp:
                return resp.status, dict(resp.headers.items()), resp.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers.items()), e.read()

    def ok(self, method: str, path: str, body: Obj | None = None, content_type: str = "application/json") -> Obj:
        status, _h, raw = self.call(method, path, body, content_type)
        if not 200 <= status <= 299:
            raise ControlPlaneError(f"{method} {path}: {status} {raw[:500]!r}")
        out: Obj = json.loads(raw)
        return out

    def error(self, method: str, path: str, body: Obj | None = None, content_type: str = "application/json") -> Obj:
        status, headers, raw = self.call(method, path, body, content_type)
        if 200 <= status <= 299:
            raise ControlPlaneError(f"{method} {path}: expected an error answer, got {status}")
        kept = {k: v for k, v in headers.items() if k.lower() in {h.lower() for h in KEPT_HEADERS}}
        return {"status": status, "headers": kept, "body": json.loads(raw)}


def _clean(obj: Obj) -> Obj:
    obj.get("metadata", {}).pop("managedFields", None)
    return obj


def _wait(what: str, cond: Callable[[], Obj | None], timeout: float = 60.0) -> Obj:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = cond()
        if got is not None:
            return got
        time.sleep(0.2)
    raise ControlPlaneError(f"timed out waiting for {what}")


def _stage_pod(outcome: dict[str, str], package: str) -> Obj:
    from reconciler.adapters.kube.stagepod import build_stage_pod
    from reconciler.model.recipe import EnvVar
    from reconciler.ports import StageSpec

    env = tuple(EnvVar(name=k, value=v) for k, v in outcome.items())
    spec = StageSpec(recipe="capture", node=NODE, package=package, version="1.0.0", stage="apply",
                     pull_ref=f"ghcr.io/example/{package}:1.0.0", run_id="capture", env=env)
    return build_stage_pod(spec, namespace=NS)


def capture(cp: ControlPlane, out: Path) -> list[Path]:
    """Capture every fixture (module docstring) from the running control plane ``cp`` into
    ``out`` (created); returns the files written. Leaves nothing behind: the namespace and the
    node are deleted at the end. Raises ControlPlaneError when the cluster does not get there."""
    api = _Api(cp)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def save(name: str, obj: Obj) -> None:
        path = out / name
        path.write_text(json.dumps(obj, indent=1, sort_keys=True) + "\n")
        written.append(path)

    cp.create_nodes([NODE])
    api.ok("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
    try:
        labels = {"app": "web"}
        api.ok("POST", f"/apis/apps/v1/namespaces/{NS}/deployments", {
            "metadata": {"name": "web"},
            "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"nodeSelector": {"kubernetes.io/hostname": NODE},
                                           "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}})
        api.ok("POST", f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets", {
            "metadata": {"name": "web"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": labels}}})

        def web_pods_ready() -> Obj | None:
            pods = api.ok("GET", f"/api/v1/namespaces/{NS}/pods?labelSelector=app%3Dweb")["items"]
            ready = [p for p in pods if any(c.get("type") == "Ready" and c.get("status") == "True"
                                            for c in (p.get("status") or {}).get("conditions") or ())]
            return {"items": ready} if len(ready) == 2 else None

        pods = _wait("two Ready web pods", web_pods_ready)["items"]
        pod = sorted(pods, key=lambda p: p["metadata"]["name"])[0]
        save("pod-web.json", _clean(pod))

        def pdb_observed() -> Obj | None:
            b = api.ok("GET", f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/web")
            st = b.get("status") or {}
            return b if st.get("observedGeneration") == b["metadata"]["generation"] and st.get("currentHealthy") == 2 \
                else None

        save("pdb-web.json", _clean(_wait("the disruption controller's status", pdb_observed)))
        node = api.ok("GET", f"/api/v1/nodes/{NODE}")
        save("node.json", _clean(node))

        name = pod["metadata"]["name"]
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": NS}}
        evict = f"/api/v1/namespaces/{NS}/pods/{name}/eviction"
        save("error-evict-429.json", api.error("POST", evict, eviction))
        api.ok("POST", f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets", {
            "metadata": {"name": "web-too"}, "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels}}})
        save("error-evict-500.json", api.error("POST", evict, eviction))
        save("error-get-404.json", api.error("GET", f"/api/v1/namespaces/{NS}/pods/missing"))
        save("error-patch-409.json", api.error("PATCH", f"/api/v1/nodes/{NODE}",
                                               {"metadata": {"resourceVersion": "1", "labels": {"x": "y"}}},
                                               "application/merge-patch+json"))
        bare: Obj = {"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": "pending", "annotations": {"sim.test/frozen": "true"}},
                     "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}
        api.ok("POST", f"/api/v1/namespaces/{NS}/pods", bare)
        save("error-create-409.json", api.error("POST", f"/api/v1/namespaces/{NS}/pods", bare))
        bad = json.loads(json.dumps(bare))
        bad["metadata"]["name"] = "Bad_Name"
        save("error-create-422.json", api.error("POST", f"/api/v1/namespaces/{NS}/pods", bad))
        time.sleep(1.0)  # kwok would have started it by now if it were not frozen
        save("pod-pending.json", _clean(api.ok("GET", f"/api/v1/namespaces/{NS}/pods/pending")))

        stages = {
            "stagepod-succeeded.json": ({}, "base", lambda p: p["status"].get("phase") == "Running" and all(
                "terminated" in (s.get("state") or {}) for s in p["status"].get("initContainerStatuses") or [{}])),
            "stagepod-failed.json": ({"SIM_TEST_OUTCOME": "fail", "SIM_TEST_EXIT_CODE": "3"}, "drv",
                                     lambda p: p["status"].get("phase") == "Failed"),
            "stagepod-pullerror.json": ({"SIM_TEST_OUTCOME": "pull-error"}, "tuned", lambda p: any(
                (s.get("state") or {}).get("waiting", {}).get("reason") in ("ImagePullBackOff", "ErrImagePull")
                for s in p["status"].get("initContainerStatuses") or ())),
        }
        names = {}
        for file, (outcome, package, _done) in stages.items():
            body = _stage_pod(outcome, package)
            names[file] = body["metadata"]["name"]
            api.ok("POST", f"/api/v1/namespaces/{NS}/pods", body)
        for file, (_o, _p, done) in stages.items():
            path = f"/api/v1/namespaces/{NS}/pods/{names[file]}"

            def finished(path: str = path, done: Callable[[Obj], bool] = done) -> Obj | None:
                p = api.ok("GET", path)
                return p if p.get("status") and done(p) else None

            save(file, _clean(_wait(f"stage pod {names[file]} ({file})", finished)))
    finally:  # the frozen pod is force-deleted: kwok leaves it alone, so nothing would finish its deletion
        api.call("DELETE", f"/api/v1/namespaces/{NS}/pods/pending?gracePeriodSeconds=0")
        api.call("DELETE", f"/api/v1/namespaces/{NS}")
        # the node goes only once its pods are gone (kwok stops finishing the deletion of pods on
        # a deleted node), so a shared control plane is left as it was found
        end = time.monotonic() + 60
        while time.monotonic() < end:
            status, _h, raw = api.call("GET", f"/api/v1/namespaces/{NS}/pods")
            if status == 404 or (status == 200 and not json.loads(raw).get("items")):
                break
            time.sleep(0.2)
        api.call("DELETE", f"/api/v1/nodes/{NODE}")
    return written


def main(argv: list[str] | None = None) -> int:
    """Start a control plane, capture into ``--out``, stop it."""
    ap = argparse.ArgumentParser(prog="python -m tests.controlplane.capture", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    a = ap.parse_args(argv)
    cp = ControlPlane()
    cp.start()
    try:
        for p in capture(cp, a.out):
            print(p)
    finally:
        cp.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``reconciler controller`` on a real control plane: join-to-untainted time minus the stage
durations, and the controller's CPU and memory idle and during a rollout of N kwok nodes.

    python bench/controller.py [--nodes 500] [--joins 5] [--budget 50]

Starts the control plane of tests/controlplane (needs the binaries of build.sh), applies the two
CRDs, creates N kwok nodes, starts one controller host process (admin kubeconfig,
``--source crd``), applies a NodeRecipe of two packages (stage pods of 1 s on kwok; no reboot)
selecting every node, and samples the controller's CPU (``/proc/<pid>/stat``) and RSS until the
object is Ready; then idle for 20 s; then ``--joins`` nodes join one at a time with the
runtime-required taint, each timed from its creation to the taint's removal, minus the time its
stage pods took (from the pod's first sighting to every init container terminated, by a watch).
Prints a table; numbers, not assertions.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

SHA = "sha256:" + "e" * 64
TAINT = "reconciler.nodewright.dev/runtime-required"


def _cpu(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def _rss(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _recipe(budget: int) -> dict[str, Any]:
    env = [{"name": "SIM_TEST_RUN_FOR", "value": "1s"}]
    return {"apiVersion": "reconciler.nodewright.dev/v1alpha1", "kind": "NodeRecipe",
            "metadata": {"name": "bench"},
            "spec": {"version": "1", "nodeSelector": {"matchLabels": {"pool": "bench"}}, "runtimeRequired": True,
                     "interruptionBudget": {"count": budget},
                     "packages": {"base": {"version": "1.0.0", "image": "ghcr.io/example/base", "containerSHA": SHA,
                                           "env": env},
                                  "tune": {"version": "1.0.0", "image": "ghcr.io/example/tune", "containerSHA": SHA,
                                           "dependsOn": {"base": "1.0.0"}, "env": env}}}}


class Sampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop = pid, 0.0, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.5):
            self.peak = max(self.peak, _rss(self.pid))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--joins", type=int, default=5)
    ap.add_argument("--budget", type=int, default=50)
    a = ap.parse_args()
    import yaml
    from kubernetes import client, watch
    from kubernetes.dynamic import DynamicClient

    from tests.controlplane.cluster import ControlPlane

    with ControlPlane() as cp, cp.api_client() as api:
        dyn = DynamicClient(api)
        for f in sorted((ROOT / "charts" / "node-reconciler" / "crds").glob("*.yaml")):
            doc = yaml.safe_load(f.read_text())
            dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"]).create(body=doc)
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": "node-reconciler"}})
        names = [f"bench-{i:04d}" for i in range(a.nodes)]
        for i in range(0, len(names), 100):
            cp.create_nodes(names[i:i + 100], labels={"pool": "bench"}, wait=180)
        time.sleep(3)  # CRDs established
        log = open(cp.logs / "controller.log", "w")  # noqa: SIM115
        proc = subprocess.Popen([sys.executable, "-m", "reconciler", "controller", "--source", "crd", "--kubeconfig",
                                 str(cp.kubeconfig), "--metrics-bind-address", "0", "--health-probe-bind-address",
                                 "0"], env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=log)
        custom = client.CustomObjectsApi(api)
        try:
            time.sleep(5)
            start_cpu, start_rss = _cpu(proc.pid), _rss(proc.pid)
            s = Sampler(proc.pid)
            s.start()
            t0 = time.monotonic()
            custom.create_cluster_custom_object("reconciler.nodewright.dev", "v1alpha1", "noderecipes",
                                                _recipe(a.budget))

            def ready() -> bool:
                st = custom.get_cluster_custom_object("reconciler.nodewright.dev", "v1alpha1", "noderecipes",
                                                      "bench").get("status") or {}
                return any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions", []))

            while not ready():
                if proc.poll() is not None or time.monotonic() - t0 > 3600:
                    raise SystemExit(f"controller ended or timed out; see {cp.logs / 'controller.log'}")
                time.sleep(1)
            wall = time.monotonic() - t0
            roll_cpu = _cpu(proc.pid) - start_cpu
            s.stop.set()
            c0 = _cpu(proc.pid)
            time.sleep(20)
            idle = (_cpu(proc.pid) - c0) / 20
            idle_rss = _rss(proc.pid)
            joins = []
            for j in range(a.joins):
                name = f"join-{j}"
                seen: dict[str, float] = {}
                done: dict[str, float] = {}
                w = watch.Watch()

                def run(node: str = name, w: Any = w, seen: dict[str, float] = seen,
                        done: dict[str, float] = done) -> None:
                    try:
                        for ev in w.stream(core.list_namespaced_pod, "node-reconciler",
                                           field_selector=f"spec.nodeName={node}", timeout_seconds=120):
                            pod = ev["object"]
                            seen.setdefault(pod.metadata.name, time.monotonic())
                            inits = pod.status.init_container_statuses or []
                            if inits and all(x.state and x.state.terminated for x in inits):
                                done.setdefault(pod.metadata.name, time.monotonic())
                    except Exception:  # the watch ends when stopped
                        return

                threading.Thread(target=run, daemon=True).start()
                time.sleep(0.5)
                t = time.monotonic()
                core.create_node({"apiVersion": "v1", "kind": "Node",
                                  "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                                               "labels": {"kubernetes.io/hostname": name, "pool": "bench"}},
                                  "spec": {"providerID": f"kwok://{name}",
                                           "taints": [{"key": TAINT, "value": "true", "effect": "NoSchedule"}]}})
                while any(x.key == TAINT for x in core.read_node(name).spec.taints or []):
                    time.sleep(0.05)
                took = time.monotonic() - t
                w.stop()
                stages = sum(done[p] - seen[p] for p in done)
                joins.append((took, stages))
        finally:
            proc.terminate()
            proc.wait(60)
            log.close()
    print(f"controller, {a.nodes} kwok nodes, 2 packages (1 s stage pods), budget {a.budget}:")
    print(f"  rollout to Ready: {wall:.0f} s wall, controller CPU {roll_cpu:.1f} s "
          f"({1000 * roll_cpu / a.nodes:.0f} ms/node), RSS {start_rss:.0f} MiB before, peak {s.peak:.0f} MiB")
    print(f"  idle after: {100 * idle:.1f} % of a core, RSS {idle_rss:.0f} MiB")
    for i, (took, stages) in enumerate(joins):
        print(f"  join {i}: untainted after {took:.2f} s, stage pods {stages:.2f} s, overhead {took - stages:.2f} s")
    if joins:
        over = sorted(t - s_ for t, s_ in joins)
        print(f"  join-to-untainted minus stages: median {over[len(over) // 2]:.2f} s, max {over[-1]:.2f} s")


if __name__ == "__main__":
    main()

"""``reconciler plan`` against a real API server, as a user runs it: N kwok nodes with 5 pods each,
the CLI as a subprocess, its wall time, CPU (user + system) and peak RSS; growth between sizes.

    python bench/plan_real.py [--nodes 2000,5000] [--pods-per-node 5] [--threads 8]

One control plane (tests/controlplane/cluster.py) serves every size: the nodes and pods of the
first size are created, ``plan`` runs, then the cluster grows to the next size and ``plan`` runs
again. Nodes carry ``pool: bench`` (the recipe's selector: every node is selected and planned);
pods are bound by ``spec.nodeName`` (no scheduler work), owned by a ConfigMap (the garbage
collector keeps them) and made Running by kwok. ``--pythonpath`` runs ``plan`` from other code
trees on the same cluster (e.g. ``git archive`` of an older commit) for before/after figures.
Objects are created through the API by ``--threads`` threads. The child's figures come from
``os.wait4`` (its own rusage, not the benchmark's). Needs the binaries of tests/controlplane/build.sh.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

SHA = "sha256:" + "e" * 64

RECIPE = f"""\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: NodeRecipe
metadata: {{name: bench}}
spec:
  version: "1"
  nodeSelector: {{matchLabels: {{pool: bench}}}}
  deploymentPolicy: bench
  packages:
    tuning:
      version: 1.0.0
      image: ghcr.io/example/tuning
      containerSHA: {SHA}
      configMap: {{sysctl.conf: "vm.swappiness=10"}}
"""

from bench.controlplane import POLICY  # noqa: E402  (the same budget and strategy as the rollout bench)


def _node(name: str, i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name,
                     "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "pool": "bench",
                                "topology.kubernetes.io/zone": f"zone-{i % 4}"},
                     "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "spec": {"providerID": f"kwok://{name}"},
    }


def _pod(node: str, j: int, owner_uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{node}-p{j}", "labels": {"app": f"a{j}"},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                                          "uid": owner_uid, "controller": True}]},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "c", "image": "registry.example/app:1"}]},
    }


def _grow(cp: Any, start: int, stop: int, pods_per_node: int, owner_uid: str, threads: int) -> float:
    """Create nodes ``start..stop-1`` and their pods in parallel; wait until kwok made the last node
    Ready and the last pod Running. Returns the seconds it took."""
    from kubernetes import client

    t0 = time.perf_counter()
    names = [f"bench-{i:05d}" for i in range(start, stop)]
    with cp.api_client() as api:
        api.configuration.connection_pool_maxsize = threads + 2
        api.rest_client.pool_manager.connection_pool_kw["maxsize"] = threads + 2
        core = client.CoreV1Api(api)

        def done(resp: Any) -> None:  # the body read (not decoded) before the connection goes back
            resp.read()
            resp.release_conn()

        def make_node(k: int) -> None:
            done(core.create_node(_node(names[k], start + k), _preload_content=False))

        def make_pods(k: int) -> None:
            for j in range(pods_per_node):
                done(core.create_namespaced_pod("load", _pod(names[k], j, owner_uid), _preload_content=False))

        with ThreadPoolExecutor(threads) as ex:
            list(ex.map(make_node, range(len(names))))
            list(ex.map(make_pods, range(len(names))))
        end = time.monotonic() + 600
        last_node, last_pod = names[-1], f"{names[-1]}-p{pods_per_node - 1}"
        while time.monotonic() < end:
            cp.check_alive()
            node = json.loads(core.read_node(last_node, _preload_content=False).data)
            ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                        for c in (node.get("status") or {}).get("conditions") or ())
            pod = json.loads(core.read_namespaced_pod(last_pod, "load", _preload_content=False).data) \
                if pods_per_node else {"status": {"phase": "Running"}}
            if ready and (pod.get("status") or {}).get("phase") == "Running":
                break
            time.sleep(1.0)
    time.sleep(5.0)  # let kwok finish the stragglers of the last page
    return time.perf_counter() - t0


def run_plan(kubeconfig: Path, work: Path, pythonpath: str = ROOT) -> dict[str, float]:
    """Run ``python -m reconciler plan`` against the cluster as a child process; its wall seconds,
    CPU seconds (user + system) and peak RSS in MB (``ru_maxrss`` of that child, from wait4)."""
    env = {**os.environ, "PYTHONPATH": pythonpath}
    args = [sys.executable, "-m", "reconciler", "plan", str(work / "recipe.yaml"), "--policy",
            str(work / "policy.yaml"), "--kubeconfig", str(kubeconfig), "-o", "json"]
    t0 = time.perf_counter()
    with open(work / "plan.json", "wb") as out, open(work / "plan.err", "wb") as err:
        # cwd: `python -m` puts the working directory first on sys.path, ahead of PYTHONPATH
        child = subprocess.Popen(args, stdout=out, stderr=err, env=env, cwd=pythonpath)
        _pid, status, ru = os.wait4(child.pid, 0)
    wall = time.perf_counter() - t0
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode not in (0, 3):
        raise SystemExit(f"plan exited {child.returncode}: {(work / 'plan.err').read_text()[-2000:]}")
    return {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "peak_mb": ru.ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", default="2000,5000", help="comma-separated cluster sizes, ascending")
    ap.add_argument("--pods-per-node", type=int, default=5)
    ap.add_argument("--threads", type=int, default=8, help="threads creating nodes and pods")
    ap.add_argument("--hold", type=float, default=0.0,
                    help="keep the cluster up this many seconds at the end (prints its kubeconfig; profiling)")
    ap.add_argument("--pythonpath", action="append",
                    help="run plan with this PYTHONPATH (repeatable: compare code trees on the same cluster)")
    a = ap.parse_args()
    sizes = [int(x) for x in a.nodes.split(",")]
    trees = a.pythonpath or [ROOT]
    from kubernetes import client

    from tests.controlplane.cluster import ControlPlane, missing_binaries

    if missing_binaries():
        print("plan against a real control plane: skipped (binaries missing: run tests/controlplane/build.sh)")
        return
    work = Path(os.environ.get("TMPDIR", "/tmp")) / "reconciler-bench-plan"
    work.mkdir(exist_ok=True)
    (work / "recipe.yaml").write_text(RECIPE)
    (work / "policy.yaml").write_text(POLICY)
    rows: list[dict[str, Any]] = []
    with ControlPlane() as cp:
        with cp.api_client() as api:
            core = client.CoreV1Api(api)
            core.create_namespace({"metadata": {"name": "load"}})
            owner = core.create_namespaced_config_map("load", {"metadata": {"name": "owner"}})
        have = 0
        for n in sizes:
            setup = _grow(cp, have, n, a.pods_per_node, owner.metadata.uid, a.threads)
            have = n
            for tree in trees:
                r = run_plan(cp.kubeconfig, work, tree)
                rows.append({"nodes": n, "pods": n * a.pods_per_node, "setup_s": setup, "tree": tree, **r})
                print(f"  {n} nodes ({tree}): setup {setup:.0f} s, plan wall {r['wall_s']:.2f} s, "
                      f"CPU {r['cpu_s']:.2f} s, peak {r['peak_mb']:.0f} MB", file=sys.stderr, flush=True)
        if a.hold:
            print(f"holding {a.hold:g} s: KUBECONFIG={cp.kubeconfig}", file=sys.stderr, flush=True)
            time.sleep(a.hold)
    print(f"plan against a real control plane: kwok nodes with {a.pods_per_node} pods each, "
          "`reconciler plan` as a subprocess")
    print(f"{'nodes':>7} {'pods':>7} {'wall s':>7} {'CPU s':>7} {'peak MB':>8} {'MB/1k nodes':>12} {'growth':>7}"
          + ("  tree" if len(trees) > 1 else ""))
    first: dict[str, dict[str, Any]] = {}
    for r in rows:
        base = first.setdefault(r["tree"], r)
        growth = "" if base is r else (f"{r['wall_s'] / base['wall_s']:.2f}x wall, {r['cpu_s'] / base['cpu_s']:.2f}x "
                                       f"CPU, {r['peak_mb'] / base['peak_mb']:.2f}x peak "
                                       f"({r['nodes'] / base['nodes']:.1f}x nodes)")
        print(f"{r['nodes']:>7} {r['pods']:>7} {r['wall_s']:>7.2f} {r['cpu_s']:>7.2f} {r['peak_mb']:>8.0f} "
              f"{r['peak_mb'] / r['nodes'] * 1000:>12.1f}  {growth}" + (f"  {r['tree']}" if len(trees) > 1 else ""))


if __name__ == "__main__":
    main()

"""Benchmark: ``reconciler plan`` end to end on a kubectl snapshot (``--cluster sim:FILE``).

    python bench/snapshot.py                       # 1,000 / 10,000 / 100,000 nodes, JSON (YAML to 10,000)
    python bench/snapshot.py --sizes 1000 10000 --formats json --repeats 5
    python bench/snapshot.py --keep DIR            # keep the generated dumps and recipe in DIR (reused)
    python bench/snapshot.py --sizes 10000 --formats json json-compact json-reordered   # JSON layouts

Generates what ``kubectl get nodes,pods,pdb -A -o json|yaml`` prints for a fleet of N GPU nodes,
each with 25 packages of recorded state (``reconciler.nodewright.dev/nodeState_bench`` in
NodeWright's JSON shape, and the per-package config digests), 10 % of the nodes one package
behind; 3 pods per node (a DaemonSet pod and two ReplicaSet pods) and one PDB. Then, each in a
fresh process: **load** = ``SimFleet.from_file`` alone (read, parse, validate, index; one run);
**plan** = ``python -m reconciler plan RECIPE --cluster sim:FILE -o json`` as a subprocess,
``--repeats`` times: wall time, CPU time (user + system) and peak RSS of that child alone
(``resource.getrusage(RUSAGE_CHILDREN)`` in a fresh measuring process), reported as min / median
(peak: the largest). ``growth`` compares the median wall and CPU with the previous size of the
same format (10x the nodes: 10x is linear). The load average is printed per row: on a shared
machine wall time is the noisy figure, CPU time the steadier one. The children run with their
bytecode cached (``PYTHONPYCACHEPREFIX`` in the work directory, written by one warm-up run), as an
installed package runs (pip and the image compile it); ``--cold`` measures with
``PYTHONDONTWRITEBYTECODE`` as the environment has it (every module compiled at every start). Numbers, not assertions;
targets (issue #14): 10,000 nodes under 3 s and 100,000 under 30 s end to end on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

PACKAGES = 25
SHA = "sha256:" + "c" * 64
RECIPE = "bench"


def recipe_text() -> str:
    """A NodeRecipe with :data:`PACKAGES` pinned packages (chains of 5 dependencies, one reboot)."""
    lines = ["apiVersion: reconciler.nodewright.dev/v1alpha1", "kind: NodeRecipe",
             f"metadata: {{name: {RECIPE}, version: 1.0.0}}", "spec:", "  deploymentPolicy: bench",
             "  nodeSelector: {matchLabels: {pool: gpu}}",
             "  podNonInterruptLabels: {matchLabels: {workload: training}}", "  packages:"]
    for i in range(PACKAGES):
        lines += [f"    pkg-{i:02d}x:", "      version: 1.0.0", f"      image: ghcr.io/bench/pkg-{i:02d}x",
                  f"      containerSHA: {SHA}", f"      configMap: {{a.conf: value-{i}}}"]
        if i % 5:
            lines.append(f"      dependsOn: {{pkg-{i - 1:02d}x: 1.0.0}}")
        if i == 7:
            lines.append("      interrupt: {type: reboot}")
    return "\n".join(lines) + "\n"


POLICY = """apiVersion: reconciler.nodewright.dev/v1alpha1
kind: DeploymentPolicy
metadata: {name: bench}
spec:
  default:
    budget: {percent: 10}
    strategy:
      exponential: {initialBatch: 1, growthFactor: 2, batchThreshold: 100, failureThreshold: 2, safetyLimit: 50}
"""


def node_annotations(recipe_path: str) -> tuple[dict[str, str], dict[str, str]]:
    """(annotations of an up-to-date node, of a node one package behind), from the loaded recipe."""
    from reconciler.diff import config_digest
    from reconciler.load import load_inputs
    from reconciler.model.nodestate import PackageState, config_key, dump_config_digests, dump_state, state_key

    r = load_inputs([recipe_path], locked=True).recipes[0]
    full = {p.key: PackageState(name=p.name, version=p.version, image=p.image, containerSHA=p.containerSHA,
                                stage="post-interrupt" if p.interrupt else "config", state="complete")
            for p in r.packages.values()}
    digests = dump_config_digests({p.name: config_digest(p) for p in r.packages.values()})
    behind = dict(full)
    old = behind.pop("pkg-03x|1.0.0").model_copy(update={"version": "0.9.0"})
    behind[old.key] = old
    common = {"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true",
              config_key(RECIPE): digests}
    return ({**common, state_key(RECIPE): dump_state(full)}, {**common, state_key(RECIPE): dump_state(behind)})


def _ts(i: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1795000000 + i % 86400))


def fleet_objects(n: int, good: dict[str, str], behind: dict[str, str]) -> list[dict[str, Any]]:
    """The Nodes, Pods and PDB of an ``n``-node fleet, as kubectl prints them (trimmed of
    managedFields and images, which the reconciler never reads)."""
    objs: list[dict[str, Any]] = []
    for i in range(n):
        name = f"gpu-{i:06d}"
        conds = [{"type": t, "status": "False", "reason": f"Kubelet{t}", "message": "ok",
                  "lastHeartbeatTime": _ts(i), "lastTransitionTime": _ts(i)}
                 for t in ("MemoryPressure", "DiskPressure", "PIDPressure")]
        conds.append({"type": "Ready", "status": "True", "reason": "KubeletReady",
                      "message": "kubelet is posting ready status", "lastHeartbeatTime": _ts(i),
                      "lastTransitionTime": _ts(i)})
        objs.append({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"00000000-0000-4000-8000-{i:012d}", "resourceVersion": str(1000 + i),
                         "creationTimestamp": _ts(i),
                         "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                    "kubernetes.io/arch": "amd64", "pool": "gpu",
                                    "topology.kubernetes.io/zone": f"us-east-1{'abcd'[i % 4]}",
                                    "node.kubernetes.io/instance-type": "p5.48xlarge",
                                    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"},
                         "annotations": behind if i % 10 == 0 else good},
            "spec": {"providerID": f"aws:///us-east-1a/i-{i:017x}", "podCIDR": f"10.{i // 65536 % 256}.{i // 256 % 256}"
                     f".{i % 256}/32"},
            "status": {
                "addresses": [{"type": "InternalIP", "address": f"10.1.{i // 256 % 256}.{i % 256}"},
                              {"type": "Hostname", "address": name}],
                "allocatable": {"cpu": "191", "memory": "2097152Mi", "nvidia.com/gpu": "8", "pods": "110"},
                "capacity": {"cpu": "192", "memory": "2097152Mi", "nvidia.com/gpu": "8", "pods": "110"},
                "conditions": conds, "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {"architecture": "amd64", "bootID": f"b007{i:028x}", "containerRuntimeVersion":
                             "containerd://2.1.4", "kernelVersion": "6.8.0-1015-aws", "kubeProxyVersion": "v1.36.3",
                             "kubeletVersion": "v1.36.3", "machineID": f"{i:032x}", "operatingSystem": "linux",
                             "osImage": "Ubuntu 24.04.2 LTS", "systemUUID": f"ec2{i:029x}"}},
        })
    for i in range(n):
        node = f"gpu-{i:06d}"
        for j, (ns, app, kind) in enumerate((("gpu-operator", "nvidia-device-plugin", "DaemonSet"),
                                             ("apps", "web", "ReplicaSet"), ("apps", "worker", "ReplicaSet"))):
            pname = f"{app}-{i:06d}" if kind == "DaemonSet" else f"{app}-7d9f8-{i:06d}"
            objs.append({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pname, "namespace": ns, "uid": f"00000000-0000-4000-9{j:03d}-{i:012d}",
                             "resourceVersion": str(5000 + i), "creationTimestamp": _ts(i),
                             "labels": {"app": app, "pod-template-hash": "7d9f8"},
                             "ownerReferences": [{"apiVersion": "apps/v1", "kind": kind,
                                                  "name": app if kind == "DaemonSet" else f"{app}-7d9f8",
                                                  "uid": f"00000000-0000-4000-a000-{j:012d}", "controller": True,
                                                  "blockOwnerDeletion": True}]},
                "spec": {"nodeName": node, "terminationGracePeriodSeconds": 30, "restartPolicy": "Always",
                         "containers": [{"name": app, "image": f"registry.example/{app}:1.0",
                                         "resources": {"requests": {"cpu": "100m"}}}],
                         "tolerations": [{"operator": "Exists"}] if kind == "DaemonSet" else
                         [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                           "tolerationSeconds": 300}]},
                "status": {"phase": "Running", "startTime": _ts(i), "podIP": f"10.2.{i // 256 % 256}.{i % 256}",
                           "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": _ts(i)}]},
            })
    objs.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                 "metadata": {"name": "web", "namespace": "apps", "generation": 1},
                 "spec": {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": "10%"}})
    return objs


def _reversed_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reversed_keys(value[k]) for k in reversed(value)}
    return [_reversed_keys(v) for v in value] if isinstance(value, list) else value


def write_fleet(path: Path, objs: list[dict[str, Any]], fmt: str) -> None:
    """Write ``objs`` as kubectl does: JSON indented by 4, or YAML (libyaml emitter); or the same
    JSON on one line (``json-compact``, as ``jq -c`` writes it), or on one line with every
    object's keys in reverse order (``json-reordered``, as a script may write it)."""
    from reconciler.adapters.sim.write import dumps_list

    if fmt.startswith("json-"):
        doc = json.loads(dumps_list(objs, "json"))
        if fmt == "json-reordered":
            doc = _reversed_keys(doc)
        path.write_text(json.dumps(doc, separators=(",", ":")), encoding="utf-8")
        return
    path.write_text(dumps_list(objs, fmt), encoding="utf-8")


def _child(argv: list[str]) -> dict[str, float]:
    """Run ``argv``; wall, CPU (user+sys) and peak RSS of that child alone (we are a fresh process)."""
    t0 = time.perf_counter()
    out = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"{argv[:4]} exit {out.returncode}: {out.stderr[-2000:]}")
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024}


def measure(kind: str, fleet: str, recipe: str, policy: str) -> dict[str, float]:
    """One measurement in this (fresh) process: ``load`` or ``plan`` (see the module docstring)."""
    env_py = [sys.executable]
    if kind == "load":
        code = ("import sys,time; t=time.perf_counter(); from reconciler.adapters.sim.fleet import SimFleet; "
                "f=SimFleet.from_file(sys.argv[1]); f.list_nodes(); f.list_pods(); f.list_pdbs(); "
                "print(time.perf_counter()-t)")
        return _child([*env_py, "-c", code, fleet])
    return _child([*env_py, "-m", "reconciler", "plan", recipe, "--policy", policy, "--cluster", f"sim:{fleet}",
                   "-o", "json"])


def _sub(kind: str, fleet: Path, recipe: Path, policy: Path) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, "--one", kind, str(fleet), str(recipe), str(policy)],
                         capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _fmt(values: list[float], digits: int = 2) -> str:
    return f"{min(values):.{digits}f}/{statistics.median(values):.{digits}f}"


def run(sizes: list[int], formats: list[str], keep: str | None, yaml_max: int = 10000, repeats: int = 3,
        load: bool = True, cold: bool = False) -> list[dict[str, Any]]:
    """Generate and measure every size × format (YAML only up to ``yaml_max`` nodes: the whole
    text and libyaml's events of a 100,000-node fleet need tens of GB); print one table row each;
    return the rows. With ``keep``, dumps already in that directory are reused."""
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="bench-snapshot-"))
    work.mkdir(parents=True, exist_ok=True)
    recipe, policy = work / "recipe.yaml", work / "policy.yaml"
    recipe.write_text(recipe_text(), encoding="utf-8")
    policy.write_text(POLICY, encoding="utf-8")
    good, behind = node_annotations(str(recipe))
    if not cold:  # bytecode cached as in an installed package (the first plan run below writes it)
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ.setdefault("PYTHONPYCACHEPREFIX", str(work / "pycache"))
    warm = not cold
    print(f"{'nodes':>8} {'pods':>7} {'format':>14} {'file MB':>8} {'load s':>7} {'plan wall s':>12} {'cpu s':>12} "
          f"{'peak MB':>8} {'growth wall/cpu':>16} {'load avg':>8}")
    print(f"{'':>8} {'':>7} {'':>14} {'':>8} {'':>7} {'min/median':>12} {'min/median':>12}")
    rows: list[dict[str, Any]] = []
    previous: dict[str, dict[str, Any]] = {}
    for n in sizes:
        objs: list[dict[str, Any]] | None = None
        for fmt in formats:
            if fmt == "yaml" and n > yaml_max:
                continue
            fleet = work / f"fleet-{n}.{fmt}"
            if not (keep and fleet.exists()):
                if objs is None:
                    objs = fleet_objects(n, good, behind)
                write_fleet(fleet, objs, fmt)
            if warm:  # one unmeasured run compiles every module the measured ones import
                _sub("plan", fleet, recipe, policy)
                warm = False
            avg = os.getloadavg()[0]
            load_s = _sub("load", fleet, recipe, policy)["wall"] if load else float("nan")
            plans = [_sub("plan", fleet, recipe, policy) for _ in range(repeats)]
            walls, cpus = [p["wall"] for p in plans], [p["cpu"] for p in plans]
            row = {"nodes": n, "pods": 3 * n, "format": fmt, "file_mb": fleet.stat().st_size / 2**20,
                   "load_s": load_s, "wall_s": walls, "cpu_s": cpus, "rss_mb": max(p["rss_mb"] for p in plans),
                   "loadavg": avg}
            growth = ""
            prev = previous.get(fmt)
            if prev is not None:
                growth = (f"{statistics.median(walls) / statistics.median(prev['wall_s']):.1f}x/"
                          f"{statistics.median(cpus) / statistics.median(prev['cpu_s']):.1f}x")
                row["growth"] = growth
            previous[fmt] = row
            rows.append(row)
            print(f"{n:>8} {3 * n:>7} {fmt:>14} {row['file_mb']:>8.0f} {load_s:>7.2f} {_fmt(walls):>12} "
                  f"{_fmt(cpus):>12} {row['rss_mb']:>8.0f} {growth:>16} {avg:>8.1f}", flush=True)
            if not keep:
                fleet.unlink()
        del objs
    return rows


def main() -> None:
    """Command line; see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--formats", nargs="+", default=["json", "yaml"],
                    choices=["json", "yaml", "json-compact", "json-reordered"])
    ap.add_argument("--keep", metavar="DIR", help="write the dumps into DIR and keep them (reused when present)")
    ap.add_argument("--yaml-max", type=int, default=10000, metavar="N", help="YAML dumps only up to N nodes")
    ap.add_argument("--repeats", type=int, default=3, metavar="N", help="plan runs per size and format")
    ap.add_argument("--no-load", action="store_true", help="skip the SimFleet.from_file measurement")
    ap.add_argument("--cold", action="store_true", help="no bytecode cache (every module compiled at every start)")
    ap.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(measure(*a.one)))
        return
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"plan end to end on a kubectl snapshot: {PACKAGES} packages of recorded state per node, 10 % of nodes "
          f"one package behind, 3 pods per node, 1 PDB; {a.repeats} plan runs per row")
    print("bytecode: " + ("not cached (--cold)" if a.cold else "cached, as installed"))
    run(a.sizes, a.formats, a.keep, a.yaml_max, a.repeats, not a.no_load, a.cold)


if __name__ == "__main__":
    main()

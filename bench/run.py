"""Benchmarks: planning cost and simulated rollout overhead, printed as a table.

    python bench/run.py                 # plan 1k/10k/50k nodes, simulated rollout of 10k nodes, plan
                                        # end to end on 1k/10k/100k-node kubectl snapshots, the
                                        # simulated apply of 1k/10k-node snapshots, API
                                        # economy on a real control plane (500 kwok nodes), and
                                        # `plan` against 2,000 and 5,000 real kwok nodes
    python bench/run.py --quick         # smaller sizes, no control plane (a smoke run)

Each measurement runs in a fresh subprocess so peak RSS (``ru_maxrss``) belongs to it alone.
Numbers, not assertions: docs/benchmarks.md shows the latest table with the machine it ran on.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

SHA = "sha256:" + "c" * 64
PACKAGES = 25


def _recipe() -> Any:
    from reconciler.model.recipe import Interrupt, Package, Recipe
    from reconciler.model.selector import LabelSelector

    pkgs = {}
    for i in range(PACKAGES):
        name = f"pkg-{i:02d}x"
        deps = {f"pkg-{i - 1:02d}x": "1.0.0"} if i % 5 else {}
        pkgs[name] = Package(
            name=name, version="1.0.0", image=f"ghcr.io/bench/{name}", containerSHA=SHA, dependsOn=deps,
            interrupt=Interrupt(type="reboot") if i == 7 else None, configMap={"a.conf": f"value-{i}"},
        )
    return Recipe(name="bench", version="1", nodeSelector=LabelSelector(matchLabels={"pool": "gpu"}),
                  podNonInterruptLabels=LabelSelector(matchLabels={"workload": "training"}), packages=pkgs)


def _policy(percent: int = 10) -> Any:
    from reconciler.model.policy import Budget, DefaultCompartment, DeploymentPolicy, ExponentialParams, Strategy

    return DeploymentPolicy(name="bench", default=DefaultCompartment(
        budget=Budget(percent=percent), strategy=Strategy(exponential=ExponentialParams(initialBatch=1))))


def _fleet(n: int, drift: float = 0.10) -> Any:
    """n nodes with the recipe complete in NodeWright JSON shape, ``drift`` of them one version behind
    on one package; 10 pods per node."""
    from reconciler.diff import config_digest
    from reconciler.model.nodestate import PackageState, config_key, dump_config_digests, dump_state, state_key
    from reconciler.model.observed import NodeInfo, ObservedFleet, OwnerRef, PodInfo

    r = _recipe()
    full = {p.key: PackageState(name=p.name, version=p.version, image=p.image, containerSHA=p.containerSHA,
                                stage="post-interrupt" if p.interrupt else "config", state="complete")
            for p in r.packages.values()}
    digests = dump_config_digests({p.name: config_digest(p) for p in r.packages.values()})
    good = dump_state(full)
    drifted_state = dict(full)
    old = full["pkg-03x|1.0.0"].model_copy(update={"version": "0.9.0"})
    del drifted_state["pkg-03x|1.0.0"]
    drifted_state[old.key] = old
    bad = dump_state(drifted_state)
    every = max(1, round(1 / drift)) if drift else 0
    nodes, pods = [], []
    for i in range(n):
        name = f"node-{i:06d}"
        ann = {state_key("bench"): bad if every and i % every == 0 else good, config_key("bench"): digests}
        nodes.append(NodeInfo(name=name, uid=name, labels={"pool": "gpu", "zone": f"z{i % 4}"}, annotations=ann,
                              boot_id=f"b-{i}", created=float(i)))
        for j in range(10):
            pods.append(PodInfo(namespace="apps", name=f"p-{i}-{j}", uid=f"u-{i}-{j}", node_name=name,
                                labels={"app": f"a{j}"}, owners=(OwnerRef("ReplicaSet", f"a{j}", True),)))
    return ObservedFleet.build(nodes, pods, [])


def bench_plan(n: int) -> dict[str, Any]:
    from reconciler.plan.planner import compute_plan

    t0 = time.perf_counter()
    fleet = _fleet(n)
    t_build = time.perf_counter() - t0
    rss_fleet = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t1 = time.perf_counter()
    plan = compute_plan(_recipe(), _policy(), fleet)
    t_plan = time.perf_counter() - t1
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"nodes": n, "changing": plan.summary["nodesChanging"], "plan_s": t_plan, "build_s": t_build,
            "us_per_node": t_plan / n * 1e6, "rss_mb": rss, "fleet_mb": rss_fleet, "plan_mb": rss - rss_fleet}


def bench_rollout(n: int) -> dict[str, Any]:
    from reconciler.adapters.sim.config import SimConfig
    from reconciler.adapters.sim.fleet import SimFleet
    from reconciler.execute.rollout import Rollout
    from reconciler.model.recipe import Interrupt, Package, Recipe
    from reconciler.model.selector import LabelSelector
    from reconciler.observe.snapshot import observe
    from reconciler.plan.batching import predict_batches
    from reconciler.plan.planner import compute_plan
    from reconciler.testing.fleetgen import make_node

    objs = [make_node(f"node-{i:06d}", {"pool": "gpu"}, created=1795000000.0 + i) for i in range(n)]
    cfg = SimConfig(stageSeconds=30, rebootSeconds=120)
    sim = SimFleet(objs, cfg)
    r = Recipe(name="bench", version="1", nodeSelector=LabelSelector(matchLabels={"pool": "gpu"}), packages={
        "base": Package(name="base", version="1.0.0", image="ghcr.io/b/base", containerSHA=SHA),
        "drv": Package(name="drv", version="1.0.0", image="ghcr.io/b/drv", containerSHA=SHA,
                       dependsOn={"base": "1.0.0"}, interrupt=Interrupt(type="reboot")),
    })
    pol = _policy(percent=10)
    plan = compute_plan(r, pol, observe(sim))
    c0 = time.process_time()
    t0 = time.perf_counter()
    res = Rollout(r, pol, plan, sim, sim).run()
    cpu = time.process_time() - c0
    wall = time.perf_counter() - t0
    # ideal: waves of the predicted batches, each node = base apply+config, drv apply+config,
    # reboot (1 s to go down + rebootSeconds), drv post-interrupt
    per_node = 4 * 30 + 1 + 120 + 30
    cp = plan.compartments[0]
    ideal = len(predict_batches(pol.default.strategy, cp.ceiling, [x for b in cp.batches for x in b])) * per_node
    return {"nodes": n, "result": res.result, "batches": len(cp.batches), "makespan_s": res.duration,
            "ideal_s": ideal, "ratio": res.duration / ideal, "cpu_s": cpu, "wall_s": wall,
            "cpu_ms_per_node": cpu / n * 1000, "writes_per_node": sim.writes / n,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _sub(kind: str, n: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--one", kind, str(n)], capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-controlplane", action="store_true", help="skip the real control-plane part")
    ap.add_argument("--one", nargs=2, metavar=("KIND", "N"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        fn = {"plan": bench_plan, "rollout": bench_rollout}[a.one[0]]
        print(json.dumps(fn(int(a.one[1]))))
        return
    sizes = (200, 1000) if a.quick else (1000, 10000, 50000)
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{platform.platform(terse=True)}")
    print(f"\nplan: {PACKAGES} packages, 10 % of nodes drifted (one package behind), 10 pods per node")
    print(f"{'nodes':>8} {'changing':>9} {'plan s':>8} {'µs/node':>8} {'peak MB':>8} {'snapshot MB':>12} "
          f"{'plan +MB':>9}")
    for n in sizes:
        r = _sub("plan", n)
        print(f"{r['nodes']:>8} {r['changing']:>9} {r['plan_s']:>8.3f} {r['us_per_node']:>8.1f} "
              f"{r['rss_mb']:>8.0f} {r['fleet_mb']:>12.0f} {r['plan_mb']:>9.0f}")
    rn = 1000 if a.quick else 10000
    r = _sub("rollout", rn)
    print("\nsimulated rollout: exponential from 1, budget 10 %, 2 packages + reboot (stage 30 s, reboot 120 s)")
    print(f"{'nodes':>8} {'batches':>8} {'makespan s':>11} {'ideal s':>8} {'ratio':>6} {'cpu s':>7} "
          f"{'cpu ms/node':>12} {'writes/node':>12} {'peak MB':>8}")
    print(f"{r['nodes']:>8} {r['batches']:>8} {r['makespan_s']:>11.0f} {r['ideal_s']:>8.0f} {r['ratio']:>6.3f} "
          f"{r['cpu_s']:>7.1f} {r['cpu_ms_per_node']:>12.2f} {r['writes_per_node']:>12.1f} {r['rss_mb']:>8.0f}")
    # a kubectl snapshot loaded and planned end to end through the CLI (bench/snapshot.py)
    print(flush=True)
    snap = [sys.executable, os.path.join(HERE, "snapshot.py"), "--sizes",
            *(["200", "1000", "--repeats", "1"] if a.quick else ["1000", "10000", "100000"])]
    subprocess.run(snap, check=True)
    # the simulated apply of such a snapshot through the CLI, drained and rebooted nodes included
    print(flush=True)
    subprocess.run([sys.executable, os.path.join(HERE, "sim_apply.py"), "--sizes",
                    *(["200", "1000"] if a.quick else ["1000", "10000"])], check=True)
    if a.quick or a.no_controlplane:
        return
    from tests.controlplane.cluster import missing_binaries

    if missing_binaries():
        print("\nreal control plane: skipped (binaries missing: run tests/controlplane/build.sh)")
        return
    print("\nreal control plane (bench/controlplane.py):", flush=True)
    # 1 s stages: a stress test of the per-node overhead; then stage and reboot durations closer to
    # real hosts (still far shorter than a driver install or a GPU node's reboot)
    subprocess.run([sys.executable, os.path.join(HERE, "controlplane.py")], check=True)
    print(flush=True)
    subprocess.run([sys.executable, os.path.join(HERE, "controlplane.py"), "--stage-seconds", "5",
                    "--reboot-seconds", "10"], check=True)
    print(flush=True)
    # the user's path on a large real cluster: `reconciler plan` against 2,000 then 5,000 kwok nodes
    subprocess.run([sys.executable, os.path.join(HERE, "plan_real.py")], check=True)


if __name__ == "__main__":
    main()

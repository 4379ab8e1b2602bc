"""API economy on a real control plane: 500 kwok nodes, 5,000 pods, a reboot change then a
config-only change: requests per node changed, wall time against the ideal, CPU by component.

    python bench/controlplane.py [--nodes 500] [--pods-per-node 10] [--stage-seconds 1] [--reboot-seconds 2]

Environment: ``BENCH_WORKERS=N`` passes ``--workers N`` to apply (default: apply's own choice);
``BENCH_CPROFILE=PATH`` saves a CPU-time profile (``cProfile`` with ``time.thread_time``) of the
apply's own thread (the rollout loop) to ``PATH-<time>``;
``BENCH_PPROF=PATH`` saves a 20 s CPU profile of kube-apiserver during each run to ``PATH-<n>``
(read it with ``go tool pprof``). Each run's JSON document is kept in ``$TMPDIR/reconciler-bench``.

Needs the binaries of tests/controlplane/build.sh. Counts the reconciler's own requests on the
client side (every HTTP request the ``kubernetes`` client sends, by verb and resource; the watch
streams count as one request each), and reads kube-apiserver's ``apiserver_request_total`` for
the whole cluster (kwok, the controllers and the scheduler included) for comparison, and the
reconciler's CPU by thread (rollout loop, node workers, each watch stream; sampled from
``/proc/self/task``). Prints a table.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
# this tree after PYTHONPATH's entries (sys.path[0] is bench/): ``PYTHONPATH=OLD_TREE`` measures
# an older tree's reconciler (and its test harness) with this bench
sys.path.insert(1 + len([p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]), os.path.dirname(HERE))

SHA = "sha256:" + "f" * 64
COUNTS: collections.Counter[tuple[str, str]] = collections.Counter()


def _count_requests() -> None:
    """Count every request the reconciler sends: all go through the ``kubernetes`` client's REST
    layer (reconciler/adapters/kube/api.py; a watch stream counts as one request)."""
    from kubernetes.client import rest

    orig = rest.RESTClientObject.request

    def counting(self: Any, method: str, url: str, *a: Any, **kw: Any) -> Any:
        _tally(method, url)
        return orig(self, method, url, *a, **kw)

    rest.RESTClientObject.request = counting  # type: ignore[method-assign]


def _tally(method: str, url: str) -> None:
    if threading.current_thread().name != "reboot-emulator":  # the test harness, not the reconciler
        path = re.sub(r"\?.*", "", url.split("://", 1)[-1].split("/", 1)[-1])
        parts = path.split("/")
        # /api/v1/namespaces/ns/pods/name/eviction → resource "pods/eviction"
        if "namespaces" in parts and len(parts) > parts.index("namespaces") + 2:
            rest_parts = parts[parts.index("namespaces") + 2:]
        else:
            rest_parts = parts[2:] if parts[0] == "api" else parts[3:]
        res = rest_parts[0] if rest_parts else "?"
        if len(rest_parts) >= 3:
            res += "/" + rest_parts[2]
        query = url.split("?", 1)[1] if "?" in url else ""
        verb = method.upper()
        if verb == "GET":
            verb = "WATCH" if "watch=true" in query.lower() else ("LIST" if len(rest_parts) == 1 else "GET")
        COUNTS[(verb, res)] += 1


CLOCKS: list[Any] = []
ADVANCES = collections.Counter()  # node advances (one decision cycle of one node run) and wake-ups


def _count_advances() -> None:
    """Count the rollout's loop passes and node advances (a watch event that wakes a node costs one)."""
    from reconciler.execute.rollout import Rollout

    orig = Rollout._advance_all

    def counting(self: Any, runs: list[Any]) -> Any:
        ADVANCES["passes"] += 1
        ADVANCES["advances"] += len(runs)
        return orig(self, runs)

    Rollout._advance_all = counting  # type: ignore[method-assign]


def _keep_clocks() -> None:
    """Remember every KubeWatch the CLI makes, so the bench can read its event counts and stop its
    watch threads after the run (``apply`` exits the process in real use; here the next run would
    otherwise pay for the previous run's streams)."""
    from reconciler.adapters.kube.watch import KubeWatch

    orig = KubeWatch.__init__

    def init(self: Any, *a: Any, **kw: Any) -> None:
        orig(self, *a, **kw)
        CLOCKS.append(self)

    KubeWatch.__init__ = init  # type: ignore[method-assign]


def _recipe(path: Path, config_value: str, stage_seconds: float) -> None:
    path.write_text(f"""\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: NodeRecipe
metadata: {{name: bench}}
spec:
  version: "1"
  nodeSelector: {{matchLabels: {{pool: bench}}}}
  drain: {{force: true, deleteEmptyDirData: true, evictionRetrySeconds: 2}}
  deploymentPolicy: bench
  packages:
    tuning:
      version: 1.0.0
      image: ghcr.io/example/tuning
      containerSHA: {SHA}
      interrupt: {{type: reboot}}
      configMap: {{sysctl.conf: "{config_value}"}}
      env: [{{name: SIM_TEST_RUN_FOR, value: {stage_seconds:g}s}}]
""")


POLICY = """\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: DeploymentPolicy
metadata: {name: bench}
spec:
  default:
    budget: {percent: 10}
    strategy: {exponential: {initialBatch: 4, growthFactor: 2}}
"""


def ideal_from_timeline(doc: dict[str, Any]) -> float:
    """The makespan the strategy allows given the durations the cluster itself imposed: per node,
    the time its stages, reboot and pod terminations took (stage-start → stage-end, interrupt →
    rebooted, first evict → drained); batches run as waves, so the ideal is the sum over batches of
    the slowest node's time. The rest of the wall time is the reconciler's own overhead."""
    per_node: dict[str, float] = {}
    opened: dict[tuple[str, str], float] = {}
    for e in doc["timeline"]:
        node, ev, t = e["node"], e["event"], float(e["t"])
        key = " ".join(e["detail"].split()[:3]) if ev.startswith("stage") else ""
        if ev in ("stage-start", "interrupt") or (ev == "evict" and (node, "evict") not in opened):
            opened[(node, key if ev == "stage-start" else ev)] = t
        end = {"stage-end": key, "rebooted": "interrupt", "drained": "evict"}.get(ev)
        if end is not None and (node, end) in opened:
            per_node[node] = per_node.get(node, 0.0) + t - opened.pop((node, end))
    return sum(max((per_node.get(n, 0.0) for n in b["nodes"]), default=0.0)
               for c in doc["compartments"] for b in c["batches"])


def _server_counts(cp: Any) -> collections.Counter[tuple[str, str]]:
    import urllib.request

    req = urllib.request.Request(f"{cp.server}/metrics", headers={"Authorization": f"Bearer {cp.admin_token}"})
    import ssl

    ctx = ssl.create_default_context(cafile=str(cp.ca_file))
    body = urllib.request.urlopen(req, context=ctx, timeout=30).read().decode()
    out: collections.Counter[tuple[str, str]] = collections.Counter()
    for line in body.splitlines():
        if line.startswith("apiserver_request_total{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            res = labels.get("resource", "") + ("/" + labels["subresource"] if labels.get("subresource") else "")
            out[(labels.get("verb", ""), res)] += int(float(line.rsplit(" ", 1)[1]))
    return out


def _pprof(cp: Any, path: str, seconds: int = 20) -> None:
    import ssl
    import urllib.request

    req = urllib.request.Request(f"{cp.server}/debug/pprof/profile?seconds={seconds}",
                                 headers={"Authorization": f"Bearer {cp.admin_token}"})
    ctx = ssl.create_default_context(cafile=str(cp.ca_file))
    Path(path).write_bytes(urllib.request.urlopen(req, context=ctx, timeout=seconds + 30).read())


def thread_cpu_seconds(native_id: int | None) -> tuple[float, float]:
    """(user, system) CPU seconds a live thread of this process used so far, from
    ``/proc/self/task/<tid>/stat`` ((0.0, 0.0) when unknown: not Linux, thread gone)."""
    if native_id is None:
        return 0.0, 0.0
    try:
        fields = Path(f"/proc/self/task/{native_id}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0, 0.0
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


class ThreadCpu:
    """CPU seconds by kind of thread of this process during a run (the rollout loop, the node
    workers, the watch streams, the harness), sampled from ``/proc/self/task`` every 0.5 s (a
    worker pool's threads end with the run, so their last reading is kept)."""

    def __init__(self) -> None:
        # tid → (kind, first, last reading), each reading (user, system) seconds
        self.seen: dict[int, tuple[str, tuple[float, float], tuple[float, float]]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-sampler", daemon=True)

    @staticmethod
    def kind(name: str) -> str:
        if name.startswith("node"):
            return "node workers"
        if name.startswith("watch"):
            return name
        if name == "MainThread":
            return "rollout loop"
        return "other"

    def _sample(self) -> None:
        for t in threading.enumerate():
            tid = t.native_id
            if tid is None or t is self._thread:
                continue
            cpu = thread_cpu_seconds(tid)
            first = self.seen.get(tid, (None, cpu, cpu))[1]
            self.seen[tid] = (self.kind(t.name), first, cpu)

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            self._sample()

    def __enter__(self) -> ThreadCpu:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def by_kind(self) -> dict[str, float]:
        """CPU seconds (user + system) by kind of thread."""
        return {k: u + s for k, (u, s) in self.split_by_kind().items()}

    def split_by_kind(self) -> dict[str, tuple[float, float]]:
        """(user, system) CPU seconds by kind of thread."""
        user: dict[str, float] = collections.defaultdict(float)
        system: dict[str, float] = collections.defaultdict(float)
        for kind, first, last in self.seen.values():
            user[kind] += last[0] - first[0]
            system[kind] += last[1] - first[1]
        return {k: (user[k], system[k]) for k in user}


def _apply(args: list[str], harness_thread: int | None = None) -> tuple[dict[str, Any], float, float]:
    """Run the CLI in this process; its JSON document, CPU seconds and wall seconds. The CPU is the
    process's minus the harness thread's (``harness_thread``: native id of the reboot emulator,
    which runs in this process but plays the host, not the reconciler)."""
    import contextlib
    import io

    from reconciler.cli.main import main

    buf = io.StringIO()
    c0, t0 = time.process_time() - sum(thread_cpu_seconds(harness_thread)), time.perf_counter()
    prof = None
    if os.environ.get("BENCH_CPROFILE"):
        import cProfile
        prof = cProfile.Profile(time.thread_time)
        prof.enable()
    with contextlib.redirect_stdout(buf):
        rc = main(args)
    if prof is not None:
        prof.disable()
        prof.dump_stats(os.environ["BENCH_CPROFILE"] + f"-{time.time():.0f}")
    cpu, wall = time.process_time() - sum(thread_cpu_seconds(harness_thread)) - c0, time.perf_counter() - t0
    doc = json.loads(buf.getvalue())
    if rc != 0:
        raise SystemExit(f"apply failed: {doc.get('result')}")
    return doc, cpu, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--pods-per-node", type=int, default=10)
    ap.add_argument("--stage-seconds", type=float, default=1.0,
                    help="how long each stage pod runs on kwok (default 1: a stress test of the overhead)")
    ap.add_argument("--reboot-seconds", type=float, default=2.0, help="how long a kwok node takes to reboot")
    a = ap.parse_args()
    from kubernetes import client

    from tests.controlplane.cluster import ControlPlane, RebootEmulator

    _count_requests()
    _keep_clocks()
    _count_advances()
    if os.environ.get("BENCH_PPROF"):
        os.environ["CONTROLPLANE_PROFILING"] = "1"
    work = Path(os.environ.get("TMPDIR", "/tmp")) / "reconciler-bench"
    work.mkdir(exist_ok=True)
    (work / "policy.yaml").write_text(POLICY)
    recipe = work / "recipe.yaml"
    with ControlPlane() as cp:
        t0 = time.perf_counter()
        from bench.plan_real import _grow  # nodes and pods created through the API by 8 threads

        with cp.api_client() as api:
            core = client.CoreV1Api(api)
            core.create_namespace({"metadata": {"name": "load"}})
            # a controller that exists (the garbage collector keeps the pods)
            owner = core.create_namespaced_config_map("load", {"metadata": {"name": "owner"}})
        _grow(cp, 0, a.nodes, a.pods_per_node, owner.metadata.uid, threads=8)
        setup = time.perf_counter() - t0
        emu = RebootEmulator(cp, reboot_for=f"{a.reboot_seconds:g}s").start()
        rows = []
        try:
            for label, value in (("reboot change (install)", "vm.swappiness=10"),
                                 ("config-only change", "vm.swappiness=1")):
                _recipe(recipe, value, a.stage_seconds)
                COUNTS.clear()
                ADVANCES.clear()
                srv0 = _server_counts(cp)
                cpu0 = cp.cpu_seconds()
                if os.environ.get("BENCH_PPROF"):  # a CPU profile of kube-apiserver during the run
                    threading.Thread(target=_pprof, args=(cp, f"{os.environ['BENCH_PPROF']}-{len(rows) + 1}"),
                                     daemon=True).start()
                workers = ["--workers", os.environ["BENCH_WORKERS"]] if os.environ.get("BENCH_WORKERS") else []
                with ThreadCpu() as threads:
                    doc, cpu, wall = _apply(["apply", str(recipe), "--policy", str(work / "policy.yaml"),
                                             "--kubeconfig", str(cp.kubeconfig), "--no-status-object", "-o", "json",
                                             *workers], emu._thread.native_id)
                watch = {"decoded": sum(c.events_seen for c in CLOCKS), **ADVANCES,
                         "threads": threads.by_kind(), "split": threads.split_by_kind()}
                for c in CLOCKS:
                    c.close()
                CLOCKS.clear()
                srv = _server_counts(cp) - srv0
                comp_cpu = {k: v - cpu0.get(k, 0.0) for k, v in cp.cpu_seconds().items()}
                # the whole run document, for looking into where the time went
                (work / f"run-{len(rows) + 1}.json").write_text(json.dumps(doc))
                changed = sum(1 for n in doc["nodes"] if n["state"] == "complete")
                evicted = sum(1 for e in doc["timeline"] if e["event"] == "evict")
                batches = sum(len(c["batches"]) for c in doc["compartments"])
                rows.append((label, changed, evicted, batches, dict(COUNTS), dict(srv), cpu, wall,
                             ideal_from_timeline(doc), comp_cpu, watch))
        finally:
            emu.stop()
    print(f"control plane: {a.nodes} kwok nodes, {a.nodes * a.pods_per_node} pods, stages of {a.stage_seconds:g} s, "
          f"reboots of {a.reboot_seconds:g} s; setup {setup:.0f} s; "
          f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    for label, changed, evicted, batches, ours, srv, cpu, wall, ideal_seen, comp_cpu, watch in rows:
        writes = sum(v for (verb, _r), v in ours.items() if verb in ("POST", "PATCH", "PUT", "DELETE"))
        reads = {k: v for k, v in ours.items() if k[0] in ("GET", "LIST", "WATCH")}
        # nominal: waves of batches, each node = its stages + a reboot, as kwok is told to take them
        stages = 4 if label.startswith("reboot") else 1
        nominal = batches * (stages * a.stage_seconds + (a.reboot_seconds if label.startswith("reboot") else 0.0))
        print(f"\n{label}: {changed} nodes changed, {evicted} pods evicted, {batches} batches, "
              f"wall {wall:.0f} s; ideal given the observed stage/reboot/termination durations "
              f"{ideal_seen:.0f} s (ratio {wall / max(ideal_seen, 1e-9):.2f}); nominal kwok durations {nominal:.0f} s "
              f"(ratio {wall / nominal:.2f}); reconciler CPU {cpu:.1f} s ({cpu / max(changed, 1) * 1000:.0f} ms/node)")
        # once per run, not per node: the Lease (renewed every ~20 s), the namespace, the run owner and
        # the shared package ConfigMaps
        per_run = sum(v for (verb, r), v in ours.items()
                      if verb in ("POST", "PATCH", "PUT", "DELETE") and r in ("leases", "namespaces", "configmaps"))
        print(f"  our writes: {writes} = {(writes - per_run) / max(changed, 1):.1f} per node changed "
              f"({(writes - per_run - evicted) / max(changed, 1):.1f} + evictions) + {per_run} per run "
              "(Lease renewals, namespace, run owner, package ConfigMaps)")
        print("  our requests by verb/resource: " + ", ".join(
            f"{v} {verb} {r}" for (verb, r), v in sorted(ours.items(), key=lambda kv: -kv[1])))
        print(f"  our requests: {sum(ours.values())} ({sum(ours.values()) / max(changed, 1):.1f} per node changed)")
        print(f"  our reads: {sum(reads.values())} ({sum(reads.values()) / max(changed, 1):.1f} per node); "
              f"watch events {watch['decoded']}; "
              f"{watch.get('advances', 0)} node advances in {watch.get('passes', 0)} loop passes "
              f"({watch.get('advances', 0) / max(changed, 1):.1f} per node)")
        total = sum(srv.values())
        print(f"  cluster total (apiserver_request_total, all clients: kwok, controllers, scheduler, us): {total}: "
              + ", ".join(f"{v} {verb} {r}" for (verb, r), v in sorted(srv.items(), key=lambda kv: -kv[1])[:12]))
        split = watch["split"]
        print("  reconciler CPU seconds by thread (user + system): " + ", ".join(
            f"{k} {v:.1f} ({split[k][0]:.1f} + {split[k][1]:.1f})"
            for k, v in sorted(watch["threads"].items(), key=lambda kv: -kv[1]) if k != "other"))
        print("  CPU seconds during the run: reconciler " + f"{cpu:.1f}, " + ", ".join(
            f"{k} {v:.1f}" for k, v in sorted(comp_cpu.items(), key=lambda kv: -kv[1])))


if __name__ == "__main__":
    main()

"""Benchmark: the simulated ``reconciler apply`` of a recipe of many packages on a few nodes.

    python bench/many_packages.py                        # 250, 500 and 1,000 packages on 3 nodes
    python bench/many_packages.py --sizes 1000 --nodes 3 --repeats 3

Writes a NodeRecipe of N pinned packages (no dependencies, no interrupt: every package's apply
and config stages run side by side) and a 3-node fleet (kubectl YAML), then runs ``python -m
reconciler apply RECIPE --cluster sim:FLEET -o json`` in a fresh process per run, ``--repeats``
times: wall time, CPU time (user + system) and peak RSS of that child alone
(``resource.getrusage(RUSAGE_CHILDREN)`` in a fresh measuring process), min / median. ``growth``
compares the median CPU with the previous size's (2x the packages: 2x is linear). Every stage
start and end rewrites the node's package-state annotation, which holds every package's entry:
issue 36's target is 1,000 packages x 3 nodes under 5 s. Numbers, not assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import snapshot  # noqa: E402  (bench/snapshot.py: the measuring child)

SHA = "sha256:" + "c" * 64


def recipe_text(n: int) -> str:
    """A NodeRecipe of ``n`` pinned packages, each with one configMap key."""
    lines = ["apiVersion: reconciler.nodewright.dev/v1alpha1", "kind: NodeRecipe", "metadata: {name: many}",
             "spec:", "  version: 1.0.0", "  nodeSelector: {matchLabels: {pool: gpu}}", "  packages:"]
    for i in range(n):
        lines += [f"    p{i:04d}x:", "      version: 1.0.0", f"      image: ghcr.io/bench/p{i:04d}x",
                  f"      containerSHA: {SHA}", f"      configMap: {{a.conf: value-{i}}}"]
    return "\n".join(lines) + "\n"


def prepare(work: Path, n: int, nodes: int) -> tuple[Path, Path]:
    """Write the recipe of ``n`` packages and a ``nodes``-node fleet into ``work``."""
    from reconciler.testing.fleetgen import make_node, write_fleet

    recipe = work / f"recipe-{n}.yaml"
    recipe.write_text(recipe_text(n), encoding="utf-8")
    fleet = work / f"fleet-{nodes}.yaml"
    write_fleet(fleet, [make_node(f"gpu-{j}", {"pool": "gpu"}) for j in range(nodes)])
    return recipe, fleet


def _one(recipe: str, fleet: str) -> None:
    """Child: apply once on a fresh copy of the fleet (apply writes it); print wall/CPU/RSS as JSON."""
    work = Path(tempfile.mkdtemp(prefix="bench-many-"))
    copy = work / "fleet.yaml"
    copy.write_bytes(Path(fleet).read_bytes())
    argv = [sys.executable, "-m", "reconciler", "apply", recipe, "--cluster", f"sim:{copy}", "-o", "json"]
    print(json.dumps(snapshot._child(argv)))


def main() -> None:
    """Command line; see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[250, 500, 1000], help="packages per recipe")
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        _one(*a.one)
        return
    work = Path(tempfile.mkdtemp(prefix="bench-many-"))
    print(f"simulated apply of N packages (apply and config stages each) on {a.nodes} nodes; "
          f"{a.repeats} runs per row, min/median")
    print(f"{'packages':>8} {'wall s':>12} {'cpu s':>12} {'peak MB':>8} {'growth cpu':>10} {'load avg':>8}")
    prev = 0.0
    for n in a.sizes:
        recipe, fleet = prepare(work, n, a.nodes)
        runs = []
        for _ in range(a.repeats):
            out = subprocess.run([sys.executable, __file__, "--one", str(recipe), str(fleet)], capture_output=True,
                                 text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        wall = [r["wall"] for r in runs]
        cpu = [r["cpu"] for r in runs]
        med = statistics.median(cpu)
        growth = f"{med / prev:.1f}x" if prev else ""
        prev = med
        print(f"{n:>8} {min(wall):>5.2f}/{statistics.median(wall):<6.2f} {min(cpu):>5.2f}/{med:<6.2f} "
              f"{max(r['rss_mb'] for r in runs):>8.0f} {growth:>10} {os.getloadavg()[0]:>8.1f}", flush=True)


if __name__ == "__main__":
    main()

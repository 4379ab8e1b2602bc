"""Benchmark: the simulated ``reconciler apply`` end to end on a kubectl snapshot (``--cluster sim:FILE``).

    python bench/sim_apply.py                        # 1,000 and 10,000 nodes, JSON
    python bench/sim_apply.py --sizes 1000 2000      # other sizes
    python bench/sim_apply.py --save                 # also --sim-save the fleet after the run (JSON)
    python bench/sim_apply.py --profile 2000         # cProfile one run in-process, top 25 by cumulative time

The dump is the one :mod:`bench.snapshot` generates (N GPU nodes, 25 packages of recorded state,
10 % of nodes one package behind — here the package with the reboot interrupt, :data:`BEHIND`, so
those nodes are drained and rebooted — 3 pods per node: a DaemonSet pod and two ReplicaSet pods, one
PDB with ``maxUnavailable: 10%``). Each size runs ``python -m reconciler apply RECIPE --policy
POLICY --cluster sim:FILE -o json`` in a fresh subprocess: wall and CPU time and peak RSS from
``resource.getrusage(RUSAGE_CHILDREN)``; the growth ratio compares each size's wall time with the
first size's. Numbers, not assertions; targets (issue #17): 10,000 nodes under 60 s and 1 GB, growth
1k → 10k within 11×.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import os
import pstats
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import snapshot  # noqa: E402  (bench/snapshot.py: the dump generator)

#: The package 10 % of the nodes are one version behind on: the one with the reboot interrupt, so
#: every changed node is cordoned and drained (its two ReplicaSet pods evicted and re-created
#: elsewhere) and rebooted, the path whose cost grows with the fleet.
BEHIND = "pkg-07x"


def node_annotations(recipe_path: str, behind_pkg: str = BEHIND) -> tuple[dict[str, str], dict[str, str]]:
    """(annotations of an up-to-date node, of a node with ``behind_pkg`` one version behind), as
    :func:`bench.snapshot.node_annotations` writes them but with the package chosen."""
    from reconciler.model.nodestate import dump_state, parse_state, state_key

    good, _ = snapshot.node_annotations(recipe_path)
    states = dict(parse_state(good[state_key(snapshot.RECIPE)]))
    key = f"{behind_pkg}|1.0.0"
    old = states.pop(key).model_copy(update={"version": "0.9.0"})
    states[old.key] = old
    return good, {**good, state_key(snapshot.RECIPE): dump_state(states)}


def prepare(work: Path, n: int) -> tuple[Path, Path, Path]:
    """Write the recipe, policy and an ``n``-node JSON dump into ``work``; return their paths."""
    recipe, policy = work / "recipe.yaml", work / "policy.yaml"
    recipe.write_text(snapshot.recipe_text(), encoding="utf-8")
    policy.write_text(snapshot.POLICY, encoding="utf-8")
    good, behind = node_annotations(str(recipe))
    fleet = work / f"fleet-{n}.json"
    snapshot.write_fleet(fleet, snapshot.fleet_objects(n, good, behind), "json")
    return recipe, policy, fleet


def argv_for(recipe: Path, policy: Path, fleet: Path, save: Path | None) -> list[str]:
    """The CLI arguments of the measured run (after ``python -m reconciler``)."""
    args = ["apply", str(recipe), "--policy", str(policy), "--cluster", f"sim:{fleet}", "-o", "json"]
    return args + (["--sim-save", str(save)] if save else [])


def _one(recipe: str, policy: str, fleet: str, save: str) -> None:
    """Child: run the measured apply once in a fresh process; print wall/CPU/RSS as JSON."""
    argv = [sys.executable, "-m", "reconciler", *argv_for(Path(recipe), Path(policy), Path(fleet),
                                                          Path(save) if save else None)]
    print(json.dumps(snapshot._child(argv)))


def profile(n: int, save: bool) -> None:
    """cProfile one apply of an ``n``-node dump in this process; print the top 25 by cumulative time."""
    from reconciler.cli.main import main as cli_main

    with tempfile.TemporaryDirectory(prefix="bench-simapply-") as tmp:
        recipe, policy, fleet = prepare(Path(tmp), n)
        args = argv_for(recipe, policy, fleet, Path(tmp) / "after.json" if save else None)
        prof = cProfile.Profile()
        with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
            prof.enable()
            with contextlib.suppress(SystemExit):
                cli_main(args)
            prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)


def run(sizes: list[int], save: bool, keep: str | None) -> list[dict[str, float]]:
    """Generate and measure each size; print one table row each; return the rows."""
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="bench-simapply-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"{'nodes':>8} {'pods':>7} {'file MB':>8} {'wall s':>8} {'cpu s':>8} {'peak MB':>8} {'growth':>7}")
    rows: list[dict[str, float]] = []
    for n in sizes:
        recipe, policy, fleet = prepare(work, n)
        out = subprocess.run(
            [sys.executable, __file__, "--one", str(recipe), str(policy), str(fleet),
             str(work / f"after-{n}.json") if save else ""],
            capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        m = json.loads(out.stdout.strip().splitlines()[-1])
        row = {"nodes": n, "file_mb": fleet.stat().st_size / 2**20, **m}
        row["growth"] = m["wall"] / rows[0]["wall"] if rows else 1.0
        rows.append(row)
        print(f"{n:>8} {3 * n:>7} {row['file_mb']:>8.0f} {m['wall']:>8.2f} {m['cpu']:>8.2f} {m['rss_mb']:>8.0f} "
              f"{row['growth']:>6.1f}x", flush=True)
        if not keep:
            fleet.unlink()
            (work / f"after-{n}.json").unlink(missing_ok=True)
    return rows


def main() -> None:
    """Command line; see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--save", action="store_true", help="also --sim-save the fleet after the run (JSON)")
    ap.add_argument("--keep", metavar="DIR", help="write the dumps into DIR and keep them")
    ap.add_argument("--profile", type=int, metavar="N", help="cProfile one in-process run of N nodes")
    ap.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        _one(*a.one)
        return
    if a.profile:
        profile(a.profile, a.save)
        return
    print(f"simulated apply end to end on a kubectl snapshot: {snapshot.PACKAGES} packages of recorded state "
          "per node, 10 % of nodes one package behind, 3 pods per node, 1 PDB (load average at start: "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    run(a.sizes, a.save, a.keep)


if __name__ == "__main__":
    main()

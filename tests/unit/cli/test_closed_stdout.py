"""``apply | head``: a reader that goes away does not stop the rollout (issue #14). The CLI runs in
a subprocess whose stdout pipe is closed after the first line; the run still finishes every node,
exits with its own code (0), and says once on stderr that output was dropped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from reconciler.adapters.sim.fleet import SimFleet
from reconciler.model.nodestate import parse_state, state_key
from reconciler.testing.fleetgen import make_node, write_fleet

SHA = "sha256:" + "a" * 64
NODES = 120  # enough event lines that the output is far larger than a pipe buffer (64 KiB)
RECIPE = f"""\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: NodeRecipe
metadata: {{name: piped}}
spec:
  version: 2026.11.1
  nodeSelector: {{matchLabels: {{pool: gpu}}}}
  interruptionBudget: {{percent: 50}}
  packages:
    base: {{version: 1.0.0, image: ghcr.io/example/base, containerSHA: "{SHA}", interrupt: {{type: reboot}}}}
    tune: {{version: 1.0.0, image: ghcr.io/example/tune, containerSHA: "{SHA}", dependsOn: {{base: 1.0.0}}}}
"""


def test_rollout_finishes_when_stdout_is_closed_early(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    write_fleet(fleet, [make_node(f"node-with-a-long-name-{i:04d}", {"pool": "gpu"}) for i in range(NODES)])
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE)
    saved = tmp_path / "after.yaml"
    err_path = tmp_path / "stderr.txt"
    with open(err_path, "w") as err:
        p = subprocess.Popen([sys.executable, "-m", "reconciler", "apply", str(recipe), "--cluster", f"sim:{fleet}",
                              "--sim-save", str(saved)], stdout=subprocess.PIPE, stderr=err, env=os.environ.copy())
        assert p.stdout is not None
        first = p.stdout.readline()
        p.stdout.close()  # the reader goes away, as `head -1` does
        rc = p.wait(timeout=300)
    stderr = err_path.read_text()
    assert first.strip(), "no first line"
    assert rc == 0, stderr
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    assert stderr.count("standard output was closed") == 1, stderr
    states = {}
    for n in SimFleet.from_file(str(saved)).list_nodes():
        state = parse_state(n.annotations.get(state_key("piped")), node=n.name)
        states[n.name] = sorted((e.name, e.state) for e in state.values())
    assert len(states) == NODES
    assert all(s == [("base", "complete"), ("tune", "complete")] for s in states.values()), states


def test_stdout_and_stderr_on_one_closed_pipe_keep_the_exit_code(tmp_path: Path) -> None:
    """``cmd 2>&1 | head -1``: stdout and stderr are one pipe whose reader went away; the note
    about dropped output cannot be written either, and the exit code is still the verb's (0)."""
    fleet = tmp_path / "fleet.yaml"
    write_fleet(fleet, [make_node(f"node-with-a-long-name-{i:04d}", {"pool": "gpu"}) for i in range(NODES)])
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE)
    r, w = os.pipe()
    p = subprocess.Popen([sys.executable, "-m", "reconciler", "apply", str(recipe), "--cluster", f"sim:{fleet}"],
                         stdout=w, stderr=w, env=os.environ.copy())
    os.close(w)
    with os.fdopen(r, "rb") as reader:
        assert reader.read(1)  # the first byte, then the reader goes away, as `head -c1` does
    assert p.wait(timeout=300) == 0

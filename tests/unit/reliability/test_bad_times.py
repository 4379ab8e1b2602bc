"""Timestamps at the edges of RFC 3339 (issue 36): every timestamp the tool reads — a snapshot's
object times, ``--sim-config startTime`` — is range-checked where it is read (years 0001–9999, and
a simulated clock starting between 1970 and 9000, so what it computes stays within 9999), with a
clear error (exit 2, the file or option named), never ``year 10000 is out of range``; times inside
the range run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.cli.main import main
from reconciler.testing.fleetgen import make_node, write_fleet

RECIPE = """\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: NodeRecipe
metadata: {name: times, version: 2026.11.1}
spec:
  nodeSelector: {matchLabels: {pool: gpu}}
  packages:
    base: {version: 1.0.0, image: ghcr.io/example/base, containerSHA: "sha256:%s"}
""" % ("a" * 64)

#: startTime → (exit code, a piece of the message or of the output)
START_TIMES = {
    "0000-01-01T00:00:00Z": (2, "is not an RFC 3339 time"),
    "0001-01-01T00:00:00Z": (2, "a simulated rollout starts between 1970-01-01T00:00:00Z and 9000-01-01T00:00:00Z"),
    "1969-12-31T23:59:59Z": (2, "a simulated rollout starts between"),
    "1970-01-01T00:00:00Z": (0, "1/1 recipe(s) succeeded"),
    "2026-11-30T12:00:00Z": (0, "1/1 recipe(s) succeeded"),
    "8999-12-31T23:59:59Z": (0, "1/1 recipe(s) succeeded"),
    "9000-01-01T00:00:00Z": (2, "a simulated rollout starts between"),
    "8999-12-31T23:00:00-23:59": (2, "a simulated rollout starts between"),  # 9000 in UTC
    "9999-12-31T23:59:59Z": (2, "a simulated rollout starts between"),
    "9999-12-31T23:59:60Z": (2, "a simulated rollout starts between"),  # a leap second: not an instant here
    "10000-01-01T00:00:00Z": (2, "is not an RFC 3339 time"),
    "2026-02-30T00:00:00Z": (2, "a simulated rollout starts between"),  # no such day
    "2026-11-30T12:00:00": (2, "is not an RFC 3339 time"),  # no offset
}

#: a node's creationTimestamp (the newest one starts the simulated clock) → (exit code, piece)
OBJECT_TIMES = {
    "9999-12-31T23:59:59Z": (2, "the fleet snapshot's newest timestamp"),
    "9000-01-01T00:00:00Z": (2, "the fleet snapshot's newest timestamp"),
    "8999-12-31T23:59:59Z": (0, "1/1 recipe(s) succeeded"),
    "0000-01-01T00:00:00Z": (2, "creationTimestamp"),
    "1969-07-20T20:17:40Z": (0, "1/1 recipe(s) succeeded"),  # none after 1970: the clock's default start
    "1970-01-01T00:00:01Z": (0, "1/1 recipe(s) succeeded"),
}


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE)
    fleet = tmp_path / "fleet.yaml"
    write_fleet(fleet, [make_node(f"n{i}", {"pool": "gpu"}) for i in (1, 2)])
    return {"recipe": recipe, "fleet": fleet, "dir": tmp_path}


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = main(argv)
    out = capsys.readouterr()
    text = out.out + out.err
    assert "Traceback" not in text and "out of range" not in text, text
    return rc, text


@pytest.mark.parametrize("start", list(START_TIMES))
def test_sim_config_start_time_is_checked_where_it_is_read(start: str, inputs: dict[str, Path],
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    code, piece = START_TIMES[start]
    cfg = inputs["dir"] / "what-if.yaml"
    cfg.write_text(f'startTime: "{start}"\n')
    before = inputs["fleet"].read_bytes()
    save = inputs["dir"] / "after.yaml"
    rc, text = _run(["apply", str(inputs["recipe"]), "--cluster", f"sim:{inputs['fleet']}", "--sim-config",
                     str(cfg), "--sim-save", str(save)], capsys)
    assert rc == code and piece in text, text
    if code == 2:
        assert f"{cfg}:1:" in text and "startTime" in text, text  # the file, line and field
        assert not save.exists() and inputs["fleet"].read_bytes() == before
    else:
        assert save.exists()


@pytest.mark.parametrize("stamp", list(OBJECT_TIMES))
def test_a_snapshot_timestamp_is_checked_where_it_is_read(stamp: str, inputs: dict[str, Path],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, piece = OBJECT_TIMES[stamp]
    fleet = inputs["dir"] / "old.yaml"
    nodes = [make_node(f"n{i}", {"pool": "gpu"}) for i in (1, 2)]
    for n in nodes:
        n["metadata"]["creationTimestamp"] = stamp
    write_fleet(fleet, nodes)
    for verb in ("apply", "simulate"):
        rc, text = _run([verb, str(inputs["recipe"]), "--cluster", f"sim:{fleet}"], capsys)
        assert rc == code and piece in text, (verb, text)

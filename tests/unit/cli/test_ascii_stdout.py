"""An ASCII-only stdout (``PYTHONIOENCODING=ascii``; a POSIX locale without UTF-8 mode) never ends a
verb in ``UnicodeEncodeError`` (issue 36: ``plan`` and ``plan -o markdown`` did): tables get ASCII
borders, any other character the encoding lacks is written as an escape (``\\xb7``)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.cli.main import main
from reconciler.testing.fleetgen import make_node, write_fleet

ROOT = Path(__file__).resolve().parents[3]
RECIPE = ROOT / "recipes" / "gpu-training-tuning.yaml"
VERBS = {
    "plan": ["plan", str(RECIPE), "--cluster", "sim:{fleet}"],
    "plan-markdown": ["plan", str(RECIPE), "--cluster", "sim:{fleet}", "-o", "markdown"],
    "simulate": ["simulate", str(RECIPE), "--cluster", "sim:{fleet}"],
    "apply": ["apply", str(RECIPE), "--cluster", "sim:{fleet}", "--sim-save", "{dir}/after.yaml"],
    "apply-markdown": ["apply", str(RECIPE), "--cluster", "sim:{fleet}", "-o", "markdown"],
    "status": ["status", "--cluster", "sim:{fleet}"],
}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ascii") / "fleet.yaml"
    labels = {"nodepool": "gpu", "node.kubernetes.io/instance-type": "p5.48xlarge"}
    write_fleet(path, [make_node(f"gpu-{i}", labels) for i in range(3)])
    return path


def _check(verb: str, out: str) -> None:
    assert out.strip()
    if verb == "plan":
        assert "+---" in out and "\\u2502" not in out  # ASCII borders, not escapes of box characters


@pytest.mark.parametrize("errors", ["strict", "surrogateescape"])  # PYTHONIOENCODING=ascii; the POSIX locale
@pytest.mark.parametrize("verb", list(VERBS))
def test_an_ascii_stdout_gets_every_verb_s_output(verb: str, errors: str, fleet: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    raw = io.BytesIO()
    stdout = io.TextIOWrapper(raw, encoding="ascii", errors=errors, write_through=True)
    monkeypatch.setattr(sys, "stdout", stdout)
    rc = main([a.format(fleet=fleet, dir=fleet.parent) for a in VERBS[verb]])
    stdout.flush()
    assert rc == 0
    _check(verb, raw.getvalue().decode("ascii"))  # every byte is ASCII


@pytest.mark.parametrize("env", [{"PYTHONIOENCODING": "ascii"}, {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0"}])
def test_the_program_under_an_ascii_locale(env: dict[str, str], fleet: Path) -> None:
    environ = {k: v for k, v in os.environ.items() if k not in ("LC_ALL", "LANG", "PYTHONUTF8", "PYTHONIOENCODING")}
    cp = subprocess.run([sys.executable, "-m", "reconciler", *[a.format(fleet=fleet) for a in VERBS["plan"]]],
                        capture_output=True, env={**environ, **env}, timeout=300)
    err = cp.stderr.decode("ascii", "replace")
    assert cp.returncode == 0 and "Traceback" not in err, err
    _check("plan", cp.stdout.decode("ascii"))

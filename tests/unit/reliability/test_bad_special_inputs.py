"""Special files as inputs (issue 36): a FIFO nobody writes, a character device that never ends
(``/dev/zero``'s numbers, made with ``mknod`` in the scratch directory), a socket and a directory,
given as every input the tool reads — a recipe (directly and inside a recipes directory), a
``--policy``, ``--cluster sim:``, ``--plan``, ``--sim-config``, a ``draw`` result, ``--kubeconfig``,
each entry of ``$KUBECONFIG``, a kubeconfig's ``tokenFile``, and the recipe directory of
``controller --source directory --once``.

Each is refused at once (a hang would time the test out: every case runs under a 20 s alarm) with
exit 2, one error naming the path and what it is (and the option, where an option named it), no
traceback, and nothing written.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from reconciler.cli.main import main
from reconciler.testing.fleetgen import make_node, write_fleet

ROOT = Path(__file__).resolve().parents[3]
RECIPE = ROOT / "recipes" / "cve-ksmbd-blacklist.yaml"
ZERO = os.makedev(1, 5)
KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:9"}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
users: [{name: u, user: {tokenFile: TOKEN}}]
"""


def _fifo(p: Path) -> str:
    os.mkfifo(p)
    return "is a FIFO (named pipe)"


def _zero(p: Path) -> str:
    try:
        os.mknod(p, stat.S_IFCHR | 0o666, ZERO)
    except PermissionError:
        pytest.skip("mknod is not permitted here")
    return "is a character device"


def _socket(p: Path) -> str:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(p))
    _SOCKETS.append(s)
    return "is a socket"


def _directory(p: Path) -> str:
    p.mkdir()
    return "is a directory"


_SOCKETS: list[socket.socket] = []
KINDS: dict[str, Callable[[Path], str]] = {"fifo": _fifo, "zero": _zero, "socket": _socket, "directory": _directory}


@pytest.fixture(autouse=True)
def _alarm() -> Iterator[None]:
    """A case that blocks (the defect) fails after 20 s instead of hanging the session."""

    def boom(*_: object) -> None:
        raise TimeoutError("the command blocked on a special file")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(20)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        while _SOCKETS:
            _SOCKETS.pop().close()


def _world(d: Path) -> dict[str, Path]:
    fleet = d / "fleet.yaml"
    write_fleet(fleet, [make_node(f"n{i}", {"nodepool": "gpu"}) for i in (1, 2)])
    recipe = d / "recipe.yaml"
    shutil.copy(RECIPE, recipe)
    return {"fleet": fleet, "recipe": recipe}


#: case → (argv with {bad} and the world's files, the option named or "" when the path is the position,
#: environment)
CASES: dict[str, tuple[list[str], str, dict[str, str]]] = {
    "recipe": (["validate", "{bad}"], "", {}),
    "recipe-apply": (["apply", "{bad}", "--cluster", "sim:{fleet}"], "", {}),
    "recipe-in-directory": (["plan", "{dir}", "--cluster", "sim:{fleet}"], "", {}),
    "policy": (["plan", "{recipe}", "--cluster", "sim:{fleet}", "--policy", "{bad}"], "", {}),
    "fleet": (["plan", "{recipe}", "--cluster", "sim:{bad}"], "--cluster", {}),
    "fleet-apply": (["apply", "{recipe}", "--cluster", "sim:{bad}"], "--cluster", {}),
    "plan-file": (["apply", "{recipe}", "--cluster", "sim:{fleet}", "--plan", "{bad}"], "--plan", {}),
    "sim-config": (["simulate", "{recipe}", "--cluster", "sim:{fleet}", "--sim-config", "{bad}"], "--sim-config", {}),
    "draw-input": (["draw", "{bad}", "--report", "{scratch}/r.html"], "", {}),
    "kubeconfig": (["plan", "{recipe}", "--kubeconfig", "{bad}"], "--kubeconfig", {}),
    "kubeconfig-env": (["plan", "{recipe}"], "$KUBECONFIG", {"KUBECONFIG": "{bad}"}),
    "kubeconfig-env-second": (["plan", "{recipe}"], "$KUBECONFIG", {"KUBECONFIG": "{scratch}/none:{bad}"}),
    "token-file": (["plan", "{recipe}", "--kubeconfig", "{kubeconfig}"], "tokenFile", {}),
    "controller-directory": (["controller", "--source", "directory", "--recipes", "{dir}", "--once",
                              "--cluster", "sim:{fleet}", "--metrics-bind-address", "0",
                              "--health-probe-bind-address", "0"], "", {}),
}


#: A directory of recipes (or policies) is a valid input: not a case there.
PAIRS = [(c, k) for c in CASES for k in KINDS
         if not (k == "directory" and c in ("recipe", "recipe-apply", "recipe-in-directory", "controller-directory",
                                            "policy"))]


@pytest.mark.parametrize(("case", "kind"), PAIRS, ids=[f"{c}-{k}" for c, k in PAIRS])
def test_a_special_file_as_input_is_refused_at_once(case: str, kind: str, tmp_path: Path,
                                                    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    argv, option, env = CASES[case]
    world = _world(tmp_path)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    shutil.copy(RECIPE, recipes / "good.yaml")
    bad = (recipes if case in ("recipe-in-directory", "controller-directory") else tmp_path) / "bad.yaml"
    words = KINDS[kind](bad)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG.replace("TOKEN", str(bad)))
    values = {"bad": str(bad), "dir": str(recipes), "scratch": str(scratch), "kubeconfig": str(kubeconfig),
              **{k: str(v) for k, v in world.items()}}
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    for k, v in env.items():
        monkeypatch.setenv(k, v.format(**values))
    before = hashlib.sha256(world["fleet"].read_bytes()).hexdigest()
    try:
        rc = main([a.format(**values) for a in argv])
    except SystemExit as e:
        rc = int(e.code or 0)
    out = capfd.readouterr()
    err = out.err + caplog.text  # the controller logs its errors
    assert "Traceback" not in err + out.out
    assert rc == 2, f"{case}/{kind}: exit {rc}\n{err}"
    errors = [x for x in err.splitlines() if x.strip()]
    assert errors, err
    where = str(kubeconfig) if case == "token-file" else str(bad)  # a kubeconfig error is at its field
    named = [x for x in errors if where in x]
    assert named, f"the path is not named: {errors}"
    assert any(words in x for x in named), f"{case}/{kind}: {words!r} not in {named}"
    if option:
        assert any(option in x for x in named), f"{case}/{kind}: {option} not named: {named}"
    assert hashlib.sha256(world["fleet"].read_bytes()).hexdigest() == before
    assert list(scratch.iterdir()) == []
    if kind == "fifo":
        assert stat.S_ISFIFO(os.lstat(bad).st_mode)


def test_an_oversized_input_is_refused_before_it_is_read(tmp_path: Path) -> None:
    from reconciler.errors import InputError
    from reconciler.fileio.reading import read_input

    big = tmp_path / "big.yaml"
    with open(big, "wb") as fh:
        fh.truncate(1 << 30)  # sparse: 1 GiB that costs nothing unless read
    with pytest.raises(InputError, match="is 1073741824 bytes, larger than the 1000 byte limit"):
        read_input(str(big), 1000, option="--plan", what="plan file")

"""Every output option written over every kind of path (issue 36): a character device made with
``mknod`` (a null one, a full one), a block device, a FIFO with and without a reader, a socket, a
symlink to a device and to a regular file, one of the command's inputs, a name longer than
``NAME_MAX`` and a directory. Devices are made only in pytest's scratch directory (the test runs as
root; where ``mknod`` is not permitted the device rows are skipped).

Each case asserts the documented outcome (docs/reference/files.md): the exit code, the option named on
stderr, and what the path is afterwards (a device or FIFO is still one, an input unchanged, a
symlink still a symlink), and that no temporary file is left beside it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import socket
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconciler.cli.main import main
from reconciler.testing.fleetgen import make_node, write_fleet

ROOT = Path(__file__).resolve().parents[3]
RECIPE_SRC = ROOT / "recipes" / "cve-ksmbd-blacklist.yaml"
NULL, FULL = os.makedev(1, 3), os.makedev(1, 7)  # what /dev/null and /dev/full are
LOOP = os.makedev(7, 200)  # a loop block device number no test machine has set up


@dataclass
class World:
    """The inputs of a case, in its own scratch directory."""

    dir: Path
    recipe: Path
    fleet: Path
    results: Path

    def argv(self, verb: str, target: str) -> list[str]:
        """The command line of ``verb`` writing its output option to ``target``."""
        sim = ["--cluster", f"sim:{self.fleet}"]
        return {
            "apply --report": ["apply", str(self.recipe), *sim, "--report", target],
            "plan --report": ["plan", str(self.recipe), *sim, "--report", target],
            "simulate --report": ["simulate", str(self.recipe), *sim, "--report", target],
            "draw --report": ["draw", str(self.results), "--report", target],
            "apply --sim-save": ["apply", str(self.recipe), *sim, "--sim-save", target],
            "node ignore --sim-save": ["node", "ignore", "n1", *sim, "-y", "--sim-save", target],
            "apply --metrics-file": ["apply", str(self.recipe), *sim, "--metrics-file", target],
            "metrics --metrics-file": ["metrics", str(self.recipe), *sim, "--metrics-file", target],
            "apply --events-file": ["apply", str(self.recipe), *sim, "--events-file", target],
        }[verb]


VERBS = ["apply --report", "plan --report", "simulate --report", "draw --report", "apply --sim-save",
         "node ignore --sim-save", "apply --metrics-file", "metrics --metrics-file", "apply --events-file"]


def option_of(verb: str) -> str:
    return verb.split()[-1]


@pytest.fixture
def world(tmp_path: Path) -> World:
    fleet = tmp_path / "fleet.yaml"
    write_fleet(fleet, [make_node(f"n{i}", {"nodepool": "gpu"}) for i in (1, 2)])
    recipe = tmp_path / "recipe.yaml"
    shutil.copy(RECIPE_SRC, recipe)
    results = tmp_path / "results.json"
    return World(tmp_path, recipe, fleet, results)


def _mknod(path: Path, mode: int, dev: int) -> None:
    try:
        os.mknod(path, mode | 0o666, dev)
    except PermissionError:
        pytest.skip("mknod is not permitted here")


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = int(e.code or 0)
    out = capsys.readouterr()
    assert "Traceback" not in out.err + out.out
    return rc, out.out, out.err


def _no_temporary_left(d: Path) -> None:
    left = [p.name for p in d.iterdir() if p.name.startswith(".reconciler-")]
    assert not left, left


def _read_now(fd: int) -> bytes:
    """What the FIFO holds now (b"" when empty)."""
    try:
        return os.read(fd, 1 << 16)
    except BlockingIOError:
        return b""


@contextmanager
def _reader(path: Path) -> Iterator[list[bytes]]:
    """A thread holding ``path`` (a FIFO) open for reading, collecting what it gets until the
    block ends."""
    got: list[bytes] = []
    done = threading.Event()
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)

    def read() -> None:
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                chunk = b""
            if chunk:
                got.append(chunk)
            elif done.is_set():  # the writer is done: what it wrote after our last look is read now
                while rest := _read_now(fd):
                    got.append(rest)
                return
            else:
                time.sleep(0.005)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    try:
        yield got
    finally:
        done.set()
        t.join(10)
        os.close(fd)


@pytest.fixture(params=VERBS)
def verb(request: pytest.FixtureRequest, world: World, capsys: pytest.CaptureFixture[str]) -> str:
    v: str = request.param
    if v.startswith("draw"):
        assert main(["apply", str(world.recipe), "--cluster", f"sim:{world.fleet}", "-o", "json"]) == 0
        world.results.write_text(capsys.readouterr().out)
    capsys.readouterr()
    return v


# --------------------------------------------------------------------------------------- devices


def test_a_null_device_is_written_in_place(verb: str, world: World, capsys: pytest.CaptureFixture[str]) -> None:
    dev = world.dir / "null"
    _mknod(dev, stat.S_IFCHR, NULL)
    rc, _, err = _run(world.argv(verb, str(dev)), capsys)
    assert rc == 0, err
    st = os.lstat(dev)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == NULL  # not replaced by a regular file
    _no_temporary_left(world.dir)


def test_a_full_device_fails_the_output_after_the_work_exit_5(verb: str, world: World,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    dev = world.dir / "full"
    _mknod(dev, stat.S_IFCHR, FULL)
    rc, out, err = _run(world.argv(verb, str(dev)), capsys)
    assert rc == 5, err
    assert option_of(verb) in err and "No space left on device" in err, err
    assert stat.S_ISCHR(os.lstat(dev).st_mode)
    if verb == "apply --events-file":  # the rollout went on to its end
        assert "complete" in out + err and "later events are not written" in err, out + err
    _no_temporary_left(world.dir)


def test_a_block_device_is_refused_before_any_work(verb: str, world: World,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    dev = world.dir / "disk"
    _mknod(dev, stat.S_IFBLK, LOOP)
    before = _digest(world.fleet)
    rc, out, err = _run(world.argv(verb, str(dev)), capsys)
    assert rc == 2, err
    assert option_of(verb) in err and "is a block device" in err, err
    assert "stage-start" not in out and _digest(world.fleet) == before
    assert stat.S_ISBLK(os.lstat(dev).st_mode)


def test_a_symlink_to_a_device_is_written_through(verb: str, world: World,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    dev = world.dir / "null"
    _mknod(dev, stat.S_IFCHR, NULL)
    link = world.dir / "stdout-like"
    os.symlink(dev, link)
    rc, _, err = _run(world.argv(verb, str(link)), capsys)
    assert rc == 0, err
    assert os.path.islink(link) and stat.S_ISCHR(os.lstat(dev).st_mode)


# ----------------------------------------------------------------------------------------- FIFOs


def test_a_fifo_without_a_reader_is_refused_before_any_work(verb: str, world: World,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    fifo = world.dir / "pipe"
    os.mkfifo(fifo)
    before = _digest(world.fleet)
    rc, out, err = _run(world.argv(verb, str(fifo)), capsys)
    assert rc == 2, err
    assert option_of(verb) in err and "no reader" in err, err
    assert "stage-start" not in out and _digest(world.fleet) == before
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_fifo_with_a_reader_gets_the_output(verb: str, world: World, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = world.dir / "pipe"
    os.mkfifo(fifo)
    with _reader(fifo) as got:
        rc, _, err = _run(world.argv(verb, str(fifo)), capsys)
        assert rc == 0, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    text = b"".join(got).decode()
    marker = {"--report": "<svg", "--sim-save": "kind: List", "--metrics-file": "# TYPE",
              "--events-file": "complete"}[option_of(verb)]
    assert marker in text, text[:300]


def test_a_socket_is_refused(verb: str, world: World, capsys: pytest.CaptureFixture[str]) -> None:
    path = world.dir / "s.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        rc, _, err = _run(world.argv(verb, str(path)), capsys)
    assert rc == 2 and option_of(verb) in err and "is a socket" in err, err


# -------------------------------------------------------------------------------- regular files


def test_a_symlink_to_a_regular_file_replaces_the_file_and_keeps_the_link(
        verb: str, world: World, capsys: pytest.CaptureFixture[str]) -> None:
    real = world.dir / "real.out"
    real.write_text("old\n")
    os.chmod(real, 0o640)
    link = world.dir / "link.out"
    os.symlink(real.name, link)
    rc, _, err = _run(world.argv(verb, str(link)), capsys)
    assert rc == 0, err
    assert os.path.islink(link) and os.readlink(link) == real.name
    assert real.read_text() != "old\n" and stat.S_IMODE(real.stat().st_mode) == 0o640
    _no_temporary_left(world.dir)


@pytest.mark.parametrize("verb", [v for v in VERBS if not v.startswith("node")], indirect=True)
def test_an_input_is_refused_before_any_work(verb: str, world: World, capsys: pytest.CaptureFixture[str]) -> None:
    target = world.results if verb.startswith("draw") else world.recipe
    before, fleet_before = _digest(target), _digest(world.fleet)
    rc, out, err = _run(world.argv(verb, str(target)), capsys)
    assert rc == 2, err
    assert option_of(verb) in err and "is also" in err and "input" in err, err
    assert _digest(target) == before and _digest(world.fleet) == fleet_before and "stage-start" not in out


def test_the_fleet_file_is_an_input_too(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    before = _digest(world.fleet)
    for option in ("--events-file", "--report", "--metrics-file"):
        rc, _, err = _run(["apply", str(world.recipe), "--cluster", f"sim:{world.fleet}", option, str(world.fleet)],
                          capsys)
        assert rc == 2 and option in err and "is also the fleet input" in err, err
        assert _digest(world.fleet) == before
    # --sim-save may name it: the fleet saved over itself, as the operation verbs do by default
    rc, _, err = _run(["apply", str(world.recipe), "--cluster", f"sim:{world.fleet}", "--sim-save", str(world.fleet)],
                      capsys)
    assert rc == 0 and _digest(world.fleet) != before, err


def test_two_outputs_on_one_file_are_refused(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(world.dir / "both.out")
    rc, _, err = _run(["apply", str(world.recipe), "--cluster", f"sim:{world.fleet}", "--report", out,
                       "--metrics-file", out], capsys)
    assert rc == 2 and "--metrics-file" in err and "is also the --report output" in err, err
    assert not os.path.exists(out)


def test_a_name_longer_than_name_max_is_refused_before_any_work(verb: str, world: World,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    target = world.dir / ("x" * 300 + ".out")
    before = _digest(world.fleet)
    rc, out, err = _run(world.argv(verb, str(target)), capsys)
    assert rc == 2, err
    assert option_of(verb) in err and "file name too long" in err.lower(), err
    assert "stage-start" not in out and _digest(world.fleet) == before


def test_a_directory_is_refused(verb: str, world: World, capsys: pytest.CaptureFixture[str]) -> None:
    d = world.dir / "a-dir"
    d.mkdir()
    rc, _, err = _run(world.argv(verb, str(d)), capsys)
    assert rc == 2 and option_of(verb) in err and "is a directory" in err, err


def test_nothing_is_created_when_the_input_is_bad(verb: str, world: World,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    if verb.startswith(("draw", "node")):
        world.results.write_text("{")  # draw's input is bad; node ignore names a node that is missing
    else:
        world.recipe.write_text("apiVersion: [\n")
    target = world.dir / "new.out"
    argv = world.argv(verb, str(target))
    if verb.startswith("node"):
        argv[2] = "no-such-node"
    rc, _, err = _run(argv, capsys)
    assert rc == 2, err
    assert not target.exists()
    _no_temporary_left(world.dir)


def test_every_output_option_is_covered() -> None:
    from reconciler.cli.optcheck import OUTPUTS

    assert {o for _, o, _ in OUTPUTS} == {option_of(v) for v in VERBS}


@pytest.fixture
def full_filesystem(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs mounted in the scratch directory and filled up (skipped where mounting is not
    permitted), unmounted after."""
    import subprocess

    mnt = tmp_path / "full"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("mounting a tmpfs is not permitted here")
    try:
        with open(mnt / "filler", "wb", buffering=0) as fh, contextlib.suppress(OSError):
            while True:
                fh.write(b"\0" * 512)
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


@pytest.mark.parametrize("verb", VERBS, indirect=True)
def test_a_full_filesystem_is_refused_before_any_work(verb: str, world: World, full_filesystem: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    target = full_filesystem / "out.txt"
    before = _digest(world.fleet)
    rc, out, err = _run(world.argv(verb, str(target)), capsys)
    assert rc == 2, err
    assert option_of(verb) in err and "no room for the file" in err and "No space left on device" in err, err
    assert "stage-start" not in out and _digest(world.fleet) == before
    assert not target.exists() and sorted(p.name for p in full_filesystem.iterdir()) == ["filler"]


def test_a_fifo_reader_sees_the_end_when_the_command_returns(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = world.dir / "pipe"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        rc, _, err = _run(["plan", str(world.recipe), "--cluster", f"sim:{world.fleet}", "--report", str(fifo)], capsys)
        assert rc == 0, err
        got = b""
        while chunk := os.read(fd, 1 << 16):  # b"" only once no writer holds the FIFO open
            got += chunk
        assert b"<svg" in got
    finally:
        os.close(fd)

"""The controller notices what is not in the cluster: mounted recipe and policy files
(``--files-interval``; a ConfigMap volume is rewritten in place by the kubelet), a stop request while
it waits for its first LISTs, an unreachable API server under ``--once`` (exit 4), and it says in
its log what each pass did."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from reconciler.cli.main import main
from reconciler.controller.source import files_fingerprint

ROOT = Path(__file__).resolve().parents[3]
FLEET = str(ROOT / "examples" / "fleets" / "gpu-24.yaml")
OFF = ["--metrics-bind-address", "0", "--health-probe-bind-address", "0"]


def configmap_dir(path: Path, files: dict[str, str], generation: int) -> None:
    """Lay ``files`` out as the kubelet lays out a ConfigMap volume: ``..<ts>/`` with the data,
    ``..data`` → it, and each key a symlink through ``..data``; a new generation swaps ``..data``."""
    path.mkdir(exist_ok=True)
    stamp = path / f"..2026_12_02_{generation}"
    stamp.mkdir()
    for k, v in files.items():
        (stamp / k).write_text(v)
    tmp = path / "..data_tmp"
    os.symlink(stamp.name, tmp)
    os.replace(tmp, path / "..data")
    for k in files:
        if not (path / k).is_symlink():
            os.symlink(f"..data/{k}", path / k)


def test_fingerprint_follows_a_configmap_volume_swap_and_survives_a_symlink_loop(tmp_path: Path) -> None:
    d = tmp_path / "recipes"
    configmap_dir(d, {"a.yaml": "one"}, 1)
    first = files_fingerprint([str(d)])
    assert files_fingerprint([str(d)]) == first  # stable
    configmap_dir(d, {"a.yaml": "two"}, 2)
    second = files_fingerprint([str(d)])
    assert second != first
    os.symlink(".", d / "loop")  # a directory linking to itself must not hang the walk
    assert files_fingerprint([str(d)]) == second  # ... and adds no file
    missing = files_fingerprint([str(tmp_path / "nope.yaml")])
    assert missing == files_fingerprint([str(tmp_path / "nope.yaml")])


def _serve(argv: list[str]) -> tuple[Any, threading.Thread]:
    from reconciler.cli.clusters import open_cluster
    from reconciler.cli.controller import _check
    from reconciler.cli.main import build_parser
    from reconciler.cli.wiring import build

    args = build_parser().parse_args(argv)
    _check(args)
    wired = build(args, open_cluster(args), "test/1")
    wired.start()
    t = threading.Thread(target=wired.controller.serve, daemon=True)
    t.start()
    return wired, t


def _wait(what: str, fn: Any, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if fn():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_changed_recipe_file_starts_a_pass_within_the_interval(tmp_path: Path) -> None:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    src = (ROOT / "recipes" / "gpu-training-tuning.yaml").read_text()
    (recipes / "r.yaml").write_text(src)
    wired, t = _serve(["controller", "--source", "directory", "--recipes", str(recipes), "--policy",
                       str(ROOT / "policies"), "--cluster", f"sim:{FLEET}", "--files-interval", "0.3", *OFF])
    ctl = wired.controller
    try:
        _wait("the first pass", lambda: ctl.passes >= 1 and not ctl._in_pass.is_set())
        time.sleep(1.0)
        assert ctl.passes == 1  # nothing changed: no pass
        (recipes / "r.yaml").write_text(src.replace("version: 2026.11.2", "version: 2026.11.3"))
        _wait("a pass after the file changed", lambda: ctl.passes >= 2)
        assert ctl.metrics.triggers.labels("files")._value.get() >= 1
    finally:
        ctl.stop()
        t.join(30)
        wired.close()


def test_a_stop_request_ends_the_wait_for_the_first_lists() -> None:
    from reconciler.adapters.host import SystemClock
    from reconciler.cli.wiring import Wired
    from reconciler.controller.loop import Controller, ControllerSettings
    from reconciler.controller.source import DirectorySource
    from reconciler.session import Session

    class NeverSynced:
        name = "nodes"
        last_error = "connection refused"

        def __init__(self) -> None:
            self.synced = threading.Event()

        def start(self) -> None:
            pass

    ctl = Controller(DirectorySource([]), Session(object(), SystemClock()), ControllerSettings(holder="t"))  # type: ignore[arg-type]
    wired = Wired(ctl, None, informers=[NeverSynced(), NeverSynced()])  # type: ignore[arg-type]
    threading.Timer(0.3, ctl.stop).start()
    t0 = time.monotonic()
    wired.start_watches(120.0)
    assert time.monotonic() - t0 < 5


def test_once_on_an_unreachable_cluster_is_exit_4(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kc = tmp_path / "kubeconfig"
    kc.write_text("apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: c, cluster: {server: "
                  "'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t0ps3cret}}]\n"
                  "contexts: [{name: c, context: {cluster: c, user: u}}]\n")
    t0 = time.monotonic()
    rc = main(["controller", "--kubeconfig", str(kc), "--once", *OFF])
    err = capsys.readouterr().err
    assert rc == 4, err
    assert time.monotonic() - t0 < 60 and "t0ps3cret" not in err and "Traceback" not in err


def test_once_logs_each_recipe_result_and_the_failed_nodes(caplog: pytest.LogCaptureFixture) -> None:
    rc = main(["controller", "--source", "directory", "--recipes", str(ROOT / "recipes"), "--policy",
               str(ROOT / "policies"), "--cluster", f"sim:{FLEET}", "--sim-config",
               str(ROOT / "examples" / "fleets" / "what-if.yaml"), "--once", *OFF])
    assert rc == 1
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "reconciler.controller.loop"]
    assert any(lvl == "INFO" and m.startswith("recipe ") and "completed" in m for lvl, m in lines), lines
    assert any(lvl == "WARNING" and " failed at " in m for lvl, m in lines), lines


def test_the_log_level_option(caplog: pytest.LogCaptureFixture) -> None:
    rc = main(["controller", "--source", "directory", "--recipes", str(ROOT / "recipes" / "gpu-training-tuning.yaml"),
               "--policy", str(ROOT / "policies"), "--cluster", f"sim:{FLEET}", "--once", "--log-level", "warning",
               *OFF])
    assert rc == 0
    import logging

    assert logging.getLogger().level == logging.WARNING
    assert not [r for r in caplog.records if r.levelno < logging.WARNING and r.name.startswith("reconciler")]

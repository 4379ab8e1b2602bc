"""A kubeconfig credential plugin's output is never printed (hostile-input check).

The ``kubernetes`` client runs a kubeconfig user's ``exec`` credential plugin
(client.authentication.k8s.io) and, when it fails, logs everything it wrote on stderr through the
root logger (``logging.error`` in kube_config.py), which the CLI's log handler printed: a plugin
that writes its token to stderr got it printed by us. A gcp ``auth-provider`` ``cmd-path`` command
that fails raised an error quoting its arguments and its stderr. Here the plugins are real scripts
in ``tmp_path``; the run must end with one line naming the kubeconfig user, the plugin's command
and its exit status (exit 4, a cluster error), and nothing the plugin wrote, nor its arguments or
environment, at any verbosity.
"""

from __future__ import annotations

import json
import logging
import stat
from pathlib import Path

import pytest

from reconciler.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
RECIPE = str(ROOT / "recipes" / "containerd-limits.yaml")

STDERR_SECRET = "EXECSECRETonSTDERR42"
ARG_SECRET = "ARGSECRETinARGS42"
ENV_SECRET = "ENVSECRETinENV42"
TOKEN = "EXECTOKENfromSTDOUT42"
SECRETS = (STDERR_SECRET, ARG_SECRET, ENV_SECRET, TOKEN)
API = "client.authentication.k8s.io/v1"


def _script(tmp_path: Path, name: str, body: str) -> Path:
    p = tmp_path / name
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return p


def _failing(tmp_path: Path) -> Path:
    """Writes a secret (and its environment's) to stderr, then exits 3."""
    return _script(tmp_path, "failing-plugin", f'echo "token: {STDERR_SECRET} env: $FOO args: $*" >&2\nexit 3\n')


def _succeeding(tmp_path: Path) -> Path:
    """Writes a secret to stderr and a valid ExecCredential on stdout, exits 0."""
    cred = json.dumps({"apiVersion": API, "kind": "ExecCredential", "status": {"token": TOKEN}})
    return _script(tmp_path, "chatty-plugin", f'echo "debug: {STDERR_SECRET}" >&2\necho \'{cred}\'\n')


def _kubeconfig(tmp_path: Path, user: dict[str, object]) -> Path:
    kc = tmp_path / "kubeconfig"
    kc.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "plugin-user", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "plugin-user"}}]}))
    return kc


def _exec_user(command: Path) -> dict[str, object]:
    return {"exec": {"apiVersion": API, "command": str(command), "args": ["--password", ARG_SECRET],
                     "env": [{"name": "FOO", "value": ENV_SECRET}], "interactiveMode": "Never"}}


def _assert_clean(*texts: str) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text, (secret, text)


VERBOSITY = [[], ["-v"], ["-vv"]]


@pytest.mark.parametrize("verbose", VERBOSITY, ids=["quiet", "-v", "-vv"])
def test_failing_exec_plugin_is_one_line_naming_user_command_and_status(
        verbose: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    plugin = _failing(tmp_path)
    kc = _kubeconfig(tmp_path, _exec_user(plugin))
    with caplog.at_level(logging.DEBUG):
        rc = main(["plan", RECIPE, "--kubeconfig", str(kc), *verbose])
    out = capsys.readouterr()
    _assert_clean(out.out, out.err, caplog.text)
    assert rc == 4, out.err
    lines = [line for line in out.err.splitlines() if line.strip()]
    assert len(lines) == 1, out.err  # no "ERROR root: exec: ..." line before it, no urllib3 retries
    line = lines[0]
    assert line.startswith(f"error: kubeconfig {kc}: user 'plugin-user': ")
    assert f"exec credential plugin {str(plugin)!r} exited with status 3" in line
    assert "--password" not in line and "FOO" not in line
    assert "127.0.0.1:1" not in line  # it stopped at the credential, it did not go on without one


@pytest.mark.parametrize("verbose", VERBOSITY, ids=["quiet", "-v", "-vv"])
def test_succeeding_exec_plugin_stderr_is_not_printed(verbose: list[str], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str],
                                                      caplog: pytest.LogCaptureFixture) -> None:
    kc = _kubeconfig(tmp_path, _exec_user(_succeeding(tmp_path)))
    with caplog.at_level(logging.DEBUG):
        rc = main(["plan", RECIPE, "--kubeconfig", str(kc), *verbose])
    out = capsys.readouterr()
    _assert_clean(out.out, out.err, caplog.text)
    assert rc == 4, out.err  # the credential was fine; the server is not there
    assert "cannot reach the Kubernetes API server at https://127.0.0.1:1" in out.err.splitlines()[-1]


@pytest.mark.parametrize("body, why", [
    ("echo 'not json' ; echo " + STDERR_SECRET + " >&2\n", "wrote no ExecCredential JSON on its standard output"),
    (f"echo '{{\"apiVersion\": \"v1beta9\", \"kind\": \"ExecCredential\", \"status\": {{\"token\": \"{TOKEN}\"}}}}'\n",
     "answered an ExecCredential of another apiVersion"),
    (f"echo '{{\"apiVersion\": \"{API}\", \"kind\": \"ExecCredential\", \"status\": {{\"tok\": \"{TOKEN}\"}}}}'\n",
     "answered an ExecCredential with neither a token nor a client certificate"),
], ids=["not-json", "api-version", "no-token"])
def test_bad_exec_plugin_answers_are_named_not_quoted(body: str, why: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    plugin = _script(tmp_path, "odd-plugin", body)
    kc = _kubeconfig(tmp_path, _exec_user(plugin))
    rc = main(["plan", RECIPE, "--kubeconfig", str(kc), "-vv"])
    out = capsys.readouterr()
    _assert_clean(out.out, out.err)
    assert rc == 4, out.err
    lines = [line for line in out.err.splitlines() if line.strip()]
    assert len(lines) == 1, out.err
    assert lines[0].startswith(f"error: kubeconfig {kc}: user 'plugin-user': the exec credential plugin "
                               f"{str(plugin)!r} {why}")


def test_missing_exec_plugin_says_it_could_not_be_started(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kc = _kubeconfig(tmp_path, _exec_user(tmp_path / "no-such-plugin"))
    assert main(["plan", RECIPE, "--kubeconfig", str(kc)]) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"exec credential plugin {str(tmp_path / 'no-such-plugin')!r} could not be started" in err


def test_failing_gcp_cmd_path_shows_neither_its_arguments_nor_its_stderr(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plugin = _failing(tmp_path)
    kc = _kubeconfig(tmp_path, {"auth-provider": {"name": "gcp",
                                                  "config": {"cmd-path": f"{plugin} --key {ARG_SECRET}"}}})
    rc = main(["plan", RECIPE, "--kubeconfig", str(kc), "-vv"])
    out = capsys.readouterr()
    _assert_clean(out.out, out.err)
    assert rc == 4, out.err
    assert out.err.splitlines() == [
        f"error: kubeconfig {kc}: user 'plugin-user': the gcp auth-provider cmd-path command {str(plugin)!r} "
        "exited with status 3 (what it wrote on stderr is not shown: it may hold credentials; "
        "run the command yourself to see it)"]

"""reconciler.adapters.kube.auth: a credential plugin's failure is logged in our words, never its
output, also when the client renews the credential during a run (no collector active), and the
filter leaves every other record alone."""

from __future__ import annotations

import json
import logging
import stat
from pathlib import Path

import pytest

from reconciler.adapters.kube import auth as kubeauth
from reconciler.adapters.kube.cluster import KubeCluster

SECRET = "RENEWALSECRETonSTDERR42"
API = "client.authentication.k8s.io/v1"


def _kubeconfig(tmp_path: Path) -> Path:
    """An exec plugin that answers an already expired token the first time and fails (a secret on
    stderr, exit 5) every time after: the client runs it again before each request."""
    marker = tmp_path / "ran-once"
    cred = json.dumps({"apiVersion": API, "kind": "ExecCredential",
                       "status": {"token": "first", "expirationTimestamp": "2000-01-01T00:00:00Z"}})
    plugin = tmp_path / "plugin"
    plugin.write_text(f"#!/bin/sh\nif [ -e {marker} ]; then echo '{SECRET}' >&2; exit 5; fi\n"
                      f"touch {marker}\necho '{cred}'\n")
    plugin.chmod(plugin.stat().st_mode | stat.S_IXUSR)
    kc = tmp_path / "kubeconfig"
    kc.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"exec": {"apiVersion": API, "command": str(plugin)}}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}))
    return kc


def test_failure_while_renewing_is_logged_without_the_plugin_output(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    cluster = KubeCluster.from_kubeconfig(str(_kubeconfig(tmp_path)))
    try:
        cfg = cluster.api_client.configuration
        with caplog.at_level(logging.DEBUG):
            cfg.get_api_key_with_prefix("BearerToken")  # what the client does before each request
    finally:
        cluster.close()
    assert SECRET not in caplog.text
    (record,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert record.getMessage().startswith("kubeconfig: a credential command (exec plugin) exited with status 5 "
                                          "while the credential was renewed (what it wrote on stderr is not shown")


def test_other_records_pass_unchanged() -> None:
    record = logging.LogRecord("root", logging.ERROR, "/somewhere/else.py", 1, "exec: process returned 3. %s",
                               ("x",), None)
    assert kubeauth.CredentialLogFilter().filter(record)
    assert record.getMessage() == "exec: process returned 3. x"


@pytest.mark.parametrize("text, words", [
    ("exec: process returned 3. token: abc", "exited with status 3"),
    ("exec: process returned -9", "exited with status -9"),
    ("[Errno 2] No such file or directory: '/nope'", "could not be started (no such file, or not executable)"),
    ("exec: failed to decode process output: Expecting value", "wrote no ExecCredential JSON on its standard output"),
    ("something new", "failed"),
])
def test_plugin_failure_words(text: str, words: str) -> None:
    assert kubeauth.plugin_failure(text).words() == words

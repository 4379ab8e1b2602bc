"""Kubeconfig credential commands fail in our words: what they wrote is never shown.

Two kinds of kubeconfig user run a command to get their credential, and the ``kubernetes``
client (read in its v37 ``kubernetes/config/kube_config.py`` and ``exec_provider.py``) quotes the
command's output when it fails:

* an ``exec`` credential plugin (client.authentication.k8s.io ExecCredential): the client runs it
  with stderr piped (unless stdout is a terminal), and when it exits non-zero raises
  ``ConfigException("exec: process returned N. <everything it wrote on stderr>")``;
  ``KubeConfigLoader._load_from_exec_plugin`` catches every exception and *logs* its text with
  ``logging.error`` on the root logger, then goes on without a credential. A plugin that prints its
  token on stderr got it printed by our log handler (``ERROR root: exec: … <token>``);
* a gcp ``auth-provider`` with a ``cmd-path``: ``CommandTokenSource`` raises
  ``ConfigException("cmd-path: process returned N\\nCmd: <command and arguments>\\nStderr: …")``.

What is done about it (a rule for the class, not a match on one secret):

* :class:`CredentialLogFilter`, installed by :func:`install_filter` on the root logger (and the
  client's module loggers, should a later version log there): a record logged from the client's
  kubeconfig loader or exec provider module never reaches a handler with the client's text. While
  :func:`collecting` is active in the thread (``KubeCluster.from_kubeconfig`` loading the
  kubeconfig) it is dropped and handed to the collector as a :class:`PluginFailure`; otherwise (a
  credential renewed during a run) its message is replaced by :meth:`PluginFailure.words`.
* :func:`plugin_failure` reads a :class:`PluginFailure` from the client's text; :func:`describe`
  writes the one-line error naming the kubeconfig user and the command, never its arguments,
  environment or output.

Not covered: with a terminal on stdout the client gives an ``exec`` plugin our stdin and stderr
themselves (so that it can prompt), and what it writes there goes to the terminal as it does with
kubectl (client-go always passes a plugin's stderr through); it is not printed by us.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kubernetes.config.kube_config import KUBE_CONFIG_DEFAULT_LOCATION, KubeConfigMerger

# the client's merger carries no annotations: called through a typed name
_merger: Callable[[str], Any] = KubeConfigMerger

#: The client's modules whose log records may quote a credential command's output (path endings).
_CLIENT_FILES = (os.path.join("kubernetes", "config", "kube_config.py"),
                 os.path.join("kubernetes", "config", "exec_provider.py"))
_CLIENT_LOGGERS = ("kubernetes.config.kube_config", "kubernetes.config.exec_provider")


class Reason(enum.Enum):
    """How a credential command failed, as the client reports it (the words printed)."""

    EXIT_STATUS = "exited with status {status}"
    NOT_STARTED = "could not be started (no such file, or not executable)"
    BAD_OUTPUT = "wrote no ExecCredential JSON on its standard output"
    MALFORMED = "answered an ExecCredential without apiVersion, kind or status"
    API_VERSION = "answered an ExecCredential of another apiVersion than the kubeconfig's exec.apiVersion"
    NO_CREDENTIAL = "answered an ExecCredential with neither a token nor a client certificate and key"
    BAD_CONFIG = "is not fully configured (exec needs command and apiVersion)"
    OTHER = "failed"


#: The client's messages (exec_provider.py, kube_config.py; v37) → the reason; first match wins.
_REASONS: tuple[tuple[re.Pattern[str], Reason], ...] = (
    (re.compile(r"process returned (?P<status>-?\d+)"), Reason.EXIT_STATUS),
    (re.compile(r"failed to decode process output"), Reason.BAD_OUTPUT),
    (re.compile(r"malformed response"), Reason.MALFORMED),
    (re.compile(r"plugin api version"), Reason.API_VERSION),
    (re.compile(r"missing (?:token or clientCertificateData|clientKeyData)"), Reason.NO_CREDENTIAL),
    (re.compile(r"malformed request"), Reason.BAD_CONFIG),
    (re.compile(r"No such file or directory|Permission denied|Exec format error|\[Errno \d+\]"),
     Reason.NOT_STARTED),
)


@dataclass(frozen=True)
class PluginFailure:
    """A credential command's failure: ``reason`` and, for :attr:`Reason.EXIT_STATUS`, ``status``."""

    reason: Reason
    status: int | None = None

    def words(self) -> str:
        """What happened, e.g. ``"exited with status 3"`` (nothing the command wrote)."""
        return self.reason.value.format(status=self.status)


def plugin_failure(text: str) -> PluginFailure:
    """The :class:`PluginFailure` a client message about a credential command says (``OTHER`` when
    none of the known messages, :data:`_REASONS`)."""
    for pattern, reason in _REASONS:
        m = pattern.search(text)
        if m is not None:
            return PluginFailure(reason, int(m["status"]) if reason is Reason.EXIT_STATUS else None)
    return PluginFailure(Reason.OTHER)


def is_command_error(text: str) -> bool:
    """Whether a client ``ConfigException`` text is a credential command's failure (and may quote
    its arguments and output): the gcp ``cmd-path`` and exec messages."""
    return text.startswith(("cmd-path:", "exec:"))


_SHOWN_NOT = "what it wrote on stderr is not shown: it may hold credentials; run the command yourself to see it"


class Command(enum.Enum):
    """Which kind of credential command failed (the words printed)."""

    EXEC = "the exec credential plugin"  # users[].user.exec.command; failures are logged by the client
    CMD_PATH = "the gcp auth-provider cmd-path command"  # users[].user.auth-provider.config.cmd-path; raised


def describe(failure: PluginFailure, command: Command, path: str | None, context: str | None) -> str:
    """The one-line error for ``failure`` of the ``command`` of the user that ``context`` (None:
    the current context) of the kubeconfig at ``path`` (None: the client's default,
    ``$KUBECONFIG`` or ``~/.kube/config``) uses: ``"kubeconfig F: user 'u': the exec credential
    plugin '/bin/p' exited with status 3 (…not shown…)"``. Names the user and the command (the
    first word of a ``cmd-path``), never arguments, environment or output; a kubeconfig that
    cannot be read again gives neither name."""
    user, program = _command_of(path, context, command)
    who = f"user {user!r}: " if user else ""
    what = f"{command.value} {program!r}" if program else command.value
    tail = f" ({_SHOWN_NOT})" if failure.reason in (Reason.EXIT_STATUS, Reason.OTHER) else ""
    return f"kubeconfig {path or '(default)'}: {who}{what} {failure.words()}{tail}"


def _command_of(path: str | None, context: str | None, command: Command) -> tuple[str, str]:
    """(user name, program) of the user ``context`` uses, read again with the client's own merger
    (same files, same merge); ``""`` for what cannot be told."""
    try:
        merged = _merger(path or KUBE_CONFIG_DEFAULT_LOCATION).config
        name = context or merged["current-context"]
        user_name = str(merged["contexts"].get_with_name(name)["context"]["user"])
        user = merged["users"].get_with_name(user_name)["user"]
    except Exception:  # the client read it a moment ago; anything odd here: name nothing
        return "", ""
    try:
        if command is Command.EXEC:
            return user_name, str(user["exec"]["command"])
        return user_name, str(user["auth-provider"]["config"]["cmd-path"]).split()[0]
    except Exception:
        return user_name, ""


class _Collector(threading.local):
    failures: list[PluginFailure] | None = None


_collector = _Collector()


@contextlib.contextmanager
def collecting() -> Iterator[list[PluginFailure]]:
    """While active, the failures :class:`CredentialLogFilter` sees in this thread are appended to
    the list yielded instead of being logged (nested: the outer list is restored after)."""
    before = _collector.failures
    failures: list[PluginFailure] = []
    _collector.failures = failures
    try:
        yield failures
    finally:
        _collector.failures = before


def _from_client(record: logging.LogRecord) -> bool:
    path = os.path.normcase(record.pathname or "")
    return any(path.endswith(os.path.normcase(f)) for f in _CLIENT_FILES)


class CredentialLogFilter(logging.Filter):
    """Logger filter: a record from the client's kubeconfig loader or exec provider (matched by the
    file that logged it, :data:`_CLIENT_FILES`) is dropped and collected while :func:`collecting`
    is active, else rewritten to say only what failed (:class:`PluginFailure`). Other records pass
    unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False to drop ``record``; may rewrite its message (see the class docstring)."""
        if not _from_client(record):
            return True
        try:
            text = record.getMessage()
        except Exception:
            text = ""
        failure = plugin_failure(text)
        if _collector.failures is not None:
            _collector.failures.append(failure)
            return False
        record.msg = (f"kubeconfig: a credential command (exec plugin) {failure.words()} while the credential was "
                      f"renewed ({_SHOWN_NOT})")
        record.args = ()
        return True


_FILTER = CredentialLogFilter()
_install_lock = threading.Lock()


def install_filter() -> None:
    """Put :class:`CredentialLogFilter` on the root logger and the client's module loggers
    (idempotent, thread-safe)."""
    with _install_lock:
        for name in ("", *_CLIENT_LOGGERS):
            logger = logging.getLogger(name)
            if _FILTER not in logger.filters:
                logger.addFilter(_FILTER)


__all__ = ["Command", "CredentialLogFilter", "PluginFailure", "Reason", "collecting", "describe", "install_filter",
           "is_command_error", "plugin_failure"]

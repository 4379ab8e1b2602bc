"""The reconciler's error vocabulary and the CLI exit codes that belong to it.

Adapters translate their library's exceptions (``kubernetes.client.ApiException``, ``pygit2``
errors, HTTP errors) into these types at the boundary, so the rest of the code never sees a raw
client exception. Exit codes (architecture.md §5): 0 ok, 1 failed or halted rollout, 2 bad input,
3 changes pending (only where asked, e.g. ``plan --detailed-exitcode``), 4 cluster/API error,
5 an output file could not be written at the end (the run itself succeeded; the file is named).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_CHANGES = 3
EXIT_CLUSTER = 4
#: The work was done, but an output (``--report``, ``--metrics-file``, ``--events-file``,
#: ``--sim-save``) could not be written: :class:`reconciler.fileio.writing.OutputError`.
EXIT_OUTPUT = 5

#: How many characters of one value the user gave (a name, selector, pattern, option value) an
#: error message quotes (:func:`shown`); a path in a position is cut at :data:`PATH_LIMIT`.
ECHO_LIMIT = 80
#: How many characters of a file path a :class:`SourcePos` shows (PATH_MAX is 4096; a longer
#: "path" is not one any file has).
PATH_LIMIT = 300


def clip(text: str, limit: int = ECHO_LIMIT) -> str:
    """``text`` as an error message shows it: unchanged up to ``limit`` characters, else its first
    ``limit`` characters and its length (``aaaa… (100000 characters)``), so a 100,000-character
    argument never fills the terminal. The printed line is redacted
    (:func:`reconciler.report.redact.redact`), but a secret cut in two may no longer look like
    one: a value that may hold a secret (a URL, a command) is redacted before it is cut."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def suggestion(word: str, choices: Iterable[str], *, cutoff: float = 0.6) -> str:
    """``"; did you mean 'apply'?"`` when one of ``choices`` is close to ``word`` (:mod:`difflib`,
    similarity at least ``cutoff``), else ``""``: the hint every "unknown name" message appends."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=cutoff)
    return f"; did you mean {close[0]!r}?" if close else ""


def shown(value: object, limit: int = ECHO_LIMIT) -> str:
    """``repr`` of ``value`` (``str(value)`` for a non-string) cut as :func:`clip` cuts:
    ``'gpu-node-stack'``, ``'aaaa'… (100000 characters)``. For every value of the user's an error
    message quotes."""
    s = value if isinstance(value, str) else str(value)
    return repr(s) if len(s) <= limit else f"{s[:limit]!r}… ({len(s)} characters)"


class ReconcilerError(Exception):
    """Base class of every error the reconciler raises on purpose."""

    exit_code = EXIT_FAILED


@dataclass(frozen=True)
class SourcePos:
    """A position in an input file: ``file`` path, 1-based ``line`` and ``column`` (0 = unknown)."""

    file: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        file = clip(self.file, PATH_LIMIT)
        if self.line:
            return f"{file}:{self.line}:{self.column or 1}"
        return file


class InputError(ReconcilerError):
    """Bad input: a malformed recipe, policy, fleet snapshot or plan file.

    Always names where: ``pos`` (file:line:column) and the dotted ``field`` path when one is known.
    ``str(err)`` is one line, e.g. ``recipes/a.yaml:12:7: spec.packages.x.version: not semver``.
    """

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, pos: SourcePos | None = None, field: str = "") -> None:
        self.message = " ".join(message.split())
        self.pos = pos
        self.field = field
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = f"{self.pos}: " if self.pos else ""
        fld = f"{self.field}: " if self.field else ""
        return f"{where}{fld}{self.message}"


class InputErrors(InputError):
    """Several input errors found in one pass; ``errors`` keeps each, ``str`` shows the first and a count."""

    def __init__(self, errors: list[InputError]) -> None:
        if not errors:
            raise ValueError("InputErrors needs at least one error")
        self.errors = errors
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(first.message + more, first.pos, first.field)


class PlanMismatchError(ReconcilerError):
    """``apply --plan`` was given a plan whose hash no longer matches the current inputs."""

    exit_code = EXIT_BAD_INPUT


class ClusterError(ReconcilerError):
    """An error answered by (or on the way to) the cluster API; ``status`` is the HTTP code or 0."""

    exit_code = EXIT_CLUSTER

    def __init__(self, message: str, status: int = 0, reason: str = "", retry_after: float | None = None):
        self.message = message[:500]
        self.status = status
        self.reason = reason
        self.retry_after = retry_after
        super().__init__(f"{self.message} (HTTP {status})" if status else self.message)


class NotFoundError(ClusterError):
    """404: the object does not exist (any more)."""


class ConflictError(ClusterError):
    """409: a resourceVersion or UID precondition did not hold."""


class TooManyRequestsError(ClusterError):
    """429: the eviction would violate a PodDisruptionBudget, or API priority and fairness throttled us.

    ``disruption_budget`` is True when the server named a DisruptionBudget cause.
    """

    def __init__(self, message: str, *, disruption_budget: bool = False, retry_after: float | None = None):
        super().__init__(message, 429, "TooManyRequests", retry_after)
        self.disruption_budget = disruption_budget


class ForbiddenError(ClusterError):
    """403: RBAC denied the call, or (eviction) the namespace is terminating (``reason``)."""


class ServerError(ClusterError):
    """5xx. For evictions a 500 means more than one PodDisruptionBudget selects the pod (not retryable)."""


class TransientError(ClusterError):
    """A timeout, a reset connection or a 503: worth retrying with backoff."""


class LeaseHeldError(ReconcilerError):
    """Another reconciler run holds the recipe's Lease; ``holder`` names it."""

    exit_code = EXIT_FAILED

    def __init__(self, lease: str, holder: str, expires_in: float) -> None:
        self.holder = holder
        super().__init__(
            f"lease {lease} is held by {holder} (expires in {expires_in:.0f} s if not renewed); "
            "another reconciler run is active for this recipe"
        )


class CrashInjected(BaseException):
    """Raised by the simulated fleet (``--sim-crash-after N``) to stop a run abruptly after N writes.

    Derives from ``BaseException`` so no ``except Exception`` in the executor can swallow it: it
    models ``kill -9``.
    """

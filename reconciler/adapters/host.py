"""Who and where this process is, and its clock: the host and process identities written into
Leases and control records, and :class:`SystemClock`. Kept here because reading the host name
(``socket``), the process id, the login name and the time is I/O on the machine, which only
``adapters`` do (docs/architecture-layers.md)."""

from __future__ import annotations

import getpass
import os
import socket
import time


def process_identity() -> str:
    """``<host name>/<pid>`` of this process: the place part of a Lease holder identity
    (:func:`reconciler.execute.lock.holder_identity`)."""
    return f"{socket.gethostname()}/{os.getpid()}"


def operator_identity() -> str:
    """``<login name>@<host name>`` of the person running a CLI verb (``unknown`` as login name
    when it cannot be read: no ``LOGNAME``/``USER`` and no password entry, as in a container)."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


class SystemClock:
    """The ``Clock`` of a real cluster: ``time.monotonic`` for in-process deadlines, ``time.time``
    for what is persisted (UTC epoch seconds), and ``wait`` sleeps."""

    def now(self) -> float:
        """Monotonic seconds (never persisted)."""
        return time.monotonic()

    def utc(self) -> float:
        """UTC wall-clock epoch seconds."""
        return time.time()

    def wait(self, seconds: float) -> None:
        """Sleep ``seconds`` (nothing for 0 or less)."""
        if seconds > 0:
            time.sleep(seconds)

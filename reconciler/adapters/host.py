"""Who and where this process is: the host and process identities written into Leases and
control records. Kept here because reading the host name (``socket``), the process id and the
login name is I/O on the machine, which only ``adapters`` do (docs/architecture-layers.md)."""

from __future__ import annotations

import getpass
import os
import socket


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

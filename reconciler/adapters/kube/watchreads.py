"""Fewer wake-ups of a busy watch stream: wait a moment before a read that would block (issue 17).

Why: a watch thread that blocks on its socket sleeps and is woken once per event the API server
sends (each event is one HTTP chunk, usually its own TCP segment). On the 2-core virtual machine
this project is measured on, a thread pays for every wake-up (cold caches, the hypervisor): the
same request costs 0.16 ms of client CPU when answered at once and 0.64 ms when answered after
100 ms, with the same system calls. While a stream is busy (a batch's stage pods, evictions and
node heartbeats: hundreds of events a second at 500 nodes) the events are better read in bursts.

What: :func:`coalesce_reads` wraps the raw reads of one streaming urllib3 response. Before a read
that would block (no byte buffered by TLS, the socket not readable) on a stream that delivered
data within the last ``busy`` seconds, the thread first sleeps ``window`` seconds, so the events
arriving meanwhile are read together; a quiet stream's next event is read as soon as it comes (no
added wait). The latency this adds is at most ``window`` per burst. Measured on a real control
plane (500 kwok nodes, 5,000 pods, 1 s stages, the same code back to back): the pod watch's CPU
4.5 → 3.4 s, the node watch's 1.8 → 1.5 s, the rollout loop's 4.7 → 4.4 s (it is woken less
often: 2,905 → 2,250 passes), the run's wall time 121 → 120 s.

How: through the standard library's objects under urllib3's response (``resp._fp.fp.raw``:
``http.client.HTTPResponse`` → its buffered reader → ``socket.SocketIO`` → the socket). They
are not public API: when any of them is missing (another urllib3 or Python, a test double), the
response is left as it is and :func:`coalesce_reads` returns False. Uses no clock but the
monotonic one, for in-process timing only.
"""

from __future__ import annotations

import select
import time
from collections.abc import Callable
from typing import Any

#: Default seconds to wait before a read that would block on a busy stream.
WINDOW = 0.02
#: Default: a stream is busy when its last read returned less than this many seconds ago.
BUSY = 0.05


def coalesce_reads(resp: Any, *, window: float = WINDOW, busy: float = BUSY,
                   sleep: Callable[[float], None] = time.sleep,
                   monotonic: Callable[[], float] = time.monotonic) -> bool:
    """Make the raw reads of the streaming urllib3 response ``resp`` wait ``window`` seconds
    before one that would block, while the stream is busy (module docstring). ``window`` 0 or
    less: nothing is changed. ``sleep``/``monotonic``: for tests. Returns whether the reads are
    wrapped (False: the objects under the response are not the standard library's; nothing was
    changed). Never raises."""
    if window <= 0:
        return False
    try:
        raw = resp._fp.fp.raw
        sock = raw._sock
        read = raw.readinto
        fileno = sock.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    if not callable(read) or not isinstance(fileno, int) or fileno < 0:
        return False
    pending: Callable[[], int] = getattr(sock, "pending", lambda: 0)  # TLS: decrypted bytes held
    last = [float("-inf")]

    def readinto(buffer: Any) -> Any:
        if monotonic() - last[0] < busy and not _ready(sock, pending):
            sleep(window)
        n = read(buffer)
        last[0] = monotonic()
        return n

    raw.readinto = readinto
    return True


def _ready(sock: Any, pending: Callable[[], int]) -> bool:
    """Whether a read of ``sock`` would return without waiting: bytes held by TLS, or readable
    (data, EOF or an error: a broken socket is read at once so its error is not delayed)."""
    try:
        if pending() > 0:
            return True
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True

"""The node runs' API requests multiplexed on the rollout loop's own thread (issue 17).

Why: with one worker thread per node in flight (a thread pool of ``--workers``), every API answer
wakes a sleeping thread, which then waits to take the GIL back from the others; on the 2-core
virtual machines this project is measured on, a thread that sleeps pays for its wake-up (cold
caches, the hypervisor), and that, not the request's own Python work, is most of a request's
client CPU. Here the runs' I/O (:meth:`~reconciler.execute.lifecycle.NodeRun.perform`) runs in
greenlets on the loop's thread instead: a request that would block switches to the next runnable
one, and when none is, the thread waits once on every connection at a time (one ``select``) and
resumes each whose answer came. Measured against a loopback TLS server, 50 requests in flight:
0.24 → 0.14 ms of client CPU per request when it answers after 5 ms, 0.32 → 0.24-0.28 after 100 ms.

What: a thread has at most one :class:`Hub` (:func:`acquire_hub`/:func:`release_hub`, shared by
its users): :class:`GreenPool` (a :class:`~reconciler.ports.JobPool`) runs each job in one of up
to ``size`` long-lived greenlets of it, and a multiplexed
:class:`~reconciler.adapters.kube.watch.WatchClock` runs its two watch streams as greenlets of it
(:meth:`Hub.run_until` while it waits), so one ``select`` serves the node I/O and the watch
streams. :class:`CoopSocket` is the socket under an ``http.client`` connection
(:mod:`reconciler.adapters.kube.transport` makes one when :func:`active_hub` says the calling thread has
a hub): its reads, writes, connect and TLS handshake wait through the :class:`Hub` when called
from one of its greenlets, and block the thread (one ``poll`` of that socket, under its timeout)
anywhere else, so a connection made here works from any thread. Timeouts are as a socket's
(``settimeout``: seconds per operation) and raise ``TimeoutError``.

What it does not change: the ports, the adapters and the write fence are the same synchronous
code; a job that calls something blocking that is not a :class:`CoopSocket` (a urllib3 request, a
lock held by another thread) blocks the loop's thread for that long (correct, only not
overlapped). Nothing here holds a lock while it waits, and no job may wait on a lock another job
of the same pool holds while it waits on I/O (the thread pool allowed that; none does).
"""

from __future__ import annotations

import collections
import errno
import heapq
import io
import itertools
import select
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

from greenlet import GreenletExit, getcurrent, greenlet

_THREAD = threading.local()


def active_hub() -> Hub | None:
    """The calling thread's hub (its :class:`GreenPool` or watch streams use it), or None."""
    hub: Hub | None = getattr(_THREAD, "hub", None)
    return hub


def acquire_hub() -> Hub:
    """The calling thread's hub, made on first use, with one more user (a :class:`GreenPool`, a
    watch clock's streams); each call is matched by one :func:`release_hub` on this thread."""
    hub = active_hub()
    if hub is None:
        hub = Hub()
        _THREAD.hub = hub
    hub.users += 1
    return hub


def release_hub(hub: Hub) -> None:
    """One user of ``hub`` is done; the last one (on the hub's own thread) releases it."""
    hub.users -= 1
    if hub.users <= 0 and threading.get_ident() == hub.thread and _THREAD.__dict__.get("hub") is hub:
        del _THREAD.hub
        hub.close()


def pool_running() -> bool:
    """Whether the calling thread runs a :class:`GreenPool` (one at a time per thread)."""
    return getattr(_THREAD, "pool", None) is not None


def sleep(seconds: float) -> None:
    """Sleep ``seconds``: through the calling thread's hub from one of its greenlets (the others
    run meanwhile), else blocking the thread."""
    hub = active_hub()
    if hub is not None and hub.cooperative():
        hub.sleep(seconds)
    else:
        time.sleep(max(0.0, seconds))


class _Wait:
    """One suspended greenlet: woken once (by its socket or by its deadline, whichever first)."""

    __slots__ = ("deadline", "fired", "g")

    def __init__(self, g: greenlet, deadline: float) -> None:
        self.g, self.deadline, self.fired = g, deadline, False

    def __lt__(self, other: _Wait) -> bool:
        return self.deadline < other.deadline


class Hub:
    """One thread's scheduler: runnable greenlets, the sockets suspended ones wait on and their
    deadlines (``time.monotonic`` seconds, for in-process timeouts only). Its ``root`` is the
    greenlet that made it (the loop's); every other greenlet of the hub has it as parent."""

    def __init__(self) -> None:
        self.root = getcurrent()
        self.thread = threading.get_ident()
        self.users = 0  # acquire_hub / release_hub
        #: ``time.monotonic()`` when the hub last looked at its sockets (the end of a ``poll``)
        self.polled_at = time.monotonic()
        self._sel = selectors.DefaultSelector()
        self._ready: collections.deque[tuple[greenlet, Any]] = collections.deque()
        self._timers: list[tuple[float, int, _Wait]] = []
        self._seq = itertools.count()

    def cooperative(self) -> bool:
        """Whether the caller may suspend here: a greenlet of this hub other than its root."""
        return threading.get_ident() == self.thread and getcurrent() is not self.root

    def wait_io(self, fd: int, events: int, timeout: float | None) -> None:
        """Suspend the calling greenlet until ``fd`` is ready for ``events`` (selectors'
        EVENT_READ/EVENT_WRITE) or ``timeout`` seconds passed (None: no limit). Raises
        TimeoutError on the deadline."""
        w = _Wait(getcurrent(), time.monotonic() + timeout if timeout is not None else float("inf"))
        self._sel.register(fd, events, w)
        if timeout is not None:
            heapq.heappush(self._timers, (w.deadline, next(self._seq), w))
        try:
            ok = self.root.switch()
        finally:
            w.fired = True  # a late wake (socket and deadline in one pass) is ignored
            self._sel.unregister(fd)
        if not ok:
            raise TimeoutError("timed out")

    def sleep(self, seconds: float) -> None:
        """Suspend the calling greenlet (not the root) for ``seconds``."""
        w = _Wait(getcurrent(), time.monotonic() + max(0.0, seconds))
        heapq.heappush(self._timers, (w.deadline, next(self._seq), w))
        try:
            self.root.switch()
        finally:
            w.fired = True

    def spawn(self, run: Callable[..., Any], *args: Any) -> greenlet:
        """A new greenlet of this hub running ``run(*args)``, runnable from the next
        :meth:`run_ready` (an exception it raises goes to the root's switch: ``run`` must catch
        its own)."""
        g = greenlet(run, parent=self.root)
        self.start(g, *args)
        return g

    def start(self, g: greenlet, *args: Any) -> None:
        """Make ``g`` runnable (switched to with ``args`` on the next :meth:`run_ready`)."""
        self._ready.append((g, args))

    def run_ready(self) -> None:
        """Run every runnable greenlet until each has suspended or ended (root only)."""
        while self._ready:
            g, args = self._ready.popleft()
            if not g.dead:  # ended (thrown out) while a wake-up was queued for it
                g.switch(*args)

    def poll(self, limit: float | None = None) -> None:
        """Wait for the first socket or deadline due, or ``limit`` seconds at most (root only),
        and make the greenlets waiting on them runnable. Raises RuntimeError when nothing is
        waited on and there is no ``limit`` (a job would never end)."""
        timeout: float | None = limit
        while self._timers and self._timers[0][2].fired:
            heapq.heappop(self._timers)
        if self._timers:
            due = max(0.0, self._timers[0][0] - time.monotonic())
            timeout = due if timeout is None else min(timeout, due)
        elif timeout is None and not self._sel.get_map():
            raise RuntimeError("no job can make progress: nothing is waited on")
        ready = self._sel.select(timeout)
        self.polled_at = time.monotonic()
        for key, _ in ready:
            w: _Wait = key.data
            if not w.fired:
                w.fired = True
                self._ready.append((w.g, (True,)))
        now = self.polled_at
        while self._timers and self._timers[0][0] <= now:
            _, _, w = heapq.heappop(self._timers)
            if not w.fired:
                w.fired = True
                self._ready.append((w.g, (False,)))

    def run_until(self, deadline: float, done: Callable[[], bool]) -> None:
        """Run the hub's greenlets (root only) until ``done()`` is true or the ``time.monotonic``
        ``deadline`` passed, whichever first."""
        while True:
            self.run_ready()
            if done():
                return
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.poll(left)

    def close(self) -> None:
        """Release the selector."""
        self._sel.close()


def wait_fd(fd: int, events: int, timeout: float | None) -> None:
    """Wait until ``fd`` is ready for ``events`` or ``timeout`` seconds passed (TimeoutError):
    through the calling thread's hub from one of its greenlets, else blocking (one poll)."""
    hub = active_hub()
    if hub is not None and hub.cooperative():
        hub.wait_io(fd, events, timeout)
        return
    mask = (select.POLLIN if events & selectors.EVENT_READ else 0) | (
        select.POLLOUT if events & selectors.EVENT_WRITE else 0)
    p = select.poll()
    p.register(fd, mask)
    if not p.poll(None if timeout is None else max(0, int(timeout * 1000 + 0.999))):
        raise TimeoutError("timed out")


class CoopSocket:
    """A connected non-blocking socket (plain or TLS) with the blocking interface
    ``http.client`` uses (``sendall``, ``makefile``, ``settimeout``, ``close``, ``fileno``) whose
    waits go through :func:`wait_fd`. ``settimeout(None)`` waits without limit.

    ``linger`` (seconds, 0: off) reads a busy stream in bursts (issue 17; a watch stream, whose
    events come one small chunk each): a read that would block within ``BUSY`` seconds of the last
    one that returned data first sleeps ``linger`` (:func:`sleep`), so the events that arrive
    meanwhile cost one wake-up together, and only then waits for the socket. At most ``linger`` of
    latency per burst; a quiet stream's next read waits for the socket at once."""

    #: A stream is busy when its last read returned data less than this many seconds ago.
    BUSY = 0.05

    def __init__(self, sock: socket.socket, timeout: float | None) -> None:
        sock.setblocking(False)
        self.sock = sock
        self.timeout = timeout
        self.linger = 0.0
        self._last = float("-inf")  # time.monotonic() of the last read that returned data
        # as socket.socket: files made by makefile keep the socket open until they are closed too
        # (http.client closes the connection's socket as soon as an answer says "Connection:
        # close", and then reads the body through the response's file)
        self._io_refs = 0
        self._closed = False

    def fileno(self) -> int:
        return self.sock.fileno()

    def settimeout(self, timeout: float | None) -> None:
        self.timeout = timeout

    def gettimeout(self) -> float | None:
        return self.timeout

    def setsockopt(self, *args: Any) -> None:
        self.sock.setsockopt(*args)

    def pending(self) -> int:
        """Decrypted bytes TLS holds (0 for a plain socket)."""
        pending: Callable[[], int] = getattr(self.sock, "pending", lambda: 0)
        return pending()

    def recv_into(self, buffer: Any, nbytes: int = 0) -> int:
        while True:
            try:
                n = self.sock.recv_into(buffer, nbytes)
                if self.linger > 0:
                    self._last = time.monotonic()
                return n
            except (ssl.SSLWantReadError, BlockingIOError, InterruptedError):
                if self.linger > 0 and time.monotonic() - self._last < self.BUSY:
                    self._last = float("-inf")  # once per would-block: then wait for the socket
                    sleep(self.linger)
                    continue
                wait_fd(self.sock.fileno(), selectors.EVENT_READ, self.timeout)
            except ssl.SSLWantWriteError:
                wait_fd(self.sock.fileno(), selectors.EVENT_WRITE, self.timeout)

    def sendall(self, data: Any) -> None:
        view = memoryview(data).cast("B")
        while view:
            try:
                view = view[self.sock.send(view):]
            except (ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
                wait_fd(self.sock.fileno(), selectors.EVENT_WRITE, self.timeout)
            except ssl.SSLWantReadError:
                wait_fd(self.sock.fileno(), selectors.EVENT_READ, self.timeout)

    def makefile(self, mode: str = "rb", buffering: int = -1) -> io.BufferedReader:
        if mode != "rb":
            raise ValueError(f"unsupported mode {mode!r}")
        self._io_refs += 1
        return io.BufferedReader(_Reader(self), buffering if buffering > 0 else io.DEFAULT_BUFFER_SIZE)

    def close(self) -> None:
        """Close the socket, or, while a file of :meth:`makefile` is open, when the last is closed."""
        self._closed = True
        if self._io_refs <= 0:
            self.sock.close()

    def _file_closed(self) -> None:
        self._io_refs -= 1
        if self._closed and self._io_refs <= 0:
            self.sock.close()


class _Reader(io.RawIOBase):
    """The raw reads of a :class:`CoopSocket` (for ``makefile``)."""

    def __init__(self, sock: CoopSocket) -> None:
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self._sock.recv_into(buffer)

    def close(self) -> None:
        if not self.closed:
            self._sock._file_closed()
        super().close()


def connect_tcp(address: tuple[str, int], timeout: float) -> CoopSocket:
    """A TCP connection to ``address`` (host, port; each address the name resolves to, in order, as
    ``socket.create_connection``; the name lookup itself blocks) with TCP_NODELAY set, under
    ``timeout`` seconds per address. Raises OSError (TimeoutError, ConnectionError,
    socket.gaierror) with nothing left open."""
    last: OSError | None = None
    host, port = address
    for family, kind, proto, _, addr in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            err = sock.connect_ex(addr)
            if err in (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN):
                wait_fd(sock.fileno(), selectors.EVENT_WRITE, timeout)
                err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                raise OSError(err, f"connect failed: {errno.errorcode.get(err, err)}")
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as e:
            sock.close()
            last = e
            continue
        return CoopSocket(sock, timeout)
    raise last if last is not None else OSError("getaddrinfo returned no address")


def start_tls(plain: CoopSocket, tls: ssl.SSLContext, server_hostname: str, timeout: float) -> CoopSocket:
    """The TLS client handshake over ``plain`` (for ``server_hostname``) under ``timeout``
    seconds per wait. Raises OSError (ssl.SSLError, TimeoutError); ``plain`` is closed then."""
    try:
        ssock = tls.wrap_socket(plain.sock, server_hostname=server_hostname, do_handshake_on_connect=False)
    except BaseException:
        plain.close()
        raise
    try:
        while True:
            try:
                ssock.do_handshake()
                return CoopSocket(ssock, timeout)
            except ssl.SSLWantReadError:
                wait_fd(ssock.fileno(), selectors.EVENT_READ, timeout)
            except ssl.SSLWantWriteError:
                wait_fd(ssock.fileno(), selectors.EVENT_WRITE, timeout)
    except BaseException:
        ssock.close()
        raise


class GreenPool:
    """A :class:`~reconciler.ports.JobPool` whose jobs run in greenlets on the calling thread
    (module docstring): at most ``size`` at once, each in a long-lived greenlet (which keeps its
    own keep-alive connection between jobs, as a worker thread does). Its hub is the thread's
    (:func:`acquire_hub`: shared with the watch streams of a
    :class:`~reconciler.adapters.kube.watch.WatchClock` waiting on this thread, which run while the
    pool waits). Not thread-safe: every method is called from the thread that made it. Raises
    RuntimeError when that thread already runs one."""

    def __init__(self, size: int) -> None:
        if pool_running():
            raise RuntimeError("this thread already runs a green pool")
        self.size = max(1, size)
        self.hub = acquire_hub()
        _THREAD.pool = self
        self._jobs: collections.deque[tuple[object, Callable[[], Any]]] = collections.deque()
        self._done: collections.deque[tuple[object, Any, BaseException | None]] = collections.deque()
        self._idle: list[greenlet] = []
        self._workers: list[greenlet] = []
        self._pending = 0

    def submit(self, key: object, job: Callable[[], Any]) -> None:
        """Queue ``job`` (no arguments); its result or exception comes back from
        :meth:`next_done` with ``key``."""
        self._jobs.append((key, job))
        self._pending += 1
        if self._idle:
            self.hub.start(self._idle.pop())
        elif len(self._workers) < self.size:
            g = greenlet(self._work, parent=self.hub.root)
            self._workers.append(g)
            self.hub.start(g)

    def _work(self) -> None:
        try:
            while True:
                if not self._jobs:
                    self._idle.append(getcurrent())
                    self.hub.root.switch()
                    continue
                key, job = self._jobs.popleft()
                try:
                    self._done.append((key, job(), None))
                except GreenletExit:
                    raise
                except BaseException as e:  # handed to the caller of next_done, as a Future would
                    self._done.append((key, None, e))
        except GreenletExit:
            return

    def pending(self) -> int:
        """Jobs submitted whose result :meth:`next_done` has not returned yet."""
        return self._pending

    def next_done(self) -> tuple[object, Any, BaseException | None]:
        """(key, result, None) or (key, None, exception) of the next job to finish; runs the jobs
        meanwhile. Raises RuntimeError when no job is pending."""
        if not self._pending:
            raise RuntimeError("no job pending")
        while not self._done:
            self.hub.run_ready()
            if not self._done:
                self.hub.poll()
        self._pending -= 1
        return self._done.popleft()

    def close(self) -> None:
        """Drop the jobs not started yet, finish the running ones (results dropped), end the
        greenlets (their connections close as a thread's would) and release the hub."""
        self._pending -= len(self._jobs)
        self._jobs.clear()
        try:
            while self._pending:
                self.next_done()
        finally:
            for g in self._workers:
                if not g.dead:
                    g.throw(GreenletExit)
            self._workers.clear()
            self._idle.clear()
            if _THREAD.__dict__.get("pool") is self:
                del _THREAD.pool
                release_hub(self.hub)

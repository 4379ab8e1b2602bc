"""A busy watch stream waits a moment before a read that would block, so its events are read in
bursts (reconciler/adapters/kube/watchreads.py, issue 17); a quiet stream, data already there, or a
response that is not the standard library's objects are read as before."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from reconciler.adapters.kube.watchreads import coalesce_reads


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def stream() -> Iterator[tuple[Any, socket.socket, socket.SocketIO]]:
    """A response-shaped object over one end of a socket pair (``resp._fp.fp.raw`` is the
    ``SocketIO`` http.client reads through) and the other end, the 'API server'."""
    ours, server = socket.socketpair()
    raw = socket.SocketIO(ours, "rb")
    resp = SimpleNamespace(_fp=SimpleNamespace(fp=SimpleNamespace(raw=raw)))
    yield resp, server, raw
    raw.close()
    ours.close()
    server.close()


def test_a_read_that_would_block_on_a_busy_stream_waits_first(stream: Any) -> None:
    resp, server, raw = stream
    clock, slept = Clock(), []

    def sleep(s: float) -> None:  # the events that arrive while the thread waits
        slept.append(s)
        server.sendall(b"event-2\nevent-3\n")

    assert coalesce_reads(resp, window=0.02, busy=0.05, sleep=sleep, monotonic=clock)
    server.sendall(b"event-1\n")
    buf = bytearray(64)
    n = raw.readinto(buf)  # the first read of the stream: never delayed
    assert bytes(buf[:n]) == b"event-1\n" and slept == []
    clock.t += 0.01  # busy: the last read returned 10 ms ago, and nothing is buffered
    n = raw.readinto(buf)
    assert slept == [0.02] and bytes(buf[:n]) == b"event-2\nevent-3\n"  # one read for both


def test_data_already_there_or_a_quiet_stream_is_read_at_once(stream: Any) -> None:
    resp, server, raw = stream
    clock, slept = Clock(), []
    assert coalesce_reads(resp, window=0.02, busy=0.05, sleep=slept.append, monotonic=clock)
    buf = bytearray(64)
    server.sendall(b"a\n")
    raw.readinto(buf)
    server.sendall(b"b\n")
    clock.t += 0.01
    raw.readinto(buf)  # busy, but readable: no wait
    assert slept == []
    clock.t += 5.0  # quiet for 5 s: the next event is read as soon as it comes
    server.sendall(b"c\n")
    raw.readinto(buf)
    assert slept == []


def test_a_closed_stream_is_read_at_once(stream: Any) -> None:
    resp, server, raw = stream
    clock, slept = Clock(), []
    assert coalesce_reads(resp, sleep=slept.append, monotonic=clock)
    server.sendall(b"a\n")
    buf = bytearray(64)
    raw.readinto(buf)
    server.close()  # EOF is readable: its answer (0 bytes) is not delayed
    clock.t += 0.001
    assert raw.readinto(buf) == 0 and slept == []


@pytest.mark.parametrize("resp", [object(), SimpleNamespace(_fp=None), SimpleNamespace(_fp=SimpleNamespace(
    fp=SimpleNamespace(raw=SimpleNamespace(readinto=len))))], ids=["no-fp", "fp-none", "no-socket"])
def test_a_response_of_other_objects_is_left_as_it_is(resp: Any) -> None:
    before = vars(resp).copy() if hasattr(resp, "__dict__") else None
    assert coalesce_reads(resp) is False
    assert (vars(resp) if hasattr(resp, "__dict__") else None) == before


def test_no_window_changes_nothing(stream: Any) -> None:
    resp, _server, raw = stream
    read = raw.readinto
    assert coalesce_reads(resp, window=0) is False and raw.readinto == read

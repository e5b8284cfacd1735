"""Kernel receive timestamps on the feedback socket (SO_TIMESTAMPNS): a datagram's arrival
time on the loop's clock, so round trips measured over feedback leave out the time a
busy agent took to read it."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from agents.runtime.transport import SO_TIMESTAMPNS, kernel_arrival


def timespec(t: float) -> bytes:
    return struct.pack("@qq", int(t), int(round((t - int(t)) * 1e9)))


def test_arrival_from_a_timestamp_record():
    record = [(socket.SOL_SOCKET, SO_TIMESTAMPNS, timespec(1_700_000_000.250))]
    # read 30 ms after the kernel stamped it: 30 ms earlier on the loop's clock
    assert kernel_arrival(record, 100.0, 1_700_000_000.280) == pytest.approx(99.970, abs=1e-6)
    assert kernel_arrival([], 100.0, 1.0) is None
    assert kernel_arrival([(socket.SOL_SOCKET, 99, timespec(1.0))], 100.0, 1.0) is None
    # a wall clock that stepped back reads as no wait, a step forward as at most 1 s
    assert kernel_arrival(record, 100.0, 1_700_000_000.0) == 100.0
    assert kernel_arrival(record, 100.0, 1_700_000_100.0) == 99.0


def wait(rx: socket.socket, tx: socket.socket, seconds: float) -> float:
    """Send a datagram, let it wait ``seconds`` in ``rx``, and return how long the kernel's
    stamp says it waited."""
    tx.sendto(b"probe", rx.getsockname())
    time.sleep(seconds)
    data, ancillary, _, _ = rx.recvmsg(64, 64)
    arrival = kernel_arrival(ancillary, time.monotonic(), time.time())
    assert data == b"probe" and arrival is not None
    return time.monotonic() - arrival


def test_kernel_stamps_a_datagram_that_waited_in_the_socket():
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        rx.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        rx.bind(("127.0.0.1", 0))
        # The kernel stamps datagrams on arrival only once its global timestamp switch
        # is on, which the option turns on from a work queue, a moment later (until
        # then a datagram is stamped when read: a CI run of 24 Nov 2026 saw 0.04 ms for
        # 50 ms). Poll until a short wait shows up in the stamp.
        deadline = time.monotonic() + 2.0
        while wait(rx, tx, 0.01) < 0.009:
            assert time.monotonic() < deadline, "the kernel never stamped on arrival"
        tx.sendto(b"probe", rx.getsockname())
        time.sleep(0.05)  # the agent is busy elsewhere
        data, ancillary, _, _ = rx.recvmsg(64, 64)
        now = time.monotonic()
        arrival = kernel_arrival(ancillary, now, time.time())
        assert data == b"probe"
        assert arrival is not None
        assert 0.045 <= now - arrival < 0.5
    finally:
        rx.close()
        tx.close()

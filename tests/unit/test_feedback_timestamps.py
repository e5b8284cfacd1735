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


def test_kernel_stamps_a_datagram_that_waited_in_the_socket():
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        rx.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        rx.bind(("127.0.0.1", 0))
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

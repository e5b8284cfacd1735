"""The real event loop: timer order, cancellation, readers, deadlines, signals; and the
simulated loop's ordering."""

from __future__ import annotations

import os
import signal
import socket
import time

from agents.runtime.loop import EventLoop
from agents.sim import SimLoop


def test_timers_fire_in_time_order_and_cancel():
    loop = EventLoop()
    fired = []
    now = loop.now()
    loop.call_at(now + 0.03, lambda: fired.append("c"))
    loop.call_at(now + 0.01, lambda: fired.append("a"))
    loop.call_at(now + 0.01, lambda: fired.append("a2"))  # same time: scheduling order
    cancelled = loop.call_at(now + 0.02, lambda: fired.append("cancelled"))
    loop.call_at(now + 0.02, lambda: fired.append("b"))
    cancelled.cancel()
    loop.call_at(now + 0.04, loop.stop)
    loop.run(until=now + 1.0)
    assert fired == ["a", "a2", "b", "c"]
    assert loop.now() - now < 0.5  # stop() ended the run, not the deadline
    loop.close()


def test_timer_lateness_is_small():
    loop = EventLoop()
    late = []
    start = loop.now()
    for i in range(20):
        due = start + 0.005 * (i + 1)
        loop.call_at(due, lambda due=due: late.append(loop.now() - due))
    loop.run(until=start + 0.2)
    assert len(late) == 20
    assert min(late) >= 0
    assert max(late) < 0.05  # generous: a shared 2-core machine
    loop.close()


def test_readers_are_dispatched_and_run_stops_at_deadline():
    loop = EventLoop()
    a, b = socket.socketpair()
    got = []
    loop.add_reader(a, lambda: got.append(a.recv(100)))
    start = loop.now()
    loop.call_at(start + 0.01, lambda: b.send(b"ping"))
    loop.run(until=start + 0.1)
    assert got == [b"ping"]
    assert loop.now() >= start + 0.1
    loop.remove_reader(a)
    a.close()
    b.close()
    loop.close()


def test_datagrams_waiting_when_a_timer_is_late_are_read_before_it():
    # A handler stalls past a timer's due time while a datagram arrives: the loop reads
    # the datagram first (it arrived before the late timer ran), so a core counting per
    # interval sees it in the interval it arrived in.
    loop = EventLoop()
    a, b = socket.socketpair()
    c, d = socket.socketpair()
    order = []

    def stalling_reader():
        order.append(c.recv(100))
        b.send(b"arrived during the stall")
        time.sleep(0.03)  # past the timer's due time

    loop.add_reader(c, stalling_reader)
    loop.add_reader(a, lambda: order.append(a.recv(100)))
    start = loop.now()
    loop.call_at(start + 0.01, lambda: d.send(b"first"))
    loop.call_at(start + 0.02, lambda: order.append("timer"))
    loop.run(until=start + 0.1)
    assert order == [b"first", b"arrived during the stall", "timer"]
    for sock in (a, b, c, d):
        sock.close()
    loop.close()


def test_signal_stops_the_loop_at_once():
    loop = EventLoop()
    old = signal.getsignal(signal.SIGUSR1)
    try:
        loop.stop_on_signals(signal.SIGUSR1)
        start = time.monotonic()
        loop.call_at(loop.now() + 0.05, lambda: os.kill(os.getpid(), signal.SIGUSR1))
        loop.run(until=loop.now() + 5.0)
        assert time.monotonic() - start < 1.0
    finally:
        loop.close()
        signal.signal(signal.SIGUSR1, old)


def test_sim_loop_jumps_between_timers():
    loop = SimLoop()
    seen = []
    loop.call_at(2.0, lambda: seen.append(loop.now()))
    loop.call_at(1.0, lambda: loop.call_at(1.5, lambda: seen.append(loop.now())))
    loop.call_at(-1.0, lambda: seen.append(loop.now()))  # past: runs now
    loop.call_at(5.0, lambda: seen.append("never"))
    loop.run(3.0)
    assert seen == [0.0, 1.5, 2.0]
    assert loop.now() == 3.0

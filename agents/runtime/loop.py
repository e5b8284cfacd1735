"""The single-threaded event loop: readable sockets (epoll via selectors) and timers.

Timers are a heap with lazy cancellation. :class:`EventLoop` and the simulator's
loop (:class:`agents.sim.SimLoop`) share the same small interface --
``now()``, ``call_at(when, fn)`` returning a handle with ``cancel()``, ``stop()``
-- so the runtime's glue runs unchanged on both.
"""

from __future__ import annotations

import heapq
import itertools
import selectors
import signal
import socket
import time
from collections.abc import Callable
from typing import Any, Protocol


class Clock(Protocol):
    """What the runtime needs from a loop."""

    def now(self) -> float: ...

    def call_at(self, when: float, fn: Callable[[], Any]) -> TimerHandle: ...

    def stop(self) -> None: ...


class TimerHandle:
    """A scheduled call; ``cancel()`` makes it a no-op."""

    __slots__ = ("when", "fn", "cancelled")

    def __init__(self, when: float, fn: Callable[[], Any]):
        self.when = when
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class TimerHeap:
    """Timers ordered by time, then by scheduling order."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, TimerHandle]] = []
        self._order = itertools.count()

    def push(self, when: float, fn: Callable[[], Any]) -> TimerHandle:
        handle = TimerHandle(when, fn)
        heapq.heappush(self._heap, (when, next(self._order), handle))
        return handle

    def next_time(self) -> float | None:
        """When the earliest live timer is due (dropping cancelled ones on the way)."""
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def due(self, now: float) -> bool:
        """Whether a live timer is due at ``now``."""
        when = self.next_time()
        return when is not None and when <= now

    def pop_due(self, now: float) -> TimerHandle | None:
        """The earliest live timer due at ``now``, removed; None if none is due."""
        when = self.next_time()
        if when is None or when > now:
            return None
        return heapq.heappop(self._heap)[2]


class EventLoop:
    """Real time (CLOCK_MONOTONIC), real sockets."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._selector = selectors.DefaultSelector()
        self._timers = TimerHeap()
        self._stopping = False
        self._wakeup: tuple[socket.socket, socket.socket] | None = None

    def now(self) -> float:
        return self._clock()

    def call_at(self, when: float, fn: Callable[[], Any]) -> TimerHandle:
        return self._timers.push(when, fn)

    def add_reader(self, fileobj: Any, fn: Callable[[], Any]) -> None:
        """Call ``fn()`` whenever ``fileobj`` is readable."""
        self._selector.register(fileobj, selectors.EVENT_READ, fn)

    def remove_reader(self, fileobj: Any) -> None:
        self._selector.unregister(fileobj)

    def stop(self) -> None:
        """Make :meth:`run` return after the current callback."""
        self._stopping = True

    def stop_on_signals(self, *signums: int) -> None:
        """Stop cleanly on these signals, waking the selector at once (main thread only)."""
        reader, writer = socket.socketpair()
        reader.setblocking(False)
        writer.setblocking(False)
        self._wakeup = (reader, writer)
        signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        self.add_reader(reader, self._drain_wakeup)
        for signum in signums:
            signal.signal(signum, lambda *_: self.stop())

    def _drain_wakeup(self) -> None:
        assert self._wakeup is not None
        try:
            while self._wakeup[0].recv(512):
                pass
        except BlockingIOError:
            pass

    def run(self, until: float | None = None) -> None:
        """Dispatch timers and readable sockets until :meth:`stop` or time ``until``.

        A stop requested before ``run`` (a signal between start-up and here) is
        honoured: the flag is cleared only once ``run`` has returned.
        """
        try:
            self._run(until)
        finally:
            self._stopping = False

    def _run(self, until: float | None) -> None:
        """The dispatch loop of :meth:`run`."""
        while not self._stopping:
            now = self._clock()
            if until is not None and now >= until:
                break
            if self._timers.due(now):
                # Read the sockets first: what they hold arrived before this timer's
                # handler runs (late, after a stall), so a core sees events in arrival
                # order; and a burst of due timers cannot starve the receive path.
                self._poll(0.0)
                handle = self._timers.pop_due(now)
                if handle is not None and not self._stopping:
                    handle.fn()
                continue
            deadline = self._timers.next_time()
            if until is not None:
                deadline = until if deadline is None else min(deadline, until)
            self._poll(None if deadline is None else max(0.0, deadline - now))

    def _poll(self, timeout: float | None) -> None:
        for key, _ in self._selector.select(timeout):
            key.data()
            if self._stopping:
                return

    def close(self) -> None:
        """Release the selector and the signal wake-up pair."""
        if self._wakeup is not None:
            signal.set_wakeup_fd(-1)
            for sock in self._wakeup:
                sock.close()
            self._wakeup = None
        self._selector.close()

"""The real network: a multicast sending socket, per-channel member sockets and a unicast
feedback socket, on the loop.

:class:`agents.sim.SimPort` implements the same methods over the simulator's
in-memory network.
"""

from __future__ import annotations

import errno
import socket
import struct
import time
from collections.abc import Callable
from typing import Protocol

from agents.runtime.feedback import parse_peer, reply_peer
from agents.runtime.loop import EventLoop
from agents.runtime.membership import close_member, open_member
from agents.runtime.session import Session

# (datagram, channel it arrived on, arrival: the kernel's receive time on the loop's clock)
Deliver = Callable[[bytes, int, float | None], None]
# (datagram, peer "ADDR:PORT" or None when no reply can reach the source, arrival as for
# Deliver)
DeliverFeedback = Callable[[bytes, str | None, float | None], None]
BATCH = 256  # datagrams read per readiness event and socket, so one socket cannot starve
# Linux SO_TIMESTAMPNS (= SCM_TIMESTAMPNS; Python's socket module does not name it): the
# kernel's receive time (CLOCK_REALTIME) of each datagram as a struct timespec.
SO_TIMESTAMPNS = 35
_TIMESPEC = struct.Struct("@qq")


def kernel_arrival(ancillary: list[tuple[int, int, bytes]], loop_now: float,
                   real_now: float) -> float | None:
    """The arrival time on the loop's clock of a datagram whose ``recvmsg`` ancillary data
    holds an ``SCM_TIMESTAMPNS`` record, read when the loop's clock said ``loop_now`` and
    the wall clock ``real_now``; None without one. The wall clock only measures how long
    the datagram waited in the host (a step of the wall clock in between is clamped to
    no wait), so round trips and per-interval counts exclude the agent's own scheduling
    delay."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(data)
            waited = real_now - (sec + nsec * 1e-9)
            return loop_now - min(max(waited, 0.0), 1.0)
    return None


class Transport(Protocol):
    """What the agent glue needs from a network."""

    def send(self, channel: int, data: bytes) -> bool: ...

    def join(self, channel: int) -> None: ...

    def leave(self, channel: int) -> None: ...

    def send_feedback(self, to: str | None, data: bytes) -> bool: ...

    def close(self) -> None: ...


class UdpTransport:
    """Sends from ``session.source`` (or ``address``) and receives on joined channels.

    With ``listen_feedback`` (the sender of a session with a ``feedback_port``), a
    unicast socket on ``source:feedback_port`` receives feedback from the start;
    a receiver opens its feedback socket (an ephemeral port on ``address``) when it
    first sends feedback, and hears replies on it.
    """

    def __init__(self, loop: EventLoop, session: Session, address: str | None,
                 deliver: Deliver, deliver_feedback: DeliverFeedback | None = None,
                 listen_feedback: bool = False):
        self.loop = loop
        self.session = session
        self.address = address
        self.deliver = deliver
        self.deliver_feedback = deliver_feedback
        self.listen_feedback = listen_feedback
        self.members: dict[int, socket.socket] = {}
        self._sender: socket.socket | None = None
        self._feedback: socket.socket | None = None

    def _sending_socket(self) -> socket.socket:
        if self._sender is None:
            out = self.address or str(self.session.source)
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, self.session.ttl)
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(out))
            sock.bind((out, 0))
            sock.setblocking(False)
            self._sender = sock
        return self._sender

    def open(self) -> None:
        """Create the sending (and feedback) sockets now, so a wrong source address or a
        taken port fails at start-up."""
        self._sending_socket()
        if self.listen_feedback:
            self._feedback_socket()

    def _feedback_socket(self) -> socket.socket:
        if self._feedback is None:
            if self.listen_feedback:
                if self.session.feedback_port is None:
                    raise ValueError("the session has no feedback_port to listen on")
                local = (self.address or str(self.session.source), self.session.feedback_port)
            else:
                local = (self.address or "0.0.0.0", 0)
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            sock.bind(local)
            sock.setblocking(False)
            self._feedback = sock
            self.loop.add_reader(sock, lambda: self._feedback_readable(sock))
        return self._feedback

    def send_feedback(self, to: str | None, data: bytes) -> bool:
        """Unicast ``data`` to ``to`` (``ADDR:PORT``) or, when None, to the session's sender;
        False when the kernel refuses (including EACCES: a peer is whoever sent the datagram
        being answered, and a forged one may name a subnet's broadcast address)."""
        if to is None:
            if self.session.feedback_port is None:
                raise ValueError("the session has no feedback_port to send feedback to")
            dest = (str(self.session.source), self.session.feedback_port)
        else:
            dest = parse_peer(to)
        try:
            self._feedback_socket().sendto(data, dest)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError as exc:
            if exc.errno in (errno.ENOBUFS, errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EPERM,
                             errno.ECONNREFUSED, errno.EACCES):
                return False
            raise
        return True

    def _feedback_readable(self, sock: socket.socket) -> None:
        for _ in range(BATCH):
            try:
                data, ancillary, _, (addr, port) = sock.recvmsg(65536, 64)
            except (BlockingIOError, InterruptedError, ConnectionRefusedError):
                return
            arrival = kernel_arrival(ancillary, self.loop.now(), time.time())
            if self.deliver_feedback is not None:
                self.deliver_feedback(data, reply_peer(addr, port), arrival)

    def send(self, channel: int, data: bytes) -> bool:
        """False when the kernel refuses (full buffer, no route): the packet is dropped."""
        chan = self.session.channels[channel]
        try:
            self._sending_socket().sendto(data, (str(chan.group), chan.port))
        except (BlockingIOError, InterruptedError):
            return False
        except OSError as exc:
            if exc.errno in (errno.ENOBUFS, errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EPERM):
                return False
            raise
        return True

    def _source(self) -> str | None:
        return str(self.session.source) if self.session.ssm else None

    def join(self, channel: int) -> None:
        if channel in self.members:
            return
        chan = self.session.channels[channel]
        sock = open_member(str(chan.group), chan.port, self._source(), self.address)
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.members[channel] = sock
        self.loop.add_reader(sock, lambda: self._readable(channel, sock))

    def leave(self, channel: int) -> None:
        sock = self.members.pop(channel, None)
        if sock is None:
            return
        self.loop.remove_reader(sock)
        close_member(sock, str(self.session.channels[channel].group), self._source(),
                     self.address)

    def _readable(self, channel: int, sock: socket.socket) -> None:
        for _ in range(BATCH):
            if self.members.get(channel) is not sock:  # left while the event was pending
                return
            try:
                data, ancillary, _, _ = sock.recvmsg(65536, 64)
            except (BlockingIOError, InterruptedError):
                return
            self.deliver(data, channel, kernel_arrival(ancillary, self.loop.now(), time.time()))

    def close(self) -> None:
        for channel in list(self.members):
            self.leave(channel)
        if self._feedback is not None:
            self.loop.remove_reader(self._feedback)
            self._feedback.close()
            self._feedback = None
        if self._sender is not None:
            self._sender.close()
            self._sender = None

"""The network of an agent that shares its process with others (``agents.host``).

Each agent of a host belongs to its own lab node. A socket belongs to the network
namespace it was created in for its whole life, and the kernel routes, joins and sends
IGMP for it there, whatever namespace the thread that later uses it is in. So
:class:`Namespaces` switches the host's thread into a node's namespace only to create a
socket (``setns(2)``, then back), and :class:`HostTransport` keeps a channel's member
socket when the agent leaves: the leave drops the membership (an IGMP leave from the
node's kernel), and a later join adds it back on the same socket, with no ``setns``.
STAIR and RLC join and leave several times a second.
"""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path

from agents.runtime.loop import EventLoop
from agents.runtime.session import Session
from agents.runtime.transport import Deliver, DeliverFeedback, UdpTransport
from mcclab import multicast
from mcclab.net.setns import Namespaces

__all__ = ["HostTransport", "Namespaces"]  # Namespaces lives in mcclab.net.setns


def _drain(sock: socket.socket) -> None:
    """Discard what a socket holds: a closed socket would have lost it too."""
    with contextlib.suppress(BlockingIOError, InterruptedError, OSError):
        while True:
            sock.recv(65536)


class HostTransport(UdpTransport):
    """:class:`UdpTransport` whose sockets are made inside the node's namespace ``netns``.

    A leave keeps the member socket (membership dropped, socket drained and
    unregistered); the next join of that channel reuses it.
    """

    def __init__(self, loop: EventLoop, session: Session, address: str | None,
                 deliver: Deliver, deliver_feedback: DeliverFeedback | None = None,
                 listen_feedback: bool = False, *, namespaces: Namespaces,
                 netns: str | Path | None):
        super().__init__(loop, session, address, deliver, deliver_feedback, listen_feedback)
        self.namespaces = namespaces
        self.netns = netns
        self.parked: dict[int, socket.socket] = {}  # channel -> member socket, not joined

    def _sending_socket(self) -> socket.socket:
        if self._sender is None:
            with self.namespaces.inside(self.netns):
                return super()._sending_socket()
        return self._sender

    def _feedback_socket(self) -> socket.socket:
        if self._feedback is None:
            with self.namespaces.inside(self.netns):
                return super()._feedback_socket()
        return self._feedback

    def join(self, channel: int) -> None:
        if channel in self.members:
            return
        sock = self.parked.pop(channel, None)
        if sock is None:
            with self.namespaces.inside(self.netns):
                super().join(channel)
            return
        _drain(sock)
        try:
            multicast.join(sock, str(self.session.channels[channel].group), self._source(),
                           self.address)
        except OSError:
            self.parked[channel] = sock
            raise
        self.members[channel] = sock
        self.loop.add_reader(sock, lambda: self._readable(channel, sock))

    def leave(self, channel: int) -> None:
        sock = self.members.pop(channel, None)
        if sock is None:
            return
        self.loop.remove_reader(sock)
        with contextlib.suppress(OSError):
            multicast.leave(sock, str(self.session.channels[channel].group), self._source(),
                            self.address)
        _drain(sock)
        self.parked[channel] = sock

    def close(self) -> None:
        super().close()  # leaves every joined channel, which parks its socket
        for sock in self.parked.values():
            sock.close()
        self.parked.clear()


"""Joining and leaving a channel on a real socket: one UDP socket per joined channel.

Each socket is bound to its group and port, so the kernel hands it only that
channel's datagrams, and has IP_MULTICAST_ALL off, so it does not also get
groups other sockets on the node joined. ASM joins and IGMPv3 source-specific
joins come from :mod:`mcclab.multicast`.
"""

from __future__ import annotations

import contextlib
import socket

from mcclab import multicast

IP_MULTICAST_ALL = getattr(socket, "IP_MULTICAST_ALL", 49)
RCVBUF = 4 << 20


def open_member(group: str, port: int, source: str | None, interface: str | None
                ) -> socket.socket:
    """A non-blocking socket receiving ``group:port`` (from ``source`` only if given), joined
    on ``interface`` (an address; None lets the kernel's routes choose)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_IP, IP_MULTICAST_ALL, 0)
        _grow_receive_buffer(sock)
        sock.bind((group, port))
        multicast.join(sock, group, source, interface)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def close_member(sock: socket.socket, group: str, source: str | None,
                 interface: str | None) -> None:
    """Leave (sends the IGMP leave at once rather than on close) and close."""
    with contextlib.suppress(OSError):
        multicast.leave(sock, group, source, interface)
    sock.close()


def _grow_receive_buffer(sock: socket.socket) -> None:
    """Ask for a large receive buffer (beyond rmem_max when root) so bursts are not dropped
    by the socket while the loop is busy."""
    force = getattr(socket, "SO_RCVBUFFORCE", 33)
    try:
        sock.setsockopt(socket.SOL_SOCKET, force, RCVBUF)
    except OSError:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)

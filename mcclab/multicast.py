"""ASM and SSM (IGMPv3 source-specific) group membership on a UDP socket.

Python 3.11's socket module lacks the source-specific options, so their
Linux values are spelled out here (from <linux/in.h>).
"""

from __future__ import annotations

import socket

IP_ADD_SOURCE_MEMBERSHIP = getattr(socket, "IP_ADD_SOURCE_MEMBERSHIP", 39)
IP_DROP_SOURCE_MEMBERSHIP = getattr(socket, "IP_DROP_SOURCE_MEMBERSHIP", 40)
_ANY = socket.inet_aton("0.0.0.0")


def _request(group: str, source: str | None, interface: str | None) -> tuple[int, int, bytes]:
    """(join option, leave option, request struct) for an ASM or SSM membership."""
    iface = socket.inet_aton(interface) if interface else _ANY
    if source is None:
        return socket.IP_ADD_MEMBERSHIP, socket.IP_DROP_MEMBERSHIP, socket.inet_aton(group) + iface
    # struct ip_mreq_source on Linux: multiaddr, interface, sourceaddr.
    mreq = socket.inet_aton(group) + iface + socket.inet_aton(source)
    return IP_ADD_SOURCE_MEMBERSHIP, IP_DROP_SOURCE_MEMBERSHIP, mreq


def join(sock: socket.socket, group: str, source: str | None = None,
         interface: str | None = None) -> None:
    """Join ``group`` (from ``source`` only, as an IGMPv3 SSM join, when given)."""
    option, _, mreq = _request(group, source, interface)
    sock.setsockopt(socket.IPPROTO_IP, option, mreq)


def leave(sock: socket.socket, group: str, source: str | None = None,
          interface: str | None = None) -> None:
    """Undo :func:`join`."""
    _, option, mreq = _request(group, source, interface)
    sock.setsockopt(socket.IPPROTO_IP, option, mreq)

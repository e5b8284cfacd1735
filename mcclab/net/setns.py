"""Move the calling thread into a named network namespace (``setns(2)``).

Python 3.11 has no ``os.setns``; libc's is one call away. ``setns`` with
CLONE_NEWNET switches only the calling thread: callers either run it in a
thread they discard or in a fresh single-threaded child.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

CLONE_NEWNET = 0x40000000
NETNS_DIR = Path("/run/netns")

_libc = ctypes.CDLL(None, use_errno=True)


def setns_fd(fd: int, what: str = "") -> None:
    """Move the calling thread into the network namespace open as ``fd``."""
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns {what}: {os.strerror(err)}")


def enter_netns(path: Path) -> None:
    """Enter the network namespace bound at ``path`` (e.g. ``/run/netns/mcl-h1``)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        setns_fd(fd, str(path))
    finally:
        os.close(fd)

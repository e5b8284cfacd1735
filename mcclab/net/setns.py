"""Move the calling thread into a named network namespace (``setns(2)``).

Python 3.11 has no ``os.setns``; libc's is one call away. ``setns`` with
CLONE_NEWNET switches only the calling thread: callers either run it in a
thread they discard or in a fresh single-threaded child.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Iterator
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


class Namespaces:
    """Open namespace files by path (kept open), and enter one for a block of code.

    Only the calling thread switches (``setns`` with CLONE_NEWNET); it is back in the
    namespace it started in when the block ends, also on an exception. One process
    can so work in many namespaces in turn: a socket keeps the namespace it was made
    in, and a child process inherits the calling thread's.
    """

    def __init__(self) -> None:
        self._home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        self._fds: dict[str, int] = {}
        self.switches = 0  # setns calls into another namespace (for tests and benches)

    def fd(self, path: str | Path) -> int:
        """The open descriptor of the namespace file at ``path``."""
        key = str(path)
        if key not in self._fds:
            self._fds[key] = os.open(key, os.O_RDONLY)
        return self._fds[key]

    @contextlib.contextmanager
    def inside(self, path: str | Path | None) -> Iterator[None]:
        """Run the block inside the namespace at ``path`` (None: where the thread is)."""
        if path is None:
            yield
            return
        setns_fd(self.fd(path), str(path))
        self.switches += 1
        try:
            yield
        finally:
            setns_fd(self._home, "back to the starting namespace")

    def close(self) -> None:
        """Close every namespace descriptor."""
        for fd in (*self._fds.values(), self._home):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds.clear()

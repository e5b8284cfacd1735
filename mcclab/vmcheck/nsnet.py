"""A network namespace for the Vagrant check, and TCP relays across its boundary.

libvirt's management network (a bridge with a private address range and a
DHCP server) may not exist in this host's root namespace, so libvirtd, Vagrant
and the VM's bridge live in a namespace the check creates and deletes. Two
kinds of relay cross the boundary, both plain TCP splices (no protocol parsing
beyond the first HTTP request's Host header):

- **registry relay**: a listening socket *inside* the namespace (port 80 on its
  addresses) whose outgoing connections are made from the root namespace, to
  the host's apt mirror hosts only (chosen by the request's Host header). The
  guest reaches Debian's mirror through it, as QEMU's user-mode stack lets
  vm-check's guest reach it through the host's own sockets;
- **port relay**: a listening socket on the root namespace's 127.0.0.1 whose
  connections go to 127.0.0.1 *inside* the namespace, where Vagrant's `ssh -L`
  port forwards listen; so the forwarded ports open from this host's 127.0.0.1.

A socket belongs to the namespace it was created in; ``socket_in_netns``
creates one in a short-lived thread that has entered the namespace (``setns``
changes only the calling thread's namespace).
"""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import threading
from collections.abc import Callable

from mcclab.net.setns import NETNS_DIR, setns_fd

_HOST = re.compile(rb"^host:\s*([^\s:]+)(?::(\d+))?\s*$", re.IGNORECASE | re.MULTILINE)
MAX_HEADER = 64 * 1024


def add_argv(name: str) -> list[str]:
    """Create the namespace (``ip netns add``)."""
    return ["ip", "netns", "add", name]


def delete_argv(name: str) -> list[str]:
    """Delete the namespace."""
    return ["ip", "netns", "delete", name]


def exec_argv(name: str, argv: list[str]) -> list[str]:
    """``argv`` run inside the namespace."""
    return ["ip", "netns", "exec", name, *argv]


def exists(name: str) -> bool:
    """True if the named namespace exists."""
    return (NETNS_DIR / name).exists()


def create(name: str) -> None:
    """Create the namespace with its loopback up."""
    subprocess.run(add_argv(name), check=True, capture_output=True)
    subprocess.run(exec_argv(name, ["ip", "link", "set", "lo", "up"]), check=True,
                   capture_output=True)


def delete(name: str) -> None:
    """Delete the namespace if it exists."""
    if exists(name):
        subprocess.run(delete_argv(name), check=True, capture_output=True)


def socket_in_netns(name: str, family: int = socket.AF_INET,
                    kind: int = socket.SOCK_STREAM) -> socket.socket:
    """A new socket in the namespace ``name`` (created by a thread that entered it)."""
    out: list[socket.socket | BaseException] = []

    def body() -> None:
        try:
            with open(NETNS_DIR / name) as f:
                setns_fd(f.fileno(), name)
            out.append(socket.socket(family, kind))
        except BaseException as exc:  # handed to the caller
            out.append(exc)
    t = threading.Thread(target=body)
    t.start()
    t.join()
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


def request_host(head: bytes) -> str | None:
    """The host name of an HTTP request's Host header (None if there is none)."""
    m = _HOST.search(head)
    return m.group(1).decode("ascii", "replace").lower() if m else None


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    """Copy until EOF, then half-close the other side."""
    with contextlib.suppress(OSError):
        while data := src.recv(65536):
            dst.sendall(data)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


def splice(a: socket.socket, b: socket.socket, first: bytes = b"") -> None:
    """Relay both directions between ``a`` and ``b`` until both are done, then close."""
    try:
        if first:
            b.sendall(first)
        t = threading.Thread(target=_pipe, args=(b, a), daemon=True)
        t.start()
        _pipe(a, b)
        t.join()
    except OSError:
        pass
    finally:
        a.close()
        b.close()


class Relay:
    """A listening socket and a thread per connection; ``close`` stops accepting."""

    def __init__(self, listener: socket.socket,
                 connect: Callable[[socket.socket], tuple[socket.socket, bytes] | None]) -> None:
        self.listener = listener
        self.connect = connect
        self.connections = 0
        self.refused: list[str] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def start(self) -> Relay:
        """Start accepting."""
        self._thread.start()
        return self

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        try:
            got = self.connect(conn)
        except OSError as exc:
            self.refused.append(str(exc))
            got = None
        if got is None:
            conn.close()
            return
        self.connections += 1
        splice(conn, *got)

    def close(self) -> None:
        """Stop accepting (connections in progress end with their peers)."""
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self._thread.join(5)


def registry_relay(netns: str, hosts: set[str], port: int = 80) -> Relay:
    """HTTP relay listening in the namespace, connecting from the root namespace.

    Only requests for ``hosts`` (the host's apt mirror hosts) are relayed, to the
    same host and port as the guest asked for; anything else is closed unanswered.
    """
    listener = socket_in_netns(netns)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", port))
    listener.listen(64)
    relay: Relay

    def connect(conn: socket.socket) -> tuple[socket.socket, bytes] | None:
        conn.settimeout(60)
        head = b""
        while b"\r\n\r\n" not in head and len(head) < MAX_HEADER:
            chunk = conn.recv(4096)
            if not chunk:
                return None
            head += chunk
        conn.settimeout(None)
        host = request_host(head)
        if host is None or host not in hosts:
            relay.refused.append(str(host))
            return None
        out = socket.create_connection((host, port), timeout=30)
        out.settimeout(None)
        return out, head

    relay = Relay(listener, connect)
    return relay.start()


def port_relay(netns: str, port: int, listen_port: int | None = None) -> Relay:
    """127.0.0.1:``listen_port`` here to 127.0.0.1:``port`` inside the namespace."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port if listen_port is None else listen_port))
    listener.listen(16)

    def connect(_conn: socket.socket) -> tuple[socket.socket, bytes] | None:
        out = socket_in_netns(netns)
        out.settimeout(10)
        out.connect(("127.0.0.1", port))
        out.settimeout(None)
        return out, b""

    return Relay(listener, connect).start()


def listen_port(relay: Relay) -> int:
    """The port a relay listens on."""
    return relay.listener.getsockname()[1]

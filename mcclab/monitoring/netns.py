"""Read per-namespace /proc/net files from the root namespace, without a subprocess.

``setns(2)`` with CLONE_NEWNET switches only the calling thread, so each read
runs in a short-lived thread that enters the node's namespace and reads
``/proc/thread-self/net/...`` (``/proc/net`` would show the *process's*
namespace, i.e. the main thread's). The exporter's main thread never moves.
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path

CLONE_NEWNET = 0x40000000
NETNS_DIR = Path("/run/netns")

_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def read_net_files(netns: str, names: list[str], netns_dir: Path = NETNS_DIR
                   ) -> dict[str, str]:
    """The text of ``/proc/net/<name>`` as seen inside named namespace ``netns``."""
    result: dict[str, str] = {}
    failure: list[BaseException] = []

    def work() -> None:
        try:
            target = os.open(netns_dir / netns, os.O_RDONLY)
            try:
                # This thread is discarded afterwards, so it never has to switch back.
                _setns(target)
            finally:
                os.close(target)
            for name in names:
                result[name] = Path(f"/proc/thread-self/net/{name}").read_text()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            failure.append(exc)

    thread = threading.Thread(target=work, name=f"netns-{netns}", daemon=True)
    thread.start()
    thread.join(5.0)
    if failure:
        raise failure[0]
    if thread.is_alive():
        raise TimeoutError(f"reading /proc/net in {netns} took more than 5 s")
    return result

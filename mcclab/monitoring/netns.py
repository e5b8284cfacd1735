"""Read per-namespace /proc/net files from the root namespace, without a subprocess.

``setns(2)`` with CLONE_NEWNET switches only the calling thread, so each read
runs in a short-lived thread that enters the node's namespace and reads
``/proc/thread-self/net/...`` (``/proc/net`` would show the *process's*
namespace, i.e. the main thread's). The exporter's main thread never moves.
"""

from __future__ import annotations

import threading
from pathlib import Path

from mcclab.net.setns import NETNS_DIR, enter_netns


def read_net_files(netns: str, names: list[str], netns_dir: Path = NETNS_DIR
                   ) -> dict[str, str]:
    """The text of ``/proc/net/<name>`` as seen inside named namespace ``netns``."""
    result: dict[str, str] = {}
    failure: list[BaseException] = []

    def work() -> None:
        try:
            # This thread is discarded afterwards, so it never has to switch back.
            enter_netns(netns_dir / netns)
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

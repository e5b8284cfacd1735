"""Two network namespaces joined by a veth, with a TCP sink in the second: for TCP option tests.

Also :func:`recorded_lab`, the lab record and lock that any test making namespaces with
mcclab's names holds while they exist.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from mcclab.commands import Cmd, cmd
from mcclab.execute import Runner, full_argv
from mcclab.lab import LOCK_NAME, QUEUE_NAME, live_labs
from mcclab.lablock import LabLock
from mcclab.net.node_config import netns_name
from mcclab.state import STATE_ROOT, LabState, destroy

# Wait for other labs on the machine rather than fail: as long as tests/conftest.py
# extends a root test's timeout for the lab lock (MCCLAB_TEST_LOCK_WAIT, default 1800 s).
LOCK_WAIT = float(os.environ.get("MCCLAB_TEST_LOCK_WAIT", "1800"))

PORT = 5999
# Accept connections forever and read each one to its end.
SINK = """
import socket, sys
s = socket.create_server((sys.argv[1], int(sys.argv[2])))
print("ready", flush=True)
while True:
    c, _ = s.accept()
    while c.recv(65536):
        pass
    c.close()
"""


@contextmanager
def recorded_lab(lab_id: str, nodes: Sequence[str],
                 lock_wait: float = LOCK_WAIT) -> Iterator[LabState]:
    """Namespaces named like a lab's nodes (``mcl-<node>``), made as a lab makes them.

    The test takes the machine-wide lab lock as ``Lab.up`` does (so it never meets
    another lab's namespaces, and no lab is built beside it), and records every
    namespace in a lab record under ``/run/mcclab`` owned by this process before it
    creates it: ``mcclab clean`` then keeps them as a live lab's, not as strays, and
    after a crash of the test it removes them. Whatever happens, the namespaces, the
    processes recorded in the state and the record go, and the lock is released.
    """
    lock = LabLock(STATE_ROOT / LOCK_NAME, STATE_ROOT / QUEUE_NAME)
    if not lock.acquire(lock_wait, ready=lambda: not live_labs()):
        raise RuntimeError(f"the lab lock was not free within {lock_wait:g} s")
    state = LabState(lab_id=lab_id)
    try:
        state.save()
        for node in nodes:
            name = netns_name(node)
            state.add_netns(name)
            subprocess.run(["ip", "netns", "add", name], check=True)
        state.status = "up"
        state.save()
        yield state
    finally:
        try:
            destroy(state)
        finally:
            lock.release()


def in_ns(node: str, *argv: str) -> list[str]:
    """argv run inside a node's namespace."""
    return full_argv(cmd(*argv, netns=netns_name(node)))


@contextmanager
def netns_pair(sender: str, receiver: str, subnet: str, dev: str,
               sender_setup: tuple[Cmd, ...] = ()) -> Iterator[Runner]:
    """``sender`` at ``subnet``.1 and ``receiver`` at .2 on a veth, a sink listening on PORT.

    ``sender_setup`` runs after the addresses are up (a qdisc, say). Everything is
    torn down afterwards, whatever happens.
    """
    runner = Runner()
    with recorded_lab(f"nspair-{sender}-{receiver}", (sender, receiver)) as state:
        runner.run(cmd("ip", "link", "add", f"{dev}0", "netns", netns_name(sender), "type",
                       "veth", "peer", "name", f"{dev}1", "netns", netns_name(receiver)))
        for node, end, host in ((sender, "0", 1), (receiver, "1", 2)):
            runner.run(cmd("ip", "addr", "add", f"{subnet}.{host}/24", "dev", f"{dev}{end}",
                           netns=netns_name(node)))
            runner.run(cmd("ip", "link", "set", f"{dev}{end}", "up", netns=netns_name(node)))
        runner.run_all(list(sender_setup))
        server = subprocess.Popen(in_ns(receiver, sys.executable, "-c", SINK, f"{subnet}.2",
                                        str(PORT)),
                                  stdout=subprocess.PIPE, text=True, start_new_session=True)
        # Recorded: should the test die, `mcclab clean` ends the sink with its namespace.
        state.add_process(server.pid, "sink")
        try:
            assert server.stdout is not None and server.stdout.readline().strip() == "ready"
            yield runner
        finally:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()

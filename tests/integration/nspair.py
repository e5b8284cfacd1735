"""Two network namespaces joined by a veth, with a TCP sink in the second: for TCP option tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from mcclab.commands import Cmd, cmd
from mcclab.execute import Runner, full_argv
from mcclab.net.node_config import netns_name

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
    made = []
    try:
        for node in (sender, receiver):
            runner.run(cmd("ip", "netns", "add", netns_name(node)))
            made.append(node)
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
        try:
            assert server.stdout is not None and server.stdout.readline().strip() == "ready"
            yield runner
        finally:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
    finally:
        for node in made:
            runner.run(cmd("ip", "netns", "del", netns_name(node)), timeout=10)

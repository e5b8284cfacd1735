"""``sack: false`` on a TCP flow: the connection really runs without SACK.

Evidence from the kernel, not the transcript: the setup commands the runner would
execute for such a flow are run into a namespace pair, and the sender's socket says
through TCP_INFO whether the handshake negotiated SACK.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from mcclab.commands import cmd
from mcclab.execute import Runner, full_argv
from mcclab.experiment.launch import host_setup
from mcclab.experiment.spec import Experiment
from mcclab.net.node_config import netns_name

pytestmark = [pytest.mark.root, pytest.mark.timeout(120)]

SENDER, RECEIVER = "sacktx", "sackrx"
TX_ADDR, RX_ADDR, PORT = "10.254.77.1", "10.254.77.2", 5999
SERVER = f"""
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("{RX_ADDR}", {PORT}))
s.listen()
print("ready", flush=True)
while True:
    c, _ = s.accept()
    while c.recv(65536):
        pass
    c.close()
"""
# Connect, send, and read tcpi_options (byte 5 of struct tcp_info) on the open socket.
CLIENT = f"""
import socket
c = socket.create_connection(("{RX_ADDR}", {PORT}), timeout=10)
c.sendall(b"x" * 100000)
print(c.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[5])
c.close()
"""
TCPI_OPT_SACK = 2  # linux/tcp.h


def in_ns(node: str, *argv: str) -> list[str]:
    """argv run inside a node's namespace."""
    return full_argv(cmd(*argv, netns=netns_name(node)))


@pytest.fixture
def pair():
    """Two namespaces joined by a veth, torn down afterwards whatever happens."""
    runner = Runner()
    made = []
    try:
        for node in (SENDER, RECEIVER):
            runner.run(cmd("ip", "netns", "add", netns_name(node)))
            made.append(node)
        runner.run(cmd("ip", "link", "add", "sack0", "netns", netns_name(SENDER), "type", "veth",
                       "peer", "name", "sack1", "netns", netns_name(RECEIVER)))
        for node, dev, addr in ((SENDER, "sack0", TX_ADDR), (RECEIVER, "sack1", RX_ADDR)):
            runner.run(cmd("ip", "addr", "add", f"{addr}/24", "dev", dev, netns=netns_name(node)))
            runner.run(cmd("ip", "link", "set", dev, "up", netns=netns_name(node)))
        server = subprocess.Popen(in_ns(RECEIVER, sys.executable, "-c", SERVER),
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


def sack_negotiated() -> bool:
    """Whether a fresh connection from the sender to the receiver runs with SACK."""
    out = subprocess.run(in_ns(SENDER, sys.executable, "-c", CLIENT), capture_output=True,
                         text=True, timeout=30, check=True).stdout
    return bool(int(out) & TCPI_OPT_SACK)


def test_a_sender_with_sack_false_negotiates_no_sack(pair):
    exp = Experiment.model_validate({
        "name": "sack", "topology": "none.yaml", "duration": "10s",
        "flows": [{"name": "tcp", "type": "tcp", "sender": SENDER, "receiver": RECEIVER,
                   "sack": False}]})
    assert sack_negotiated()  # the kernel's default
    pair.run_all(host_setup(exp))
    assert not sack_negotiated()
    # the receiver's namespace keeps its own default
    rx = subprocess.run(in_ns(RECEIVER, "sysctl", "-n", "net.ipv4.tcp_sack"),
                        capture_output=True, text=True, check=True).stdout.strip()
    assert rx == "1"

"""``max_window`` on a TCP flow: the sender's congestion window really stops there.

Evidence from the kernel: the setup commands for the ceiling run into a namespace
pair whose link is slower than the sender, so an unclamped window grows far past
the ceiling; the sender's socket reports its cwnd through TCP_INFO.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import sys

import pytest

from mcclab.commands import cmd
from mcclab.execute import Runner, full_argv
from mcclab.net.node_config import netns_name
from mcclab.net.tcp_window import clamp_cmds

pytestmark = [pytest.mark.root, pytest.mark.timeout(120)]

SENDER, RECEIVER = "wintx", "winrx"
TX_ADDR, RX_ADDR, PORT = "10.254.78.1", "10.254.78.2", 5999
CEILING = 8
SERVER = f"""
import socket
s = socket.create_server(("{RX_ADDR}", {PORT}))
print("ready", flush=True)
while True:
    c, _ = s.accept()
    while c.recv(65536):
        pass
    c.close()
"""
# Keep the queue full for two seconds; print the largest snd_cwnd (struct tcp_info, byte 80).
CLIENT = f"""
import socket, struct, time
c = socket.create_connection(("{RX_ADDR}", {PORT}), timeout=10)
c.setblocking(False)
largest, end = 0, time.monotonic() + 2
while time.monotonic() < end:
    try:
        c.send(b"x" * 65536)
    except BlockingIOError:
        time.sleep(0.001)
    info = c.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    largest = max(largest, struct.unpack_from("I", info, 80)[0])
c.close()
print(largest)
"""


def in_ns(node: str, *argv: str) -> list[str]:
    """argv run inside a node's namespace."""
    return full_argv(cmd(*argv, netns=netns_name(node)))


@pytest.fixture
def pair(kernel_features):
    """Two namespaces joined by a 20-Mbit/s veth, torn down afterwards whatever happens."""
    if not kernel_features.tbf:
        pytest.skip("needs the tbf qdisc: without a slow link the window never grows")
    runner = Runner()
    made = []
    try:
        for node in (SENDER, RECEIVER):
            runner.run(cmd("ip", "netns", "add", netns_name(node)))
            made.append(node)
        runner.run(cmd("ip", "link", "add", "win0", "netns", netns_name(SENDER), "type", "veth",
                       "peer", "name", "win1", "netns", netns_name(RECEIVER)))
        for node, dev, addr in ((SENDER, "win0", TX_ADDR), (RECEIVER, "win1", RX_ADDR)):
            runner.run(cmd("ip", "addr", "add", f"{addr}/24", "dev", dev, netns=netns_name(node)))
            runner.run(cmd("ip", "link", "set", dev, "up", netns=netns_name(node)))
        # A queue that holds 200 ms: without a ceiling the window grows to fill it.
        runner.run(cmd("tc", "qdisc", "add", "dev", "win0", "root", "tbf", "rate", "20mbit",
                       "burst", "4kb", "latency", "200ms", netns=netns_name(SENDER)))
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


def largest_cwnd() -> int:
    """The largest congestion window of a fresh two-second transfer, in segments."""
    out = subprocess.run(in_ns(SENDER, sys.executable, "-c", CLIENT), capture_output=True,
                         text=True, timeout=30, check=True).stdout
    return int(out)


def test_the_window_ceiling_holds_from_the_first_flow_on(pair):
    # Without the ceiling the window passes it by far (and this leaves a cache entry
    # without the lock, which the setup must replace).
    assert largest_cwnd() > 4 * CEILING
    pair.run_all(clamp_cmds(netns_name(SENDER), netns_name(RECEIVER),
                            ipaddress.IPv4Address(RX_ADDR), None, "win0", CEILING))
    assert largest_cwnd() <= CEILING
    assert largest_cwnd() <= CEILING  # and for the next connection too

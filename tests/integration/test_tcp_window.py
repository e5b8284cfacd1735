"""``max_window`` on a TCP flow: the sender's congestion window really stops there.

Evidence from the kernel: the setup commands for the ceiling run into a namespace
pair whose link is slower than the sender, so an unclamped window grows far past
the ceiling; the sender's socket reports its cwnd through TCP_INFO.
"""

from __future__ import annotations

import ipaddress
import subprocess
import sys

import pytest
from nspair import PORT, in_ns, netns_pair

from mcclab.commands import cmd
from mcclab.net.node_config import netns_name
from mcclab.net.tcp_window import clamp_cmds

# timeout: measured 6.4 s (2-core VM); 60 s is the floor for a lab test
pytestmark = [pytest.mark.root, pytest.mark.timeout(60)]

SENDER, RECEIVER = "wintx", "winrx"
SUBNET = "10.254.78"
CEILING = 8
# Keep the queue full for two seconds; print the largest snd_cwnd (struct tcp_info, byte 80).
CLIENT = f"""
import socket, struct, time
c = socket.create_connection(("{SUBNET}.2", {PORT}), timeout=10)
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


@pytest.fixture
def pair(kernel_features):
    """The two namespaces on a 20-Mbit/s link, torn down afterwards whatever happens."""
    if not kernel_features.tbf:
        pytest.skip("needs the tbf qdisc: without a slow link the window never grows")
    # A queue that holds 200 ms: without a ceiling the window grows to fill it.
    slow = cmd("tc", "qdisc", "add", "dev", "win0", "root", "tbf", "rate", "20mbit",
               "burst", "4kb", "latency", "200ms", netns=netns_name(SENDER))
    with netns_pair(SENDER, RECEIVER, SUBNET, "win", (slow,)) as runner:
        yield runner


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
                            ipaddress.IPv4Address(f"{SUBNET}.2"), None, "win0", CEILING))
    assert largest_cwnd() <= CEILING
    assert largest_cwnd() <= CEILING  # and for the next connection too

"""``sack: false`` on a TCP flow: the connection really runs without SACK.

Evidence from the kernel, not the transcript: the setup commands the runner would
execute for such a flow are run into a namespace pair, and the sender's socket says
through TCP_INFO whether the handshake negotiated SACK.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from nspair import PORT, in_ns, netns_pair

from mcclab.experiment.launch import host_setup
from mcclab.experiment.spec import Experiment

# timeout: measured 0.1 s (2-core VM); 60 s is the floor for a lab test
pytestmark = [pytest.mark.root, pytest.mark.timeout(60)]

SENDER, RECEIVER = "sacktx", "sackrx"
SUBNET = "10.254.77"
# Connect, send, and read tcpi_options (byte 5 of struct tcp_info) on the open socket.
CLIENT = f"""
import socket
c = socket.create_connection(("{SUBNET}.2", {PORT}), timeout=10)
c.sendall(b"x" * 100000)
print(c.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[5])
c.close()
"""
TCPI_OPT_SACK = 2  # linux/tcp.h


@pytest.fixture
def pair():
    """The two namespaces, torn down afterwards whatever happens."""
    with netns_pair(SENDER, RECEIVER, SUBNET, "sack") as runner:
        yield runner


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


RECOVERY = ("net.ipv4.tcp_sack", "net.ipv4.tcp_recovery", "net.ipv4.tcp_early_retrans",
            "net.ipv4.tcp_frto")


def sysctls(ns: str | None) -> dict[str, str]:
    """The four loss-recovery sysctls as a namespace (None: the host) sees them."""
    argv = ("sysctl", "-n", *RECOVERY)
    out = subprocess.run(in_ns(ns, *argv) if ns else list(argv), capture_output=True,
                         text=True, check=True).stdout.split()
    return dict(zip(RECOVERY, out, strict=True))


@pytest.mark.parametrize("model,off", [("webrc", True), ("linux-reno", False)])
def test_a_papers_tcp_model_turns_recovery_off_in_the_senders_namespace_only(pair, model, off):
    """RACK, TLP, F-RTO and SACK are per-namespace sysctls: the model's sender alone changes."""
    exp = Experiment.model_validate({
        "name": "model", "topology": "none.yaml", "duration": "10s", "tcp": {"model": model},
        "flows": [{"name": "tcp", "type": "tcp", "sender": SENDER, "receiver": RECEIVER}]})
    host, receiver, before = sysctls(None), sysctls(RECEIVER), sysctls(SENDER)
    pair.run_all(host_setup(exp))
    assert sysctls(SENDER) == (dict.fromkeys(RECOVERY, "0") if off else before)
    assert sack_negotiated() is not off
    assert sysctls(RECEIVER) == receiver and sysctls(None) == host

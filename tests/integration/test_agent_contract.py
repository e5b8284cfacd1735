"""Contract: every registered agent runs as real processes in network namespaces.

For each protocol, a sender and a receiver run for about three seconds in two
namespaces of their own (``agt-*``, a veth pair for data, and a veth each to
the root namespace as the control net). The receiver must get the configured
rate within 5%, its event log must be flushed while it runs, and ``/metrics``
must answer on the control address, and only there.

This test builds its own namespaces instead of a :class:`mcclab.lab.Lab`: one
lab at a time may be up on a machine, and a plain veth needs no router
(the sender routes 224.0.0.0/4 out of its veth, the receiver joins on its own).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from agents.runtime.registry import protocols
from mcclab.model.units import parse_rate

# timeout: 3x the slowest case measured (6.2 s, 2-core VM), at least 60 s
pytestmark = [pytest.mark.root, pytest.mark.timeout(60)]

REPO = Path(__file__).resolve().parents[2]
TOLERANCE = 0.05
SENDER_SECONDS = 3.5
METRICS_PORT = 9477
TOKEN = f"{os.getpid() % 100000:05d}"
NET = 1 + os.getpid() % 250  # third octet, so concurrent runs do not clash

# One session per registered protocol, declared in the protocol's own package (its SPEC's
# contract_case, agents/<package>/contract.py): channels, params, ssm, optional
# receiver_params and session (extra session keys such as feedback_port), and what to
# check: expected (a rate within 5%) or expected_range (adaptive protocols),
# silent_channels (never received) and joins_prefix (joins the protocol decides). The
# test fails if a protocol has none, so every new agent comes with its contract case.
CASES: dict[str, dict] = {name: spec.contract_case for name, spec in protocols().items()}


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=check, capture_output=True, text=True)


@dataclass
class Pair:
    """Two namespaces joined by a data veth, each with a control veth to the root namespace."""

    sender_ns: str
    receiver_ns: str
    sender_data: str
    receiver_data: str
    sender_control: str
    receiver_control: str


@contextlib.contextmanager
def veth_pair():
    """Create the two namespaces and their links; remove everything on exit."""
    s_ns, r_ns = f"agt-s{TOKEN}", f"agt-r{TOKEN}"
    d_s, d_r = f"agt-d{TOKEN}s", f"agt-d{TOKEN}r"
    c_s, c_r = f"agt-c{TOKEN}s", f"agt-c{TOKEN}r"
    data = f"10.251.{NET}"
    ctl = f"10.252.{NET}"
    try:
        sh("ip", "netns", "add", s_ns)
        sh("ip", "netns", "add", r_ns)
        sh("ip", "link", "add", d_s, "netns", s_ns, "type", "veth", "peer", d_r, "netns", r_ns)
        for ns, dev, addr in ((s_ns, d_s, f"{data}.1/24"), (r_ns, d_r, f"{data}.2/24")):
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", ns, "addr", "add", addr, "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "-n", s_ns, "route", "add", "224.0.0.0/4", "dev", d_s)
        # Control net: a /30 per node; the root side of each veth stays in the root namespace.
        for ns, dev, host in ((s_ns, c_s, 0), (r_ns, c_r, 4)):
            sh("ip", "link", "add", dev, "type", "veth", "peer", "ctl0", "netns", ns)
            sh("ip", "addr", "add", f"{ctl}.{host + 1}/30", "dev", dev)
            sh("ip", "link", "set", dev, "up")
            sh("ip", "-n", ns, "addr", "add", f"{ctl}.{host + 2}/30", "dev", "ctl0")
            sh("ip", "-n", ns, "link", "set", "ctl0", "up")
        yield Pair(s_ns, r_ns, f"{data}.1", f"{data}.2", f"{ctl}.2", f"{ctl}.6")
    finally:
        for dev in (c_s, c_r):
            sh("ip", "link", "del", dev, check=False)
        for ns in (s_ns, r_ns):
            sh("ip", "netns", "del", ns, check=False)


@pytest.fixture
def pair():
    with veth_pair() as net:
        yield net


def session_file(tmp_path: Path, name: str, case: dict, net: Pair) -> Path:
    session = {
        "protocol": name, "flow": f"contract-{name}", "session_id": 4242,
        "source": net.sender_data, "ssm": case["ssm"], "ttl": 1,
        "channels": case["channels"], "params": case["params"],
        "nodes": {
            "snd": {"address": net.sender_data},
            "rcv": {"address": net.receiver_data, "params": case.get("receiver_params", {})},
        },
        **case.get("session", {}),
    }
    path = tmp_path / "session.json"
    path.write_text(json.dumps(session))
    return path


def launch(ns: str, role: str, session: Path, node: str, log: Path, metrics: str,
           duration: float) -> subprocess.Popen:
    argv = ["ip", "netns", "exec", ns, sys.executable, "-m", "agents.run", role,
            "--session", str(session), "--node", node, "--log", str(log),
            "--metrics", metrics, "--duration", str(duration)]
    return subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def wait_ready(proc: subprocess.Popen, what: str) -> dict:
    line = proc.stdout.readline()
    if not line:
        proc.wait(5)
        pytest.fail(f"{what} exited ({proc.returncode}) before ready: {proc.stderr.read()}")
    return json.loads(line)


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def scrape(addr: str) -> str:
    with urllib.request.urlopen(f"http://{addr}:{METRICS_PORT}/metrics", timeout=3) as reply:
        return reply.read().decode()


def listening(ns: str) -> list[str]:
    out = sh("ip", "netns", "exec", ns, "ss", "-Hltn").stdout
    return [line.split()[3] for line in out.splitlines() if line.strip()]


def test_every_registered_protocol_has_a_contract_case():
    missing = sorted(name for name, case in CASES.items() if not case)
    assert not missing, f"no contract_case in the SPEC of {missing}"
    for name, case in CASES.items():
        assert {"ssm", "channels", "params", "silent_channels"} <= set(case), name
        assert ("expected" in case) != ("expected_range" in case), name


@pytest.mark.parametrize("name", sorted(CASES))
def test_agent_contract(name, pair, tmp_path):
    case = CASES[name]
    session = session_file(tmp_path, name, case, pair)
    rlog, slog = tmp_path / "receiver.jsonl", tmp_path / "sender.jsonl"
    rmetrics = f"{pair.receiver_control}:{METRICS_PORT}"
    smetrics = f"{pair.sender_control}:{METRICS_PORT}"
    receiver = launch(pair.receiver_ns, "receiver", session, "rcv", rlog, rmetrics,
                      SENDER_SECONDS + 1.5)
    sender = None
    try:
        wait_ready(receiver, "receiver")
        sender = launch(pair.sender_ns, "sender", session, "snd", slog, smetrics, SENDER_SECONDS)
        wait_ready(sender, "sender")
        time.sleep(1.6)

        # While running: the log has been flushed (a stats record is out) and /metrics answers
        # on the control address, and the HTTP server listens there only.
        assert any(r["event"] == "stats" for r in records(rlog)), "event log not flushed"
        text = scrape(pair.receiver_control)
        assert (f'mcc_agent_packets_received_total{{flow="contract-{name}",node="rcv",'
                f'protocol="{name}",role="receiver"}}') in text
        assert "mcc_agent_malformed_datagrams_total" in text
        assert "mcc_agent_packets_sent_total" in scrape(pair.sender_control)
        assert [a for a in listening(pair.receiver_ns) if a.endswith(f":{METRICS_PORT}")] \
            == [rmetrics]

        assert sender.wait(15) == 0, sender.stderr.read()
        assert receiver.wait(15) == 0, receiver.stderr.read()
    finally:
        for proc in (sender, receiver):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()

    rx, tx = records(rlog), records(slog)
    assert rx[-1]["event"] == "stop" and tx[-1]["event"] == "stop"
    sent_from = next(r["t"] for r in tx if r["event"] == "start")
    sent_until = tx[-1]["t"]
    # Receiver stats intervals that lie entirely inside the sender's active period.
    full = [r for r in rx if r["event"] == "stats"
            and r["t"] - r["interval"] >= sent_from and r["t"] <= sent_until]
    assert len(full) >= 2, f"too few full stats intervals: {full}"
    bits = 8 * sum(r["rx_bytes"] for r in full)
    seconds = sum(r["interval"] for r in full)
    if "expected_range" in case:  # adaptive protocols
        low, high = (parse_rate(x) for x in case["expected_range"])
        assert low <= bits / seconds <= high, (bits / seconds, low, high)
    else:
        expected = parse_rate(case["expected"])
        assert abs(bits / seconds - expected) <= TOLERANCE * expected, (bits / seconds, expected)
    assert rx[-1]["lost"] == 0
    assert rx[-1]["dropped"] == {}
    # The channels above the subscription were never received.
    last_stats = [r for r in rx if r["event"] == "stats"][-1]
    for channel in case["silent_channels"]:
        assert str(channel) not in last_stats["channels"]
    joins = [r["channel"] for r in rx if r["event"] == "join"]
    if "joins_prefix" in case:  # joins decided by the protocol: check how they begin
        assert joins[:len(case["joins_prefix"])] == case["joins_prefix"], joins
    else:
        assert joins == [c for c in range(len(case["channels"]))
                         if c not in case["silent_channels"]]

"""One small experiment run twice, one process per agent and then in agent hosts: the same
results within the run-to-run spread, the hosts recorded and scraped, nothing left over.

The experiment (written here, 40 s on tree2): an ORMCC session from src to h1..h4
through a 1 Mbit/s bottleneck in front of h3 and h4 (unicast feedback: the sender's
socket listens from the start, each receiver opens its own on first use), and an RLC
session to the same four receivers (joins of new layers at run time, each a new socket
in the receiver's namespace). Host mode runs its 10 agents in two hosts.

Spread assumed: the mean throughput of a flow at a receiver over the 30-s window may
differ by up to 20 % between two runs of the same setup. ORMCC's rate is a sawtooth
(AIMD against the bottleneck's 50-packet queue) whose period is seconds long, so 30 s
hold only a few periods, and RLC's join experiments fall at random times. A "lab check"
band, not from a paper.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
MCCLAB = [sys.executable, "-m", "mcclab"]
SPREAD = 0.20
# Queue for the machine-wide lab lock as long as conftest's allowance (other labs first).
LOCK_WAIT = float(os.environ.get("MCCLAB_TEST_LOCK_WAIT", "1800"))

# timeout: two 40-s runs on tree2 with bring-up and teardown (about 75 s each, 2-core VM);
# conftest adds the lab-lock allowance
pytestmark = [pytest.mark.root, pytest.mark.timeout(420)]

SPEC = """
name: agenthost-check
description: ORMCC and RLC to four receivers, for the agent host's equivalence test
reference: "lab check (agents.host against agents.run)"
topology: topologies/tree2.yaml
overrides:
  links:
    - endpoints: [r0, r2]
      forward: {rate: 1Mbit, delay: 20ms, queue: {limit: 50pkt, discipline: droptail}}
duration: 40s
warmup: 10s
seed: 1
flows:
  - name: ormcc
    type: multicast
    protocol: ormcc
    sender: src
    receivers: [h1, h2, h3, h4]
    params: {packet_size: 1000B, beta: 0.65}
  - name: rlc
    type: multicast
    protocol: rlc
    sender: src
    receivers: [h1, h2, h3, h4]
    params: {layers: 4, tau0: 125ms, packet_size: 256B}
profiles:
  quick: {scaling: "as written", set: {}}
"""


def start(spec: Path, results: Path, *settings: str) -> subprocess.Popen[str]:
    """``mcclab run`` the spec, queued for the lab lock."""
    argv = [*MCCLAB, "run", str(spec), "--profile", "quick", "--results", str(results),
            "--wait", f"{LOCK_WAIT:.0f}"]
    for item in settings:
        argv += ["--set", item]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=REPO)


def finish(proc: subprocess.Popen[str], results: Path) -> Path:
    """Wait for a started run; its one results folder."""
    out, _ = proc.communicate(timeout=LOCK_WAIT + 400)
    assert proc.returncode == 0, out[-3000:]
    (folder,) = list((results / "agenthost-check").iterdir())
    return folder


def means(folder: Path) -> dict[tuple[str, str], float]:
    """Mean throughput per (flow, receiver) over the window 10..40 s."""
    table = pd.read_csv(folder / "tables" / "per_second.csv")
    window = table[(table["t"] > 10) & (table["t"] <= 40)]
    return {(str(f), str(n)): float(g["throughput_bps"].mean())
            for (f, n), g in window.groupby(["flow", "node"])}


def test_host_mode_gives_the_results_of_process_mode(tmp_path):
    spec = tmp_path / "agenthost-check.yaml"
    spec.write_text(SPEC)
    # Both queued at once, so they take the lab lock one right after the other.
    first = start(spec, tmp_path / "process")
    try:
        time.sleep(1.0)  # the lock is first come, first served: process mode first
        second = start(spec, tmp_path / "host", "agents.mode=host", "agents.hosts=2")
    except BaseException:
        first.kill()
        raise
    try:
        process = finish(first, tmp_path / "process")
        host = finish(second, tmp_path / "host")
    finally:
        for proc in (first, second):
            if proc.poll() is None:  # a failed wait: SIGTERM makes a run wind up cleanly
                proc.terminate()
                proc.wait(timeout=120)

    rec_p = json.loads((process / "run.json").read_text())
    rec_h = json.loads((host / "run.json").read_text())
    assert rec_p["status"] == rec_h["status"] == "complete"
    assert rec_p["agents"] == {"mode": "process"}
    hosts = rec_h["agents"]["hosts"]
    assert rec_h["agents"]["mode"] == "host" and sorted(hosts) == ["agent-host-1",
                                                                   "agent-host-2"]
    assert sum(len(m) for m in hosts.values()) == 10

    # The results folder keeps its layout: one event log per agent, the same tables.
    for folder in (process, host):
        for flow in ("ormcc", "rlc"):
            assert (folder / "logs" / f"{flow}-sender-src.jsonl").is_file()
            for r in ("h1", "h2", "h3", "h4"):
                events = [json.loads(line)["event"] for line in
                          (folder / "logs" / f"{flow}-receiver-{r}.jsonl").read_text()
                          .splitlines()]
                assert events[0] == "start" and events[-1] == "stop", (folder, flow, r)
        summary = json.loads((folder / "summary.json").read_text())
        assert summary["agent_stalls"] is not None and not summary["agent_stalls"]["overloaded"]
    assert {h["host"] for h in json.loads((host / "summary.json").read_text())
            ["agent_stalls"]["hosts"]} == set(hosts)

    # Receivers in hosts sent ORMCC feedback and got RLC's layers joined at run time.
    fb = [json.loads(line) for line in (host / "logs" / "ormcc-sender-src.jsonl")
          .read_text().splitlines()]
    assert max(r.get("feedback_rx", 0) for r in fb if r["event"] == "stats") > 0
    joins = [json.loads(line) for line in (host / "logs" / "rlc-receiver-h1.jsonl")
             .read_text().splitlines() if '"join"' in line]
    assert len({j["channel"] for j in joins}) >= 2

    # One /metrics per host, scraped with every agent's labels (Prometheus's targets).
    targets = json.loads((host / "logs" / "monitoring" / "targets.json").read_text())
    roles = [t["labels"]["role"] for t in targets]
    assert roles.count("host") == 2 and "receiver" not in roles and "sender" not in roles
    metrics = pd.read_csv(host / "tables" / "metrics.csv.gz", low_memory=False)
    received = metrics[metrics["metric"] == "mcc_agent_packets_received_total"]
    receivers = received[received["role"] == "receiver"]
    assert set(receivers["node"]) == {"h1", "h2", "h3", "h4"}
    assert set(receivers["flow"]) == {"ormcc", "rlc"} and set(received["component"]) == {"agent"}

    got_p, got_h = means(process), means(host)
    print({key: (round(got_p[key]), round(got_h.get(key, 0))) for key in got_p})
    assert set(got_p) == set(got_h) and len(got_p) >= 8
    far = {key: (got_p[key], got_h[key]) for key in got_p
           if abs(got_h[key] - got_p[key]) > SPREAD * max(got_p[key], got_h[key])}
    assert not far, f"beyond the {SPREAD:.0%} spread (process, host bit/s): {far}"

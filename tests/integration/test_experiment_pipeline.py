"""Acceptance: the default experiment end to end, and SIGTERM in mid-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from mcclab.probes.reach import wait_for
from mcclab.state import leftovers

pytestmark = [pytest.mark.root, pytest.mark.timeout(900)]

MCCLAB = [sys.executable, "-m", "mcclab"]
BOTTLENECK = 3.2e6
CBR_RATE = 1e6
# IP+UDP headers of a 1000 B CBR payload, and TCP goodput per wire byte at 1500 B MTU.
CBR_ON_WIRE = CBR_RATE * 1028 / 1000
TCP_GOODPUT_PER_WIRE_BYTE = 1448 / 1500


def only_run(results):
    """The single run folder under results/default."""
    runs = list((results / "default").iterdir())
    assert len(runs) == 1, runs
    return runs[0]


def test_default_experiment_short_version(tmp_path):
    out = subprocess.run(MCCLAB + ["run", "default", "--profile", "quick", "--set",
                                   "duration=22s", "--set", "warmup=5s", "--results",
                                   str(tmp_path), "--wait", "600"],
                         capture_output=True, text=True, timeout=750)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    run = only_run(tmp_path)
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == "complete" and record["elapsed_s"] == pytest.approx(22, abs=0.5)
    env = json.loads((run / "env.json").read_text())
    assert env["kernel"] and env["git_sha"] and env["link_backend"] in ("kernel", "userspace")
    assert env["packages"]["frr"] and env["packages"]["iperf3"]
    for name in ("spec.yaml", "topology.yaml", "tables/per_second.csv", "summary.json",
                 "report.html", "figures/throughput.png", "figures/throughput.svg"):
        assert (run / name).is_file(), name
    assert list((run / "logs").glob("cbr-receiver-d1.jsonl"))

    table = pd.read_csv(run / "tables" / "per_second.csv")
    window = table[table["t"] > 5]
    cbr = window[window["flow"] == "cbr"]["throughput_bps"].mean()
    tcp = window[window["flow"] == "tcp"]["throughput_bps"].mean()
    # CBR is not congestion controlled: it gets its configured rate (within 3%).
    assert cbr == pytest.approx(CBR_RATE, rel=0.03), cbr
    # TCP takes the rest of the bottleneck, within 10%.
    rest = (BOTTLENECK - CBR_ON_WIRE) * TCP_GOODPUT_PER_WIRE_BYTE
    assert tcp == pytest.approx(rest, rel=0.10), (tcp, rest)

    summary = json.loads((run / "summary.json").read_text())
    verdicts = {q["label"]: q["verdict"] for q in summary["quantities"]}
    assert verdicts["CBR throughput"] == "pass"
    assert leftovers() == {"netns": [], "interfaces": []}


def test_sigterm_mid_run_leaves_an_interrupted_record_and_nothing_running(tmp_path):
    proc = subprocess.Popen(MCCLAB + ["run", "default", "--set", "duration=60s", "--set",
                                      "warmup=2s", "--results", str(tmp_path), "--wait", "600"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    log = None

    def receiver_running_a_while():
        nonlocal log
        runs = list((tmp_path / "default").glob("*/logs/cbr-receiver-d1.jsonl"))
        if not runs:
            return False
        log = runs[0]
        return log.read_text().count('"stats"') >= 6

    wait_for(receiver_running_a_while, 700, "six seconds of CBR reception")
    os.kill(proc.pid, signal.SIGTERM)
    killed_at = time.monotonic()
    proc.wait(timeout=90)
    assert proc.returncode == 1  # not a complete run
    run = only_run(tmp_path)
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == "interrupted"
    assert 5 <= record["elapsed_s"] < 20
    table = pd.read_csv(run / "tables" / "per_second.csv")
    assert table["t"].max() == int(record["elapsed_s"])
    assert table[table["flow"] == "cbr"]["throughput_bps"].iloc[-3:].mean() > 0.5 * CBR_RATE
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    assert (run / "report.html").is_file()
    assert time.monotonic() - killed_at < 60
    assert leftovers() == {"netns": [], "interfaces": []}
    clean = subprocess.run(MCCLAB + ["clean"], capture_output=True, text=True, timeout=60)
    assert "removed 0 lab(s), swept 0 stray namespace(s) and 0 stray interface(s)" in clean.stdout

"""Acceptance: an on/off UDP flow is one source and one sink that follow the seeded schedule."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from labrun import run_mcclab

from mcclab.traffic.udp_onoff import send_offsets

# timeout: 3x the measured 41.4 s (2-core VM)
pytestmark = [pytest.mark.root, pytest.mark.timeout(150)]

RATE, SIZE = 1e6, 500  # well below the dumbbell's 3.2 Mbit/s: nothing may be lost
DURATION = 30
MARGIN = 1.5  # s

SPEC = f"""
name: onoff-check
description: one UDP on/off flow over the dumbbell (lab test)
topology: topologies/dumbbell.yaml
duration: {DURATION}s
warmup: 0s
seed: 11
flows:
  - name: bg
    type: onoff
    carrier: udp
    sender: s2
    receiver: d2
    start: 2s
    rate: {RATE:.0f}bit
    packet_size: {SIZE}B
    on_period: {{distribution: exponential, mean: 2s}}
    off_period: {{distribution: exponential, mean: 2s}}
"""


def records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("mode", ["process", "host"])
def test_udp_on_off_flow_sends_its_schedule_and_nothing_else(tmp_path, mode):
    """``process``: a source and a sink process; ``host`` (agents.mode=host): both in the
    one on/off host (mcclab.traffic.onoff_host), each socket in its own node."""
    spec = tmp_path / "onoff-check.yaml"
    spec.write_text(SPEC)
    out = run_mcclab(["run", str(spec), "--results", str(tmp_path / "results"),
                      "--set", f"agents.mode={mode}", "--wait", "600"], timeout=500)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (run,) = list((tmp_path / "results" / "onoff-check").iterdir())
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == "complete"
    hosted = (run / "logs" / "onoff-host.out").exists()
    assert hosted == (mode == "host")
    assert ("onoff" in record["agents"]) == (mode == "host"), record["agents"]
    if hosted:  # ready, then a clean exit on the runner's SIGTERM (logged by the fork server)
        ready = json.loads((run / "logs" / "onoff-host.out").read_text().splitlines()[0])
        assert (ready["event"], ready["sinks"], ready["sources"]) == ("ready", 1, 1)
        # the host is the run's one forked tool, and it exited cleanly on SIGTERM
        exits = [line.split()[-1] for line in
                 (run / "logs" / "forkserver.log").read_text().splitlines() if " exited " in line]
        assert exits == ["0"], exits
    schedule = json.loads((run / "sessions" / "bg.onoff.json").read_text())
    periods = [tuple(p) for p in schedule["periods"]]
    assert len(periods) >= 4, periods  # seed 11: six on-periods in 28 s

    # The source sent exactly the schedule's datagrams (it ran the whole time), bar
    # those due more than one gap before it started: it keeps the run's clock (--t0)
    # and skips them rather than send a burst. Which ones that is follows from its
    # start record, so the count is exact, and the start must be on time.
    log = records(run / "logs" / "bg-source-s2.jsonl")
    began, done = log[0], log[-1]
    offsets = list(send_offsets(periods, RATE, SIZE))
    late = began["t"] - (began["origin"] + offsets[0])
    assert late < 0.5, began  # started within half a second of its first datagram
    skipped = sum(began["origin"] + o < began["t"] - SIZE * 8 / RATE for o in offsets)
    expected = len(offsets) - skipped
    assert done["event"] == "done" and done["sent"] == expected, done
    assert done["skipped"] == skipped, done
    # ... and the sink got every one of them: under the bottleneck's rate, nothing lost.
    stats = [r for r in records(run / "logs" / "bg-sink-d2.jsonl") if r["event"] == "stats"]
    assert stats[-1]["total_rx_packets"] == expected and stats[-1]["total_lost"] == 0
    assert stats[-1]["total_rx_bytes"] == expected * SIZE

    # The run's table carries the flow, on while the schedule is on, silent while it is off.
    table = pd.read_csv(run / "tables" / "per_second.csv")
    bg = table[table["flow"] == "bg"].set_index("t")
    assert (bg["kind"] == "onoff").all()
    assert bg["throughput_bps"].sum() / 8 == pytest.approx(expected * SIZE, rel=0.02)
    origin = schedule["origin_s"]
    on = [(a + origin, b + origin) for a, b in periods]
    # The sink reports about once a second and the table interpolates between reports,
    # so a second counts as off only MARGIN clear of every on-period (and as on only
    # MARGIN inside one); half a second more than the reports' spacing, for a late one.
    quiet = [k for k in bg.index if all(k - 1 >= b + MARGIN or k <= a - MARGIN for a, b in on)]
    busy = [k for k in bg.index if any(a + MARGIN <= k - 1 and k <= b - MARGIN for a, b in on)]
    assert len([k for k in quiet if k > 3]) >= 3 and len(busy) >= 3, on  # seed 11 gives both
    assert (bg.loc[quiet, "throughput_bps"] == 0).all(), bg.loc[quiet]
    assert bg.loc[busy, "throughput_bps"].between(0.9 * RATE, 1.1 * RATE).all(), bg.loc[busy]

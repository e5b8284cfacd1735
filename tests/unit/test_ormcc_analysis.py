"""ORMCC measures computed from a run folder's tables."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from agents.ormcc import analysis as ormcc
from mcclab.analysis.results import load_run


@pytest.fixture
def run(tmp_path):
    """Two flows over 10 s (window after 4 s): 'long' with twice the RTT_cr and four
    times the loss events per packet of 'short'."""
    (tmp_path / "run.json").write_text(json.dumps({
        "experiment": "x", "run_id": "r", "profile": "quick", "status": "complete",
        "duration_s": 10.0, "warmup_s": 4.0, "elapsed_s": 10.0}))
    tables = tmp_path / "tables"
    tables.mkdir()
    per_second = [{"t": t, "flow": f, "kind": "multicast", "node": n,
                   "throughput_bps": 8000 * k, "packets": k - 1, "lost": 1, "level": ""}
                  for t in range(1, 11) for f, k in (("long", 50), ("short", 100))
                  for n in (f"{f}-a", f"{f}-b")]
    pd.DataFrame(per_second).to_csv(tables / "per_second.csv", index=False)
    proto = []
    for t in range(1, 11):
        # The start-up (t <= 4) has other values (a burst of 100 loss events at
        # 3 s, RTTs of 5 s): only the window is measured.
        for f, rtt in (("long", 0.4), ("short", 0.2)):
            proto.append({"t": t, "flow": f, "node": "src", "role": "sender",
                          "name": "rtt_cr_s", "value": rtt if t > 4 else 5.0})
        for f, per_second_events in (("long", 2), ("short", 1)):
            for n in (f"{f}-a", f"{f}-b"):
                proto.append({"t": t, "flow": f, "node": n, "role": "receiver",
                              "name": "loss_events",
                              "value": per_second_events * t + (100 if t >= 3 else 0)})
    pd.DataFrame(proto).to_csv(tables / "protocol.csv", index=False)
    return load_run(tmp_path)


def test_loss_event_rate_counts_the_window_only(run):
    # long: 2 events per receiver-second over 50 packets; short: 1 over 100
    assert ormcc.loss_event_rate(run, "long") == pytest.approx(2 / 50)
    assert ormcc.loss_event_rate(run, "short") == pytest.approx(1 / 100)
    assert math.isnan(ormcc.loss_event_rate(run, "none"))


def test_aimd_ratio_is_the_square_root_law(run):
    # (0.2 / 0.4) * sqrt(0.01 / 0.04) = 0.25
    assert ormcc.aimd_ratio(run, "long", "short") == pytest.approx(0.25)
    assert ormcc.aimd_ratio(run, "short", "long") == pytest.approx(4.0)
    assert math.isnan(ormcc.aimd_ratio(run, "long", "none"))

"""WEBRC's analysis plugins on a hand-made run folder (values computed by hand)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from agents.webrc import analysis as webrc
from mcclab.analysis.plugins import get_figure, get_measure, get_sweep_figure
from mcclab.analysis.results import load_run


@pytest.fixture
def run(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({
        "experiment": "x", "run_id": "r", "profile": "quick", "status": "complete",
        "duration_s": 10.0, "warmup_s": 4.0, "elapsed_s": 10.0}))
    tables = tmp_path / "tables"
    tables.mkdir()
    rows = [{"t": t, "flow": "webrc", "kind": "multicast", "node": n,
             "throughput_bps": 8192 * k, "packets": k, "lost": 0, "level": ""}
            for t in range(1, 11) for n, k in (("a", 90), ("b", 100))]
    pd.DataFrame(rows).to_csv(tables / "per_second.csv", index=False)
    proto = [{"t": t, "flow": "webrc", "node": n, "role": "receiver", "name": "artt_seconds",
              "value": v + (0.5 if t <= 4 else 0.0)}  # the warm-up is not measured
             for t in range(1, 11) for n, v in (("a", 0.17), ("b", 0.18))]
    proto += [{"t": t, "flow": "webrc", "node": "a", "role": "receiver", "name": "lossp",
               "value": 0.01 * (t > 4)} for t in range(1, 11)]
    pd.DataFrame(proto).to_csv(tables / "protocol.csv", index=False)
    links = [{"t": t, "link": 1, "src": "r1", "dst": "r2", "pkts_out": 100 * t,
              "bytes_out": 0, "drops_queue": 0, "drops_loss": 0, "qlen_pkts": 0}
             for t in range(0, 11)]
    pd.DataFrame(links).to_csv(tables / "links.csv", index=False)
    return load_run(tmp_path)


def test_artt_and_lossp_are_window_means(run):
    assert webrc.artt(run, "webrc", "a") == pytest.approx(0.17)
    assert webrc.artt(run, "webrc") == pytest.approx(0.175)  # mean over receivers
    assert webrc.lossp(run, "webrc", "a") == pytest.approx(0.01)
    assert math.isnan(webrc.lossp(run, "webrc", "b"))


def test_shared_fraction_is_received_over_crossed(run):
    # window (4, 10]: 600 packets crossed r1 -> r2; a got 6 * 90, b 6 * 100
    assert webrc.shared_fraction(run, "webrc", "a", "r1", "r2") == pytest.approx(0.9)
    assert webrc.shared_fraction(run, "webrc", "b", "r1", "r2") == pytest.approx(1.0)
    assert math.isnan(webrc.shared_fraction(run, "webrc", "a", "r2", "r1"))


def test_plugins_are_registered(run, tmp_path):
    assert get_measure("webrc.artt").unit == "s"
    assert get_measure("webrc.lossp").unit == "1"
    assert get_sweep_figure("webrc.fig5")
    paths = get_figure("webrc.timeline").fn(run, tmp_path, flow="webrc")
    assert {p.suffix for p in paths} == {".png", ".svg"}


def test_fig5_point_reads_rtt_and_loss_of_the_override():
    link = {"endpoints": ["rl", "rr"], "delay": "50ms", "forward": {"loss": "10%"}}
    assert webrc._path_of({"overrides.links": [link]}) == (pytest.approx(0.1), 0.1)
    assert webrc._path_of({}) is None

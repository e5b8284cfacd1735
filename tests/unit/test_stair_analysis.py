"""STAIR analysis plugins on synthetic runs: TCP ratios, receiver ratios, Def. 4 dilation."""

from __future__ import annotations

import pandas as pd
import pytest

from mcclab.analysis.plugins import get_figure, get_measure
from mcclab.analysis.protocols import stair
from mcclab.analysis.results import load_run
from mcclab.analysis.synthetic import rows, write_run

SECONDS = range(1, 61)
PKT = 512
FLOWS = [
    {"name": "stair", "type": "multicast", "params": {"packet_size": "512B"}},
    {"name": "tcp1", "type": "tcp"}, {"name": "tcp2", "type": "tcp"},
]


def link_rows(pkts_per_s: int) -> list[dict]:
    """Cumulative a->b counters: ``pkts_per_s`` 512 B UDP payloads (540 B on the wire)."""
    return [{"t": t, "link": "a-b", "src": "a", "dst": "b", "pkts_out": pkts_per_s * t,
             "bytes_out": pkts_per_s * t * (PKT + 28), "drops_queue": 0, "drops_loss": 0,
             "qlen_pkts": 0} for t in range(0, 61)]


@pytest.fixture
def run(tmp_path):
    per_second = (rows("stair", "multicast", "s1", 488 * PKT * 8, SECONDS, packet_bytes=PKT)
                  + rows("stair", "multicast", "s2", 244 * PKT * 8, SECONDS, packet_bytes=PKT)
                  + rows("tcp1", "tcp", "t1", 1.5e6, SECONDS)
                  + rows("tcp2", "tcp", "t1", 2.5e6, SECONDS))
    folder = write_run(tmp_path / "stair-x" / "run", per_second, flows=FLOWS,
                       links=link_rows(610))
    return load_run(folder)


def test_tcp_and_receiver_ratios(run):
    ratio = get_measure("stair.tcp_ratio").fn(run, flow="stair", node="s1",
                                                  flows=["tcp1", "tcp2"])
    assert ratio == pytest.approx(488 * PKT * 8 / 2e6)
    assert stair.receiver_ratio(run, "stair", "s1", "s2") == pytest.approx(2.0)


def test_dilation_from_link_counters(run):
    # the link carried 610 payloads per second; the largest receiver was subscribed to 488
    series = stair.dilation_series(run, "stair", "a", "b", ["s1", "s2"])
    assert len(series) == 50  # the window (10, 60]
    assert series.to_numpy() == pytest.approx([610 / 488] * 50)
    assert stair.dilation_max(run, "stair", "a", "b", ["s1", "s2"]) == pytest.approx(610 / 488)
    # the demanded rate counts what a receiver lost below the link, too
    demand = stair.demanded_rate(run.per_second, "stair", ["s2"], PKT)
    assert demand.iloc[0] == 244 * PKT * 8


def test_figures_are_written(run, tmp_path):
    out = get_figure("stair.dilation").fn(run, tmp_path, flow="stair", src="a", dst="b",
                                          nodes=["s1", "s2"])
    assert [p.suffix for p in out] == [".png", ".svg"] and all(p.stat().st_size for p in out)
    out = stair.versus_tcp(run, tmp_path, flow="stair",
                           panels=[{"node": "s1", "tcp": ["tcp1", "tcp2"], "title": "S1"}])
    assert all(p.is_file() for p in out)
    assert stair.representative(run, ["tcp1", "tcp2"]) in ("tcp1", "tcp2")


def test_fig10_rtt_of_a_sweep_point():
    links = [{"endpoints": ["a", "b"], "delay": "2ms"}, {"endpoints": ["b", "c1"], "delay": "26ms"}]
    assert stair.path_rtt(links, ["c1", "b"], 0.004) == pytest.approx(0.060)
    assert stair.path_rtt(links, ["b", "c2"], 0.004) != stair.path_rtt(links, ["b", "c2"], 0.004)


def test_joined_stair_layer_from_gauges(tmp_path):
    folder = write_run(tmp_path / "stair-y" / "run",
                       rows("stair", "multicast", "s1", 1e6, SECONDS, packet_bytes=PKT),
                       flows=FLOWS[:1])
    gauges = [{"t": t, "flow": "stair", "node": "s1", "role": "receiver",
               "name": "stair_layer", "value": 1 if t < 20 else 2} for t in SECONDS]
    pd.DataFrame(gauges).to_csv(folder / "tables" / "protocol.csv", index=False)
    assert stair.joined_stair(load_run(folder), "stair", "s1") == 2  # most of (10, 60]

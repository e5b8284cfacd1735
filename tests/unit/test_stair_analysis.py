"""STAIR analysis plugins on synthetic runs: TCP ratios, receiver ratios, Def. 4 dilation."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from synthetic_runs import rows, write_run

from agents.stair import analysis as stair
from mcclab.analysis.plugins import get_figure, get_measure
from mcclab.analysis.results import load_run

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


# --- Def. 4 dilation -----------------------------------------------------------------

BASE = 256_000
PARAMS = {"base_rate": "256kbit", "packet_size": "512B", "alpha": 2, "max_rate": "4Mbit",
          "stair_base": "16ms", "stair_layers": 5}
LAYOUT = stair.Layout(stair.StairParams(**PARAMS))
T0 = 5000.0  # the runtime clock (CLOCK_MONOTONIC) at experiment second 0
ORIGIN = T0  # the sender's start: stair schedules count from it


def test_layout_of_the_synthetic_session():
    # CL_0..CL_3 at 1, 1, 2, 4 units; NCL_0..NCL_2 at 1, 2, 4 (Fib1); then 5 stair layers
    assert [LAYOUT.static_rate(0, j) / BASE for j in range(LAYOUT.n_cl)] == [1, 1, 2, 4]
    assert [LAYOUT.static_rate(1, i) / BASE for i in range(LAYOUT.n_ncl)] == [1, 2, 4]
    assert LAYOUT.channels == 12


def test_reception_intervals_from_an_event_log():
    records = [
        {"t": 1.0, "event": "join", "channel": 0},
        {"t": 1.02, "event": "first_packet", "channel": 0},
        {"t": 2.0, "event": "join", "channel": 3},
        {"t": 2.01, "event": "leave", "channel": 3},  # left before its first packet
        {"t": 3.0, "event": "join", "channel": 3},
        {"t": 3.03, "event": "first_packet", "channel": 3},
        {"t": 3.5, "event": "stats"},
        {"t": 4.0, "event": "leave", "channel": 3},
        {"t": 9.0, "event": "stop"},
        {"t": 9.5, "event": "first_packet", "channel": 5},  # after stop: ignored
    ]
    assert stair.reception_intervals(records, end=20.0) == {0: [(1.02, 9.0)],
                                                            3: [(3.03, 4.0)]}
    assert stair.reception_intervals(records[:3], end=20.0) == {0: [(1.02, 20.0)]}


def test_channel_rates_follow_the_stair_schedule():
    grid = ORIGIN + np.array([0.0, 0.031, 0.033, 0.063, 0.065, 10.0])
    rates = stair.channel_rates(LAYOUT, ORIGIN, grid)
    assert rates[0] == pytest.approx([BASE] * 6)  # CL_0
    assert rates[3] == pytest.approx([4 * BASE] * 6)  # CL_3
    sl32 = LAYOUT.channel(2, 1)  # W = 2, period 64 ms: one packet per 32 ms, then two, then again
    assert LAYOUT.window(1) == 2
    assert rates[sl32] / (PKT * 8 / 0.032) == pytest.approx([1, 1, 2, 2, 1, 1])
    assert stair.channel_rates(LAYOUT, ORIGIN, np.array([ORIGIN - 1]))[sl32] == [0.0]


def receiver_log(spans: list[tuple[int, float, float]]) -> list[dict]:
    """An event log receiving channel ``ch`` over [a, b) for each (ch, a, b): join 10 ms
    before the first packet, leave at b."""
    out = []
    for ch, a, b in spans:
        out += [{"t": a - 0.01, "event": "join", "channel": ch},
                {"t": a, "event": "first_packet", "channel": ch},
                {"t": b, "event": "leave", "channel": ch}]
    return sorted(out, key=lambda r: r["t"])


def link_intervals_at(rate_bps: float, seconds: int, jitter: float = 0.03) -> pd.DataFrame:
    """link_intervals() of a link carrying ``rate_bps`` of payload, sampled each second a
    little late (as the runner's loop)."""
    ends = [T0 + k + jitter * (k % 3) for k in range(seconds + 1)]
    return pd.DataFrame({"t": range(1, seconds + 1), "start": ends[:-1], "end": ends[1:],
                         "payload_bps": rate_bps})


def alternating(seconds: int) -> dict[str, list[dict]]:
    """Two receivers taking turns at 4 units (CL_0..CL_2) each half second; the other
    holds CL_0 only (1 unit) meanwhile."""
    a, b = [(0, T0, T0 + seconds + 1)], [(0, T0, T0 + seconds + 1)]
    for k in range(seconds + 1):
        first, second = T0 + k, T0 + k + 0.5
        a += [(1, first, second), (2, first, second)]
        b += [(1, second, second + 0.5), (2, second, second + 0.5)]
    return {"r1": receiver_log(a), "r2": receiver_log(b)}


def test_dilation_uses_the_largest_receiver_at_each_moment():
    # Receivers taking turns at 4 units: the union is 4 units and so is the largest
    # receiver at every moment, so Def. 4 gives 1. The largest of the two receivers'
    # one-second means is 2.5 units, which would give 1.6.
    table = stair.dilation_table(link_intervals_at(4 * BASE, 10, jitter=0.0),
                                 alternating(10), LAYOUT, ORIGIN - 100)
    assert len(table) == 10
    assert table["largest"].to_numpy() == pytest.approx([4 * BASE] * 10, rel=0.01)
    assert table["union"].to_numpy() == pytest.approx([4 * BASE] * 10, rel=0.01)
    assert table["demanded"].to_numpy() == pytest.approx([1.0] * 10, rel=0.01)
    assert table["link"].to_numpy() == pytest.approx([1.0] * 10, rel=0.01)


def test_static_basis_leaves_the_stair_layers_out():
    # r1 holds CL_0 + SL_16 (1 unit + 1 packet per 16 ms = 1 unit); r2 holds CL_0 + NCL_0
    # (2 units). Union CL_0 + NCL_0 + SL_16 = 3 units over a largest of 2: 1.5; the
    # static layers alone: 2 units over 2 units.
    sl16 = LAYOUT.channel(2, 0)
    logs = {"r1": receiver_log([(0, T0, T0 + 20), (sl16, T0, T0 + 20)]),
            "r2": receiver_log([(0, T0, T0 + 20), (LAYOUT.channel(1, 0), T0, T0 + 20)])}
    table = stair.dilation_table(link_intervals_at(3 * BASE, 10), logs, LAYOUT, ORIGIN)
    assert table["demanded"].to_numpy() == pytest.approx([1.5] * 10, rel=0.01)
    assert table["static"].to_numpy() == pytest.approx([1.0] * 10, rel=0.01)


def test_link_basis_counts_what_the_routers_forwarded_after_leaves():
    # the link carried 5 units (a 4-unit union plus groups not yet pruned)
    table = stair.dilation_table(link_intervals_at(5 * BASE, 10), alternating(10),
                                 LAYOUT, ORIGIN - 100)
    assert table["link"].to_numpy() == pytest.approx([1.25] * 10, rel=0.02)
    assert table["demanded"].to_numpy() == pytest.approx([1.0] * 10, rel=0.02)


def test_dilation_intervals_follow_the_link_samples_clock():
    # one receiver at 1 unit, then at 3 units from T0 + 4.5 (CL_0 + NCL_1); the link's
    # samples are 0.5 s late, so interval t = 5 is [T0 + 4.5, T0 + 5.5]: all 3 units.
    log = {"r1": receiver_log([(0, T0, T0 + 20), (LAYOUT.channel(1, 1), T0 + 4.5, T0 + 20)])}
    ends = [T0 + k + 0.5 for k in range(11)]
    links = pd.DataFrame({"t": range(1, 11), "start": ends[:-1], "end": ends[1:],
                          "payload_bps": 3 * BASE})
    table = stair.dilation_table(links, log, LAYOUT, ORIGIN)
    assert table.loc[4, "largest"] == pytest.approx(BASE, rel=0.01)
    assert table.loc[5, "largest"] == pytest.approx(3 * BASE, rel=0.01)
    assert table.loc[5, "link"] == pytest.approx(1.0, rel=0.01)


def pulsing(seconds: int) -> dict[str, list[dict]]:
    """r1 holds CL_0 and, for the first half of every second, NCL_2 (4 units); r2 holds
    CL_0 only."""
    ncl2 = LAYOUT.channel(1, 2)
    a = [(0, T0, T0 + seconds + 1)] + [(ncl2, T0 + k, T0 + k + 0.5) for k in range(seconds + 1)]
    return {"r1": receiver_log(a), "r2": receiver_log([(0, T0, T0 + seconds + 1)])}


def test_modelled_basis_forwards_each_group_from_join_to_leave_plus_latencies():
    # r1 is the largest receiver throughout: 1 + 4 x 0.5 = 3 units a second on average.
    # Its joins come 10 ms before the first packets. Routers whose joins take those
    # 10 ms and whose leaves take 200 ms carry NCL_2 for 0.7 s a second (3.8 units:
    # 1.267); with joins that take no time, 0.71 s (3.84 units: 1.28).
    links = link_intervals_at(3.8 * BASE, 10, jitter=0.0)
    plain = stair.dilation_table(links, pulsing(10), LAYOUT, ORIGIN)
    assert "modelled" not in plain
    assert plain["demanded"].to_numpy() == pytest.approx([1.0] * 10, rel=0.01)
    late = stair.dilation_table(links, pulsing(10), LAYOUT, ORIGIN, latency=(0.01, 0.2))
    assert late["modelled"].to_numpy() == pytest.approx([3.8 / 3] * 10, rel=0.01)
    assert late["link"].to_numpy() == pytest.approx(late["modelled"].to_numpy(), rel=0.01)
    early = stair.dilation_table(links, pulsing(10), LAYOUT, ORIGIN, latency=(0.0, 0.2))
    assert early["modelled"].to_numpy() == pytest.approx([3.84 / 3] * 10, rel=0.01)
    # joins as long as the receivers': the groups they received, i.e. the demanded basis
    none = stair.dilation_table(links, pulsing(10), LAYOUT, ORIGIN, latency=(0.01, 0.0))
    assert none["modelled"].to_numpy() == pytest.approx(none["demanded"].to_numpy())


def test_modelled_basis_counts_joins_left_before_their_first_packet():
    # r2 joins NCL_1 (2 units) at T0 + k + 0.6 and leaves it 100 ms later, before any
    # packet: nothing it received, but routers forward it from the join's arrival
    # (20 ms) to the leave's (50 ms): 0.13 s of 2 units a second beside r1's 3 units.
    ncl1 = LAYOUT.channel(1, 1)
    logs = pulsing(10)
    logs["r2"] = sorted(logs["r2"] + [
        rec for k in range(11) for rec in (
            {"t": T0 + k + 0.6, "event": "join", "channel": ncl1},
            {"t": T0 + k + 0.7, "event": "leave", "channel": ncl1})], key=lambda r: r["t"])
    links = link_intervals_at(3.26 * BASE, 10, jitter=0.0)
    table = stair.dilation_table(links, logs, LAYOUT, ORIGIN, latency=(0.02, 0.05))
    assert table["demanded"].to_numpy() == pytest.approx([1.0] * 10, rel=0.01)
    # r1's NCL_2: [k + 0.01, k + 0.55) = 0.54 s of 4 units; r2's NCL_1 0.13 s of 2 units
    assert table["modelled"].to_numpy() == pytest.approx([(1 + 4 * 0.54 + 2 * 0.13) / 3] * 10,
                                                          rel=0.01)


def stair_run(folder, receivers: dict[str, list[dict]], payload_bps: float, origin: float):
    """A 20-s run folder (warm-up 5 s): the sender's start at ``origin``, the receivers'
    event logs, and a->b counters carrying ``payload_bps`` of 512 B payloads."""
    folder = write_run(folder, rows("stair", "multicast", "r1", 1e6, range(1, 21),
                                    packet_bytes=PKT),
                       flows=[{"name": "stair", "type": "multicast", "params": PARAMS}],
                       duration_s=20.0, warmup_s=5.0)
    logs = folder / "logs"
    (logs / "stair-sender-src.jsonl").write_text(
        json.dumps({"t": origin, "event": "start"}) + "\n")
    for node, records in receivers.items():
        (logs / f"stair-receiver-{node}.jsonl").write_text(
            "\n".join(json.dumps(r) for r in records) + "\n")
    pkts = payload_bps / (PKT * 8)
    pd.DataFrame([{"t": t, "link": 0, "src": "a", "dst": "b", "time": T0 + t,
                   "pkts_out": pkts * t, "bytes_out": pkts * t * (PKT + 28), "drops_queue": 0,
                   "drops_loss": 0, "qlen_pkts": 0} for t in range(0, 21)]
                 ).to_csv(folder / "tables" / "links.csv", index=False)
    return load_run(folder)


def test_dilation_measures_from_a_run_folder(tmp_path):
    run = stair_run(tmp_path / "stair-z" / "run", alternating(20), 5 * BASE, ORIGIN - 100)
    nodes = ["r1", "r2"]
    assert stair.dilation_series(run, "stair", "a", "b", nodes).index.tolist() == \
        list(range(6, 21))  # the window (5, 20]
    assert stair.dilation_max(run, "stair", "a", "b", nodes) == pytest.approx(1.25, rel=0.02)
    assert stair.dilation_mean(run, "stair", "a", "b", nodes, basis="demanded") == \
        pytest.approx(1.0, rel=0.02)
    assert stair.dilation_above(run, "stair", "a", "b", nodes, bound=1.2) == 15
    assert stair.dilation_above(run, "stair", "a", "b", nodes, bound=1.3) == 0
    assert stair.leave_overhead(run, "stair", "a", "b", nodes) == pytest.approx(1.25, rel=0.02)
    with pytest.raises(ValueError):
        stair.dilation_series(run, "stair", "a", "b", nodes, basis="other")
    with pytest.raises(ValueError, match="leave latency"):
        stair.dilation_series(run, "stair", "a", "b", nodes, basis="modelled")


def test_model_fit_and_modelled_measures_from_a_run_folder(tmp_path):
    # the link carried NCL_2 for 0.7 s of every second: 3.8 units
    run = stair_run(tmp_path / "stair-m" / "run", pulsing(20), 3.8 * BASE, ORIGIN)
    nodes = ["r1", "r2"]
    fit = get_measure("stair.model_fit").fn
    assert fit(run, "stair", "a", "b", nodes, leave="200ms", join="10ms") == \
        pytest.approx(1.0, rel=0.01)
    assert fit(run, "stair", "a", "b", nodes, leave="0s", join="10ms") == \
        pytest.approx(3.8 / 3, rel=0.01)
    assert stair.dilation_max(run, "stair", "a", "b", nodes, basis="modelled", leave="50ms",
                              join="10ms") == pytest.approx(3.2 / 3, rel=0.01)
    assert stair.dilation_max(run, "stair", "a", "b", nodes, basis="modelled", leave="50ms",
                              join="60ms") == pytest.approx(1.0, rel=0.01)
    out = get_figure("stair.dilation_vs_leave").fn(
        run, tmp_path, flow="stair", src="a", dst="b", nodes=nodes,
        leaves=["0s", "50ms", "200ms"], join="10ms", measured_leave="200ms")
    assert [p.suffix for p in out] == [".png", ".svg"] and all(p.stat().st_size for p in out)


def test_dilation_is_nan_without_logs(run):
    assert math.isnan(stair.dilation_max(run, "stair", "a", "b", ["s1", "s2"]))


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
    rtts = [{"t": t, "flow": "stair", "node": "s1", "role": "receiver", "name": "rtt_ms",
             "value": 0.0 if t < 3 else (30.0 if t <= 10 else 44.0)} for t in SECONDS]
    pd.DataFrame(gauges + rtts).to_csv(folder / "tables" / "protocol.csv", index=False)
    assert stair.measured_rtt(load_run(folder), "stair", "s1") == pytest.approx(0.044)
    assert math.isnan(stair.measured_rtt(load_run(folder), "stair", "s2"))

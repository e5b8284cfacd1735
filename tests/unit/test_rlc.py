"""RLC (INFOCOM 1998): the sender's schedule (Fig. 1), the receiver's rules (sec. 3.4),
Eq. 2 and Appendix A, on simulated clocks."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from sender_clock import drive_sender

from agents.rlc import NO_SP, RLC_EXT, SP_FLAG, RlcExt, RlcParams, RlcReceiver, RlcSender
from agents.rlc.model import (
    appendix_cycle,
    eq2_band,
    eq2_c,
    eq2_throughput,
    loss_events,
)
from agents.rlc.schedule import (
    layer_of,
    per_cycle,
    per_slot,
    sp_level,
    sp_spacing,
)
from agents.runtime.actions import Join, Leave, Send
from agents.runtime.header import Header
from agents.runtime.session import Session
from agents.sim import Link, simulate

TAU0 = 0.125


def fig1(layers: int = 5, cycles: int = 32, P: int = 1) -> list[tuple[float, Send]]:  # noqa: N803
    """Fig. 1's setting: P = 1, W = 8, five layers."""
    core = RlcSender(RlcParams(layers=layers, P=P, W=8, tau0="125ms"))
    return drive_sender(core, cycles * 8 * TAU0)


def slot_of(t: float) -> int:
    return int(t / TAU0 + 1e-9)


# ---- the sender: Fig. 1 -------------------------------------------------------------


def test_fig1_burst_silence_normal_pattern_per_layer():
    sends = fig1(cycles=4)
    per = Counter((slot_of(t), s.channel) for t, s in sends)
    for slot in range(4 * 8):
        for layer in range(5):
            expected = {0: 2, 1: 0}.get(slot % 8, 1) * per_slot(layer)
            assert per[(slot, layer)] == expected, (slot, layer)
    # Every cycle carries W * n_j packets per layer: the average rate is B_i.
    assert Counter(s.channel for _, s in sends) == {j: 4 * per_cycle(j, 8) for j in range(5)}


def test_burst_sends_two_back_to_back_packets_per_transmission():
    sends = fig1(cycles=1)
    burst = [(t, s) for t, s in sends if slot_of(t) == 0]
    times = Counter(t for t, _ in burst)
    assert set(times.values()) == {2}
    for t in times:
        pair = [s for u, s in burst if u == t]
        assert pair[0].channel == pair[1].channel
        assert pair[1].ext.index == pair[0].ext.index + 1


@pytest.mark.parametrize("level", range(5))
def test_every_cumulative_level_is_evenly_spaced(level):
    sends = fig1(cycles=1)
    normal = sorted(t for t, s in sends if slot_of(t) == 3 and s.channel <= level)
    gaps = {round(b - a, 9) for a, b in zip(normal, normal[1:], strict=False)}
    assert len(normal) == 2 ** level
    assert gaps <= {round(TAU0 / 2 ** level, 9)}


def test_layer_zero_transmits_last_in_every_slot():
    for layers in (1, 3, 5, 8):
        m = 2 ** (layers - 1)
        assert layer_of(m - 1, layers) == 0
        assert Counter(layer_of(q, layers) for q in range(m)) == {
            j: per_slot(j) for j in range(layers)}


def test_sp_is_the_last_burst_packet_flagged_on_layer_zero():
    sends = fig1(cycles=8)
    for cycle in range(8):
        burst = [s for t, s in sends if slot_of(t) == cycle * 8]
        last = burst[-1]
        assert last.channel == 0 and last.flags & SP_FLAG
        assert last.ext.sp == sp_level(cycle, 1, 5)
        assert all(not s.flags & SP_FLAG for s in burst[:-1])
    assert all(not s.flags for t, s in sends if slot_of(t) % 8)


@pytest.mark.parametrize("P", [1, 2])
def test_sp_spacing_and_subset_property(P):  # noqa: N803
    sends = fig1(cycles=64, P=P)
    sp_times = {i: [t for t, s in sends if s.flags & SP_FLAG and s.ext.sp >= i]
                for i in range(5)}
    for i in range(5):
        gaps = {round(b - a, 9) for a, b in zip(sp_times[i], sp_times[i][1:], strict=False)}
        assert gaps == {round(sp_spacing(i, P, 8, TAU0), 9)}
        assert gaps == {round((2 ** i) * P * 8 * TAU0, 9)}  # (B_i / B_0) P W tau0
        if i + 1 < 5:
            assert set(sp_times[i + 1]) < set(sp_times[i])
    # SPs sit at the end of a burst: in slot 0 of a cycle, after every other burst packet.
    assert all(slot_of(t) % 8 == 0 for t in sp_times[0])


def test_sender_rate_per_layer_matches_b0_spacing():
    params = RlcParams(layers=6)
    sends = fig1(layers=6, cycles=10)
    seconds = 10 * 8 * TAU0
    by_layer = Counter(s.channel for _, s in sends)
    rates = [by_layer[j] * 256 * 8 / seconds for j in range(6)]
    assert rates[0] == pytest.approx(params.base_rate)
    assert params.base_rate == pytest.approx(2048 * 8)  # the paper's 2 KB/s
    assert sum(rates) == pytest.approx(params.level_rate(5))


def test_sender_skips_ahead_when_stalled_instead_of_bursting():
    core = RlcSender(RlcParams(layers=3))
    core.start(0.0)
    actions = core.on_timer(5.0, "send")
    assert len([a for a in actions if isinstance(a, Send)]) <= 4
    assert core.skipped > 0


def test_extension_round_trip_and_bounds():
    ext = RlcExt(3, 123456, 17, 2)
    assert RLC_EXT.decode(RLC_EXT.encode(ext)) == ext
    with pytest.raises(ValueError):
        RLC_EXT.encode(RlcExt(12, 0, 0))
    with pytest.raises(ValueError):
        RLC_EXT.decode(RLC_EXT.struct.pack(0, 0, 0, 40))


# ---- the receiver: sec. 3.3 and 3.4 ---------------------------------------------------


class Feed:
    """Deliver a precomputed sender schedule to a receiver core, with chosen drops."""

    def __init__(self, params: RlcParams, duration: float):
        self.sends = drive_sender(RlcSender(params), duration)
        self.core = RlcReceiver(params)
        self.joined: set[int] = set()
        self.events: list[tuple[float, object]] = []

    def run(self, drop=lambda t, s: False, until: float = math.inf) -> RlcReceiver:  # noqa: ANN001
        seq: Counter[int] = Counter()
        self._apply(0.0, self.core.start(0.0))
        for t, s in self.sends:
            if t > until:
                break
            n = seq[s.channel]
            seq[s.channel] += 1
            if s.channel not in self.joined or drop(t, s):
                continue
            header = Header(4, 1, s.channel, n, 0, s.flags, s.ext)
            self._apply(t, self.core.on_packet(t, header, s.size, "239.0.0.1"))
        return self.core

    def _apply(self, t: float, actions: list) -> None:
        for a in actions:
            if isinstance(a, Join):
                self.joined.add(a.channel)
                self.events.append((t, a))
            elif isinstance(a, Leave):
                self.joined.discard(a.channel)
                self.events.append((t, a))

    def joins(self) -> list[tuple[float, int]]:
        return [(round(t, 4), a.channel) for t, a in self.events if isinstance(a, Join)]

    def leaves(self) -> list[tuple[float, int]]:
        return [(round(t, 4), a.channel) for t, a in self.events if isinstance(a, Leave)]


def sp_time(cycle: int, layers: int) -> float:
    """Send time of the SP packet of ``cycle`` (the last grid point of the burst)."""
    m = 2 ** (layers - 1)
    return round((cycle * 8 * m + m - 1) * TAU0 / m, 4)


def test_lossless_receiver_joins_at_every_sp_of_its_level():
    params = RlcParams(layers=5)
    feed = Feed(params, 17.0)
    feed.run()
    # level 0 -> 1 at cycle 0, then at cycles 1 (every level-1 SP is 2 cycles apart,
    # cycle 2), 4, 8, 16 ... as SPs of level i fall every 2^i cycles.
    assert feed.joins() == [(0.0, 0), (sp_time(0, 5), 1), (sp_time(2, 5), 2),
                            (sp_time(4, 5), 3), (sp_time(8, 5), 4)]
    assert feed.core.level == 4 and feed.leaves() == []


def test_burst_loss_blocks_the_join_at_that_sp_only():
    params = RlcParams(layers=5)
    feed = Feed(params, 9.0)
    # a mid-burst packet of layer 1 in cycle 4's burst (the level-2 SP at cycle 4)
    feed.run(drop=lambda t, s: s.channel == 1 and s.ext.cycle == 4 and s.ext.index == 0)
    joins = feed.joins()
    assert (sp_time(4, 5), 3) not in joins
    assert (sp_time(8, 5), 3) in joins  # the next SP of level 2
    assert feed.leaves() == []  # burst losses never make a receiver leave
    assert feed.core.c.sp_blocked == 1


def test_loss_of_the_last_burst_packet_of_a_layer_blocks_the_join():
    # The lost packet is only detected from the layer's next packet (after the
    # silence), so the SP check must see that the burst is incomplete.
    params = RlcParams(layers=5)
    feed = Feed(params, 9.0)
    last = 2 * per_slot(2) - 1
    feed.run(drop=lambda t, s: s.channel == 2 and s.ext.cycle == 8 and s.ext.index == last)
    assert (sp_time(8, 5), 4) not in feed.joins()
    assert feed.core.level == 3 and feed.leaves() == []


def test_lost_sp_packet_means_no_join():
    params = RlcParams(layers=5)
    feed = Feed(params, 9.0)
    feed.run(drop=lambda t, s: bool(s.flags & SP_FLAG) and s.ext.cycle == 8)
    assert (sp_time(8, 5), 4) not in feed.joins()
    assert feed.leaves() == []


def test_normal_loss_leaves_the_top_layer_then_deaf_period():
    params = RlcParams(layers=5, deaf_period="3s")
    feed = Feed(params, 16.0)
    # level 4 from 8.12 s; normal-phase packets of layer 1 lost at ~9.3 s, 10.3 s
    # (within t_D: ignored) and 12.4 s (after t_D: a second leave).
    victims = {(9, 3), (10, 3), (12, 4)}

    def drop(t, s):  # noqa: ANN001, ANN202
        return s.channel == 1 and (s.ext.cycle, s.ext.index) in victims

    core = feed.run(drop=drop)
    leaves = feed.leaves()
    assert [layer for _, layer in leaves] == [4, 3]
    assert leaves[0][0] == pytest.approx(9 + 3.5 * TAU0, abs=TAU0)
    assert leaves[1][0] - leaves[0][0] >= 3.0
    assert core.c.ignored_deaf == 1
    assert core.c.lost_normal == 3 and core.c.lost_burst == 0
    # losses within t_D of the event's first count once: 9.4 + 10.4 -> 1, 12.5 -> 1
    assert core.c.loss_events == 2


def test_normal_loss_at_level_one_leaves_but_level_zero_is_the_floor():
    feed = Feed(RlcParams(layers=3), 1.0)
    core = feed.run(drop=lambda t, s: s.channel == 0 and (s.ext.cycle, s.ext.index) == (0, 5))
    assert [layer for _, layer in feed.leaves()] == [1] and core.level == 0
    # No join at cycle 0 (its SP packet is lost), then a normal-phase loss at level 0:
    # nothing to leave.
    feed = Feed(RlcParams(layers=3), 1.0)
    core = feed.run(drop=lambda t, s: s.ext.cycle == 0 and (s.flags or s.ext.index == 5))
    assert core.level == 0 and feed.leaves() == [] and core.c.lost_normal == 1


def test_receiver_counts_per_layer_and_ignores_duplicates():
    core = RlcReceiver(RlcParams(layers=2))
    core.start(0.0)
    h = Header(4, 1, 0, 10, 0, 0, RlcExt(0, 3, 4, NO_SP))
    assert core.on_packet(1.0, h, 256, "g") == []
    assert core.on_packet(1.1, h, 256, "g") == []  # duplicate
    assert core.c.received == 1 and core.c.lost == 0
    # a straggler of a layer above the level is ignored
    assert core.on_packet(1.2, Header(4, 1, 1, 0, 0, 0, RlcExt(1, 3, 4, NO_SP)), 256, "g") == []
    assert core.c.received == 1


def test_sim_receiver_climbs_and_oscillates_below_a_bottleneck():
    layers = 7
    session = Session.model_validate({
        "protocol": "rlc", "flow": "rlc", "session_id": 1, "source": "10.0.0.1",
        "channels": [{"group": f"239.1.1.{i + 1}", "port": 5000} for i in range(layers)],
        "params": {"layers": layers, "deaf_period": "3s"}, "nodes": {}})
    link = Link(delay=0.05, rate=300e3, queue=50, join_delay=0.02, leave_delay=2.3)
    res = simulate(session, receivers=["r"], duration=60.0, links={"r": link})
    node = res.receivers["r"]
    levels = [r["level"] for r in node.records("rlc_level")]
    assert levels[:5] == [0, 1, 2, 3, 4]  # climbs one level per SP
    assert max(levels) == 5 and levels[-1] in (4, 5)  # B_4 = 262k < 300k < B_5 = 524k
    m = node.agent.core.metrics()
    assert m["deaf_periods"] >= 2 and m["sp_joins"] >= m["deaf_periods"]
    # burst losses (merged within t_D) are far rarer than the packets lost
    assert 0 < m["burst_loss_rate"] < m["perceived_loss_rate"]
    stats = node.records("stats")[-30:]
    rate = sum(r["rx_bytes"] for r in stats) * 8 / len(stats)
    assert 0.6 * 300e3 < rate <= 300e3 * 1.01


# ---- Eq. 2 and Appendix A ------------------------------------------------------------


def test_eq2_pins_the_paper_formula():
    # s = 256 B, tau0 = 125 ms (B0 = 2 KB/s), P = 1, W = 8, p = 1%:
    # T = 2048 / (0.1 * sqrt 8) = 7240.77 B/s for c' = 1
    assert eq2_throughput(0.01, 256, 0.125) == pytest.approx(7240.77, rel=1e-5)
    lo, hi = eq2_band(0.01, 256, 0.125)
    assert hi == pytest.approx(2 * lo)
    assert eq2_throughput(0.04, 256, 0.125) == pytest.approx(lo / 2)  # T ~ 1/sqrt(p)
    assert eq2_c(lo * 1.5, 0.01, 256, 0.125) == pytest.approx(1.5)
    assert eq2_throughput(0.0, 256, 0.125) == math.inf


@pytest.mark.parametrize("alpha", [0.0, 0.1, 0.25, 0.4, 0.49])
@pytest.mark.parametrize("level", [2, 5])
def test_appendix_model_gives_eq2_with_c_in_1_to_sqrt2(alpha, level):
    t, p = appendix_cycle(alpha, level, 256, 0.125)
    # Eq. 5: 2^i = 1 / sqrt((1 + 2 alpha) p P W)
    assert 2 ** level == pytest.approx(1 / math.sqrt((1 + 2 * alpha) * p * 8))
    c = eq2_c(t, p, 256, 0.125)
    assert c == pytest.approx(math.sqrt(1 + 2 * alpha))
    assert 1.0 <= c < math.sqrt(2)


@pytest.mark.parametrize("alpha", [0.5, 0.75, 0.99])
def test_appendix_model_second_half_falls_below_c_1(alpha):
    # For alpha >= 1/2 the appendix's own t_L and N_L give c' = sqrt((1 + alpha) / 2),
    # between 0.87 and 1: the paper's "1 <= c' <= 2" is looser than its model.
    t, p = appendix_cycle(alpha, 4, 256, 0.125)
    assert eq2_c(t, p, 256, 0.125) == pytest.approx(math.sqrt((1 + alpha) / 2))


def test_loss_events_merge_losses_closer_than_td():
    assert loss_events([], 3.0) == 0
    assert loss_events([1.0, 1.5, 3.9, 4.0, 8.0], 3.0) == 3  # {1, 1.5, 3.9}, {4}, {8}
    assert loss_events([0.0, 2.9, 3.0, 5.9, 6.0], 3.0) == 3
    assert loss_events([5.0, 1.0], 3.0) == 2


# ---- analysis: synchrony of receivers behind one bottleneck (Fig. 7) -----------------


def test_sync_stats_convergence_and_fraction_in_sync():
    from agents.rlc.measures import sync_stats

    traces = {
        "a": [(0.0, 0), (1.0, 1), (3.0, 2), (20.0, 3), (24.0, 2)],
        "b": [(2.0, 0), (2.5, 1), (10.0, 2), (20.0, 3), (22.0, 2)],
    }
    s = sync_stats(traces, end=30.0, step=0.01)
    assert s["last_start"] == 2.0
    assert s["converged_at"] == pytest.approx(10.0, abs=0.02)  # both at level 2 from 10 s
    # out of sync only between 22 and 24 s: 2 of the 20 s after convergence
    assert s["in_sync"] == pytest.approx(18 / 20, abs=0.01)
    assert s["common_level"] == 2


def test_sync_stats_never_converging():
    from agents.rlc.measures import sync_stats

    s = sync_stats({"a": [(0.0, 1)], "b": [(0.0, 2)]}, end=10.0)
    assert s["in_sync"] == 0.0 and math.isnan(s["converged_at"])


def _write_run(folder):  # noqa: ANN001
    """A two-instance RLC run folder with hand-picked counters (window 10..20 s)."""
    import json as _json

    import pandas as pd
    import yaml as _yaml

    (folder / "tables").mkdir(parents=True)
    (folder / "run.json").write_text(_json.dumps({
        "experiment": "t", "run_id": "x", "profile": "quick", "status": "complete",
        "started": "2026-11-21T00:00:00+00:00", "duration_s": 20.0, "warmup_s": 10.0,
        "elapsed_s": 20.0}))
    (folder / "spec.yaml").write_text(_yaml.safe_dump({"name": "t", "flows": [
        {"name": "a1", "type": "multicast", "protocol": "rlc"},
        {"name": "b1", "type": "multicast", "protocol": "rlc"}]}))
    rows, proto, links = [], [], []
    # a1 gets 100 packets/s, b1 50 packets/s of 256 B
    for t in range(1, 21):
        for flow, node, pps in (("a1", "n5", 100), ("b1", "n3", 50)):
            rows.append({"t": t, "flow": flow, "kind": "multicast", "node": node,
                         "throughput_bps": pps * 256 * 8, "packets": pps, "lost": 0,
                         "level": 3})
            # cumulative core counters: 1 % lost, one loss event every 5 s
            proto += [{"t": t, "flow": flow, "node": node, "role": "receiver", "name": n,
                       "value": v} for n, v in (("rx_packets", pps * t),
                                                ("lost_packets", pps * t / 99),
                                                ("loss_events", t // 5))]
        links.append({"t": t, "link": "n1-n2", "src": "n1", "dst": "n2",
                      "pkts_out": 150 * t, "bytes_out": 150 * t * 284,
                      "drops_queue": 3 * t, "drops_loss": 0, "qlen_pkts": 0})
    pd.DataFrame(rows).to_csv(folder / "tables" / "per_second.csv", index=False)
    pd.DataFrame(proto).to_csv(folder / "tables" / "protocol.csv", index=False)
    pd.DataFrame(links).to_csv(folder / "tables" / "links.csv", index=False)


def test_table1_indexes_from_a_run_folder(tmp_path):
    from agents.rlc.measures import table1_row
    from mcclab.analysis.results import load_run

    _write_run(tmp_path)
    row = table1_row(load_run(tmp_path), capacity_bps=1.5e6)
    assert row["instances"] == 2
    assert row["fairness"] == pytest.approx((100 + 50) ** 2 / (2 * (100 ** 2 + 50 ** 2)))
    assert row["router_loss"] == pytest.approx(3 / 153)  # drops over arrivals, 10..20 s
    assert row["perceived_loss"] == pytest.approx(0.01)  # lost / (received + lost)
    # two events in 10..20 s (at 15 and 20) over expected packets, per instance, averaged
    expected = [pps * 10 * (1 + 1 / 99) for pps in (100, 50)]
    assert row["burst_loss"] == pytest.approx(sum(2 / e for e in expected) / 2)
    assert row["exploitation"] == pytest.approx(150 * 284 * 8 / 1.5e6)
    assert row["exploitation_payload"] == pytest.approx(150 * 256 * 8 / 1.5e6)

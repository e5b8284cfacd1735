"""Per-agent statistics: loss from sequence gaps (wrap, reordering, duplicates, leaves)."""

from __future__ import annotations

import pytest

from agents.runtime.header import Drop
from agents.runtime.stats import AgentStats, ChannelStats


def feed(seqs, size=100):
    c = ChannelStats()
    for s in seqs:
        c.on_packet(s, size)
    return c


def test_no_loss():
    c = feed(range(10, 20))
    assert (c.packets, c.bytes, c.lost) == (10, 1000, 0)


def test_gaps_are_loss_and_the_first_packet_sets_the_base():
    assert feed([5, 6, 9, 10]).lost == 2  # 7, 8; nothing before 5 counts
    assert feed([0, 100]).lost == 99


def test_wrap_around():
    c = feed([2**32 - 2, 2**32 - 1, 0, 2])
    assert c.lost == 1 and c.packets == 4


def test_reordering_is_not_loss_and_duplicates_do_not_go_negative():
    c = feed([1, 3, 2, 4])
    assert c.lost == 0 and c.reordered == 1
    assert feed([1, 1, 1, 2]).lost == 0


def test_leave_closes_the_period():
    c = feed([0, 1, 3])  # one lost
    c.close_period()
    c.on_packet(500, 100)  # re-joined much later: the gap across the leave is not loss
    c.on_packet(502, 100)  # one lost
    assert c.lost == 2 and c.packets == 5


def test_roll_reports_the_interval_and_totals():
    s = AgentStats()
    s.start(0.0)
    for seq in (0, 1, 2, 4):
        s.on_packet(0, seq, 1000)
    s.on_drop(Drop.MAGIC)
    r = s.roll(1.0)
    assert r["rx_packets"] == 4 and r["rx_lost"] == 1
    assert r["throughput_bps"] == pytest.approx(32000)
    assert r["loss_fraction"] == pytest.approx(0.2)
    assert r["dropped"] == {"magic": 1}
    assert "tx_packets" not in r  # a receiver that sent nothing has no send fields
    s.on_packet(0, 5, 1000)
    r = s.roll(1.5)
    assert r["rx_packets"] == 1 and r["interval"] == 0.5
    assert r["throughput_bps"] == pytest.approx(16000)
    assert r["total_rx_packets"] == 5 and r["total_lost"] == 1


def test_sender_roll():
    s = AgentStats()
    s.start(10.0)
    for _ in range(3):
        s.on_send(1, 500)
    r = s.roll(11.0, "sender")
    assert r["tx_packets"] == 3 and r["send_rate_bps"] == pytest.approx(12000)
    assert r["sent_channels"] == {"1": {"packets": 3, "bytes": 1500}}
    assert "rx_packets" not in r

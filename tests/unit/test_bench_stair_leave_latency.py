"""The per-hop leave-latency probe (bench/stair_leave_latency.py): cache parsing and the
matching of router removals to receivers' leaves."""

from __future__ import annotations

import pytest

from bench.stair_leave_latency import (
    Removal,
    carried_bytes,
    channel_sends,
    downstream,
    forwarding,
    leave_delays,
    on_fraction,
    parse_oifs,
    parse_vif_names,
    removals,
    summarize,
)
from mcclab.model.loader import load_topology

CACHE = """Group    Origin   Iif     Pkts    Bytes    Wrong Oifs
010000E8 0100000A 0       1200   650000        0  2:1    3:1
020000E8 0100000A 0         10     5400        0
030000E8 00000000 -1         0        0        0
"""
VIFS = """Interface      BytesIn  PktsIn  BytesOut PktsOut Flags Local    Remote
 0 b-eth0          0       0         0       0 00000 0100000A 00000000
 2 b-eth3          0       0         0       0 00000 0100000A 00000000
"""


def test_parse_oifs_reads_groups_sources_and_vifs():
    entries = parse_oifs(CACHE)
    assert entries == {("10.0.0.1", "232.0.0.1"): frozenset({2, 3}),
                       ("10.0.0.1", "232.0.0.2"): frozenset()}  # unresolved one skipped


def test_parse_vif_names():
    assert parse_vif_names(VIFS) == {0: "b-eth0", 2: "b-eth3"}


def test_removals_from_changes_and_disappearing_entries():
    rows = [{"t": "1.0", "router": "b", "source": "s", "group": "g", "oifs": "c1+c2"},
            {"t": "2.0", "router": "b", "source": "s", "group": "g", "oifs": "c2"},
            {"t": "3.0", "router": "b", "source": "s", "group": "g", "oifs": ""}]
    assert removals(rows) == [Removal(2.0, "b", "c1", "g"), Removal(3.0, "b", "c2", "g")]


def test_downstream_on_fig12():
    topo = load_topology("topologies/stair-fig12.yaml")
    rx = [f"s{i}" for i in range(1, 7)]
    assert downstream(topo, "a", "b", rx) == rx
    assert downstream(topo, "b", "c3", rx) == ["s3"]
    assert downstream(topo, "c3", "s3", rx) == ["s3"]
    assert downstream(topo, "c3", "t3", rx) == []


def test_leave_delays_use_the_last_leave_below():
    below = {("a", "b"): ["s1", "s2"], ("c1", "s1"): ["s1"]}
    leaves = {"s1": [(10.0, "g"), (20.0, "h")], "s2": [(10.5, "g")]}
    removed = [Removal(10.7, "a", "b", "g"), Removal(10.11, "c1", "s1", "g"),
               Removal(40.0, "c1", "s1", "h")]  # 20 s after the leave: not matched
    got = leave_delays(removed, leaves, below)
    assert [(r.router, round(d, 3)) for r, d in got] == [("a", 0.2), ("c1", 0.11)]
    table = summarize(got, {"a": "top", "c1": "access"})
    assert table["top"]["median_ms"] == pytest.approx(200.0)
    assert table["access"]["n"] == 1


def _stats(t: float, **sent: int) -> dict:
    """A sender stats record with cumulative per-channel byte counters."""
    return {"t": t, "sent_channels": {k.removeprefix("c"): {"bytes": v} for k, v in sent.items()}}


def test_channel_sends_are_differences_of_the_cumulative_counters():
    stats = [_stats(0.0, c0=100, c1=0), _stats(1.0, c0=300, c1=50), _stats(2.0, c0=400, c1=50)]
    assert channel_sends(stats, ["g", "h"]) == [(0.0, 1.0, {"g": 200, "h": 50}),
                                                (1.0, 2.0, {"g": 100, "h": 0})]


def test_on_fraction_follows_the_changes_and_the_state_before_the_window():
    changes = [(0.5, frozenset({"c1"})), (1.25, frozenset({"c1", "c2"})), (1.75, frozenset())]
    assert on_fraction(changes, "c1", 1.0, 2.0) == pytest.approx(0.75)  # on since 0.5
    assert on_fraction(changes, "c2", 1.0, 2.0) == pytest.approx(0.5)
    assert on_fraction(changes, "c3", 1.0, 2.0) == 0.0
    assert on_fraction(changes, "c1", 3.0, 4.0) == 0.0  # removed before the window
    assert on_fraction([], "c1", 0.0, 1.0) == 0.0


def test_carried_bytes_weights_each_interval_by_the_forwarding_share():
    rows = [{"t": "0.0", "router": "b", "source": "s", "group": "g", "oifs": "c1"},
            {"t": "1.5", "router": "b", "source": "s", "group": "g", "oifs": ""},
            {"t": "0.0", "router": "b", "source": "s", "group": "h", "oifs": "c2"}]
    sends = [(0.0, 1.0, {"g": 100, "h": 40}), (1.0, 2.0, {"g": 100, "h": 40}),
             (2.0, 3.0, {"g": 100, "h": 40})]
    fwd = forwarding(rows)
    assert carried_bytes(sends, fwd, "b", "c1", 0.0, 3.0) == pytest.approx(150.0)
    assert carried_bytes(sends, fwd, "b", "c2", 0.0, 3.0) == pytest.approx(120.0)
    assert carried_bytes(sends, fwd, "b", "c2", 1.0, 2.0) == pytest.approx(40.0)  # window

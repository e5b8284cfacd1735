"""RLC: the gauges its cores export and its agent contract case (docs/protocols.md)."""

from __future__ import annotations

from typing import Any

SENDER_GAUGES: dict[str, str] = {
    "layers": "number of layers",
    "sp_interval_seconds": "time between SPs",
    "cycle": "current burst cycle number",
    "target_rate_bps": "B_(l-1): all layers, bit/s of payload",
    "skipped_transmissions": "grid points skipped after a stall, cumulative",
}

RECEIVER_GAUGES: dict[str, str] = {
    "subscription_level": "layers joined",
    "level": "the paper's subscription level i (layers 0..i joined)",
    "level_rate_bps": "B_i of the current level, bit/s of payload",
    "sp_joins": "joins made at synchronisation points, cumulative",
    "deaf": "1 while in a deaf period after a drop, else 0",
    "deaf_periods": "deaf periods entered, cumulative",
    "rx_packets": "packets received on joined layers, cumulative",
    "lost_packets": "packets lost on joined layers, cumulative",
    "lost_burst_phase": "lost packets that belonged to a burst, cumulative",
    "lost_normal_phase": "lost packets of the normal phase, cumulative",
    "loss_events": "losses counted once per deaf period (burst losses), cumulative",
    "ignored_deaf": "normal-phase losses ignored in a deaf period, cumulative",
    "sp_seen": "SPs of the current level seen, cumulative",
    "sp_blocked": "SPs where the burst had a loss (no join), cumulative",
    "perceived_loss_rate": "lost over expected packets on joined layers",
    "burst_loss_rate": "loss events over expected packets",
}

CONTRACT_CASE: dict[str, Any] = {
    "ssm": False,
    # One layer at a short tau0, so every 1-s stats interval holds ~125 whole
    # burst/silence/normal cycles and the rate is B_0 = s / tau0 within 5%.
    "channels": [{"group": "239.7.6.1", "port": 6006}],
    "params": {"layers": 1, "tau0": "1ms", "packet_size": "256B"},
    "expected": "2.048Mbit",
    "silent_channels": [],
}

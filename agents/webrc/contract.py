"""WEBRC: the gauges its cores export and its agent contract case (docs/protocols.md)."""

from __future__ import annotations

from typing import Any

SENDER_GAUGES: dict[str, str] = {
    "waves": "number of wave channels (T)",
    "base_rate_bps": "base channel rate, bit/s",
    "waves_active": "active waves at any time (N)",
    "tsi": "current time slot index",
    "skipped_packets": "packets skipped by a sender woken too late, cumulative",
}

RECEIVER_GAUGES: dict[str, str] = {
    "artt_seconds": "ARTT: the receiver's average round-trip time estimate, seconds",
    "lossp": "LOSSP: the loss event probability estimate (0..1; 0 until start-up ends)",
    "trate_bps": "TRATE: the target reception rate from the equation, bit/s",
    "nwc": "NWC: the receiver's NWC variable (the wave channel count of RFC 3738)",
    "arr_pps": "ARR: anticipated reception rate, packets/s",
    "trr_pps": "TRR: true (averaged) reception rate, packets/s",
    "rr_pps": "RR: reception rate of the last epoch, packets/s",
    "startup": "1 during start-up (sec. 3.2), else 0",
    "wave_joins": "wave joins, cumulative (the runtime's joins_total adds the base)",
    "wave_leaves": "wave leaves, cumulative",
    "join_timeouts": "join timeouts, cumulative",
    "loss_events": "loss events, cumulative",
}

# WEBRC adapts its rate, so the case checks a range: at least the base channel
# (BCR = 1 packet/s of 1024 B, 0.87 on average over a slot), at most the session
# rate. 1 Mbit/s gives N = 13 active and T = 43 wave channels plus the base (CN 43);
# the receiver joins the base first, then the wave in its last slot (CN 0 in slot 0).
CONTRACT_CASE: dict[str, Any] = {
    "ssm": False,
    "channels": [{"group": f"239.7.3.{i + 1}", "port": 6006} for i in range(44)],
    "params": {"session_rate": "1Mbit", "packet_size": "1024B"},
    "expected_range": ["4kbit", "1Mbit"],
    "joins_prefix": [43, 0],
    "silent_channels": [],
}

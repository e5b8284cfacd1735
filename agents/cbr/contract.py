"""CBR: the gauges its cores export and its agent contract case (docs/protocols.md)."""

from __future__ import annotations

from typing import Any

SENDER_GAUGES: dict[str, str] = {
    "target_rate_bps": "configured rate, bit/s",
}

RECEIVER_GAUGES: dict[str, str] = {}

CONTRACT_CASE: dict[str, Any] = {
    "ssm": True,  # exercises the IGMPv3 source-specific join
    "channels": [{"group": "232.1.1.1", "port": 6001}],
    "params": {"rate": "2Mbit", "packet_size": "1000B"},
    "expected": "2Mbit",
    "silent_channels": [],
}

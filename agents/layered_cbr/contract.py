"""Layered CBR: the gauges its cores export and its agent contract case (docs/protocols.md)."""

from __future__ import annotations

from typing import Any

SENDER_GAUGES: dict[str, str] = {
    "layers": "number of layers",
    "target_rate_bps": "sum of the layer rates",
}

RECEIVER_GAUGES: dict[str, str] = {
    "subscription_level": "layers joined (level k = layers 0..k-1)",
    "subscribed_rate_bps": "sum of the joined layers' rates, bit/s",
}

CONTRACT_CASE: dict[str, Any] = {
    "ssm": False,
    "channels": [{"group": "239.7.1.1", "port": 6002}, {"group": "239.7.1.2", "port": 6002},
                 {"group": "239.7.1.3", "port": 6003}],
    "params": {"rates": ["400kbit", "800kbit", "1.6Mbit"], "packet_size": "500B"},
    "receiver_params": {"level": 2},
    "expected": "1.2Mbit",
    "silent_channels": [2],  # above the receiver's level
}

"""cbr's part of the metric contract and its agent contract case.

``SENDER_GAUGES`` and ``RECEIVER_GAUGES``: the gauges its cores return from
``metrics()`` (exported as ``mcc_agent_<name>``), each with its meaning.
``CONTRACT_CASE``: the session tests/integration/test_agent_contract.py runs
between two namespaces.
"""

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

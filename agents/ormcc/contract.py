"""ORMCC: the gauges its cores export and its agent contract case (docs/protocols.md)."""

from __future__ import annotations

from typing import Any

SENDER_GAUGES: dict[str, str] = {
    "rate_bps": "current sending rate, bit/s",
    "cr_id": "numeric id of the current representative (CR) receiver",
    "cr_switches": "CR changes, cumulative",
    "cr_valid": "1 while the CR is valid (packets carry its TRAC), else 0",
    "rtt_cr_s": "smoothed RTT between the source and the CR, seconds",
    "rtt_max_s": "largest RTT_cr seen, seconds",
    "mu_cr_bps": "E(mu^cr): the CR's average TRAC, bit/s",
    "sigma_cr_bps": "deviation of the CR's TRAC, bit/s",
    "t_cr_s": "E(T^cr): average CR response time at full load, seconds",
    "ci_rx": "CIs received, cumulative",
    "ci_rx_cr": "CIs received from the CR, cumulative",
    "ci_ignored": "CIs from other receivers that changed nothing, cumulative",
    "ci_malformed": "feedback datagrams that were not CIs, cumulative",
    "rate_cuts": "rate cuts, cumulative",
    "cr_timeouts": "CR checking timer expiries, cumulative",
}

RECEIVER_GAUGES: dict[str, str] = {
    "is_cr": "1 while this receiver is the CR, else 0",
    "ci_sent": "congestion indications sent, cumulative",
    "ci_suppressed": "congestion indications suppressed, cumulative",
    "rid": "this receiver's 32-bit id (matches the sender's cr_id)",
    "trac_avg_bps": "E(U): this receiver's average TRAC, bit/s",
    "trac_last_bps": "the last TRAC sample, bit/s",
    "loss_events": "packets that revealed a sequence gap, cumulative",
    "lost_packets": "packets missing in those gaps, cumulative",
}

CONTRACT_CASE: dict[str, Any] = {
    "ssm": False,
    "channels": [{"group": "239.7.5.1", "port": 6006}],
    # No loss on a veth pair: the AIMD rate rises until max_rate; pinning the
    # initial rate there makes the rate checkable.
    "params": {"initial_rate": "2Mbit", "max_rate": "2Mbit", "packet_size": "1000B"},
    "session": {"feedback_port": 6105},
    "expected": "2Mbit",
    "silent_channels": [],
}

"""TFMCC: the gauges its cores export and its agent contract case (docs/protocols.md)."""

from __future__ import annotations

from typing import Any

SENDER_GAUGES: dict[str, str] = {
    "rate_bps": "current sending rate, bit/s",
    "target_bps": "rate the sender is moving towards (the CLR's, or the slow-start cap), bit/s",
    "clr_id": "id of the current limiting receiver (CLR), -1 without one",
    "clr_rate_bps": "the CLR's last reported rate, bit/s",
    "rmax_s": "R_max: the largest receiver RTT, decaying per round, seconds",
    "round": "current feedback round number",
    "slow_start": "1 during slow start, else 0",
    "fb_rx": "well-formed receiver reports received, cumulative",
    "fb_clr": "reports from the CLR acted on, cumulative",
    "fb_nonclr": "reports from other receivers acted on, cumulative",
    "fb_malformed": "feedback datagrams that were not reports, cumulative",
    "fb_no_loss": "reports without a loss event after slow start (ignored), cumulative",
    "clr_switches": "CLR changes, cumulative",
    "clr_timeouts": "CLRs dropped after a silence, cumulative",
    "halvings": "rate halvings while the CLR was silent, cumulative",
    "rounds": "feedback rounds ended, cumulative",
    "round_fb_nonclr": "non-CLR reports in the current round",
}

RECEIVER_GAUGES: dict[str, str] = {
    "rtt_s": "RTT estimate, adjusted by the one-way delay change (R_max before a sample), s",
    "loss_event_rate": "loss event rate p from the weighted intervals (0 before a loss)",
    "is_clr": "1 while this receiver is the CLR, else 0",
    "rid": "this receiver's 32-bit id (matches the sender's clr_id)",
    "loss_events": "loss events, cumulative",
    "lost_packets": "packets lost (sequence gaps), cumulative",
    "rtt_samples": "RTT samples from the sender's echoes, cumulative",
    "fb_sent": "reports sent, cumulative",
    "fb_sent_clr": "reports sent as the CLR, cumulative",
    "fb_suppressed": "reports suppressed by the sender's echoed rates, cumulative",
    "seq_jumps": "sequence jumps too large to be losses (counting restarted), cumulative",
}

# No loss on a veth pair: slow start runs into max_rate within the first second (a short
# initial_rtt lets it double quickly before the first RTT sample), so the rate is checked
# as a range up to max_rate (5% over it for pacing jitter).
CONTRACT_CASE: dict[str, Any] = {
    "ssm": False,
    "channels": [{"group": "239.7.8.1", "port": 6008}],
    "params": {"packet_size": "1000B", "max_rate": "2Mbit", "initial_rtt": "20ms"},
    "session": {"feedback_port": 6108},
    "expected_range": ["1Mbit", "2.1Mbit"],
    "silent_channels": [],
}

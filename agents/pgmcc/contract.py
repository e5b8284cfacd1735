"""PGMCC: the gauges its cores export and its agent contract case (docs/protocols.md)."""

from __future__ import annotations

from typing import Any

SENDER_GAUGES: dict[str, str] = {
    "window": "congestion window W, packets",
    "tokens": "token count T, packets",
    "in_flight": "packets sent and not yet settled by an ACK or a timeout",
    "acker_id": "id of the current acker, -1 without one",
    "acker_loss": "the acker's last reported loss rate p",
    "acker_rtt_s": "the acker's last RTT sample, seconds",
    "srtt_s": "smoothed RTT of the current acker (0 before a sample), seconds",
    "rto_s": "current timeout, backoff included, seconds",
    "rate_bps": "W packets per smoothed acker RTT (0 before a sample), bit/s",
    "acks_rx": "ACKs received, cumulative",
    "naks_rx": "NAKs received, cumulative",
    "fb_malformed": "feedback datagrams that were not ACKs or NAKs, cumulative",
    "fb_ignored": "ACKs naming a packet never sent, cumulative",
    "acker_acks": "ACKs from the current acker acted on, cumulative",
    "acker_switches": "acker changes by the throughput comparison, cumulative",
    "elections": "ackers elected while none was designated, cumulative",
    "acker_drops": "ackers dropped after successive timeouts, cumulative",
    "cuts": "window halvings, cumulative",
    "lost": "packets the acker's bitmaps showed lost, cumulative",
    "unreported": "packets sent for an earlier acker and never reported, cumulative",
    "timeouts": "timeouts (W and T reset to 1), cumulative",
    "sent": "data packets sent, cumulative",
}

RECEIVER_GAUGES: dict[str, str] = {
    "loss_rate": "loss rate p, the EWMA over packets received and missing",
    "is_acker": "1 while the last data packet named this receiver as acker, else 0",
    "rid": "this receiver's 32-bit id (matches the sender's acker_id)",
    "received": "data packets received, cumulative",
    "lost_packets": "packets missing from sequence gaps, cumulative",
    "late": "packets that arrived after a later one, cumulative",
    "acks_sent": "ACKs sent, cumulative",
    "naks_sent": "NAKs sent (election NAKs included), cumulative",
    "election_naks": "NAKs sent because a data packet named no acker, cumulative",
    "naks_capped": "missing packets left without a NAK by the per-gap cap, cumulative",
    "seq_jumps": "sequence jumps too large to be losses (counting restarted), cumulative",
}

# No loss on a veth pair: the window opens until max_rate holds the sender back. The
# first packet may leave before the receiver's join took effect; a short first timeout
# (instead of TCP's 3 s) lets the election happen within the case's few seconds.
CONTRACT_CASE: dict[str, Any] = {
    "ssm": False,
    "channels": [{"group": "239.7.7.1", "port": 6007}],
    "params": {"packet_size": "1000B", "max_rate": "2Mbit", "initial_rto": "250ms"},
    "session": {"feedback_port": 6107},
    "expected_range": ["500kbit", "2.1Mbit"],
    "silent_channels": [],
}

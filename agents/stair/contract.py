"""STAIR: the gauges its cores export and its agent contract case (docs/protocols.md)."""

from __future__ import annotations

from typing import Any

SENDER_GAUGES: dict[str, str] = {
    "layers": "channels: CLs + NCLs + SLs",
    "cumulative_layers": "cumulative layers (CLs) sent",
    "noncumulative_layers": "non-cumulative layers (NCLs) sent",
    "stair_layers": "stair layers (SLs) sent",
    "target_rate_bps": "mean output over every layer, bit/s",
    "probes_echoed": "RTT probes echoed, cumulative",
}

RECEIVER_GAUGES: dict[str, str] = {
    "subscription_level": "units held on CLs and NCLs (base rate units)",
    "static_rate_bps": "rate of the CLs and NCLs held, bit/s",
    "cumulative_layers": "cumulative layers joined",
    "noncumulative_mask": "non-cumulative layers joined (bit i: NCL_i)",
    "stair_layer": "index of the stair layer joined (-1: none)",
    "stair_rtt_ms": "RTT the joined stair layer emulates, ms",
    "rtt_ms": "RTT estimate, ms",
    "mrtt_ms": "last join latency (MRTT), ms",
    "rtt_sample_ms": "last probe RTT sample (kernel timestamps, hosts' delay out), ms",
    "probe_host_ms": "time the last probe and its echo waited in the two hosts, ms",
    "increases": "additive increases, cumulative",
    "decreases": "multiplicative decreases, cumulative",
    "loss_events": "loss events, cumulative",
    "lost_packets": "packets lost (sequence gaps), cumulative",
    "periods": "stair periods ended, cumulative",
    "probes_sent": "RTT probes sent, cumulative",
    "probe_replies": "RTT probe replies received, cumulative",
    "bad_ext": "packets whose extension did not match their channel, cumulative",
}

CONTRACT_CASE: dict[str, Any] = {
    "ssm": False,
    # one unit (CL_0) and one stair layer; SL_16 at 256 kbit/s with 512 B packets tops
    # out at one packet per 16 ms, so the stair is flat and the rate constant
    "channels": [{"group": "239.7.2.1", "port": 6004}, {"group": "239.7.2.2", "port": 6004}],
    "params": {"base_rate": "256kbit", "packet_size": "512B", "max_rate": "256kbit",
               "stair_layers": 1, "rtt_source": "fixed", "rtt": "16ms"},
    "session": {"feedback_port": 6005},
    "expected": "512kbit",
    "silent_channels": [],
}

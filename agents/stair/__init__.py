"""STAIR: fine-grained layered multicast with stair layers (Byers et al., ToN 2006).

``layering`` holds the layering schemes and their metrics, ``stairs`` the stair
layers, ``config`` the parameters, channel layout and header extension,
``sender``/``receiver`` the cores, ``probe`` the RTT probe.
"""

from __future__ import annotations

from agents.runtime.registry import ProtocolSpec, register
from agents.stair.config import STAIR_EXT, Layout, StairParams
from agents.stair.contract import CONTRACT_CASE, RECEIVER_GAUGES, SENDER_GAUGES
from agents.stair.receiver import StairReceiver
from agents.stair.sender import StairSender

SPEC = register(ProtocolSpec(
    name="stair", protocol_id=6, params=StairParams, sender=StairSender,
    receiver=StairReceiver, extension=STAIR_EXT,
    channels=lambda params: Layout(params).channels,
    example_params={"base_rate": "256kbit", "packet_size": "512B", "max_rate": "2Mbit",
                    "rtt_source": "fixed", "rtt": "32ms"},
    feedback=True,
    sender_gauges=SENDER_GAUGES, receiver_gauges=RECEIVER_GAUGES,
    contract_case=CONTRACT_CASE,
))

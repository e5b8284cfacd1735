"""Registration of ``webrc``: wire id 3, the CN/TSI/PSN header extension, T+1 channels."""

from __future__ import annotations

from agents.runtime.header import StructExtension
from agents.runtime.registry import ProtocolSpec, register
from agents.webrc.contract import CONTRACT_CASE, RECEIVER_GAUGES, SENDER_GAUGES
from agents.webrc.params import WebrcParams
from agents.webrc.receiver import WebrcReceiver
from agents.webrc.sender import WebrcExt, WebrcSender


def check_ext(ext: WebrcExt) -> None:
    """Reject field values no WEBRC session can carry (PSN is 16 bits by construction)."""
    for name in ("cn", "tsi", "psn"):
        value = getattr(ext, name)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 0xFFFF:
            raise ValueError(f"WEBRC {name}={value!r} outside 0..65535")


WEBRC_EXT = StructExtension(WebrcExt, "!HHH", check=check_ext, example=WebrcExt(3, 1, 7))

SPEC = register(ProtocolSpec(
    name="webrc", protocol_id=3, params=WebrcParams, sender=WebrcSender,
    receiver=WebrcReceiver, extension=WEBRC_EXT,
    channels=lambda params: params.channels,
    example_params={"session_rate": "1Mbit", "packet_size": "1024B"},
    sender_gauges=SENDER_GAUGES, receiver_gauges=RECEIVER_GAUGES,
    contract_case=CONTRACT_CASE,
))

"""``cbr``: one group at a constant bit rate. Also used as multicast cross traffic.

The rate counts UDP payload bits (agent header included, IP and UDP headers
excluded): ``rate / (8 * packet_size)`` packets per second.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agents.cbr.contract import CONTRACT_CASE, RECEIVER_GAUGES, SENDER_GAUGES
from agents.runtime.actions import Action, Join, Send, SetTimer
from agents.runtime.core import ReceiverCore, SenderCore
from agents.runtime.header import HEADER_LEN, MAX_DATAGRAM
from agents.runtime.pacing import Pacer
from agents.runtime.registry import ProtocolSpec, register
from agents.runtime.session import Session
from mcclab.model.units import Rate, Size

SEND = "send"


def check_packet_size(size: int) -> int:
    if not HEADER_LEN <= size <= MAX_DATAGRAM:
        raise ValueError(f"packet_size {size}B outside {HEADER_LEN}B..{MAX_DATAGRAM}B")
    return size


class CbrParams(BaseModel):
    """``rate`` (e.g. ``"1Mbit"``) and ``packet_size`` (e.g. ``"1000B"``)."""

    model_config = ConfigDict(extra="forbid")

    rate: Rate
    packet_size: Size = Field(default=1000)

    @field_validator("rate")
    @classmethod
    def _positive(cls, rate: float) -> float:
        if rate <= 0:
            raise ValueError("rate must be positive")
        return rate

    @field_validator("packet_size")
    @classmethod
    def _size(cls, size: int) -> int:
        return check_packet_size(size)


class CbrSender(SenderCore):
    """Sends ``packet_size`` packets on channel 0, paced at ``rate``."""

    def __init__(self, params: CbrParams, session: Session | None = None):
        self.params = params
        self.pacer: Pacer | None = None

    def start(self, now: float) -> list[Action]:
        self.pacer = Pacer(self.params.rate, now)
        return self.on_timer(now, SEND)

    def on_timer(self, now: float, timer_id: str) -> list[Action]:
        assert self.pacer is not None
        size = self.params.packet_size
        actions: list[Action] = []
        while self.pacer.due(now):
            actions.append(Send(0, size))
            self.pacer.sent(size)
        actions.append(SetTimer(SEND, self.pacer.next_due))
        return actions

    def metrics(self) -> dict[str, float]:
        return {"target_rate_bps": self.params.rate}


class CbrReceiver(ReceiverCore):
    """Joins channel 0 for the whole session."""

    def __init__(self, params: CbrParams, session: Session | None = None):
        self.params = params

    def start(self, now: float) -> list[Action]:
        return [Join(0)]


SPEC = register(ProtocolSpec(
    name="cbr", protocol_id=1, params=CbrParams, sender=CbrSender, receiver=CbrReceiver,
    channels=lambda params: 1, example_params={"rate": "1Mbit", "packet_size": "1000B"},
    sender_gauges=SENDER_GAUGES, receiver_gauges=RECEIVER_GAUGES,
    contract_case=CONTRACT_CASE,
))

"""``layered-cbr``: fixed cumulative layers, one channel (group) per layer, each at its own
constant rate; a receiver holds a fixed subscription level.

A receiver at level ``k`` joins layers ``0 .. k-1`` and so receives
``sum(rates[:k])``. ``level`` defaults to every layer; set it per receiver in
the session's ``nodes.<name>.params``. Rates count UDP payload bits as in ``cbr``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agents.cbr import check_packet_size
from agents.layered_cbr.contract import CONTRACT_CASE, RECEIVER_GAUGES, SENDER_GAUGES
from agents.runtime.actions import Action, Join, Log, Send, SetTimer
from agents.runtime.core import ReceiverCore, SenderCore
from agents.runtime.pacing import Pacer
from agents.runtime.registry import ProtocolSpec, register
from agents.runtime.session import Session
from mcclab.model.units import Rate, Size

SEND = "send"


class LayeredCbrParams(BaseModel):
    """``rates`` per layer (not cumulative), ``packet_size``, receiver ``level``."""

    model_config = ConfigDict(extra="forbid")

    rates: list[Rate] = Field(min_length=1, max_length=256)
    packet_size: Size = Field(default=1000)
    level: int | None = Field(default=None, ge=0, description="layers joined (default: all)")

    @field_validator("rates")
    @classmethod
    def _positive(cls, rates: list[float]) -> list[float]:
        if any(r <= 0 for r in rates):
            raise ValueError("every layer rate must be positive")
        return rates

    @field_validator("packet_size")
    @classmethod
    def _size(cls, size: int) -> int:
        return check_packet_size(size)

    @model_validator(mode="after")
    def _level(self) -> LayeredCbrParams:
        if self.level is not None and self.level > len(self.rates):
            raise ValueError(f"level {self.level} exceeds the {len(self.rates)} layers")
        return self

    @property
    def subscription(self) -> int:
        return len(self.rates) if self.level is None else self.level


class LayeredCbrSender(SenderCore):
    """One pacer per layer; each timer sends every packet due, earliest first."""

    def __init__(self, params: LayeredCbrParams, session: Session | None = None):
        self.params = params
        self.pacers: list[Pacer] = []

    def start(self, now: float) -> list[Action]:
        self.pacers = [Pacer(rate, now) for rate in self.params.rates]
        return self.on_timer(now, SEND)

    def on_timer(self, now: float, timer_id: str) -> list[Action]:
        size = self.params.packet_size
        actions: list[Action] = []
        while True:
            layer = min(range(len(self.pacers)), key=lambda i: self.pacers[i].next_due)
            pacer = self.pacers[layer]
            if not pacer.due(now):
                break
            actions.append(Send(layer, size))
            pacer.sent(size)
        actions.append(SetTimer(SEND, min(p.next_due for p in self.pacers)))
        return actions

    def metrics(self) -> dict[str, float]:
        return {"layers": len(self.params.rates), "target_rate_bps": sum(self.params.rates)}


class LayeredCbrReceiver(ReceiverCore):
    """Joins the lowest ``level`` layers at start and stays."""

    def __init__(self, params: LayeredCbrParams, session: Session | None = None):
        self.params = params
        self.level = params.subscription

    def start(self, now: float) -> list[Action]:
        rate = sum(self.params.rates[:self.level])
        return [Log("subscription", {"level": self.level, "rate_bps": rate}),
                *(Join(layer) for layer in range(self.level))]

    def metrics(self) -> dict[str, float]:
        return {"subscription_level": self.level,
                "subscribed_rate_bps": sum(self.params.rates[:self.level])}


SPEC = register(ProtocolSpec(
    name="layered-cbr", protocol_id=2, params=LayeredCbrParams, sender=LayeredCbrSender,
    receiver=LayeredCbrReceiver, channels=lambda params: len(params.rates),
    example_params={"rates": ["256kbit", "512kbit", "1Mbit"], "packet_size": "500B"},
    sender_gauges=SENDER_GAUGES, receiver_gauges=RECEIVER_GAUGES,
    contract_case=CONTRACT_CASE,
))

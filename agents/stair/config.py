"""STAIR's parameters, channel layout and header extension.

Channels are laid out as ``CL_0..CL_{c-1}``, then ``NCL_0..NCL_{n-1}``, then
``SL_0..SL_{s-1}``; each is its own group. The extension carries the layer's kind
and index (so a receiver can check a packet against the channel it came on) and,
on stair layers, the stair cycle and step; the runtime's header carries the
per-channel sequence number.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agents.cbr import check_packet_size
from agents.runtime.header import StructExtension
from agents.stair.layering import Hybrid, canonical_subscriptions
from agents.stair.stairs import stair_rtts, stair_window
from mcclab.model.units import Duration, Rate, Size

CL, NCL, SL = 0, 1, 2
KIND_NAMES = {CL: "C", NCL: "N", SL: "S"}


@dataclass(frozen=True)
class StairExt:
    """``kind`` (0 CL, 1 NCL, 2 SL), layer ``index``, stair ``cycle`` and ``step`` (SL only)."""

    kind: int
    index: int
    cycle: int = 0
    step: int = 0


def check_ext(ext: StairExt) -> None:
    """Reject a kind that does not exist (the parser counts it as a bad extension)."""
    if ext.kind not in KIND_NAMES:
        raise ValueError(f"unknown layer kind {ext.kind}")


STAIR_EXT = StructExtension(StairExt, "!BBIH", check=check_ext,
                            example=StairExt(SL, 1, 7, 3))


class StairParams(BaseModel):
    """Sender and receiver parameters (rates count UDP payload bits, as every agent's)."""

    model_config = ConfigDict(extra="forbid")

    base_rate: Rate = Field(512_000, description="C_0 = N_0, the unit of every rate")
    packet_size: Size = Field(512)
    alpha: float = Field(2.0, gt=1, le=4, description="cumulative layers at powers of alpha")
    max_rate: Rate = Field(16_000_000, description="the highest reception rate offered")
    stair_base: Duration = Field(0.016, gt=0, description="RTT emulated by the fastest stair")
    stair_layers: int = Field(5, ge=1, le=8)
    subscription: Literal["simple", "complex"] = "simple"
    rtt_source: Literal["probe", "mrtt", "fixed"] = "probe"
    rtt: Duration | None = Field(None, gt=0, description="fixed RTT, or the first estimate")
    probe_interval: Duration = Field(1.0, gt=0)
    rtt_gain: float = Field(0.125, gt=0, le=1, description="EWMA gain of RTT samples")
    md_holdoff: Duration = Field(0.0, ge=0, description="no decrease this long after the "
                                 "previous one, even in a new stair period")

    @model_validator(mode="after")
    def _check(self) -> StairParams:
        check_packet_size(self.packet_size)
        if self.base_rate <= 0:
            raise ValueError("base_rate must be positive")
        w = stair_window(self.base_rate, self.stair_base, self.packet_size)
        if w < 1 - 1e-9 or abs(w - round(w)) > 1e-6:
            raise ValueError(
                f"base_rate x stair_base / (8 x packet_size) = {w:g} packets: the fastest stair "
                "must top out at a whole number (>= 1) of packets per RTT (Fig. 7 calibration)")
        if self.units < 1:
            raise ValueError("max_rate must be at least base_rate")
        if self.rtt_source == "fixed" and self.rtt is None:
            raise ValueError("rtt_source fixed needs rtt")
        return self

    @property
    def units(self) -> int:
        """R: the highest reception rate in base units."""
        return int(self.max_rate // self.base_rate)


@dataclass(frozen=True)
class Layout:
    """The session's layers and their channels, derived from the parameters."""

    params: StairParams

    @cached_property
    def scheme(self) -> Hybrid:
        """The CL + NCL scheme (sec. IV-C)."""
        return Hybrid(self.params.alpha, limit=self.params.units)

    @cached_property
    def n_cl(self) -> int:
        """Cumulative layers: thresholds up to R."""
        return sum(1 for t in self.scheme.thresholds if t <= self.params.units)

    @cached_property
    def n_ncl(self) -> int:
        """Non-cumulative layers any rate up to R uses."""
        subs = canonical_subscriptions(self.scheme, self.params.units).values()
        used = [i for s in subs for k, i in s if k == "N"]
        return max(used) + 1 if used else 0

    @property
    def n_sl(self) -> int:
        """Stair layers."""
        return self.params.stair_layers

    @property
    def channels(self) -> int:
        """Every layer has its own channel."""
        return self.n_cl + self.n_ncl + self.n_sl

    def channel(self, kind: int, index: int) -> int:
        """The channel of layer ``index`` of ``kind``."""
        return index + (0, self.n_cl, self.n_cl + self.n_ncl)[kind]

    def layer(self, channel: int) -> tuple[int, int]:
        """(kind, index) of a channel."""
        if channel < self.n_cl:
            return CL, channel
        if channel < self.n_cl + self.n_ncl:
            return NCL, channel - self.n_cl
        return SL, channel - self.n_cl - self.n_ncl

    def group_channel(self, group: tuple[str, int]) -> int:
        """The channel of a layering-scheme group ``("C", j)`` / ``("N", i)``."""
        return self.channel(CL if group[0] == "C" else NCL, group[1])

    def static_rate(self, kind: int, index: int) -> float:
        """Rate (bit/s) of a CL or NCL."""
        name = "C" if kind == CL else "N"
        return self.scheme.group_rate((name, index)) * self.params.base_rate

    @cached_property
    def rtts(self) -> list[float]:
        """Emulated RTTs of the stair layers."""
        return stair_rtts(self.params.stair_base, self.n_sl)

    def window(self, sl: int) -> int:
        """Top step of stair layer ``sl`` in packets per RTT."""
        return round(stair_window(self.params.base_rate, self.rtts[sl], self.params.packet_size))

    def total_rate(self) -> float:
        """The sender's mean output over every layer (bit/s)."""
        static = sum(self.static_rate(CL, j) for j in range(self.n_cl))
        static += sum(self.static_rate(NCL, i) for i in range(self.n_ncl))
        stairs = sum(self.params.base_rate * (self.window(s) + 1) / (2 * self.window(s))
                     for s in range(self.n_sl))
        return static + stairs

"""TFMCC parameters (RFC 4654), validated with units."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agents.cbr import check_packet_size
from mcclab.model.units import Duration, Rate, Size


class TfmccParams(BaseModel):
    """Sender and receiver parameters; each has the RFC's value or a choice listed in
    ``agents/tfmcc/README.md``.

    ``initial_rtt`` is the sender's first R_max and every receiver's RTT until it
    has a measurement. ``round_rtts`` is the feedback round duration T in units of
    R_max. ``max_receivers`` is N, the upper bound on the receiver count that
    shapes the exponential feedback timer. ``bias`` is the share of T spent on the
    rate-ordered part of the timer, ``suppress_margin`` the fraction by which a
    receiver's rate must be below the echoed suppression rate for its report to
    still go out. ``rtt_gain_clr`` and ``rtt_gain`` are the EWMA gains of the RTT
    estimate at the CLR and at other receivers. ``clr_halve_rtts`` and
    ``clr_timeout_rtts`` are the no-feedback limits in CLR round-trip times.
    """

    model_config = ConfigDict(extra="forbid")

    packet_size: Size = Field(default=1000)
    initial_rtt: Duration = Field(default=0.5, gt=0.0, le=10.0)
    round_rtts: float = Field(default=4.0, ge=1.0, le=32.0)
    max_receivers: int = Field(default=10_000, ge=2, le=10_000_000)
    bias: float = Field(default=0.25, ge=0.0, lt=1.0)
    suppress_margin: float = Field(default=0.1, ge=0.0, lt=1.0)
    rtt_gain_clr: float = Field(default=0.05, gt=0.0, le=1.0)
    rtt_gain: float = Field(default=0.5, gt=0.0, le=1.0)
    clr_halve_rtts: float = Field(default=4.0, gt=0.0)
    clr_timeout_rtts: float = Field(default=10.0, gt=0.0)
    min_rate: Rate = Field(default=8_000.0, gt=0.0)
    max_rate: Rate = Field(default=10_000_000.0, gt=0.0)
    min_rtt: Duration = Field(default=0.001, gt=0.0)

    @model_validator(mode="after")
    def _check(self) -> TfmccParams:
        check_packet_size(self.packet_size)
        if self.min_rate > self.max_rate:
            raise ValueError("need min_rate <= max_rate")
        if self.clr_halve_rtts > self.clr_timeout_rtts:
            raise ValueError("need clr_halve_rtts <= clr_timeout_rtts")
        return self

    @property
    def initial_rate(self) -> float:
        """One packet per initial R_max (RFC 4654 sec. 3.1), within the rate bounds."""
        rate = self.packet_size * 8 / self.initial_rtt
        return min(max(rate, self.min_rate), self.max_rate)

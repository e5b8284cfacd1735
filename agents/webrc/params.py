"""WEBRC's session and receiver parameters (Table 1), with the choices the paper leaves open.

Session parameters must be the same for the sender and every receiver (they
define the waves); the receiver parameters may differ per receiver
(``nodes.<name>.params``). Every default that is our choice, not the paper's,
says so.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agents.cbr import check_packet_size
from agents.webrc.model import WaveModel
from mcclab.model.units import Duration, Rate, Size


class WebrcParams(BaseModel):
    """Table 1's session parameters and the receiver's knobs."""

    model_config = ConfigDict(extra="forbid")

    # -- session (Table 1) --
    session_rate: Rate = Field(4e6, gt=0, description="SR_b: total over all channels "
                                                      "(UDP payload)")
    packet_size: Size = Field(1024, description="LENP: UDP payload bytes per packet")
    bcr: float = Field(1.0, gt=0, description="BCR_P, packets/s")
    p: float = Field(0.75, gt=0, lt=1, description="rate decrease factor per TSD")
    tsd: Duration = Field(10.0, gt=0, description="time slot duration")
    q: int | None = Field(None, ge=1, description="quiescent slots (default ceil(300/TSD))")
    # -- receiver (Table 1) --
    epoch: Duration = Field(0.5, gt=0, description="EL, epoch length")
    mrr: Rate | None = Field(None, gt=0, description="MRR_b, maximum reception rate")
    # -- receiver: our choices where the paper is silent (docs/webrc.md) --
    artt_alpha: float = Field(0.2, gt=0, lt=1, description="ARTT estimator's alpha")
    loss_smoothing: Duration | None = Field(
        None, gt=0, description="stage-1 EWMA time constant (default 2*TSD)")
    loss_delta: float = Field(0.1, gt=0, lt=1, description="F_i estimator's delta")
    arr_alpha: float = Field(0.25, gt=0, le=1, description="ARR's EWMA fraction per epoch")
    trr_alpha: float = Field(0.25, gt=0, le=1, description="TRR's EWMA fraction per epoch")
    ssr_factor: float | None = Field(
        None, gt=0, le=1, description="SSR = factor * TRR at each loss event, at least "
        "SSMINR with ssr_floor (RFC 3738 3.2.3.4); none: P, the RFC's factor")
    ssr_floor: bool = Field(
        True, description="SSR is at least SSMINR = BCR (1 + 1/P + 1/P^2), the base "
        "channel and the two lowest waves at a slot's start (RFC 3738 3.2.2.6)")
    startup_exponent: float = Field(3.0, gt=0, description="TRR exponent in Eq. 5 at start-up")
    exponent: float = Field(1.5, gt=0, description="TRR exponent in Eq. 5")
    rr_lag_margin: float = Field(0.1, ge=0, lt=1,
                                 description="start-up ends if RR < (1-margin)*ARR")
    rr_lag_packets: float = Field(2.0, ge=0,
                                  description="and by more than this many packets per epoch")
    mrtt_jump_spacing: float = Field(2.0, ge=0,
                                     description="MRTT jump threshold, in packet spacings")
    mrtt_jump_min: Duration = Field(0.02, ge=0, description="MRTT jump threshold floor")
    overflow_margin: float = Field(0.03, ge=0, lt=1,
                                   description="sec. 3.3: join only if TRR < (1-m)*max TRR")
    join_timeout: Duration = Field(2.0, gt=0, description="join timeout floor")
    join_timeout_artt: float = Field(4.0, ge=0, description="join timeout in ARTTs")
    join_retries: int = Field(2, ge=0, description="re-joins before a join is given up")
    base_mrtt_sample: bool = Field(True, description="the base channel's join is an MRTT sample")
    mrtt_spacing_correction: bool = Field(
        True, description="a wave's MRTT sample is its first packet's time minus half the "
                          "wave's packet spacing there (sec. 4.4's taut RTT; docs/webrc.md)")
    loss_timing: Literal["detection", "interpolated"] = Field(
        "interpolated", description="when a lost packet is taken to have been lost: "
        "(footnote 4's TFRC, RFC 5348 sec. 5.2) at its interpolated arrival between its "
        "neighbours on its channel, which counts one congestion episode once on slow channels "
        "too; or 'detection', when its gap is seen, which counts it again there (docs/webrc.md)")
    initial_artt: Duration = Field(0.5, gt=0, description="ARTT before any MRTT sample")
    epoch_phase: Duration | None = Field(
        None, ge=0, description="epochs end at k*EL + this on the agents' clock (the lab's "
                                "CLOCK_MONOTONIC, shared by every agent, as ns-2's clock is); "
                                "none: every EL from the receiver's own start (docs/webrc.md)")

    @field_validator("packet_size")
    @classmethod
    def _size(cls, size: int) -> int:
        return check_packet_size(size)

    @model_validator(mode="after")
    def _model_fits(self) -> WebrcParams:
        self.model()  # raises ValueError if the waves cannot be built
        return self

    @property
    def sr_pps(self) -> float:
        """SR in packets/s."""
        return self.session_rate / (8 * self.packet_size)

    @property
    def quiescent(self) -> int:
        """Q."""
        return self.q if self.q is not None else math.ceil(300 / self.tsd)

    def model(self) -> WaveModel:
        """The fluid wave model these parameters define."""
        return WaveModel(self.sr_pps, self.bcr, self.p, self.tsd, self.quiescent)

    @property
    def channels(self) -> int:
        """T wave channels plus the base channel."""
        return self.model().t + 1

"""PGMCC parameters (draft-ietf-rmt-bb-pgmcc-03), validated with units."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agents.cbr import check_packet_size
from mcclab.model.units import Duration, Rate, Size


class PgmccParams(BaseModel):
    """Sender and receiver parameters; each has the draft's value or a choice listed in
    ``agents/pgmcc/README.md``.

    ``switch_factor`` is the draft's C: a receiver i becomes the acker when its
    throughput estimate T_i < C T_acker. ``loss_gain`` is the weight of the newest
    packet in the receivers' loss-rate EWMA. ``ssthresh`` is the fixed slow-start
    threshold in packets, ``dupthresh`` the number of acknowledged packets above an
    unacknowledged one that make it lost. ``initial_rto``, ``min_rto`` and
    ``max_rto`` bound the retransmission-style timeout; ``acker_timeouts`` is the
    number of successive timeouts after which the acker is dropped.
    ``max_naks_per_gap`` bounds the NAKs one gap produces, ``max_window`` the window
    and ``max_rate`` the sending rate.
    """

    model_config = ConfigDict(extra="forbid")

    # ORMCC paper sec. V: every simulation of the comparison used 1000-byte packets.
    packet_size: Size = Field(default=1000)
    # Draft sec. 2.3: "a suggested value for C is 0.75".
    switch_factor: float = Field(default=0.75, gt=0.0, le=1.0)
    # Draft sec. 2.6: c_p = 500/65536 in 16-bit fixed point.
    loss_gain: float = Field(default=500 / 65536, gt=0.0, lt=1.0)
    # Draft sec. 2.2: a fixed, small SSTHRESH, "e.g. 4 packets".
    ssthresh: float = Field(default=4.0, ge=1.0)
    # Draft sec. 2.2: lost when followed by at least 3 acknowledged packets (TCP's 3 dupacks).
    dupthresh: int = Field(default=3, ge=1, le=31)
    # Draft sec. 2.7: TCP's default initial timeout, 3 s, before any RTT sample.
    initial_rto: Duration = Field(default=3.0, gt=0.0, le=60.0)
    # Not in the draft: Linux TCP's 200 ms floor (RFC 6298 recommends 1 s; see README).
    min_rto: Duration = Field(default=0.2, gt=0.0)
    # RFC 6298 sec. 2.5: an upper bound of at least 60 s.
    max_rto: Duration = Field(default=60.0, gt=0.0)
    # Draft sec. 2.7: "we recommend this new election ... after two successive timeouts".
    acker_timeouts: int = Field(default=2, ge=1, le=100)
    # Not in the draft: one NAK per lost packet, at most one bitmap's worth per gap (README).
    max_naks_per_gap: int = Field(default=32, ge=1, le=10_000)
    # Not in the draft: TCP's window is bounded by the receive window; so is this one.
    max_window: float = Field(default=1000.0, ge=2.0)
    # Not in the draft: the same machine-protecting ceiling as ORMCC's and TFMCC's.
    max_rate: Rate = Field(default=10_000_000.0, gt=0.0)
    # Floor of an RTT sample (clock granularity).
    min_rtt: Duration = Field(default=0.001, gt=0.0)

    @model_validator(mode="after")
    def _check(self) -> PgmccParams:
        check_packet_size(self.packet_size)
        if not self.min_rto <= self.initial_rto <= self.max_rto:
            raise ValueError("need min_rto <= initial_rto <= max_rto")
        if self.ssthresh > self.max_window:
            raise ValueError("need ssthresh <= max_window")
        return self

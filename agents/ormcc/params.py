"""ORMCC parameters (Li and Kalyanaraman), validated with units."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agents.cbr import check_packet_size
from mcclab.model.units import Duration, Rate, Size


class OrmccParams(BaseModel):
    """Sender and receiver parameters; every field has the paper's value or a stated choice.

    ``beta`` is the rate-cut factor (sec. III-A.5: 0.65 for a user-level
    implementation). ``alpha`` is the EWMA gain of every average (TRAC, T^cr,
    RTT); the paper does not give it. ``initial_rtt`` is the paper's 100 ms.
    ``trac_window`` is the averaging period of the receivers' output rate
    (footnote 1: one second). ``initial_check`` is the CR checking timer's
    length before the first sample of T^cr exists. ``initial_rate``,
    ``min_rate`` and ``max_rate`` bound the AIMD rate (the paper has no bounds;
    ``max_rate`` keeps a session without losses from saturating the machine).
    """

    model_config = ConfigDict(extra="forbid")

    packet_size: Size = Field(default=1000)
    beta: float = Field(default=0.65, gt=0.0, le=1.0)
    alpha: float = Field(default=0.125, gt=0.0, le=1.0)
    initial_rtt: Duration = Field(default=0.1, gt=0.0)
    initial_rate: Rate = Field(default=80_000.0, gt=0.0)
    min_rate: Rate = Field(default=8_000.0, gt=0.0)
    max_rate: Rate = Field(default=10_000_000.0, gt=0.0)
    trac_window: Duration = Field(default=1.0, gt=0.0)
    initial_check: Duration = Field(default=5.0, gt=0.0)
    min_rtt: Duration = Field(default=0.001, gt=0.0)

    @model_validator(mode="after")
    def _check(self) -> OrmccParams:
        check_packet_size(self.packet_size)
        if not self.min_rate <= self.initial_rate <= self.max_rate:
            raise ValueError("need min_rate <= initial_rate <= max_rate")
        return self

"""Reference quantities: what an experiment measures and the paper's value for it.

Each quantity is computed from a run's tidy per-second table over the
measurement window [warmup, duration] (see ``mcclab.analysis.metrics``), then
compared with the paper's value within a stated tolerance.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from mcclab.model.topology import StrictModel
from mcclab.model.units import Probability, Rate


class _Reference(StrictModel):
    """Common fields: a label, the source of the paper value, and the tolerance."""

    label: str = Field(description="short name shown in the report, e.g. 'WEBRC share'")
    source: str = Field("", description="where the paper value comes from, e.g. 'Fig. 9'")
    tolerance: Probability | None = Field(None, description="relative tolerance, e.g. '10%'")
    within: tuple[float, float] | None = Field(
        None, description="absolute acceptance interval [low, high] in the quantity's unit")

    @model_validator(mode="after")
    def _one_criterion(self) -> _Reference:
        if self.within is not None and self.within[0] > self.within[1]:
            raise ValueError("within: low bound above high bound")
        return self


class Throughput(_Reference):
    """Mean received rate of a flow (at one node, or averaged over its receivers), bit/s."""

    kind: Literal["throughput"]
    flow: str
    node: str | None = None
    paper: Rate


class Share(_Reference):
    """A flow's mean throughput as a fraction of a capacity (or of a set of flows' total)."""

    kind: Literal["share"]
    flow: str
    node: str | None = None
    capacity: Rate | None = None
    of_flows: list[str] = Field(default_factory=list)
    paper: float = Field(ge=0)

    @model_validator(mode="after")
    def _denominator(self) -> Share:
        if (self.capacity is None) == (not self.of_flows):
            raise ValueError("give exactly one of 'capacity' and 'of_flows'")
        return self


class Utilisation(_Reference):
    """Sum of the flows' mean throughputs over a link capacity."""

    kind: Literal["utilisation"]
    flows: list[str] = Field(min_length=1)
    capacity: Rate
    paper: float = Field(ge=0)


class Fairness(_Reference):
    """Jain's fairness index over the flows' mean throughputs (RLC footnote 3)."""

    kind: Literal["fairness"]
    flows: list[str] = Field(min_length=2)
    paper: float = Field(ge=0, le=1)


class Loss(_Reference):
    """Fraction of a flow's packets lost (at a node, or over all its receivers)."""

    kind: Literal["loss"]
    flow: str
    node: str | None = None
    paper: float = Field(ge=0, le=1)


class Ratio(_Reference):
    """Mean throughput of one flow over another's."""

    kind: Literal["ratio"]
    numerator: str
    denominator: str
    node: str | None = None
    paper: float = Field(ge=0)


Reference = Annotated[
    Throughput | Share | Utilisation | Fairness | Loss | Ratio, Field(discriminator="kind")
]

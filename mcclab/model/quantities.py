"""Reference quantities: what an experiment measures and the paper's value for it.

Each quantity is computed from a run's tidy per-second table over the
measurement window [warmup, duration] (see ``mcclab.analysis.metrics``), then
compared with the paper's value within a stated tolerance. A ``measure``
quantity is computed by an analysis plugin (``mcclab.model.plugins``);
a :class:`FigureRef` names a plugin figure. These are the spec's models: the
runner validates them and the analysis reads them, and this module imports
neither package.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, field_serializer, model_validator

from mcclab.model.topology import StrictModel
from mcclab.model.units import (
    NonNegRate,
    PositiveRate,
    Probability,
    format_probability,
    in_range,
)

# A relative tolerance of 0% accepts only the exact value, which a measurement never is.
Tolerance = Annotated[Probability, in_range(format_probability, 0, 1, low_open=True,
                                            why="0% accepts only the exact value")]


class _Reference(StrictModel):
    """Common fields: a label, the source of the paper value, and the tolerance."""

    label: str = Field(description="short name shown in the report, e.g. 'WEBRC share'")
    source: str = Field("", description="where the paper value comes from, e.g. 'Fig. 9'")
    tolerance: Tolerance | None = Field(None, description="relative tolerance, e.g. '10%' "
                                       "(above 0%, at most 100%)")
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
    paper: NonNegRate


class Share(_Reference):
    """A flow's mean throughput as a fraction of a capacity (or of a set of flows' total)."""

    kind: Literal["share"]
    flow: str
    node: str | None = None
    capacity: PositiveRate | None = None
    of_flows: list[str] = Field(default_factory=list)
    bits: Literal["payload", "ip"] = Field(
        "payload", description="'ip' also counts the 28 bytes of IPv4 and UDP header of every "
        "received packet: the flow's part of what a link of 'capacity' carries (ns-2 counts "
        "whole packets). Multicast flows only, with 'capacity'")
    paper: float = Field(ge=0)

    @model_validator(mode="after")
    def _denominator(self) -> Share:
        if (self.capacity is None) == (not self.of_flows):
            raise ValueError("give exactly one of 'capacity' and 'of_flows'")
        if self.bits == "ip" and self.capacity is None:
            raise ValueError("bits: 'ip' needs 'capacity' (a share of other flows counts payload)")
        return self


def ip_bits_problem(ref: Any, flow_types: dict[str, str]) -> str | None:
    """Why a reference cannot count IP bits on its flow (``None``: it can, or it counts payload).

    IP bits add headers per received packet, and only the agents' multicast
    flows count packets (iperf3's rows carry bytes only). ``flow_types`` maps
    the spec's flow names to their types.
    """
    if getattr(ref, "bits", "payload") != "ip" or flow_types[ref.flow] == "multicast":
        return None
    return (f"bits: 'ip' counts headers per received packet, and only multicast flows "
            f"count packets; {ref.flow!r} is a {flow_types[ref.flow]} flow")


class Utilisation(_Reference):
    """Sum of the flows' mean throughputs over a link capacity."""

    kind: Literal["utilisation"]
    flows: list[str] = Field(min_length=1)
    capacity: PositiveRate
    paper: float = Field(ge=0)


class Fairness(_Reference):
    """Jain's fairness index over the flows' mean throughputs (RLC footnote 3)."""

    kind: Literal["fairness"]
    flows: list[str] = Field(min_length=2)
    paper: float = Field(ge=0, le=1, description="between 1/n and 1 for n flows")

    @model_validator(mode="after")
    def _jain_range(self) -> Fairness:
        low = 1 / len(self.flows)
        if self.paper < low - 1e-12:
            raise ValueError(f"paper: {self.paper:g} is outside the allowed range [{low:.4g}, 1] "
                             f"(Jain's index of {len(self.flows)} flows is at least 1/n)")
        return self


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


class MeasureRef(_Reference):
    """A value computed by an analysis plugin: ``measure(run, **args)``, in its declared unit.

    The plugin module is imported when the spec is validated, so an unknown
    measure or an argument it does not take fails at load time. ``paper`` and
    the bounds of ``within`` are written with the measure's unit ('0.2s';
    bare numbers or percentages for dimensionless measures).

    ``paper`` may be left out where the paper gives no number (a baseline the text
    only describes): the row is then reported without a paper value, judged by
    ``within`` alone if it has one, and refused with a ``tolerance``, which is
    relative to a paper value.
    """

    kind: Literal["measure"]
    measure: str = Field(description="plugin name, e.g. 'webrc.artt'")
    args: dict[str, Any] = Field(default_factory=dict, description="keyword arguments")
    paper: float | None = Field(
        None, description="the paper's value; omitted where the paper gives no number (the "
        "row is reported without one, and judged only by 'within' if it has one)")

    @model_validator(mode="after")
    def _tolerance_needs_paper(self) -> MeasureRef:
        # A relative tolerance is a band around the paper's value: without one there is
        # nothing to be relative to, and a silent n/a would hide the mistake.
        if self.paper is None and self.tolerance is not None:
            raise ValueError("tolerance: a relative tolerance needs a paper value; give "
                             "'paper', or judge by 'within' alone")
        return self

    @model_validator(mode="before")
    @classmethod
    def _in_unit(cls, data: Any) -> Any:
        """Check the measure and its arguments; parse paper and within in its unit."""
        from mcclab.model.plugins import UNITS, PluginError, get_measure

        if not isinstance(data, dict) or not isinstance(data.get("measure"), str):
            return data  # the field checks report what is missing
        try:
            plugin = get_measure(data["measure"])
        except PluginError as exc:
            raise ValueError(f"measure: {exc}") from None
        args = data.get("args") or {}
        if isinstance(args, dict):
            try:
                plugin.check_args(args, leading=1)
            except PluginError as exc:
                raise ValueError(f"args: {exc}") from None
            problem = fraction_problem(args)
            if problem:
                raise ValueError(problem)
        unit = UNITS[plugin.unit]
        out = dict(data)
        for key in ("paper", "within"):
            value = out.get(key)
            try:
                if key == "paper" and value is not None:
                    out[key] = unit.parse(value)
                elif key == "within" and isinstance(value, list | tuple):
                    out[key] = tuple(unit.parse(v) for v in value)
            except ValueError as exc:
                raise ValueError(f"{key}: {exc} (measure {plugin.name} is in "
                                 f"'{plugin.unit}')") from None
        return out

    @property
    def unit(self) -> str:
        """The measure's unit."""
        from mcclab.model.plugins import get_measure

        return get_measure(self.measure).unit

    @field_serializer("paper")
    def _write_paper(self, value: float | None) -> Any:
        """Back to the unit-bearing form, so a dumped spec validates again."""
        from mcclab.model.plugins import UNITS

        return None if value is None else UNITS[self.unit].write(value)

    @field_serializer("within")
    def _write_within(self, value: tuple[float, float] | None) -> Any:
        """Both bounds in the unit-bearing form."""
        from mcclab.model.plugins import UNITS

        return None if value is None else [UNITS[self.unit].write(v) for v in value]


def accepted_band(paper: float | None, tolerance: float | None,
                  within: tuple[float, float] | None) -> tuple[float, float] | None:
    """The values a criterion accepts: the tolerance's interval around ``paper``, the
    ``within`` range, or their intersection when it has both (the verdict needs both);
    None when it has neither (reported only). Either end may be infinite.

    Without a paper value (``paper`` None) a tolerance has nothing to be relative to
    and is ignored (the spec refuses that pair); the band is ``within``'s alone."""
    if paper is None:
        tolerance = None
    if tolerance is None and within is None:
        return None
    lo, hi = -math.inf, math.inf
    if tolerance is not None and paper is not None:
        lo, hi = paper - tolerance * abs(paper), paper + tolerance * abs(paper)
    if within is not None:
        lo, hi = max(lo, within[0]), min(hi, within[1])
    return lo, hi


# The values each built-in kind can take: fractions in [0, 1] (Jain's index of n flows is at
# least 1/n, but [0, 1] holds for any n), rates and their ratios from 0 upwards. A measure's
# domain is its plugin's (``@measure(..., domain=...)``).
KIND_DOMAINS: dict[str, tuple[float, float]] = {
    "share": (0.0, 1.0), "utilisation": (0.0, 1.0), "loss": (0.0, 1.0),
    "fairness": (0.0, 1.0), "throughput": (0.0, math.inf), "ratio": (0.0, math.inf),
}


def domain_of(kind: str, measure: str | None = None) -> tuple[float, float] | None:
    """The closed range of values a quantity of ``kind`` can take; None when it has none.

    For a ``measure`` it is what the plugin ``measure`` declares (None when the plugin
    declares none or is not registered: a result folder may outlive its plugin).
    """
    if kind != "measure":
        return KIND_DOMAINS.get(kind)
    from mcclab.model.plugins import PluginError, get_measure

    if measure is None:
        return None
    try:
        return get_measure(measure).domain
    except PluginError:
        return None


def fraction_problem(args: dict[str, Any]) -> str | None:
    """Why a plugin's ``*_frac`` arguments do not make a window inside the run (None: they do).

    By convention (as ``flow``/``flows`` name flows) an argument ending in
    ``_frac`` is a fraction of the run's duration: in [0, 1], and
    ``start_frac`` before ``end_frac``. Other arguments are the plugin's own.
    """
    for key, value in args.items():
        if not key.endswith("_frac") or isinstance(value, bool):
            continue
        if not isinstance(value, int | float) or not 0 <= value <= 1:
            return (f"args.{key}: {value!r} is outside the allowed range [0, 1] "
                    "(a fraction of the run)")
    start, end = args.get("start_frac"), args.get("end_frac")
    if isinstance(start, int | float) and isinstance(end, int | float) and end <= start:
        return (f"args.end_frac: {end:g} is outside the allowed range ({start:g}, 1] "
                "(the window ends after start_frac)")
    return None


def plugin_arg_flows(ref: Any) -> list[tuple[str, str]]:
    """(field, flow) pairs a measure names in its ``args``: by convention ``flow`` and ``flows``.

    Measures may take flows under other names too; only these two are checked.
    """
    args = getattr(ref, "args", None) or {}
    out = []
    if isinstance(args.get("flow"), str):
        out.append(("args.flow", args["flow"]))
    if isinstance(args.get("flows"), list):
        out += [(f"args.flows[{j}]", f) for j, f in enumerate(args["flows"]) if isinstance(f, str)]
    return out


Reference = Annotated[
    Throughput | Share | Utilisation | Fairness | Loss | Ratio | MeasureRef,
    Field(discriminator="kind"),
]
REFERENCE_KINDS = frozenset(
    {"throughput", "share", "utilisation", "fairness", "loss", "ratio", "measure"})


class FigureRef(StrictModel):
    """A plugin figure: ``fn(run, folder, **args)``, or ``fn(sweep, folder, **args)`` in a sweep.

    The name and arguments are checked when the spec is validated.
    """

    figure: str = Field(description="plugin name, e.g. 'webrc.artt'")
    args: dict[str, Any] = Field(default_factory=dict, description="keyword arguments")

    def plugin(self, sweep: bool = False) -> Any:
        """The registered plugin (raises PluginError when unknown)."""
        from mcclab.model.plugins import get_figure, get_sweep_figure

        return (get_sweep_figure if sweep else get_figure)(self.figure)

    def check(self, sweep: bool = False) -> str | None:
        """Why this figure cannot be drawn ('figure: ...', 'args: ...'), or None."""
        from mcclab.model.plugins import PluginError

        try:
            plugin = self.plugin(sweep)
        except PluginError as exc:
            return f"figure: {exc}"
        try:
            plugin.check_args(self.args, leading=2)
        except PluginError as exc:
            return f"args: {exc}"
        return fraction_problem(self.args)

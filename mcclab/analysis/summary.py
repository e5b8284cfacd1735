"""The paper-versus-measured summary of a run (``summary.json``) and its wording.

Each reference quantity of the spec is measured over the run's window with
:mod:`mcclab.analysis.metrics` and judged against the paper's value:

* ``within: [lo, hi]`` passes when ``lo <= measured <= hi``;
* ``tolerance: 10%`` passes when ``|measured - paper| <= 0.10 * |paper|``;
* with both, every given criterion must hold; with neither, the verdict is
  ``n/a`` (there is nothing to judge against);
* a ``measure`` may have no paper value (``paper`` null: the paper gives no
  number). Then only ``within`` judges it; without ``within`` it is ``n/a``,
  shown as "reported, no paper value" (:data:`NO_PAPER`). The spec refuses a
  ``tolerance`` without a paper value, since it is relative to one;
* ``n/a`` also when the quantity cannot be measured (no data for a flow,
  empty window), and ``measured`` is then ``null``;
* ``error`` when a ``measure`` plugin raised: ``measured`` is ``null`` and
  ``error`` holds the exception, so one broken plugin costs one row, not the
  report.

A pass or fail is *marginal* when the measured value lies within 10 % of the
band's half-width of one of its edges, on either side (:func:`margin`): such a
verdict would turn over with a small change of the measurement, so the report
and the criterion tables label it. Only an edge a value can cross counts: one at
or beyond the end of the quantity's domain (a share of 1, a loss of 0; see
:func:`mcclab.model.quantities.domain_of`) cannot be crossed, so a value on it
is not marginal.

Where a quantity names a ``node``, its main flow (``flow``, ``numerator``) is
measured at that node; the other flows it names (``of_flows``,
``denominator``) are measured at that node when they are received there, and
otherwise as their mean over their receivers.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from mcclab.analysis import metrics, plugins
from mcclab.analysis.results import Run, Status
from mcclab.analysis.stalls import Stalls, agent_hosts, assess
from mcclab.model.quantities import (
    Fairness,
    Loss,
    MeasureRef,
    Ratio,
    Reference,
    Share,
    Throughput,
    Utilisation,
    accepted_band,
    domain_of,
)

Verdict = Literal["pass", "fail", "n/a", "error"]
# A verdict whose margin (distance to the band's nearest edge over its half-width) is
# below this is marginal.
MARGINAL = 0.10
# Kinds shown as percentages; fairness and ratio read better as plain numbers.
PERCENT_KINDS = {"share", "utilisation", "loss"}
# Shown where the verdict would be, for a row with neither a paper value nor a range.
NO_PAPER = "reported, no paper value"


class Quantity(BaseModel):
    """One row of the summary: a reference quantity, paper and measured values, verdict."""

    label: str
    kind: str
    source: str
    paper: float | None = Field(description="null: the paper gives no number (a 'measure' only)")
    measured: float | None
    unit: str = Field(description="bit/s, fraction, or a measure's unit (see plugins.UNITS)")
    tolerance: float | None
    within: tuple[float, float] | None
    verdict: Verdict
    margin: float | None = Field(
        None, description="distance inside the band to its nearest edge a value can cross "
        "(negative: outside) over its half-width; null: no edge can be crossed")
    marginal: bool = Field(False, description="a pass or fail within 10 % of a band edge")
    measure: str | None = Field(None, description="the plugin of a 'measure' quantity")
    error: str | None = Field(None, description="why a measure plugin failed")
    # Why the verdict is what it is; shown in the report, kept out of the JSON
    # so summary.json is exactly the contract.
    note: str = Field("", exclude=True)

    @model_serializer(mode="wrap")
    def _contract(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Only 'measure' rows carry the plugin name and error; the others keep the contract."""
        data = handler(self)
        if self.kind != "measure":
            data.pop("measure", None)
            data.pop("error", None)
        return data

    @property
    def domain(self) -> tuple[float, float] | None:
        """The values this quantity can take (None: unbounded, or a measure without one)."""
        return domain_of(self.kind, self.measure)


class Summary(BaseModel):
    """``summary.json``."""

    experiment: str
    run_id: str
    status: Status
    window: tuple[float, float]
    quantities: list[Quantity]
    agent_stalls: Stalls | None = Field(
        None, description="whether the machine kept up with the agents (null: no agents table)")

    def counts(self) -> dict[str, int]:
        """How many quantities pass, fail, are n/a, or could not be computed (error)."""
        out = {"pass": 0, "fail": 0, "n/a": 0, "error": 0}
        for q in self.quantities:
            out[q.verdict] += 1
        return out


def judge(measured: float, paper: float | None, tolerance: float | None,
          within: tuple[float, float] | None) -> Verdict:
    """The verdict for a measured value, per the rules in the module docstring."""
    if paper is None:
        tolerance = None  # relative to nothing; the spec refuses it, so this is a guard
    if not math.isfinite(measured) or (tolerance is None and within is None):
        return "n/a"
    ok = True
    if within is not None:
        ok &= within[0] <= measured <= within[1]
    if tolerance is not None and paper is not None:
        # A hair of slack so that 'exactly 10% off' passes despite float rounding.
        ok &= abs(measured - paper) <= tolerance * abs(paper) * (1 + 1e-9) + 1e-12
    return "pass" if ok else "fail"


def margin(measured: float, paper: float | None, tolerance: float | None,
           within: tuple[float, float] | None,
           domain: tuple[float, float] | None = None) -> float | None:
    """How far a value sits inside its band, as a fraction of the band's half-width.

    Inside the band it is the distance to the nearest edge a value can cross, over
    the half-width: 1 at the centre of a band whose edges both lie inside the
    quantity's ``domain``, 0 on a crossable edge. An edge at or beyond an end of
    ``domain`` cannot be crossed (no share exceeds 1), so it does not count: a value
    on it is as far from turning over as the other edge is, up to 2; with no
    crossable edge the verdict cannot turn over and the margin is None. Outside the
    band (a fail) it is minus the distance to the nearest edge over the half-width.
    None as well when there is no finite band or value. With a tolerance and a
    range, the band is their intersection, as the verdict requires both.
    """
    band = accepted_band(paper, tolerance, within)
    if not math.isfinite(measured) or band is None:
        return None
    lo, hi = band
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return None
    half = (hi - lo) / 2
    if measured < lo or measured > hi:
        return -max(lo - measured, measured - hi) / half
    low_end, high_end = domain if domain is not None else (-math.inf, math.inf)
    inside = [measured - lo] if lo > low_end else []
    inside += [hi - measured] if hi < high_end else []
    return min(inside) / half if inside else None


def is_marginal(verdict: str, value: float | None) -> bool:
    """A pass or fail whose :func:`margin` ``value`` is within :data:`MARGINAL` of 0."""
    return verdict in ("pass", "fail") and value is not None and abs(value) < MARGINAL


def unjudged_without_paper(paper: float | None, within: tuple[float, float] | None) -> bool:
    """A row with no paper value and no range: reported only, never judged."""
    return paper is None and within is None


def shown_verdict(q: Quantity) -> str:
    """The verdict as the reports show it: :data:`NO_PAPER` for a row with neither a
    paper value nor a range (its ``verdict`` stays 'n/a' in the JSON), else the verdict."""
    if q.verdict == "n/a" and unjudged_without_paper(q.paper, q.within):
        return NO_PAPER
    return q.verdict


class _Measure:
    """Measuring the flows of one run over its window."""

    def __init__(self, run: Run):
        """Measure over the run's per-second table and window."""
        self.run = run
        self.table = run.per_second
        self.window = run.window

    def rate(self, flow: str, node: str | None, main: bool = True, header_bytes: int = 0) -> float:
        """A flow's mean rate; ``node`` falls back to all receivers for non-main flows."""
        if node is not None and not main and node not in metrics.receivers(self.table, flow):
            node = None
        return metrics.throughput(self.table, flow, self.window, node, header_bytes)

    def value(self, ref: Reference) -> float:
        """The measured value of a reference quantity (``nan`` when not measurable)."""
        match ref:
            case Throughput():
                return self.rate(ref.flow, ref.node)
            case Share():
                if ref.capacity is not None:
                    denominator = ref.capacity
                else:
                    denominator = sum(self.rate(f, ref.node, main=False) for f in ref.of_flows)
                headers = metrics.IP_UDP if ref.bits == "ip" else 0
                return _divide(self.rate(ref.flow, ref.node, header_bytes=headers), denominator)
            case Utilisation():
                return metrics.utilisation([self.rate(f, None) for f in ref.flows], ref.capacity)
            case Fairness():
                return metrics.jain_index([self.rate(f, None) for f in ref.flows])
            case Loss():
                return metrics.flow_loss(self.table, ref.flow, self.window, ref.node)
            case Ratio():
                return _divide(self.rate(ref.numerator, ref.node),
                               self.rate(ref.denominator, ref.node, main=False))
            case MeasureRef():
                return float(plugins.get_measure(ref.measure).fn(self.run, **ref.args))
        raise TypeError(f"unknown reference kind {type(ref).__name__}")

    def why_missing(self, ref: Reference) -> str:
        """Why a quantity could not be measured, for the report."""
        start, end = self.window
        if end <= start:
            return "no measurement window (the run ended before the warm-up did)"
        if isinstance(ref, MeasureRef):
            return f"{ref.measure} found nothing to measure"
        flows = [getattr(ref, k) for k in ("flow", "numerator", "denominator") if hasattr(ref, k)]
        flows += list(getattr(ref, "flows", [])) + list(getattr(ref, "of_flows", []))
        present = set(self.table["flow"])
        absent = [f for f in flows if f not in present]
        if absent:
            return f"no data for flow(s) {', '.join(absent)}"
        node = getattr(ref, "node", None)
        main = getattr(ref, "flow", None) or getattr(ref, "numerator", None)
        if node and main and node not in metrics.receivers(self.table, main):
            return f"flow {main} has no data at node {node}"
        if ref.kind == "loss":
            return "no packet counts in the window"
        return "undefined (e.g. a zero denominator, or every flow at zero)"


def _divide(numerator: float, denominator: float) -> float:
    """numerator / denominator, nan for a zero or undefined denominator."""
    return numerator / denominator if denominator and math.isfinite(denominator) else math.nan


def unit_of(ref: Reference) -> str:
    """The unit a reference quantity is measured in."""
    if isinstance(ref, MeasureRef):
        return ref.unit
    return "bit/s" if ref.kind == "throughput" else "fraction"


def evaluate(ref: Reference, run: Run) -> Quantity:
    """Measure and judge one reference quantity; a failing measure plugin gives 'error'."""
    measure = _Measure(run)
    unit = unit_of(ref)
    common = {"label": ref.label, "kind": ref.kind, "source": ref.source, "paper": ref.paper,
              "unit": unit, "tolerance": ref.tolerance, "within": ref.within,
              "measure": ref.measure if isinstance(ref, MeasureRef) else None}
    try:
        value = measure.value(ref)
    except Exception as exc:  # noqa: BLE001 - a plugin bug costs its row, not the report
        if not isinstance(ref, MeasureRef):
            raise
        message = f"{type(exc).__name__}: {exc}"
        return Quantity(**common, measured=None, verdict="error", error=message,
                        note=f"{ref.measure} failed: {message}")
    verdict = judge(value, ref.paper, ref.tolerance, ref.within)
    measured = value if math.isfinite(value) else None
    inside = margin(value, ref.paper, ref.tolerance, ref.within,
                    domain_of(ref.kind, ref.measure if isinstance(ref, MeasureRef) else None))
    marginal = is_marginal(verdict, inside)
    if measured is None:
        note = measure.why_missing(ref)
    else:
        note = describe(ref.kind, value, ref.paper, ref.tolerance, ref.within, unit)
        if marginal:
            note += "; marginal: within 10 % of the band's edge"
    return Quantity(**common, measured=measured, verdict=verdict, note=note,
                    margin=inside if verdict in ("pass", "fail") else None, marginal=marginal)


def summarise(run: Run) -> Summary:
    """The summary of a run: every reference quantity measured and judged."""
    start, end = run.window
    return Summary(
        experiment=run.info.experiment, run_id=run.info.run_id, status=run.info.status,
        window=(start, end), quantities=[evaluate(ref, run) for ref in run.spec.references],
        agent_stalls=assess(run.agents, (start, end), hosts=agent_hosts(run.path)),
    )


def write_summary(run: Run) -> Path:
    """Write ``summary.json`` into the run's folder and return its path."""
    path = run.path / "summary.json"
    path.write_text(summarise(run).model_dump_json(indent=2) + "\n")
    return path


# ---------------------------------------------------------------- wording


def format_value(kind: str, value: float | None, unit: str = "") -> str:
    """A quantity's value for people: '2.91 Mbit/s', '93.4 %', '0.987', '150 ms'.

    ``unit`` matters for ``measure`` quantities, which carry their plugin's unit.
    """
    if value is None or not math.isfinite(value):
        return "–"
    if kind == "measure":
        return plugins.show(value, unit or "1")
    if kind == "throughput":
        return format_rate(value)
    if kind in PERCENT_KINDS:
        return f"{value * 100:.3g} %"
    return f"{value:.3g}"


def format_rate(bps: float) -> str:
    """bit/s with a readable unit and three significant digits."""
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if abs(bps) >= scale:
            return f"{bps / scale:.3g} {unit}"
    return f"{bps:.3g} bit/s"


def format_criterion(q: Quantity) -> str:
    """The acceptance criterion: '±10 %', '[0.9, 1]', or both."""
    parts = []
    if q.tolerance is not None:
        parts.append(f"±{q.tolerance * 100:.3g} %")
    if q.within is not None:
        parts.append(f"[{format_value(q.kind, q.within[0], q.unit)}, "
                     f"{format_value(q.kind, q.within[1], q.unit)}]")
    return " and ".join(parts) or "none"


def describe(kind: str, measured: float, paper: float | None, tolerance: float | None,
             within: tuple[float, float] | None, unit: str = "") -> str:
    """One sentence explaining the verdict, e.g. '9.4 % below the paper's value; allowed ±10 %'."""
    if paper is None:
        if within is None:
            return "the paper gives no number for it, and the spec no range: reported only"
        where = "inside" if within[0] <= measured <= within[1] else "outside"
        return (f"the paper gives no number for it; {where} "
                f"[{format_value(kind, within[0], unit)}, {format_value(kind, within[1], unit)}]")
    parts = []
    if paper:
        off = (measured - paper) / abs(paper)
        side = "above" if off > 0 else "below"
        parts.append("equal to the paper's value" if off == 0
                     else f"{abs(off) * 100:.3g} % {side} the paper's value")
    else:
        parts.append(f"paper's value is 0, measured {format_value(kind, measured, unit)}")
    if tolerance is not None:
        parts.append(f"allowed ±{tolerance * 100:.3g} %")
    if within is not None:
        where = "inside" if within[0] <= measured <= within[1] else "outside"
        parts.append(f"{where} [{format_value(kind, within[0], unit)}, "
                     f"{format_value(kind, within[1], unit)}]")
    if tolerance is None and within is None:
        parts.append("no tolerance or 'within' in the spec, so no verdict")
    return "; ".join(parts)

"""ORMCC analysis plugins: CR tracking, CI suppression, rate ratios, the paper's figures.

The CR and CI quantities come from the cores' gauges (``tables/protocol.csv``,
see :mod:`agents.ormcc.measures`); rates from ``per_second.csv``.
Period bounds are fractions of the run's duration so that a time-scaled
profile measures the same periods.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from agents.ormcc import measures as om
from mcclab.analysis import metrics
from mcclab.analysis.figures import STYLE, save
from mcclab.analysis.plugins import figure, measure
from mcclab.analysis.protocols.tracking import rate_with_switches
from mcclab.analysis.results import Run


def _nodes_of(run: Run, flow: str) -> list[str]:
    rows = run.per_second[run.per_second["flow"] == flow]
    return sorted(set(rows["node"]))


def _period(run: Run, start_frac: float, end_frac: float) -> tuple[float, float]:
    duration = run.info.duration_s
    return start_frac * duration, end_frac * duration


@measure("ormcc.suppression", unit="1", domain=(0, 1))
def suppression(run: Run, flow: str, whole_run: bool = True) -> float:
    """Suppressed CIs over all CIs the receivers' losses triggered (sec. V-D).

    Over the whole run (as the paper counts) unless ``whole_run`` is false, then
    over the measurement window.
    """
    start = 0.0 if whole_run else run.window[0]
    return om.suppression_ratio(run, flow, start, run.window[1])


@measure("ormcc.feedback_volume", unit="1")
def feedback_volume(run: Run, flow: str, whole_run: bool = True) -> float:
    """CIs sent over what one receiver would send without suppression (sec. V-D's
    criterion: 816 sent against 553 per receiver, 1.48, "less than 2").

    Independent of the number of receivers, unlike the suppression ratio.
    """
    start = 0.0 if whole_run else run.window[0]
    sent = om.counter_delta(run, flow, "ci_sent", start, run.window[1])
    suppressed = om.counter_delta(run, flow, "ci_suppressed", start, run.window[1])
    if sent.empty or (sent.sum() + suppressed.sum()) == 0:
        return math.nan
    per_receiver = (sent.sum() + suppressed.sum()) / len(sent)
    return float(sent.sum() / per_receiver)


@measure("ormcc.ci_sent", unit="1")
def ci_sent(run: Run, flow: str) -> float:
    """CIs sent by all receivers of ``flow`` over the whole run (Table II's feedback count)."""
    sent = om.counter_delta(run, flow, "ci_sent", 0.0, run.window[1])
    return float(sent.sum()) if not sent.empty else math.nan


@measure("ormcc.cr_share", unit="1", domain=(0, 1))
def cr_share(run: Run, flow: str, node: str, start_frac: float = 0.0,
             end_frac: float = 1.0) -> float:
    """Fraction of the seconds in [start_frac, end_frac] of the run whose valid CR is ``node``."""
    start, end = _period(run, start_frac, end_frac)
    return om.cr_share(run, flow, [node], start, end)


@measure("ormcc.leaf_ratio", unit="1")
def leaf_ratio(run: Run, numerator: str, flows: list[str], statistic: str = "mean") -> float:
    """Rate of ``numerator`` over each flow of ``flows`` at that flow's receiver; the mean
    (or min, max) over those receivers.

    ``numerator`` may contain ``{i}``: it is then the i-th numerator for the i-th
    flow (``uni{i}`` against ``tcp{i}``).
    """
    ratios = []
    for i, flow in enumerate(flows, start=1):
        num = numerator.replace("{i}", str(i)) if "{i}" in numerator else numerator
        for node in _nodes_of(run, flow):
            den = metrics.throughput(run.per_second, flow, run.window, node)
            got = metrics.throughput(run.per_second, num, run.window, node)
            if den > 0 and not math.isnan(got):
                ratios.append(got / den)
    if not ratios:
        return math.nan
    series = pd.Series(ratios)
    return float({"mean": series.mean, "min": series.min, "max": series.max}[statistic]())


@measure("ormcc.rtt_cr", unit="s")
def rtt_cr(run: Run, flow: str) -> float:
    """Mean of the source's RTT_cr over the window."""
    table = om.gauge(run, flow, "rtt_cr_s")
    if table.empty:
        return math.nan
    lo, hi = run.window
    window = table[(table.index > lo) & (table.index <= hi)].iloc[:, 0]
    return float(window.mean()) if not window.empty else math.nan


def loss_event_rate(run: Run, flow: str) -> float:
    """Loss events per packet sent to ``flow``'s receivers over the window.

    Each receiver's ``loss_events`` (sequence gaps, one CI each if sent) over the
    packets it received or lost, summed over the receivers.
    """
    lo, hi = run.window
    events = om.counter_delta(run, flow, "loss_events", lo, hi).sum()
    rows = run.per_second[(run.per_second["flow"] == flow) & (run.per_second["t"] > lo)
                          & (run.per_second["t"] <= hi)]
    packets = rows["packets"].sum() + rows["lost"].sum()
    return float(events / packets) if packets > 0 else math.nan


@measure("ormcc.aimd_ratio", unit="1")
def aimd_ratio(run: Run, flow: str, reference: str) -> float:
    """The rate of ``flow`` over ``reference`` that AIMD's RTT bias predicts from the run's
    own RTT_cr and loss-event rates: (RTT_ref / RTT_flow) * sqrt(p_ref / p_flow).

    Each source raises its rate by s/RTT_cr per RTT_cr and cuts it by a fixed
    factor per loss event, so its mean rate goes as 1 / (RTT * sqrt(p)) (the
    square-root law; s and beta cancel in the ratio). Proportional fairness
    (sec. V-B) would make the long flow's rate independent of its RTT.
    """
    rtts = [rtt_cr(run, f) for f in (flow, reference)]
    rates = [loss_event_rate(run, f) for f in (flow, reference)]
    if not all(math.isfinite(x) and x > 0 for x in [*rtts, *rates]):
        return math.nan
    return (rtts[1] / rtts[0]) * math.sqrt(rates[1] / rates[0])


def _rate_at(run: Run, flow: str, node: str) -> pd.Series:
    """Per-second throughput of ``flow`` at ``node`` (0 for missing seconds)."""
    t = run.per_second
    rows = t[(t["flow"] == flow) & (t["node"] == node)].set_index("t")["throughput_bps"]
    full = pd.RangeIndex(1, int(t["t"].max()) + 1) if not t.empty else pd.RangeIndex(0)
    return rows.groupby(level=0).sum().reindex(full, fill_value=0.0)


@figure("ormcc.running_average")
def running_average_figure(run: Run, folder: Path, node: str, flows: list[str],
                           name: str = "ormcc-fig4") -> list[Path]:
    """Over-time average rates at one receiver (traffic in [0, t] over t), as ORMCC Fig. 4."""
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
        for flow in flows:
            rate = _rate_at(run, flow, node)
            if rate.empty or not rate.any():
                continue
            avg = rate.cumsum() / pd.Series(rate.index, index=rate.index)
            ax.plot(avg.index, avg / 1e3, label=flow)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("over-time average rate (kbit/s)")
        ax.set_title(f"average rates at {node}")
        ax.legend()
        return save(fig, folder, f"{name}-{node}")


@figure("ormcc.tracking")
def tracking_figure(run: Run, folder: Path, flow: str, name: str = "ormcc-tracking"
                    ) -> list[Path]:
    """The source's sending rate with a dashed line at every CR change, as ORMCC Fig. 8."""
    rate = om.gauge(run, flow, "rate_bps")
    if rate.empty:
        return []
    return rate_with_switches(rate.iloc[:, 0], list(om.cr_switches(run, flow)),
                              "sending rate (kbit/s)",
                              f"{flow}: sending rate; dashed: CR changes", folder,
                              f"{name}-{flow}")

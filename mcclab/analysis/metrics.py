"""The shared metrics: throughput, Jain's fairness, utilisation, loss and convergence time.

Every experiment's numbers come from here, so that two protocols are always
measured the same way. The inputs are the tidy per-second table of a run
(``tables/per_second.csv``: one row per second, flow and receiving node, where
``t`` is the *end* of the one-second interval) and the measurement window
``(start, end)`` in seconds since the experiment started.

Definitions (also in ``docs/results.md``):

* The window holds the one-second intervals that lie entirely inside it: the
  rows with ``start + 1 <= t <= end``. Their number is the window's length.
* **Throughput** of a flow at a node is the bits it received in the window
  divided by the window's length. A second without a row counts as zero (a
  receiver that got nothing may write no row). A flow's throughput without a
  node is the mean over its receivers (the nodes with rows for it). Its bits
  are payload bits, unless IP bits are asked for: then each received packet
  also counts its 28 bytes of IPv4 and UDP header (:data:`IP_UDP`), the bits
  an emulated link carries (ns-2 counts whole packets).
* **Loss rate** is lost / (received + lost) packets, summed over the window
  (and over the receivers when no node is given), as RTP counts it.
* **Jain's fairness index** (RLC paper, footnote 3):
  ``(sum T)^2 / (N * sum T^2)``; 1 when all N flows get the same, 1/N when one
  gets everything.
* **Utilisation** is the sum of the flows' throughputs over a capacity; a
  link's utilisation from its byte counter is bytes sent in the window * 8 over
  capacity * window length.
* **Convergence time**: see :func:`convergence_time`.

Functions return ``nan`` when there is no data to compute from, never raise on
empty input, so an interrupted run still yields a summary.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

Window = tuple[float, float]
"""(start, end) of the measurement window, seconds since the experiment started."""

IP_UDP = 28
"""Bytes of IPv4 and UDP header on every datagram: what the links carry besides the payload."""


def window_seconds(window: Window) -> list[int]:
    """The interval end times ``t`` of the whole one-second intervals inside the window."""
    start, end = window
    first, last = math.ceil(start + 1 - 1e-9), math.floor(end + 1e-9)
    return list(range(first, last + 1))


def in_window(table: pd.DataFrame, window: Window) -> pd.DataFrame:
    """The rows of a per-second table whose interval lies inside the window."""
    seconds = window_seconds(window)
    if not seconds:
        return table.iloc[0:0]
    return table[(table["t"] >= seconds[0]) & (table["t"] <= seconds[-1])]


def mean_rate(series: pd.Series, window: Window) -> float:
    """Mean of a per-second rate series (indexed by interval end ``t``) over the window.

    Seconds without a sample count as zero; an empty window gives ``nan``.
    """
    seconds = window_seconds(window)
    if not seconds:
        return math.nan
    inside = series[(series.index >= seconds[0]) & (series.index <= seconds[-1])]
    return float(inside.sum()) / len(seconds)


def _rows(table: pd.DataFrame, flow: str, node: str | None) -> pd.DataFrame:
    """The rows of one flow (at one node if given)."""
    rows = table[table["flow"] == flow]
    return rows if node is None else rows[rows["node"] == node]


def receivers(table: pd.DataFrame, flow: str) -> list[str]:
    """The nodes that have rows for a flow anywhere in the table, sorted."""
    return sorted(table.loc[table["flow"] == flow, "node"].unique())


def throughput(table: pd.DataFrame, flow: str, window: Window, node: str | None = None,
               header_bytes: int = 0) -> float:
    """Mean received rate (bit/s) of a flow at a node, or averaged over its receivers.

    ``header_bytes`` are added per received packet (``IP_UDP`` gives the bits
    on the link of a datagram flow). ``nan`` when the flow (at that node) has
    no rows at all, or the window is empty.
    """
    nodes = [node] if node is not None else receivers(table, flow)
    rates = []
    for n in nodes:
        rows = _rows(table, flow, n)
        if rows.empty:
            continue
        # Several rows for the same second and node would be a runner bug;
        # summing them keeps the bits rather than silently dropping some.
        bits = rows["throughput_bps"]
        if header_bytes:
            bits = bits + rows["packets"] * (8 * header_bytes)
        series = bits.groupby(rows["t"]).sum()
        rates.append(mean_rate(series, window))
    return float(np.mean(rates)) if rates else math.nan


def loss_rate(received: float, lost: float) -> float:
    """lost / (received + lost); ``nan`` when no packet was expected."""
    expected = received + lost
    if not expected > 0:  # also catches nan
        return math.nan
    return lost / expected


def flow_loss(table: pd.DataFrame, flow: str, window: Window, node: str | None = None) -> float:
    """Loss rate of a flow over the window, at a node or over all its receivers."""
    rows = in_window(_rows(table, flow, node), window)
    if rows.empty or rows["lost"].isna().all():
        return math.nan
    return loss_rate(float(rows["packets"].sum()), float(rows["lost"].sum()))


def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index of the values; ``nan`` if empty, any is nan, or all are zero."""
    xs = np.asarray(values, dtype=float)
    if xs.size == 0 or np.isnan(xs).any():
        return math.nan
    square_sum = float(np.sum(xs * xs))
    if square_sum == 0:
        return math.nan  # 0/0: nobody got anything, so fairness is undefined
    return float(np.sum(xs)) ** 2 / (xs.size * square_sum)


def utilisation(rates: Sequence[float], capacity_bps: float) -> float:
    """Sum of the rates over the capacity; ``nan`` if any rate is nan."""
    xs = np.asarray(rates, dtype=float)
    if xs.size == 0 or np.isnan(xs).any() or capacity_bps <= 0:
        return math.nan
    return float(xs.sum()) / capacity_bps


def link_utilisation(counter: pd.Series, capacity_bps: float, window: Window) -> float:
    """Utilisation of a link from its cumulative ``bytes_out`` counter (indexed by ``t``).

    Bytes sent between the samples at the window's two ends, times 8, over
    capacity times the time between those samples. The samples used are the
    last one at or before the start and the last one at or before the end, so
    a counter sampled only until an interruption still gives a value.
    """
    start, end = window
    before, upto = counter[counter.index <= start], counter[counter.index <= end]
    if before.empty or upto.empty or capacity_bps <= 0:
        return math.nan
    t0, t1 = before.index[-1], upto.index[-1]
    if t1 <= t0:
        return math.nan
    return (float(upto.iloc[-1]) - float(before.iloc[-1])) * 8 / (capacity_bps * (t1 - t0))


def convergence_time(
    series: pd.Series, band: float = 0.1, final: float = 0.25, smooth: int = 1
) -> float:
    """Time from which a series stays within ±band of its final mean.

    ``series`` is indexed by time (sorted, e.g. per-second ``t``). Precisely:

    1. If ``smooth`` > 1 the series is first replaced by its trailing moving
       average over ``smooth`` samples (a sawtooth protocol never stays within
       a few percent second by second).
    2. The final mean ``m`` is the mean of the last ``ceil(final * n)`` samples
       (at least one).
    3. A sample is in the band when ``|x - m| <= band * |m|``.
    4. The result is the index (time) of the first sample from which every
       later sample is in the band. It is measured on the series' own axis, so
       subtract the time of the event that started the transient (a join, a
       competing flow's start) to get a duration.

    Returns ``nan`` for an empty series or when the last sample is out of band.
    """
    values = series.sort_index().astype(float)
    if smooth > 1:
        values = values.rolling(smooth, min_periods=1).mean()
    n = len(values)
    if n == 0:
        return math.nan
    tail = max(1, math.ceil(final * n))
    m = float(values.iloc[-tail:].mean())
    inside = (values - m).abs() <= band * abs(m) + 1e-12 * max(1.0, abs(m))
    if not inside.iloc[-1]:
        return math.nan
    # Last out-of-band sample; convergence starts at the sample after it.
    outside = np.flatnonzero(~inside.to_numpy())
    first = 0 if outside.size == 0 else int(outside[-1]) + 1
    return float(values.index[first])

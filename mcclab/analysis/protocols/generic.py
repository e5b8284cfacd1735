"""Protocol-independent plugins: rates over a chosen interval, convergence, rate figures.

They work on any run's ``tables/per_second.csv`` and double as the example
of a plugin module (``docs/experiments.md``, "Analysis plugins").
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from mcclab.analysis import metrics
from mcclab.analysis.figures import STYLE, rate_scale, save
from mcclab.analysis.plugins import figure, measure, sweep_figure
from mcclab.analysis.results import Run
from mcclab.analysis.sweep import Sweep, table_cell
from mcclab.analysis.trials import TRIAL_KEY, trials_table
from mcclab.model.units import parse_duration, parse_rate


def _interval(run: Run, start: str | None, end: str | None) -> metrics.Window:
    """The run's window, narrowed by optional start and end durations ('20s')."""
    lo, hi = run.window
    if start is not None:
        lo = max(lo, parse_duration(start))
    if end is not None:
        hi = min(hi, parse_duration(end))
    return (lo, hi)


@measure("generic.mean_rate", unit="bit/s")
def mean_rate(run: Run, flow: str, node: str | None = None, start: str | None = None,
              end: str | None = None) -> float:
    """Mean received rate of a flow (at a node, else over its receivers) in [start, end].

    ``start`` and ``end`` are durations since the experiment started and are
    clipped to the measurement window.
    """
    return metrics.throughput(run.per_second, flow, _interval(run, start, end), node)


@measure("generic.settling_time", unit="s")
def settling_time(run: Run, flow: str, node: str | None = None, band: float = 0.1,
                  final: float = 0.25, smooth: int = 5, after: str = "0s") -> float:
    """How long after ``after`` a flow's rate settles within ±band of its final mean.

    The flow's per-second rate (summed over ``node``'s rows, else the mean over
    its receivers) from ``after`` on goes through
    :func:`mcclab.analysis.metrics.convergence_time`; the result is counted
    from ``after``. ``nan`` when it never settles or there is no data.
    """
    rows = run.per_second[run.per_second["flow"] == flow]
    if node is not None:
        rows = rows[rows["node"] == node]
    if rows.empty:
        return math.nan
    origin = parse_duration(after)
    _, end = run.window
    rows = rows[(rows["t"] > origin) & (rows["t"] <= end)]
    receivers = max(1, rows["node"].nunique())
    series = rows.groupby("t")["throughput_bps"].sum() / receivers
    if series.empty:
        return math.nan
    return metrics.convergence_time(series, band=band, final=final, smooth=smooth) - origin


@figure("generic.rates")
def rates_figure(run: Run, folder: Path, flows: list[str] | None = None, smooth: int = 1,
                 name: str = "generic-rates") -> list[Path]:
    """Each flow's rate (mean over its receivers) over time, optionally smoothed."""
    table = run.per_second
    chosen = flows or list(table["flow"].unique())
    series = {}
    for flow in chosen:
        rows = table[table["flow"] == flow]
        if rows.empty:
            continue
        per_t = rows.groupby("t")["throughput_bps"].sum() / rows["node"].nunique()
        series[flow] = per_t.rolling(max(1, smooth), min_periods=1).mean()
    top = max((float(s.max()) for s in series.values()), default=0.0)
    scale, unit = rate_scale(top)
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(10.5, 3.6), layout="constrained")
        for flow, values in series.items():
            ax.plot(values.index, values / scale, lw=1.1, label=flow)
        start, _ = run.window
        if start > 0:
            ax.axvspan(0, start, color="#f2f2f2", zorder=0, lw=0)
        ax.set_xlabel("time (s)")
        ax.set_ylabel(f"rate ({unit})")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        if series:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=9)
        else:
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", color="grey")
        title = "mean rate per flow" + (f" ({smooth}-s moving average)" if smooth > 1 else "")
        fig.suptitle(f"{run.spec.name}: {title}", x=0.01, ha="left", fontsize=11)
        return save(fig, folder, name)


def _numeric(values: list[Any]) -> tuple[list[float], str] | None:
    """Swept values as numbers and their axis unit (plain, durations in s, rates scaled).

    None when they are not all numbers of one kind (then they are categories).
    """
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return [float(v) for v in values], ""
    for parse, unit in ((parse_duration, "s"), (parse_rate, "bit/s")):
        try:
            numbers = [float(parse(v)) for v in values]
        except (TypeError, ValueError):
            continue
        if unit == "bit/s":
            scale, unit = rate_scale(max(numbers))
            numbers = [n / scale for n in numbers]
        return numbers, unit
    return None


@sweep_figure("generic.sweep_quantity")
def sweep_quantity(sweep: Sweep, folder: Path, label: str, x: str | None = None,
                   by: str | None = None, name: str | None = None) -> list[Path]:
    """A reference quantity, measured in each run, against a swept key (paper values dashed)."""
    x = x or sweep.keys[0]
    if x not in sweep.keys or (by is not None and by not in sweep.keys):
        raise ValueError(f"x and by must be swept keys: {', '.join(sweep.keys)}")
    rows = sweep.quantity(label)
    unit = str(rows["unit"].iloc[0]) if len(rows) else ""
    scale, shown = (rate_scale(float(rows["measured"].max() or 0)) if unit == "bit/s"
                    else (1.0, "" if unit in ("1", "fraction") else unit))
    groups = [(None, rows)] if by is None else list(rows.groupby(by, sort=False))
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
        categories = list(dict.fromkeys(sweep.info.over[x]))
        numeric = _numeric(categories)
        numbers, x_unit = numeric if numeric is not None else (None, "")
        # Table cells hold non-scalar values as JSON; compare in that form.
        position = {table_cell(c): i for i, c in enumerate(categories)}
        for i, (value, part) in enumerate(groups):
            where = [position[v] for v in part[x]]
            xs = [numbers[w] for w in where] if numbers is not None else where
            colour = f"C{i % 10}"
            tag = f"{by}={value}" if by is not None else "measured"
            ax.plot(xs, part["measured"].astype(float) / scale, "o-", color=colour, label=tag)
            papers = part["paper"].astype(float)  # NaN where the paper gives no number
            if papers.notna().any():
                ax.plot(xs, papers / scale, "--", color=colour, lw=0.9,
                        alpha=0.7, label=None if by is not None else "paper")
        if numbers is None:
            ax.set_xticks(range(len(categories)), [str(c) for c in categories])
            ax.set_xlim(-0.5, len(categories) - 0.5)
        ax.set_xlabel(f"{x} ({x_unit})" if x_unit else x)
        ax.set_ylabel(f"{label} ({shown})" if shown else label)
        ax.set_ylim(bottom=0)
        if len(rows):
            ax.legend(fontsize=9)
        else:
            ax.text(0.5, 0.5, f"no run measured {label!r}", transform=ax.transAxes,
                    ha="center", color="grey")
        fig.suptitle(f"{sweep.info.experiment}: {label} by {x}", x=0.01, ha="left",
                     fontsize=11)
        stem = name or "sweep-" + re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-").lower()
        return save(fig, folder, stem)


@sweep_figure("generic.trials_quantity")
def trials_quantity(sweep: Sweep, folder: Path, label: str, name: str | None = None) -> list[Path]:
    """A quantity in each trial (seed), with the mean over them, ±1 sd and the paper's value."""
    if TRIAL_KEY not in sweep.keys or len(sweep.keys) != 1:
        raise ValueError(f"sweep over '{TRIAL_KEY}' alone needed; this one is over "
                         f"{', '.join(sweep.keys)}")
    rows = sweep.quantity(label)
    rows = rows[rows["status"] == "complete"]
    stats = trials_table(sweep)
    stats = stats[stats["label"] == label]
    unit = str(rows["unit"].iloc[0]) if len(rows) else ""
    scale, shown = (rate_scale(float(rows["measured"].max() or 0)) if unit == "bit/s"
                    else (1.0, "" if unit in ("1", "fraction") else unit))
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
        ax.plot(rows[TRIAL_KEY].astype(float), rows["measured"].astype(float) / scale, "o",
                color="C0", label="each run")
        if len(stats) and stats["runs"].iloc[0]:
            mean, sd = float(stats["mean"].iloc[0]), float(stats["sd"].iloc[0])
            ax.axhline(mean / scale, color="C0", label=f"mean of {stats['runs'].iloc[0]}")
            if math.isfinite(sd):
                ax.axhspan((mean - sd) / scale, (mean + sd) / scale, color="C0", alpha=0.15,
                           label="±1 sd")
            paper = stats["paper"].iloc[0]
            if paper is not None and math.isfinite(float(paper)):  # none: no paper value
                ax.axhline(float(paper) / scale, color="k", ls="--", lw=0.9, label="paper")
            ax.legend(fontsize=9)
        else:
            ax.text(0.5, 0.5, f"no run measured {label!r}", transform=ax.transAxes,
                    ha="center", color="grey")
        ax.set_xlabel(f"{TRIAL_KEY} (one run each)")
        ax.set_ylabel(f"{label} ({shown})" if shown else label)
        ax.set_ylim(bottom=0)
        fig.suptitle(f"{sweep.info.experiment}: {label} over {len(rows)} trials", x=0.01,
                     ha="left", fontsize=11)
        stem = name or "trials-" + re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-").lower()
        return save(fig, folder, stem)

"""Trials: a sweep over ``seed`` repeats a run, and its quantities are averaged over the seeds.

The papers report some numbers as a mean over runs (ORMCC's Table II: 10 runs;
WEBRC's Fig. 5: eight trials). A sweep whose ``over`` includes ``seed`` is
read as such trials: its runs are grouped by every other swept key, and each
group gets the mean, standard deviation, minimum and maximum of every
reference quantity over its complete runs. The paper's criterion is applied
to the mean, because that is what the paper's number is.

A run that did not complete, or whose quantity could not be measured, is left
out of the statistics and counted in ``missing``; an overloaded run (its
agents stalled) is counted in ``overloaded`` and kept, as the per-run table
keeps it.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pandas as pd

from mcclab.analysis.stalls import is_overloaded
from mcclab.analysis.summary import Quantity, judge
from mcclab.analysis.sweep import Sweep, SweepPoint, table_cell

TRIAL_KEY = "seed"
STAT_COLUMNS = ["label", "kind", "unit", "runs", "missing", "overloaded", "mean", "sd", "min",
                "max", "paper", "verdict"]


def is_trials(sweep: Sweep) -> bool:
    """Whether the sweep repeats runs over seeds."""
    return TRIAL_KEY in sweep.keys


def _criteria(sweep: Sweep) -> dict[str, Quantity]:
    """The first run's quantity per label: its paper value, tolerance and band."""
    out: dict[str, Quantity] = {}
    for point in sweep.points:
        for q in point.summary.quantities if point.summary is not None else []:
            out.setdefault(q.label, q)
    return out


def trials_table(sweep: Sweep) -> pd.DataFrame:
    """One row per group of the other swept keys and reference quantity (``trials.csv``).

    Columns: the swept keys other than ``seed``, then ``label``, ``kind``,
    ``unit``, ``runs`` (those with a value), ``missing``, ``overloaded``,
    ``mean``, ``sd`` (sample standard deviation; empty for one run), ``min``,
    ``max``, ``paper`` and ``verdict`` (the spec's criterion applied to the mean).
    """
    groups = [key for key in sweep.keys if key != TRIAL_KEY]
    by_group: dict[tuple, list[SweepPoint]] = {}
    for point in sweep.points:
        key = tuple(table_cell(point.record.set.get(k)) for k in groups)
        by_group.setdefault(key, []).append(point)
    criteria = _criteria(sweep)
    rows = []
    for values, points in by_group.items():
        for label, q in criteria.items():
            measured, overloaded = [], 0
            for point in points:
                if point.record.status != "complete" or point.summary is None:
                    continue
                mine = [x for x in point.summary.quantities
                        if x.label == label and x.measured is not None]
                if mine and math.isfinite(mine[0].measured):
                    measured.append(mine[0].measured)
                    overloaded += is_overloaded(point.summary.agent_stalls)
            mean = statistics.fmean(measured) if measured else math.nan
            rows.append({
                **dict(zip(groups, values, strict=True)), "label": label, "kind": q.kind,
                "unit": q.unit, "runs": len(measured), "missing": len(points) - len(measured),
                "overloaded": overloaded, "mean": mean,
                "sd": statistics.stdev(measured) if len(measured) > 1 else math.nan,
                "min": min(measured, default=math.nan), "max": max(measured, default=math.nan),
                "paper": q.paper, "verdict": judge(mean, q.paper, q.tolerance, q.within)})
    return pd.DataFrame(rows, columns=[*groups, *STAT_COLUMNS])


def write_trials_csv(sweep: Sweep) -> None:
    """Write ``trials.csv`` into the sweep folder when the sweep is one of trials."""
    if is_trials(sweep):
        trials_table(sweep).to_csv(sweep.path / "trials.csv", index=False)


def read_trials(folder: Path) -> pd.DataFrame | None:
    """``trials.csv`` of a sweep folder, or None when the sweep was not one of trials."""
    path = folder / "trials.csv"
    if not path.is_file():
        return None
    # Only empty cells are missing: pandas would read the verdict "n/a" as NaN.
    table = pd.read_csv(path, keep_default_na=False, na_values=[""])
    table["unit"] = table["unit"].fillna("")
    return table

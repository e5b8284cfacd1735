"""ORMCC quantities from a run's ``tables/protocol.csv`` (the cores' gauges, per second).

The sender exports ``cr_id`` and ``cr_valid``; every receiver exports its own
``rid``, so the CR's node is found by matching ids. CI counters are cumulative,
so a count over an interval is the difference of the last values at its ends.
"""

from __future__ import annotations

import math

import pandas as pd

from mcclab.analysis.results import Run


def gauge(run: Run, flow: str, name: str) -> pd.DataFrame:
    """One gauge of ``flow`` as a table: index t (experiment second), one column per node."""
    p = run.protocol
    rows = p[(p["flow"] == flow) & (p["name"] == name)]
    if rows.empty:
        return pd.DataFrame()
    return rows.pivot_table(index="t", columns="node", values="value", aggfunc="last")


def receiver_ids(run: Run, flow: str) -> dict[int, str]:
    """Receiver id -> node for ``flow``."""
    rids = gauge(run, flow, "rid")
    if rids.empty:
        return {}
    return {int(rids[node].dropna().iloc[-1]): node for node in rids.columns
            if not rids[node].dropna().empty}


def cr_nodes(run: Run, flow: str) -> pd.Series:
    """The node that is the valid CR each second ('' while no CR is valid)."""
    ids = receiver_ids(run, flow)
    cr = gauge(run, flow, "cr_id")
    valid = gauge(run, flow, "cr_valid")
    if cr.empty:
        return pd.Series(dtype=object)
    cr_col, valid_col = cr.iloc[:, 0], valid.iloc[:, 0].reindex(cr.index).fillna(0)
    return pd.Series([ids.get(int(c), "?") if v >= 0.5 and c >= 0 else ""
                      for c, v in zip(cr_col, valid_col, strict=True)], index=cr.index)


def cr_share(run: Run, flow: str, nodes: list[str], start: float, end: float) -> float:
    """Fraction of the seconds in (start, end] whose valid CR is one of ``nodes``."""
    series = cr_nodes(run, flow)
    window = series[(series.index > start) & (series.index <= end)]
    if window.empty:
        return math.nan
    return float(window.isin(nodes).mean())


def counter_delta(run: Run, flow: str, name: str, start: float = 0.0,
                  end: float = math.inf) -> pd.Series:
    """Per node, the increase of a cumulative gauge over (start, end] (0 before the first row)."""
    table = gauge(run, flow, name)
    if table.empty:
        return pd.Series(dtype=float)
    table = table.ffill().fillna(0.0)
    before = table[table.index <= start]
    upto = table[table.index <= end]
    first = before.iloc[-1] if not before.empty else 0.0 * table.iloc[0]
    last = upto.iloc[-1] if not upto.empty else first
    return last - first


def suppression_ratio(run: Run, flow: str, start: float = 0.0, end: float = math.inf) -> float:
    """Suppressed CIs over all CIs the receivers' losses triggered in (start, end]."""
    sent = counter_delta(run, flow, "ci_sent", start, end).sum()
    suppressed = counter_delta(run, flow, "ci_suppressed", start, end).sum()
    total = sent + suppressed
    return float(suppressed / total) if total > 0 else math.nan


def cr_switches(run: Run, flow: str) -> list[tuple[float, str]]:
    """(second, node) at each change of the valid CR's node, from the per-second table."""
    series = cr_nodes(run, flow)
    out: list[tuple[float, str]] = []
    for t, node in series.items():
        if node and (not out or out[-1][1] != node):
            out.append((float(t), node))
    return out

"""Feedback volume of any protocol, from its cores' cumulative counters.

Each protocol package names its own feedback counters in its gauges
(``agents/<package>/contract.py``): ORMCC's receivers count ``ci_sent``,
PGMCC's ``acks_sent`` and ``naks_sent``, TFMCC's ``fb_sent``; their senders
count what arrived (PGMCC ``acks_rx``/``naks_rx``, TFMCC ``fb_rx``). The spec
names the counters, so this module knows no protocol and a new scheme needs no
edit here. It serves the comparison of ORMCC sec. V-D and Table II, where the
three schemes' feedback totals are set side by side (docs/comparison.md).
"""

from __future__ import annotations

import math

import pandas as pd

from mcclab.analysis.plugins import measure
from mcclab.analysis.results import Run

ROLES = ("receiver", "sender")


def counter_increase(run: Run, flow: str, name: str, role: str, start: float,
                     end: float) -> pd.Series:
    """Per node of ``role``, how much the cumulative gauge ``name`` rose over (start, end].

    A counter starts at 0 when its agent starts, so the increase from the run's
    start is its last value at or before ``end``. An empty series: the flow's
    agents never reported that gauge.
    """
    p = run.protocol
    rows = p[(p["flow"] == flow) & (p["role"] == role) & (p["name"] == name)]
    if rows.empty:
        return pd.Series(dtype=float)
    table = rows.pivot_table(index="t", columns="node", values="value", aggfunc="last")
    table = table.sort_index().ffill().fillna(0.0)
    upto = table[table.index <= end]
    before = table[table.index <= start]
    last = upto.iloc[-1] if not upto.empty else 0.0 * table.iloc[0]
    first = before.iloc[-1] if not before.empty else 0.0 * table.iloc[0]
    return last - first


@measure("feedback.count", unit="1")
def count(run: Run, flow: str, counters: list[str], role: str = "receiver",
          whole_run: bool = True) -> float:
    """Feedback packets of ``flow``: the named counters summed over its agents of ``role``.

    Over the whole run (as ORMCC sec. V-D and Table II count) unless
    ``whole_run`` is false, then over the measurement window. A counter that no
    agent of the flow reported is an error naming it (a misspelt or foreign
    counter must not read as zero); ``nan`` when the run has no protocol table.
    """
    if role not in ROLES:
        raise ValueError(f"role {role!r}: use one of {', '.join(ROLES)}")
    if not counters:
        raise ValueError("counters: name at least one cumulative gauge")
    if run.protocol.empty:
        return math.nan
    start = 0.0 if whole_run else run.window[0]
    total = 0.0
    for name in counters:
        rise = counter_increase(run, flow, name, role, start, run.window[1])
        if rise.empty:
            known = sorted(set(run.protocol.loc[(run.protocol["flow"] == flow)
                                                & (run.protocol["role"] == role), "name"]))
            raise ValueError(f"no {role} of flow {flow!r} reported a gauge {name!r}; "
                             f"its {role} gauges are {', '.join(known) or 'none'}")
        total += float(rise.sum())
    return total

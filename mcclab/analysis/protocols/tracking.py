"""Which receiver a single-rate multicast sender tracks, from its cores' gauges.

Single-rate schemes follow one receiver, meant to be the slowest: ORMCC's congestion
representative (CR), PGMCC's acker, TFMCC's current limiting receiver (CLR). Each
sender exports that receiver's id as a gauge and each receiver its own id
(``agents/<package>/contract.py``):

| scheme | sender's gauge (``tracked``) | valid while (``valid``) | receiver's id |
| --- | --- | --- | --- |
| ORMCC | ``cr_id`` | ``cr_valid`` is 1 | ``rid`` |
| PGMCC | ``acker_id`` (-1: none) | | ``rid`` |
| TFMCC | ``clr_id`` (-1: none) | | ``rid`` |

The spec names the gauges, so this module knows no protocol. From them it tells, for
each second the sender reported, which receiver node was tracked; over a period of the
run (fractions of its duration, so a time-scaled profile measures the same periods) it
gives each receiver's share of the seconds, the receiver tracked most and the number
of switches. It serves ORMCC's Fig. 8 and Table I (sec. V-C), where the three schemes
are set side by side on how they follow the slowest receiver (docs/comparison.md).
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from mcclab.analysis.figures import STYLE, save
from mcclab.analysis.plugins import figure, measure
from mcclab.analysis.results import Run

NONE = ""
"""The tracked node while the sender tracks no receiver (no id, or not valid)."""
UNKNOWN = "?"
"""The tracked node when the sender's id matches no receiver's id."""


def _gauge(run: Run, flow: str, role: str, name: str) -> pd.DataFrame:
    """One gauge of ``flow``'s agents of ``role``: index t, one column per node.

    An unknown gauge is an error naming the ones that role reported, so a misspelt
    gauge never reads as "nothing tracked".
    """
    p = run.protocol
    mine = p[(p["flow"] == flow) & (p["role"] == role)]
    rows = mine[mine["name"] == name]
    if rows.empty:
        known = sorted(set(mine["name"]))
        raise ValueError(f"no {role} of flow {flow!r} reported a gauge {name!r}; "
                         f"its {role} gauges are {', '.join(known) or 'none'}")
    return rows.pivot_table(index="t", columns="node", values="value", aggfunc="last").sort_index()


def receiver_ids(run: Run, flow: str, rid: str = "rid") -> dict[int, str]:
    """Receiver id -> node for ``flow``, from each receiver's last ``rid`` value."""
    ids = _gauge(run, flow, "receiver", rid)
    return {int(ids[node].dropna().iloc[-1]): str(node) for node in ids.columns
            if not ids[node].dropna().empty}


def tracked_nodes(run: Run, flow: str, tracked: str, valid: str | None = None,
                  rid: str = "rid") -> pd.Series:
    """The node the sender of ``flow`` tracks at each second it reported.

    ``tracked`` is the sender's gauge holding the receiver's id; a negative id means
    none. With ``valid``, a second whose ``valid`` gauge is below 0.5 tracks none
    too. The value is the receiver's node, :data:`NONE` or :data:`UNKNOWN`.
    """
    ids = receiver_ids(run, flow, rid)
    chosen = _gauge(run, flow, "sender", tracked).iloc[:, 0]
    if valid is not None:
        ok = _gauge(run, flow, "sender", valid).iloc[:, 0].reindex(chosen.index).ffill()
        ok = ok.fillna(0.0)
    else:
        ok = pd.Series(1.0, index=chosen.index)
    out = []
    for value, flag in zip(chosen, ok, strict=True):
        if math.isnan(value) or value < 0 or flag < 0.5:
            out.append(NONE)
        else:
            out.append(ids.get(int(value), UNKNOWN))
    return pd.Series(out, index=chosen.index, dtype=object)


def _period(run: Run, start_frac: float, end_frac: float) -> tuple[float, float]:
    """(start, end] in seconds of the run for fractions of its duration."""
    if not 0.0 <= start_frac < end_frac <= 1.0:
        raise ValueError(f"period [{start_frac}, {end_frac}]: need 0 <= start_frac < "
                         "end_frac <= 1")
    duration = run.info.duration_s
    return start_frac * duration, end_frac * duration


def _in_period(series: pd.Series, start: float, end: float) -> pd.Series:
    return series[(series.index > start) & (series.index <= end)]


def shares(run: Run, flow: str, tracked: str, start: float, end: float,
           valid: str | None = None, rid: str = "rid") -> dict[str, float]:
    """Each tracked node's share of the sender's seconds in (start, end], largest first.

    :data:`NONE` and :data:`UNKNOWN` appear as keys when such seconds exist; the
    shares add up to 1. Empty when the sender reported no second in the period.
    """
    window = _in_period(tracked_nodes(run, flow, tracked, valid, rid), start, end)
    if window.empty:
        return {}
    counts = window.value_counts(normalize=True)
    return {str(node): float(share) for node, share in
            sorted(counts.items(), key=lambda item: (-item[1], str(item[0])))}


def most_tracked(run: Run, flow: str, tracked: str, start: float, end: float,
                 valid: str | None = None, rid: str = "rid") -> tuple[str, float]:
    """The receiver tracked for the largest share of (start, end], and that share.

    Seconds tracking no receiver do not compete; ties go to the node name first in
    order. (:data:`NONE`, ``nan``) when no receiver was tracked in the period.
    """
    nodes = {n: s for n, s in shares(run, flow, tracked, start, end, valid, rid).items()
             if n not in (NONE, UNKNOWN)}
    if not nodes:
        return NONE, math.nan
    return min(nodes.items(), key=lambda item: (-item[1], item[0]))


def switch_times(run: Run, flow: str, tracked: str, start: float, end: float,
                 valid: str | None = None, rid: str = "rid") -> list[tuple[float, str]]:
    """(second, new node) at each change of the tracked receiver in (start, end].

    Seconds without a tracked receiver are skipped: A, none, A is no switch and
    A, none, B is one. The first receiver tracked in the period is no switch.
    """
    window = _in_period(tracked_nodes(run, flow, tracked, valid, rid), start, end)
    out: list[tuple[float, str]] = []
    last = NONE
    for t, node in window.items():
        if node == NONE:
            continue
        if last != NONE and node != last:
            out.append((float(t), node))
        last = node
    return out


@measure("tracking.share", unit="1", domain=(0, 1))
def share(run: Run, flow: str, tracked: str, node: str, valid: str | None = None,
          rid: str = "rid", start_frac: float = 0.0, end_frac: float = 1.0) -> float:
    """Share of the sender's seconds in the period whose tracked receiver is ``node``.

    ``nan`` when the run has no protocol table or the sender reported no second in
    the period.
    """
    if run.protocol.empty:
        return math.nan
    start, end = _period(run, start_frac, end_frac)
    got = shares(run, flow, tracked, start, end, valid, rid)
    return got.get(node, 0.0) if got else math.nan


@measure("tracking.lead", unit="1", domain=(-1, 1))
def lead(run: Run, flow: str, tracked: str, node: str, valid: str | None = None,
         rid: str = "rid", start_frac: float = 0.0, end_frac: float = 1.0) -> float:
    """``node``'s share of the period minus the largest share of any other receiver.

    Positive exactly when ``node`` is the receiver tracked most; 1 when it is tracked
    throughout; negative by how far another receiver led it. Seconds tracking none
    count for nobody.
    """
    if run.protocol.empty:
        return math.nan
    start, end = _period(run, start_frac, end_frac)
    got = shares(run, flow, tracked, start, end, valid, rid)
    if not got:
        return math.nan
    others = [s for n, s in got.items() if n not in (node, NONE)]
    return got.get(node, 0.0) - max(others, default=0.0)


@measure("tracking.switches", unit="1")
def switches(run: Run, flow: str, tracked: str, valid: str | None = None, rid: str = "rid",
             start_frac: float = 0.0, end_frac: float = 1.0) -> float:
    """Changes of the tracked receiver in the period (the first one tracked is none).

    ``nan`` when the run has no protocol table.
    """
    if run.protocol.empty:
        return math.nan
    start, end = _period(run, start_frac, end_frac)
    return float(len(switch_times(run, flow, tracked, start, end, valid, rid)))


def rate_with_switches(rate: pd.Series, marks: list[tuple[float, str]], ylabel: str,
                       title: str, folder: Path, filename: str) -> list[Path]:
    """Fig. 8's layout: ``rate`` (bit/s, indexed by time) in kbit/s, with a dashed line
    at each ``(time, node)`` of ``marks`` and the node named at its top."""
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(7.2, 3.6))
        ax.plot(rate.index, rate / 1e3, color="black", linewidth=0.8)
        top = float(rate.max() / 1e3)
        for t, node in marks:
            ax.axvline(t, color="grey", linestyle="--", linewidth=0.6)
            ax.text(t, top, node, rotation=90, fontsize=7, va="top", ha="right")
        ax.set_xlabel("time (s)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        return save(fig, folder, filename)


@figure("tracking.timeline")
def timeline(run: Run, folder: Path, flow: str, tracked: str, valid: str | None = None,
             rid: str = "rid", name: str = "tracking") -> list[Path]:
    """The flow's rate (mean over its receivers) with a dashed line at every switch of the
    tracked receiver, named at the line: ORMCC Fig. 8's layout for any scheme."""
    rows = run.per_second[run.per_second["flow"] == flow]
    if rows.empty or run.protocol.empty:
        return []
    rate = rows.groupby("t")["throughput_bps"].sum() / rows["node"].nunique()
    changes = switch_times(run, flow, tracked, 0.0, math.inf, valid, rid)
    first = [(t, n) for t, n in tracked_nodes(run, flow, tracked, valid, rid).items()
             if n != NONE][:1]
    return rate_with_switches(rate, [*first, *changes], "rate at the receivers (kbit/s)",
                              f"{flow}: rate; dashed: the tracked receiver ({tracked}) changes",
                              folder, f"{name}-{flow}")

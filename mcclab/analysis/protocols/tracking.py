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

How soon the sender settles on the receiver expected after a change of the slowest
one (Table III's "in time") is :func:`settle`: from the gauge, to the second, or
from the sender's event log, which records each new choice when the core made it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from mcclab.analysis.figures import STYLE, save
from mcclab.analysis.plugins import figure, measure
from mcclab.analysis.results import Run
from mcclab.resultsdir import LOGS, event_records

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


# ---- "in time": how soon the sender settles on a new slowest receiver ----------------

HOLD_S = 5.0
"""Seconds a receiver must stay tracked, unbroken, for the sender to count as settled on it.

Long enough that a passing pick is not taken for the new representative (on Table I's
runs ORMCC's CR after a timed-out CR check went to h2 for under 3 s before h1 took it,
and TFMCC's CLR changed 15 times in 0.6 s at start-up), and over 15 round trips of ORMCC's
Fig. 7 tree with full queues (about 0.3 s each), so each scheme has had rounds of
feedback to undo a wrong pick. Short against Table I's periods (40 s in the quick
profile, 200 s in the paper's). In seconds of protocol time, not scaled with the
profile, as the schemes' timers are not. A long stretch inside a flap still counts as
settling: the shares and :func:`switches` tell flapping apart.
"""


@dataclass(frozen=True)
class Timeline:
    """The node the sender tracks, as a step function of the experiment's time.

    From each ``(time, node)`` of ``changes`` (in time order) the sender tracks
    ``node`` (:data:`NONE`: no receiver) until the next change; before the first it
    tracks none. ``end`` is the last time the sender's state is known.
    """

    changes: list[tuple[float, str]]
    end: float


def gauge_timeline(run: Run, flow: str, tracked: str, valid: str | None = None,
                   rid: str = "rid") -> Timeline:
    """The tracked node from the sender's per-second gauge (:func:`tracked_nodes`).

    Each second's value holds from that second to the next: a change is seen at the
    first second that reports it, up to about a second after it happened (the gauge is
    the sender's last stats record before the second), and a choice that came and went
    between two records is not seen at all.
    """
    nodes = tracked_nodes(run, flow, tracked, valid, rid)
    changes: list[tuple[float, str]] = []
    for t, node in nodes.items():
        if not changes or node != changes[-1][1]:
            changes.append((float(t), str(node)))
    return Timeline(changes, float(nodes.index.max()) if len(nodes) else 0.0)


def _sender_log(run: Run, flow: str) -> tuple[float, list[dict]]:
    """(the sender's agent clock at experiment time 0, its event-log records).

    ``tables/agents.csv`` holds the sender's ``start`` record in experiment time and
    the log holds it on the agent's clock: their difference places every record.
    """
    a = run.agents
    starts = a[(a["flow"] == flow) & (a["role"] == "sender") & (a["event"] == "start")]
    if starts.empty:
        raise ValueError(f"tables/agents.csv has no start of flow {flow!r}'s sender: its "
                         "event log cannot be placed in the run's time")
    node, t_start = str(starts["node"].iloc[0]), float(starts["t"].iloc[0])
    log = run.path / LOGS / f"{flow}-sender-{node}.jsonl"
    records = event_records(log)
    first = next((r for r in records if r.get("event") == "start"), None)
    if first is None:
        raise ValueError(f"{log}: no start record (is the sender's event log missing?)")
    return float(first["t"]) - t_start, records


def _addresses(records: list[dict]) -> dict[str, str]:
    """Address -> node of the flow's session, from the sender's start record."""
    session = next((r.get("session") or {} for r in records if r.get("event") == "start"), {})
    return {str(v.get("address")): str(node) for node, v in (session.get("nodes") or {}).items()
            if isinstance(v, dict) and v.get("address")}


def _host(peer: object) -> str:
    """The address part of a ``host:port`` peer (``[v6]:port`` too)."""
    text = str(peer)
    host = text.rsplit(":", 1)[0] if text.count(":") == 1 or text.startswith("[") else text
    return host.strip("[]")


def event_timeline(run: Run, flow: str, event: str, drops: list[str] | None = None,
                   valid: str | None = None) -> Timeline:
    """The tracked node from the sender's own event log, at the times the core acted.

    A record named ``event`` makes the receiver at its ``peer`` address the tracked
    one (the session's addresses, from the log's start record, name the node;
    :data:`UNKNOWN` for an address of no node). A record named in ``drops`` leaves
    none tracked until the next ``event``. With ``valid``, a stats record whose core
    gauge ``valid`` is at least 0.5 while none is tracked after a drop gives the last
    chosen receiver back: ORMCC keeps a timed-out CR and takes it back, unlogged, when
    it answers again, so that return is known only to the stats record's second.

    Raises ValueError when the log has no ``event`` record, naming the events it has,
    so a misspelt name never reads as "never tracked".
    """
    clock0, records = _sender_log(run, flow)
    if not any(r.get("event") == event for r in records):
        seen = sorted({str(r.get("event")) for r in records})
        raise ValueError(f"flow {flow!r}'s sender logged no {event!r} record; its events "
                         f"are {', '.join(seen) or 'none'}")
    nodes = _addresses(records)
    dropped = set(drops or ())
    changes: list[tuple[float, str]] = []
    state = chosen = NONE
    end = 0.0
    for rec in records:
        name, t = rec.get("event"), rec.get("t")
        if not isinstance(t, (int, float)):
            continue
        end = max(end, float(t) - clock0)
        new = state
        if name == event:
            new = chosen = nodes.get(_host(rec.get("peer")), UNKNOWN)
        elif name in dropped:
            new = NONE
        elif (valid is not None and name == "stats" and state == NONE and chosen != NONE
              and float((rec.get("core") or {}).get(valid, 0.0)) >= 0.5):
            new = chosen
        if new != state:
            changes.append((float(t) - clock0, new))
            state = new
    return Timeline(changes, end)


def settle_delay(timeline: Timeline, at: float, until: float, node: str,
                 hold: float = HOLD_S) -> float:
    """Seconds from ``at`` until ``timeline`` tracks ``node`` and keeps it ``hold`` s.

    The first stretch of ``node`` within [``at``, ``until``] (clipped to the
    timeline's end) that lasts at least ``hold`` counts; its start, or ``at`` when
    ``node`` was already tracked then, gives the delay. ``nan`` when no stretch in
    the period lasts that long.
    """
    until = min(until, timeline.end)
    current = NONE
    for t, n in timeline.changes:
        if t > at:
            break
        current = n
    start = at
    for t, n in [*((t, n) for t, n in timeline.changes if at < t < until), (until, None)]:
        if n == current:
            continue
        if current == node and t - start >= hold:
            return start - at
        start, current = t, n
    return math.nan


def _timeline(run: Run, flow: str, tracked: str | None, valid: str | None, rid: str,
              event: str | None, drops: list[str] | None) -> Timeline | None:
    """The timeline from the gauge ``tracked`` or the log's ``event`` (exactly one);
    None when the run has nothing to read it from."""
    if (tracked is None) == (event is None):
        raise ValueError("name the sender's gauge (tracked) or its log event (event), "
                         "not both or neither")
    if event is not None:
        return None if run.agents.empty else event_timeline(run, flow, event, drops, valid)
    assert tracked is not None
    return None if run.protocol.empty else gauge_timeline(run, flow, tracked, valid, rid)


def settle_delays(run: Run, flow: str, changes: list[tuple[float, str]],
                  end_frac: float = 1.0, tracked: str | None = None, valid: str | None = None,
                  rid: str = "rid", event: str | None = None, drops: list[str] | None = None,
                  hold_s: float = HOLD_S) -> list[tuple[float, float]]:
    """(period length, settle delay) in seconds for each ``(start_frac, node)`` of
    ``changes``: the period runs to the next change's start (the last to ``end_frac``)
    and ``node`` is the receiver expected in it. The delay is ``nan`` where the sender
    did not settle in the period; [] when the run has nothing to read."""
    line = _timeline(run, flow, tracked, valid, rid, event, drops)
    if line is None:
        return []
    ordered = sorted((float(f), str(n)) for f, n in changes)
    out = []
    for k, (frac, node) in enumerate(ordered):
        nxt = ordered[k + 1][0] if k + 1 < len(ordered) else end_frac
        at, until = _period(run, frac, nxt)
        out.append((until - at, settle_delay(line, at, until, node, hold_s)))
    return out


@measure("tracking.settle", unit="s", domain=(0, math.inf))
def settle(run: Run, flow: str, node: str, at_frac: float, until_frac: float = 1.0,
           tracked: str | None = None, valid: str | None = None, rid: str = "rid",
           event: str | None = None, drops: list[str] | None = None,
           hold_s: float = HOLD_S) -> float:
    """Seconds from ``at_frac`` of the run until the sender tracks ``node`` and keeps it
    for ``hold_s`` (default :data:`HOLD_S`, 5 s) without a break, within the period up
    to ``until_frac``: how "in time" it follows a change of the slowest receiver.

    0 when ``node`` was already tracked at the boundary and kept; ``nan`` when it was
    not settled on in the period, or the run has nothing to read. The tracked node
    comes from the sender's gauge ``tracked`` (one reading a second: a change is seen
    up to about a second late) or, more precisely, from its event log: ``event`` is
    the record of a new choice, ``drops`` those that leave none (see
    :func:`event_timeline`):

    | scheme | ``event`` | ``drops`` | ``valid`` |
    | --- | --- | --- | --- |
    | ORMCC | ``ormcc_cr`` | ``ormcc_cr_timeout`` | ``cr_valid`` |
    | PGMCC | ``pgmcc_acker`` | ``pgmcc_acker_drop`` | |
    | TFMCC | ``tfmcc_clr`` | ``tfmcc_clr_timeout`` | |
    """
    got = settle_delays(run, flow, [(at_frac, node)], until_frac, tracked, valid, rid,
                        event, drops, hold_s)
    return got[0][1] if got else math.nan


SETTLE_STATS = ("mean", "max")


@measure("tracking.settle_stat", unit="s", domain=(0, math.inf))
def settle_stat(run: Run, flow: str, changes: list[tuple[float, str]], stat: str = "mean",
                end_frac: float = 1.0, tracked: str | None = None, valid: str | None = None,
                rid: str = "rid", event: str | None = None, drops: list[str] | None = None,
                hold_s: float = HOLD_S) -> float:
    """The ``mean`` or ``max`` settle delay over the boundaries ``changes``
    (``[start_frac, expected node]`` pairs, as :func:`settle_delays`; the other
    arguments as :func:`settle`).

    A boundary not settled on in its period counts as the period's length, a lower
    bound of its delay, so missing is never better than settling late;
    ``tracking.settle_missed`` counts those. ``nan`` when the run has nothing to read
    or ``changes`` is empty.
    """
    if stat not in SETTLE_STATS:
        raise ValueError(f"stat must be one of {', '.join(SETTLE_STATS)}, not {stat!r}")
    got = settle_delays(run, flow, changes, end_frac, tracked, valid, rid, event, drops,
                        hold_s)
    if not got:
        return math.nan
    delays = [length if math.isnan(d) else d for length, d in got]
    return float(max(delays)) if stat == "max" else float(sum(delays) / len(delays))


@measure("tracking.settle_missed", unit="1", domain=(0, math.inf))
def settle_missed(run: Run, flow: str, changes: list[tuple[float, str]], end_frac: float = 1.0,
                  tracked: str | None = None, valid: str | None = None, rid: str = "rid",
                  event: str | None = None, drops: list[str] | None = None,
                  hold_s: float = HOLD_S) -> float:
    """How many boundaries of ``changes`` the sender did not settle on within their
    period (arguments as :func:`settle_stat`); ``nan`` when the run has nothing to read.
    """
    got = settle_delays(run, flow, changes, end_frac, tracked, valid, rid, event, drops,
                        hold_s)
    return float(sum(math.isnan(d) for _, d in got)) if got else math.nan

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

"""STAIR analysis (ToN 2006 sec. VI): TCP-friendliness ratios, link dilation (Def. 4),
and the paper-style figures (Figs. 9, 11, 13: a STAIR receiver against a representative
TCP flow with the TCP mean and standard deviation; Fig. 14: dilation over time).

Dilation (Def. 4) of a link direction ``src -> dst``, per counter sampling interval
of ``tables/links.csv`` (one a second) and on the emulator's own clock (its ``time``
column, CLOCK_MONOTONIC like the agents' event logs), so numerator and denominator
cover the same interval:

* ``M``: the largest downstream receiver's reception rate, from its event log: the
  sender's rate of every group it was receiving (first packet after the join to the
  leave; stair layers at their scheduled step), averaged over the interval;
* ``C`` (``basis="link"``): the UDP payload the link carried (``bytes_out`` minus 28
  bytes of IP and UDP header per packet), so groups the routers still forward after
  the last downstream leave count, as on a real link; or (``basis="demanded"``) the
  rate of the union of the groups the receivers were receiving, Def. 4's bandwidth
  "demanded in aggregate by receivers downstream"; or (``basis="modelled"``) the union
  of the groups as routers would forward them: from ``join`` after each join (the
  join's way up to the link) to ``leave`` after the leave (the routers' leave
  latency), joins left before their first packet included. At the latencies
  measured on a run it should match ``link`` (``stair.model_fit``); at others it
  says what the link would carry with routers that leave sooner (Fig. 14's ns-2
  routers prune in about a link delay).

The link must carry nothing but the session (the STAIR topologies put the TCP
sources below it).
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from agents.stair.config import SL, Layout, StairParams
from agents.stair.stairs import select_simple, stair_rtts
from mcclab.analysis import metrics
from mcclab.analysis.figures import STYLE, rate_scale, save
from mcclab.analysis.plugins import figure, measure, sweep_figure
from mcclab.analysis.results import Run
from mcclab.analysis.sweep import Sweep
from mcclab.model.units import parse_duration
from mcclab.resultsdir import event_records

IP_UDP_HEADER = 28
GRID_STEP = 0.005  # s: the subscriptions are sampled this finely inside each link interval
_SCHEDULE = ("join", "leave", "first_packet", "stop")


def _subscription_events(records: list[dict], end: float
                         ) -> tuple[list[tuple[str, float, int]], float]:
    """The receiver's join, first-packet and leave records in order, and ``end`` cut at its stop."""
    events = []
    for rec in records:
        event, t = rec.get("event"), rec.get("t")
        if event not in _SCHEDULE or not isinstance(t, int | float):
            continue
        if event == "stop":
            return events, min(end, t)
        events.append((event, t, rec.get("channel")))
    return events, end


def reception_intervals(records: list[dict], end: float) -> dict[int, list[tuple[float, float]]]:
    """Per channel, when a receiver was receiving it: from the first packet after each join
    to the leave (or ``stop``, or ``end``), from its event log's runtime records.

    A join left before its first packet counts nothing (the group never reached the
    receiver), so the join latency is excluded as it is from the link's counters.
    """
    joined: set[int] = set()
    since: dict[int, float] = {}
    out: dict[int, list[tuple[float, float]]] = {}
    events, end = _subscription_events(records, end)
    for event, t, ch in events:
        if event == "join":
            joined.add(ch)
        elif event == "first_packet" and ch in joined and ch not in since:
            since[ch] = t
        elif event == "leave":
            joined.discard(ch)
            if ch in since:
                out.setdefault(ch, []).append((since.pop(ch), t))
    for ch, t in since.items():
        out.setdefault(ch, []).append((t, end))
    return out


def channel_rates(layout: Layout, origin: float, grid: np.ndarray) -> np.ndarray:
    """Each channel's sending rate (UDP payload bit/s) at each time of ``grid``: CLs and
    NCLs constant, stair layers on their schedule from the sender's start ``origin``."""
    size = layout.params.packet_size
    out = np.zeros((layout.channels, len(grid)))
    for ch in range(layout.channels):
        kind, index = layout.layer(ch)
        if kind != SL:
            out[ch] = layout.static_rate(kind, index)
            continue
        rtt, window = layout.rtts[index], layout.window(index)
        into = np.mod(grid - origin, window * rtt)
        step = np.minimum(np.floor(into / rtt) + 1, window)
        out[ch] = np.where(grid >= origin, step * size * 8 / rtt, 0.0)
    return out


def holding(intervals: dict[int, list[tuple[float, float]]], channels: int,
            grid: np.ndarray) -> np.ndarray:
    """Boolean [channel, time]: the receiver was receiving that channel then."""
    out = np.zeros((channels, len(grid)), dtype=bool)
    for ch, spans in intervals.items():
        if 0 <= ch < channels:
            for a, b in spans:
                out[ch] |= (grid >= a) & (grid < b)
    return out


def link_intervals(path: Path, src: str, dst: str) -> pd.DataFrame:
    """The ``src -> dst`` counters per sampling interval on the emulator's own clock
    (links.csv ``time``, CLOCK_MONOTONIC as the agents' logs): ``t`` (the experiment
    second of the sample), ``start``, ``end`` and ``payload_bps``."""
    try:
        table = pd.read_csv(path, usecols=["t", "src", "dst", "time", "pkts_out", "bytes_out"],
                            dtype={"src": str, "dst": str}, keep_default_na=False)
    except (OSError, ValueError, pd.errors.EmptyDataError):
        return pd.DataFrame(columns=["t", "start", "end", "payload_bps"])
    rows = table[(table["src"] == src) & (table["dst"] == dst)].sort_values("t")
    span = rows["time"].diff()
    payload = (rows["bytes_out"].diff() - rows["pkts_out"].diff() * IP_UDP_HEADER) * 8
    out = pd.DataFrame({"t": rows["t"].round().astype(int), "start": rows["time"].shift(),
                        "end": rows["time"], "payload_bps": payload / span})
    return out[span > 0].dropna().reset_index(drop=True)


def subscription_intervals(records: list[dict], end: float,
                           join: float = 0.0, leave: float = 0.0
                           ) -> dict[int, list[tuple[float, float]]]:
    """Per channel, when a router upstream forwarded it for this receiver: from ``join``
    after each join (the join's way up) to ``leave`` after the leave (the routers'
    leave latency), whether or not a packet arrived in between."""
    since: dict[int, float] = {}
    out: dict[int, list[tuple[float, float]]] = {}
    events, end = _subscription_events(records, end)
    for event, t, ch in events:
        if event == "join" and ch not in since:
            since[ch] = t
        elif event == "leave" and ch in since:
            out.setdefault(ch, []).append((since.pop(ch) + join, t + leave))
    for ch, t in since.items():
        out.setdefault(ch, []).append((t + join, end + leave))
    return out


def dilation_table(links: pd.DataFrame, receivers: dict[str, list[dict]], layout: Layout,
                   origin: float, step: float = GRID_STEP,
                   latency: tuple[float, float] | None = None) -> pd.DataFrame:
    """Def. 4 per link sampling interval, indexed by its experiment second.

    Columns: ``carried`` (what the link carried, from its counters), ``union`` (the
    rate of every group some downstream receiver was receiving: Def. 4's ``C_l`` from
    the subscriptions, without the routers' leave latency), ``largest`` (the largest
    receiver's rate, ``M_l``), all interval means in bit/s on the same clock; and the
    dilations ``link = carried / largest``, ``demanded = union / largest`` and
    ``static``, the same over the CLs and NCLs alone (Lemma 4's setting). With
    ``latency = (join, leave)`` in seconds also ``modelled``: the union of the
    receivers' ``subscription_intervals`` with those latencies, over the largest
    receiver.
    """
    cols = ["carried", "union", "largest", "link", "demanded", "static", "modelled"]
    if links.empty or not receivers:
        return pd.DataFrame(columns=cols)
    grid = np.arange(float(links["start"].iloc[0]), float(links["end"].iloc[-1]), step)
    rates = channel_rates(layout, origin, grid)
    end = float(grid[-1]) + step if len(grid) else origin
    held = [holding(reception_intervals(recs, end), layout.channels, grid)
            for recs in receivers.values()]
    largest = np.max([(h * rates).sum(axis=0) for h in held], axis=0)
    union = (np.any(held, axis=0) * rates).sum(axis=0)
    carried_by_model = union
    if latency is not None:
        forwarded = [holding(subscription_intervals(recs, end, *latency), layout.channels, grid)
                     for recs in receivers.values()]
        carried_by_model = (np.any(forwarded, axis=0) * rates).sum(axis=0)
    fixed = np.array([layout.layer(ch)[0] != SL for ch in range(layout.channels)])
    s_largest = np.max([(h[fixed] * rates[fixed]).sum(axis=0) for h in held], axis=0)
    s_union = (np.any(held, axis=0)[fixed] * rates[fixed]).sum(axis=0)
    which = np.searchsorted(links["end"].to_numpy(), grid, side="left")
    rows = {}
    for k, row in links.iterrows():
        inside = (which == k) & (grid > row["start"])
        if not inside.any():
            continue
        rows[int(row["t"])] = {"carried": row["payload_bps"], "union": float(union[inside].mean()),
                               "largest": float(largest[inside].mean()),
                               "s_union": float(s_union[inside].mean()),
                               "s_largest": float(s_largest[inside].mean()),
                               "model": float(carried_by_model[inside].mean())}
    table = pd.DataFrame.from_dict(
        rows, orient="index", columns=[*cols[:3], "s_union", "s_largest", "model"]).sort_index()
    table = table[(table["largest"] > 0) & (table["s_largest"] > 0)]
    table["link"] = table["carried"] / table["largest"]
    table["demanded"] = table["union"] / table["largest"]
    table["static"] = table.pop("s_union") / table.pop("s_largest")
    table["modelled"] = table["model"] / table["largest"]
    if latency is None:
        table = table.drop(columns=["model", "modelled"])
    return table


def _stair_layout(run: Run, flow: str) -> Layout | None:
    """The flow's STAIR parameters from the spec (None if they do not validate)."""
    for f in run.spec.flows:
        if f.name == flow:
            params = (getattr(f, "model_extra", None) or {}).get("params") or {}
            try:
                return Layout(StairParams(**params))
            except (TypeError, ValueError):
                return None
    return None


def _seconds(value: str | float | None) -> float | None:
    """A duration argument of a spec ('140ms') or a number of seconds; None stays None."""
    return parse_duration(value) if isinstance(value, str) else value


def _load(run: Run, flow: str, src: str, dst: str, nodes: list[str],
          latency: tuple[float, float] | None = None) -> pd.DataFrame:
    """dilation_table() from the run folder (cached per run and arguments)."""
    key = (str(run.path), flow, src, dst, tuple(nodes), latency)
    if key not in _CACHE:
        logs = run.path / "logs"
        senders = sorted(logs.glob(f"{flow}-sender-*.jsonl"))
        start = [r["t"] for r in event_records(senders[0]) if r.get("event") == "start"] \
            if senders else []
        layout = _stair_layout(run, flow)
        receivers = {n: event_records(logs / f"{flow}-receiver-{n}.jsonl") for n in nodes}
        receivers = {n: recs for n, recs in receivers.items() if recs}
        links = link_intervals(run.path / "tables" / "links.csv", src, dst)
        if layout is None or not start:
            _CACHE[key] = pd.DataFrame(columns=["carried", "union", "largest", "link",
                                                "demanded", "static", "modelled"])
        else:
            _CACHE[key] = dilation_table(links, receivers, layout, start[0], latency=latency)
    return _CACHE[key]


_CACHE: dict[tuple, pd.DataFrame] = {}
BASES = ("link", "demanded", "static", "modelled")


def _windowed(run: Run, flow: str, src: str, dst: str, nodes: list[str],
              latency: tuple[float, float] | None = None) -> pd.DataFrame:
    """The dilation table's rows inside the run's window."""
    table = _load(run, flow, src, dst, nodes, latency)
    lo, hi = run.window
    return table[(table.index > lo) & (table.index <= hi)]


def dilation_series(run: Run, flow: str, src: str, dst: str, nodes: list[str],
                    basis: str = "link", leave: str | float | None = None,
                    join: str | float = 0.0) -> pd.Series:
    """Def. 4 per second over the run's window: ``basis="link"`` is what ``src -> dst``
    carried over the largest downstream reception rate, ``"demanded"`` the union of the
    receivers' groups over the same (no router leave latency), ``"static"`` the same
    without stair layers (the CLs and NCLs Lemma 4 bounds), ``"modelled"`` the union
    with routers that start forwarding a group ``join`` after a join and stop ``leave``
    after the last leave (durations)."""
    if basis not in BASES:
        raise ValueError(f"basis must be one of {', '.join(map(repr, BASES))}, not {basis!r}")
    latency = None
    if basis == "modelled":
        if leave is None:
            raise ValueError("basis 'modelled' needs the routers' leave latency (leave=...)")
        latency = (_seconds(join), _seconds(leave))
    return _windowed(run, flow, src, dst, nodes, latency)[basis].astype(float)


def _throughput(run: Run, flow: str, node: str | None = None) -> float:
    return metrics.throughput(run.per_second, flow, run.window, node)


@measure("stair.tcp_ratio", unit="1")
def tcp_ratio(run: Run, flow: str, node: str, flows: list[str] | None = None,
              tcp: list[str] | None = None) -> float:
    """STAIR's throughput at ``node`` over the mean throughput of the TCP ``flows``
    (``tcp``: the same, as the first runs' specs name it)."""
    rates = [_throughput(run, f) for f in (flows or tcp or [])]
    rates = [r for r in rates if not math.isnan(r)]
    if not rates or sum(rates) == 0:
        return math.nan
    return _throughput(run, flow, node) / (sum(rates) / len(rates))


@measure("stair.receiver_ratio", unit="1")
def receiver_ratio(run: Run, flow: str, numerator: str, denominator: str) -> float:
    """Throughput of one receiver of ``flow`` over another's (Fig. 11's 4:2:1)."""
    bottom = _throughput(run, flow, denominator)
    if not bottom or math.isnan(bottom):
        return math.nan
    return _throughput(run, flow, numerator) / bottom


@measure("stair.dilation_max", unit="1")
def dilation_max(run: Run, flow: str, src: str, dst: str, nodes: list[str],
                 quantile: float = 1.0, basis: str = "link", leave: str | None = None,
                 join: str = "0s") -> float:
    """The largest (or the ``quantile``) per-second dilation of ``src -> dst`` (Def. 4)."""
    series = dilation_series(run, flow, src, dst, nodes, basis, leave, join)
    return float(series.quantile(quantile)) if len(series) else math.nan


@measure("stair.dilation_mean", unit="1")
def dilation_mean(run: Run, flow: str, src: str, dst: str, nodes: list[str],
                  basis: str = "link", leave: str | None = None, join: str = "0s") -> float:
    """Mean per-second dilation of ``src -> dst`` over the window."""
    series = dilation_series(run, flow, src, dst, nodes, basis, leave, join)
    return float(series.mean()) if len(series) else math.nan


@measure("stair.dilation_above", unit="s")
def dilation_above(run: Run, flow: str, src: str, dst: str, nodes: list[str],
                   bound: float = 1.81, basis: str = "link", leave: str | None = None,
                   join: str = "0s") -> float:
    """Seconds of the window whose dilation of ``src -> dst`` exceeds ``bound``."""
    series = dilation_series(run, flow, src, dst, nodes, basis, leave, join)
    return float((series > bound).sum()) if len(series) else math.nan


@measure("stair.leave_overhead", unit="1")
def leave_overhead(run: Run, flow: str, src: str, dst: str, nodes: list[str]) -> float:
    """What ``src -> dst`` carried over the union of the groups its receivers were
    receiving, over the window: above 1 by the groups routers still forward after the
    last downstream leave (the IGMP/PIM leave latency)."""
    table = _windowed(run, flow, src, dst, nodes)
    union = float(table["union"].sum())
    return float(table["carried"].sum()) / union if union > 0 else math.nan


@measure("stair.model_fit", unit="1")
def model_fit(run: Run, flow: str, src: str, dst: str, nodes: list[str], leave: str,
              join: str = "0s") -> float:
    """What ``src -> dst`` carried over what the ``modelled`` basis says it carries with
    the routers' ``join`` and ``leave`` latency (over the window): 1 when the latencies
    are the run's own, so the model's dilation at other latencies can be trusted."""
    table = _windowed(run, flow, src, dst, nodes, (_seconds(join), _seconds(leave)))
    model = float(table["model"].sum())
    return float(table["carried"].sum()) / model if model > 0 else math.nan


def _rates(run: Run, flow: str, node: str | None = None) -> pd.Series:
    rows = run.per_second[run.per_second["flow"] == flow]
    if node is not None:
        rows = rows[rows["node"] == node]
    return rows.groupby("t")["throughput_bps"].sum().sort_index()


def representative(run: Run, tcp: list[str]) -> str:
    """The TCP flow whose mean rate is closest to the mean of all (sec. VI's choice)."""
    means = {f: _throughput(run, f) for f in tcp}
    means = {f: m for f, m in means.items() if not math.isnan(m)}
    overall = sum(means.values()) / len(means)
    return min(means, key=lambda f: abs(means[f] - overall))


@figure("stair.versus_tcp")
def versus_tcp(run: Run, folder: Path, flow: str, panels: list[dict],
               name: str = "stair-versus-tcp") -> list[Path]:
    """One panel per STAIR receiver: its rate, a representative TCP flow, and the TCP
    flows' mean and standard deviation (as Figs. 9, 11, 13). ``panels``:
    ``[{node: s1, tcp: [tcp1, ...], title: "S1, 32 ms"}]``."""
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(len(panels), 1, figsize=(7, 2.6 * len(panels)), squeeze=False)
        for ax, panel in zip(axes[:, 0], panels, strict=True):
            tcp = list(panel["tcp"])
            mine = _rates(run, flow, panel["node"])
            table = pd.concat({f: _rates(run, f) for f in tcp}, axis=1).fillna(0.0)
            top = max(float(mine.max() if len(mine) else 0), float(table.max().max()))
            scale, unit = rate_scale(top)
            rep = representative(run, tcp)
            mean_rate = _throughput(run, flow, panel["node"]) / scale
            ax.plot(mine.index, mine / scale, color="#c0392b", lw=1.3,
                    label=f"STAIR {panel['node']} (mean {mean_rate:.2f})")
            ax.plot(table.index, table[rep] / scale, color="#2c3e50", lw=0.9,
                    label=f"{rep} (representative)")
            mean, sd = table.mean(axis=1), table.std(axis=1)
            ax.fill_between(table.index, (mean - sd) / scale, (mean + sd) / scale,
                            color="#95a5a6", alpha=0.35, lw=0, label="TCP mean ± sd")
            overall = sum(_throughput(run, f) for f in tcp) / len(tcp)
            ax.axhline(overall / scale, color="#7f8c8d", ls="--", lw=0.8,
                       label=f"TCP mean {overall / scale:.2f}")
            ax.axvspan(0, run.window[0], color="#eeeeee", lw=0)
            ax.set_ylim(bottom=0)
            ax.set_ylabel(f"throughput ({unit})")
            ax.set_title(panel.get("title", panel["node"]), fontsize=10)
            ax.legend(fontsize=7, ncol=2, loc="upper right")
        axes[-1, 0].set_xlabel("time (s)")
        fig.tight_layout()
        return save(fig, folder, name)


@figure("stair.dilation")
def dilation_figure(run: Run, folder: Path, flow: str, src: str, dst: str, nodes: list[str],
                    bound: float = 1.81, name: str = "stair-dilation") -> list[Path]:
    """Fig. 14: the dilation of ``src -> dst`` per second (from the link's counters and
    from the receivers' subscriptions), with the worst-case bound."""
    link = dilation_series(run, flow, src, dst, nodes, "link")
    demanded = dilation_series(run, flow, src, dst, nodes, "demanded")
    static = dilation_series(run, flow, src, dst, nodes, "static")
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(7, 2.8))
        ax.plot(link.index, link.values, color="#2c3e50", lw=1.0,
                label=f"{src}-{dst}, link counters")
        ax.plot(demanded.index, demanded.values, color="#8e44ad", lw=0.9, ls=":",
                label="receivers' groups (no leave latency)")
        ax.plot(static.index, static.values, color="#27ae60", lw=0.8, ls="--",
                label="CLs and NCLs only")
        ax.axhline(bound, color="#c0392b", ls="--", lw=0.9, label=f"bound {bound:g} (Lemma 4)")
        ax.axhline(1.0, color="#7f8c8d", lw=0.6)
        top = max([bound, *(float(s.max()) for s in (link, demanded) if len(s))])
        ax.set_ylim(0.8, top + 0.1)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("dilation")
        ax.legend(fontsize=8)
        return save(fig, folder, name)


@figure("stair.dilation_vs_leave")
def dilation_vs_leave(run: Run, folder: Path, flow: str, src: str, dst: str, nodes: list[str],
                      leaves: list[str], join: str = "0s", measured_leave: str | None = None,
                      bound: float = 1.81, name: str = "stair-dilation-vs-leave") -> list[Path]:
    """The dilation of ``src -> dst`` the run's subscriptions give with routers that stop
    forwarding a group ``leaves`` after its last leave (``modelled`` basis: worst second,
    90th percentile and mean), and the link counters' at ``measured_leave``."""
    xs = [_seconds(v) * 1e3 for v in leaves]
    series = [dilation_series(run, flow, src, dst, nodes, "modelled", v, join) for v in leaves]
    link = dilation_series(run, flow, src, dst, nodes, "link")
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(6, 3.2))
        for stat, style, label in ((lambda s: s.max(), "-o", "worst second"),
                                   (lambda s: s.quantile(0.9), "--s", "90th percentile"),
                                   (lambda s: s.mean(), ":^", "mean")):
            ax.plot(xs, [float(stat(s)) if len(s) else math.nan for s in series], style,
                    color="#2c3e50", lw=1.0, ms=4, label=f"modelled, {label}")
        if measured_leave is not None and len(link):
            at = _seconds(measured_leave) * 1e3
            ax.plot([at, at], [float(link.max()), float(link.mean())], "x", color="#c0392b",
                    ms=8, mew=1.5, label="link counters (worst, mean)")
        ax.axhline(bound, color="#c0392b", ls="--", lw=0.9, label=f"bound {bound:g} (Lemma 4)")
        ax.set_xlabel("routers' leave latency (ms)")
        ax.set_ylabel(f"dilation of {src}-{dst}")
        ax.set_ylim(bottom=1.0)
        ax.legend(fontsize=7)
        return save(fig, folder, name)


def path_rtt(links: list[dict], receiver_link: list[str], fixed_one_way: float) -> float:
    """The RTT a Fig. 10 point sets: twice (the receiver link's delay + the fixed rest)."""
    for link in links:
        if sorted(link.get("endpoints", [])) == sorted(receiver_link):
            return 2 * (parse_duration(link["delay"]) + fixed_one_way)
    return math.nan


def joined_stair(run: Run, flow: str, node: str) -> int | None:
    """The stair layer a receiver held most of the window (its ``stair_layer`` gauge)."""
    table = run.protocol
    rows = table[(table["flow"] == flow) & (table["node"] == node)
                 & (table["name"] == "stair_layer") & (table["t"] > run.window[0])]
    rows = rows[rows["value"] >= 0]
    return int(rows["value"].mode().iloc[0]) if len(rows) else None


def measured_rtt(run: Run, flow: str, node: str) -> float:
    """A receiver's mean RTT estimate over the window in seconds (its ``rtt_ms`` gauge;
    nan without one): the RTT its TCP flows saw too, queueing included."""
    table = run.protocol
    rows = table[(table["flow"] == flow) & (table["node"] == node)
                 & (table["name"] == "rtt_ms") & (table["t"] > run.window[0])
                 & (table["value"] > 0)]
    return float(rows["value"].mean()) / 1e3 if len(rows) else math.nan


@sweep_figure("stair.fig10")
def fig10(sweep: Sweep, folder: Path, flow: str, node: str, receiver_link: list[str],
          fixed_one_way: str = "4ms", stair_base: str = "16ms", stair_layers: int = 5,
          name: str = "stair-fig10") -> list[Path]:
    """Fig. 10: STAIR's and TCP's mean throughput against the RTT, and the expected STAIR
    throughput, TCP's x RTT / the stair layer's RTT (simple option): for the path's RTT
    and the layer it selects, for the layer joined, and for the RTT measured (queueing
    included, as TCP sees it) and the layer joined."""
    rtts = stair_rtts(parse_duration(stair_base), stair_layers)
    points = []
    for p in sweep.points:
        if p.run is None or p.record.status != "complete":
            continue
        rtt = path_rtt(p.record.set.get("overrides.links", []), receiver_link,
                       parse_duration(fixed_one_way))
        tcp = [f.name for f in p.run.spec.flows if f.type == "tcp"]
        tcp_mean = sum(_throughput(p.run, f) for f in tcp) / len(tcp) if tcp else math.nan
        (layer,) = select_simple(rtt, rtts)
        joined = joined_stair(p.run, flow, node)
        seen = measured_rtt(p.run, flow, node)
        points.append((rtt, _throughput(p.run, flow, node), tcp_mean,
                       tcp_mean * rtt / rtts[layer],
                       tcp_mean * rtt / rtts[joined] if joined is not None else math.nan,
                       tcp_mean * seen / rtts[joined] if joined is not None else math.nan))
    points.sort()
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(6, 3.2))
        if points:
            x = [p[0] * 1e3 for p in points]
            top = max(max(v for v in p[1:] if not math.isnan(v)) for p in points)
            scale, unit = rate_scale(top)
            ax.plot(x, [p[1] / scale for p in points], "o-", color="#c0392b", label="STAIR")
            ax.plot(x, [p[2] / scale for p in points], "s-", color="#2c3e50", label="TCP mean")
            ax.plot(x, [p[3] / scale for p in points], "--", color="#7f8c8d",
                    label="expected STAIR (TCP x RTT / stair RTT)")
            ax.plot(x, [p[4] / scale for p in points], ":", color="#8e44ad",
                    label="same, with the stair layer the receiver joined")
            ax.plot(x, [p[5] / scale for p in points], "-.", color="#27ae60",
                    label="same, with the RTT the receiver measured")
            ax.set_ylabel(f"throughput ({unit})")
            ax.legend(fontsize=8)
        ax.set_xlabel("RTT (ms)")
        fig.tight_layout()
        return save(fig, folder, name)

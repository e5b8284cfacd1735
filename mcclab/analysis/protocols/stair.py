"""STAIR analysis (ToN 2006 sec. VI): TCP-friendliness ratios, link dilation (Def. 4),
and the paper-style figures (Figs. 9, 11, 13: a STAIR receiver against a representative
TCP flow with the TCP mean and standard deviation; Fig. 14: dilation over time).

Dilation of a link direction ``src -> dst`` at second ``t`` is
``C(t) / M(t)``: ``C`` is the payload the link carried in that second (its
``bytes_out`` minus 28 bytes of IP and UDP header per packet, from
``tables/links.csv``), ``M`` the largest reception rate demanded by the STAIR
receivers downstream of it (packets received plus packets lost, times the
packet size, from ``tables/per_second.csv``). The link must carry nothing but
the session (the STAIR topologies put the TCP sources below it).
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from agents.stair.stairs import select_simple, stair_rtts
from mcclab.analysis import metrics
from mcclab.analysis.figures import STYLE, rate_scale, save
from mcclab.analysis.plugins import figure, measure, sweep_figure
from mcclab.analysis.results import Run
from mcclab.analysis.sweep import Sweep
from mcclab.model.units import parse_duration, parse_size

IP_UDP_HEADER = 28


def demanded_rate(per_second: pd.DataFrame, flow: str, nodes: list[str],
                  packet_size: int) -> pd.Series:
    """Per second, the largest rate (bit/s) any of ``nodes`` was subscribed to:
    (packets received + packets lost) x packet size."""
    rows = per_second[(per_second["flow"] == flow) & per_second["node"].isin(nodes)]
    demand = (rows["packets"] + rows["lost"]) * packet_size * 8
    return demand.groupby(rows["t"]).max().sort_index()


def link_payload_rate(links: pd.DataFrame, src: str, dst: str) -> pd.Series:
    """Per second, UDP payload bits the ``src -> dst`` direction carried (from its counters)."""
    rows = links[(links["src"] == src) & (links["dst"] == dst)].sort_values("t")
    if rows.empty:
        return pd.Series(dtype=float)
    pkts = rows["pkts_out"].diff()
    octets = rows["bytes_out"].diff()
    dt = rows["t"].diff()
    rate = (octets - pkts * IP_UDP_HEADER) * 8 / dt
    rate.index = rows["t"].round().astype(int)
    return rate.dropna()


def dilation_series(run: Run, flow: str, src: str, dst: str, nodes: list[str]) -> pd.Series:
    """Def. 4 per second over the run's window (seconds where no receiver demanded
    anything are left out)."""
    if run.links is None:
        return pd.Series(dtype=float)
    size = _packet_size(run, flow)
    demand = demanded_rate(run.per_second, flow, nodes, size)
    carried = link_payload_rate(run.links, src, dst)
    both = pd.concat({"c": carried, "m": demand}, axis=1).dropna()
    both = both[both["m"] > 0]
    lo, hi = run.window
    both = both[(both.index > lo) & (both.index <= hi)]
    return both["c"] / both["m"]


def _packet_size(run: Run, flow: str) -> int:
    """The flow's packet size from the spec (default 512 B, the paper's)."""
    for f in run.spec.flows:
        if f.name == flow:
            params = (getattr(f, "model_extra", None) or {}).get("params") or {}
            if isinstance(params, dict) and "packet_size" in params:
                return parse_size(params["packet_size"])
    return 512


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
                 quantile: float = 1.0) -> float:
    """The largest (or the ``quantile``) per-second dilation of ``src -> dst`` (Def. 4)."""
    series = dilation_series(run, flow, src, dst, nodes)
    return float(series.quantile(quantile)) if len(series) else math.nan


@measure("stair.dilation_mean", unit="1")
def dilation_mean(run: Run, flow: str, src: str, dst: str, nodes: list[str]) -> float:
    """Mean per-second dilation of ``src -> dst`` over the window."""
    series = dilation_series(run, flow, src, dst, nodes)
    return float(series.mean()) if len(series) else math.nan


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
    """Fig. 14: the dilation of ``src -> dst`` per second, with the worst-case bound."""
    series = dilation_series(run, flow, src, dst, nodes)
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(7, 2.8))
        ax.plot(series.index, series.values, color="#2c3e50", lw=1.0, label=f"{src}-{dst}")
        ax.axhline(bound, color="#c0392b", ls="--", lw=0.9, label=f"bound {bound:g} (Lemma 4)")
        ax.axhline(1.0, color="#7f8c8d", lw=0.6)
        ax.set_ylim(0.8, max(bound, float(series.max()) if len(series) else 1) + 0.1)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("dilation")
        ax.legend(fontsize=8)
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


@sweep_figure("stair.fig10")
def fig10(sweep: Sweep, folder: Path, flow: str, node: str, receiver_link: list[str],
          fixed_one_way: str = "4ms", stair_base: str = "16ms", stair_layers: int = 5,
          name: str = "stair-fig10") -> list[Path]:
    """Fig. 10: STAIR's and TCP's mean throughput against the RTT, and the expected STAIR
    throughput, TCP's x RTT / the stair layer's RTT (simple option)."""
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
        points.append((rtt, _throughput(p.run, flow, node), tcp_mean,
                       tcp_mean * rtt / rtts[layer],
                       tcp_mean * rtt / rtts[joined] if joined is not None else math.nan))
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
            ax.set_ylabel(f"throughput ({unit})")
            ax.legend(fontsize=8)
        ax.set_xlabel("RTT (ms)")
        fig.tight_layout()
        return save(fig, folder, name)

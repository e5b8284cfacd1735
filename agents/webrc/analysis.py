"""WEBRC's analysis: receiver estimates (ARTT, LOSSP) from ``tables/protocol.csv``, the
fraction of the packets crossing a bottleneck that reach each receiver (sec. 5.3), the
split of the MRTT samples into way down, join latency and wait for the wave's packet
(:mod:`agents.webrc.mrtt`, from the agents' event logs), and figures in the
paper's style (Figs. 4, 8-11: ARTT, LOSSP and throughput over time).

Everything reads only the run folder (:class:`~mcclab.analysis.results.Run`).
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from agents.webrc.mrtt import (  # noqa: E402
    Sample,
    Schedule,
    WavePair,
    decompose,
    expected_mrtt,
    samples,
    wave_pairs,
)
from mcclab.analysis.figures import STYLE, rate_scale, save  # noqa: E402
from mcclab.analysis.plugins import figure, measure, sweep_figure  # noqa: E402
from mcclab.analysis.results import Run  # noqa: E402
from mcclab.analysis.sweep import Sweep  # noqa: E402
from mcclab.resultsdir import event_records  # noqa: E402


def _window(run: Run) -> tuple[float, float]:
    start, end = run.window
    return start, end


# Gauges renamed during development; runs recorded before keep the old names.
_OLD_NAMES = {"artt_seconds": "artt_s"}


def gauge(run: Run, name: str, flow: str, node: str) -> pd.Series:
    """A receiver gauge over the whole run, indexed by experiment second."""
    p = run.protocol
    mine = p[(p["flow"] == flow) & (p["node"] == node) & (p["role"] == "receiver")]
    if name not in set(mine["name"]) and name in _OLD_NAMES:
        name = _OLD_NAMES[name]
    rows = mine[mine["name"] == name]
    return rows.set_index("t")["value"].sort_index()


def window_mean(run: Run, name: str, flow: str, node: str) -> float:
    """Mean of a receiver gauge over the measurement window (nan if never reported)."""
    start, end = _window(run)
    series = gauge(run, name, flow, node)
    series = series[(series.index > start) & (series.index <= end)]
    return float(series.mean()) if len(series) else math.nan


def _over_receivers(run: Run, name: str, flow: str, node: str | None) -> float:
    """A gauge's window mean at ``node``, else the mean over the flow's receivers."""
    nodes = [node] if node is not None else receivers(run, flow)
    values = [v for v in (window_mean(run, name, flow, n) for n in nodes) if not math.isnan(v)]
    return sum(values) / len(values) if values else math.nan


@measure("webrc.artt", unit="s")
def artt(run: Run, flow: str, node: str | None = None) -> float:
    """ARTT (the averaged MRTT) over the window, at a receiver or the mean over receivers."""
    return _over_receivers(run, "artt_seconds", flow, node)


@measure("webrc.lossp", unit="1", domain=(0, 1))
def lossp(run: Run, flow: str, node: str | None = None) -> float:
    """LOSSP (the loss event rate estimate) over the window."""
    return _over_receivers(run, "lossp", flow, node)


@measure("webrc.shared_fraction", unit="1", domain=(0, 1))
def shared_fraction(run: Run, flow: str, node: str, src: str, dst: str) -> float:
    """Packets ``node`` received over the packets the link ``src -> dst`` carried, in the
    window (sec. 5.3: the share of the packets crossing the shared link that reach a
    receiver). The link must carry only this session's packets (control traffic is a
    few packets a minute)."""
    start, end = _window(run)
    links = run.links
    if links is None or links.empty:
        return math.nan
    d = links[(links["src"] == src) & (links["dst"] == dst)].sort_values("t")
    before, upto = d[d["t"] <= start], d[d["t"] <= end]
    if before.empty or upto.empty:
        return math.nan
    crossed = float(upto["pkts_out"].iloc[-1] - before["pkts_out"].iloc[-1])
    ps = run.per_second
    got = ps[(ps["flow"] == flow) & (ps["node"] == node) & (ps["t"] > start)
             & (ps["t"] <= end)]["packets"].sum()
    return float(got) / crossed if crossed > 0 else math.nan


def _flow_extra(run: Run, flow: str) -> dict:
    """The spec's fields of ``flow`` beyond name and type (params, start, ...)."""
    for f in run.spec.flows:
        if f.name == flow:
            return dict(getattr(f, "model_extra", None) or {})
    return {}


def _records(run: Run, flow: str, role: str, node: str) -> list[dict]:
    """One agent's event log."""
    return event_records(run.path / "logs" / f"{flow}-{role}-{node}.jsonl")


def _sender_start(run: Run, flow: str) -> tuple[float, float] | None:
    """(the sender core's start on the agent clock, the agent clock at experiment time 0)."""
    from mcclab.model.units import parse_duration

    start = parse_duration(_flow_extra(run, flow).get("start") or "0s")
    for log in sorted((run.path / "logs").glob(f"{flow}-sender-*.jsonl")):
        for rec in event_records(log):
            if rec.get("event") == "webrc_sender":
                # The sender runs from its flow's start (plus interpreter start-up, a few
                # hundred ms: good enough to cut a window of 100 s or more).
                return float(rec["t"]), float(rec["t"]) - start
    return None


def mrtt_samples(run: Run, flow: str, node: str, window: bool = True) -> list[Sample]:
    """A receiver's wave MRTT samples placed on the sender's schedule (those in the
    measurement window unless ``window`` is false); [] without the logs."""
    from agents.webrc.params import WebrcParams

    found = _sender_start(run, flow)
    if found is None:
        return []
    sender_t, clock0 = found
    params = WebrcParams.model_validate(_flow_extra(run, flow).get("params") or {})
    items = samples(_records(run, flow, "receiver", node), Schedule(params.model(), sender_t))
    if not window:
        return items
    return [s for s in items if _in_window(run, clock0, s)]


def _in_window(run: Run, clock0: float, sample: Sample) -> bool:
    """Whether ``sample``'s first packet came in the measurement window (``clock0``: the
    agent clock at experiment time 0)."""
    start, end = _window(run)
    return start < sample.t_first - clock0 <= end


MRTT_PARTS = ("sample", "used", "down", "join", "wait", "artt_lag", "join_low", "join_high",
              "spacing", "expected")


@measure("webrc.mrtt", unit="s")
def mrtt(run: Run, flow: str, node: str, part: str = "sample") -> float:
    """Mean of the MRTT samples in the window (join sent -> first packet), ``used`` (the
    mean of the values the receiver fed into ARTT: the samples minus half the spacing
    with ``mrtt_spacing_correction``), or one part of the sample: ``down`` (first packet's
    one-way time), ``join`` (join sent -> forwarding state, estimated), ``wait`` (half the
    joined wave's packet spacing), ``artt_lag`` (ARTT minus the samples' mean),
    ``join_low``/``join_high`` (the interval all samples allow a constant join latency),
    ``spacing`` (the joined waves' packet spacing), ``expected`` (where ARTT should
    settle: with the spacing correction the mean of the values used, ``down + join``;
    without it the wait's fixed point from the measured down + join and the window's
    LOSSP, :func:`~agents.webrc.mrtt.expected_mrtt`)."""
    if part not in MRTT_PARTS:
        raise ValueError(f"part must be one of {', '.join(MRTT_PARTS)}, not {part!r}")
    d = decompose(mrtt_samples(run, flow, node))
    if part == "expected":
        from agents.webrc.params import WebrcParams

        params = WebrcParams.model_validate(_flow_extra(run, flow).get("params") or {})
        if params.mrtt_spacing_correction:
            return d.down + d.join
        return expected_mrtt(d.down + d.join, window_mean(run, "lossp", flow, node), params.p)
    return {"sample": d.mrtt, "used": d.used, "down": d.down, "join": d.join, "wait": d.wait,
            "artt_lag": d.artt_lag, "join_low": d.join_low, "join_high": d.join_high,
            "spacing": d.spacing}[part]


def _pairs(run: Run, flow: str, nodes: list[str], window: bool = True) -> list[WavePair]:
    """The waves two receivers of ``flow`` both sampled (in the window unless not)."""
    if len(nodes) != 2:
        raise ValueError(f"nodes must name two receivers, not {nodes!r}")
    from agents.webrc.params import WebrcParams

    tsd = WebrcParams.model_validate(_flow_extra(run, flow).get("params") or {}).tsd
    first, second = (mrtt_samples(run, flow, node, window) for node in nodes)
    return wave_pairs(first, second, within=tsd)


@measure("webrc.pair_mrtt", unit="s")
def pair_mrtt(run: Run, flow: str, nodes: list[str]) -> float:
    """Mean over the window's waves that both ``nodes`` sampled of their two MRTT values
    (as fed into ARTT) summed: sec. 4.4, at least the delays of the tree's links, equal
    to them when both cycles are taut (Fig. 3: X + Y + Z); ``nan`` without such waves."""
    pairs = _pairs(run, flow, nodes)
    return float(sum(p.total for p in pairs) / len(pairs)) if pairs else math.nan


@measure("webrc.slack_waves", unit="1")
def slack_waves(run: Run, flow: str, nodes: list[str]) -> float:
    """Fraction of the window's waves that both ``nodes`` sampled in which their first
    packet was the same packet (PSN): the later join reached the shared router before
    the wave did and waited for it, a slack cycle (sec. 4.4); ``nan`` without waves."""
    pairs = _pairs(run, flow, nodes)
    return sum(p.slack for p in pairs) / len(pairs) if pairs else math.nan


@figure("webrc.wave_pairs")
def wave_pairs_figure(run: Run, folder: Path, flow: str, nodes: list[str],
                      taut: str | None = None) -> list[Path]:
    """Per wave both receivers sampled: the sum of their two MRTT values against the time
    between their joins (second node's minus first's), the window's waves taut (blue) or
    slack (red, :func:`slack_waves`); ``taut`` (a duration, the tree's delays) draws sec.
    4.4's sum when both cycles are taut."""
    from mcclab.model.units import parse_duration

    pairs = _pairs(run, flow, nodes, window=False)
    found = _sender_start(run, flow)
    if not pairs or found is None:
        return []
    inside = {p.first.t_join for p in pairs if _in_window(run, found[1], p.first)}
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(6, 4))
        for label, keep, slack, style in (
                ("waves before the window", False, None, {"color": "#bbbbbb", "marker": "o"}),
                ("in the window, taut", True, False, {"color": "C0", "marker": "o"}),
                ("in the window, slack (one first packet for both)", True, True,
                 {"color": "C3", "marker": "s"})):
            chosen = [p for p in pairs if (p.first.t_join in inside) == keep
                      and (slack is None or p.slack == slack)]
            ax.plot([p.gap for p in chosen], [p.total for p in chosen], ls="none", ms=4,
                    label=f"{label} ({len(chosen)})", **style)
        if taut is not None:
            ax.axhline(parse_duration(taut), color="k", lw=1, ls="--",
                       label="both cycles taut (sec. 4.4)")
        ax.set_xlabel(f"{nodes[1]}'s join minus {nodes[0]}'s (s)")
        ax.set_ylabel(f"MRTT {nodes[0]} + MRTT {nodes[1]} (s)")
        ax.legend(fontsize=8)
        return save(fig, folder, f"webrc-wave-pairs-{flow}")


def receivers(run: Run, flow: str) -> list[str]:
    """The flow's receiving nodes as recorded."""
    ps = run.per_second
    return sorted(ps.loc[ps["flow"] == flow, "node"].unique())


@figure("webrc.timeline")
def timeline_figure(run: Run, folder: Path, flow: str = "webrc",
                    others: list[str] | None = None) -> list[Path]:
    """Figs. 4 and 10 in one style: ARTT, LOSSP and throughput (per second) against time,
    one line per receiver of ``flow``; ``others`` adds competing flows' throughput."""
    nodes = receivers(run, flow)
    if not nodes:
        return []
    ps = run.per_second
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(3, 1, figsize=(7, 7), sharex=True)
        for node in nodes:
            axes[0].plot(gauge(run, "artt_seconds", flow, node), label=node)
            axes[1].plot(gauge(run, "lossp", flow, node), label=node)
        rows = ps[ps["flow"].isin([flow, *(others or [])])]
        scale, unit = rate_scale(float(rows["throughput_bps"].max() or 1.0))
        for (name, node), group in rows.groupby(["flow", "node"]):
            axes[2].plot(group["t"], group["throughput_bps"] / scale, label=f"{name} {node}")
        axes[0].set_ylabel("ARTT (s)")
        axes[1].set_ylabel("LOSSP")
        axes[2].set_ylabel(f"throughput ({unit})")
        axes[2].set_xlabel("time (s)")
        start, _ = _window(run)
        for ax in axes:
            ax.axvspan(0, start, color="#eeeeee", zorder=0)
            ax.legend(fontsize=8)
        return save(fig, folder, f"webrc-timeline-{flow}")


@figure("webrc.mrtt")
def mrtt_figure(run: Run, folder: Path, flow: str = "webrc") -> list[Path]:
    """Each wave MRTT sample over time split into way down, join sent -> packet sent
    (join latency + wait) and the joined wave's packet spacing, with the ARTT; one panel
    per receiver (the first four), the measurement window shaded white."""
    nodes = receivers(run, flow)[:4]
    found = _sender_start(run, flow)
    if not nodes or found is None:
        return []
    clock0 = found[1]
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(len(nodes), 1, figsize=(7, 2.6 * len(nodes) + 0.6),
                                 sharex=True, squeeze=False)
        for ax, node in zip(axes[:, 0], nodes, strict=True):
            items = mrtt_samples(run, flow, node, window=False)
            if not items:
                continue
            t = [s.t_first - clock0 for s in items]
            ax.plot(t, [s.sample for s in items], ".", ms=3, label="MRTT sample")
            ax.plot(t, [s.up_to_packet for s in items], ".", ms=3,
                    label="join sent -> packet sent")
            ax.plot(t, [s.down for s in items], ".", ms=3, label="packet's way down")
            ax.plot(t, [min(s.spacing, 1.0) for s in items], "x", ms=3,
                    label="wave packet spacing")
            if any(s.used != s.sample for s in items):
                ax.plot(t, [s.used for s in items], "+", ms=4,
                        label="value used (sample - spacing/2)")
            ax.plot(t, [s.artt for s in items], "-", lw=1, color="k", label="ARTT")
            d = decompose(mrtt_samples(run, flow, node))
            ax.set_title(f"{node}: window mean {d.mrtt:.3f} s = down {d.down:.3f} + join "
                         f"{d.join:.3f} + wait {d.wait:.3f}; used {d.used:.3f}; "
                         f"ARTT {d.artt:.3f}", fontsize=8)
            ax.set_ylabel("s")
            ax.set_ylim(0, max(0.6, 1.2 * max(s.sample for s in items[len(items) // 4:])))
            start, _ = _window(run)
            ax.axvspan(0, start, color="#eeeeee", zorder=0)
            ax.legend(fontsize=7, ncol=3)
        axes[-1, 0].set_xlabel("time (s)")
        return save(fig, folder, f"webrc-mrtt-{flow}")


def _path_of(values: dict) -> tuple[float, float] | None:
    """(RTT s, loss) of a Fig. 5 sweep point: twice the bottleneck delay, its forward loss."""
    from mcclab.model.units import parse_duration, parse_probability

    links = values.get("overrides.links")
    if not links:
        return None
    link = links[0]
    loss = (link.get("forward") or {}).get("loss", 0)
    return 2 * parse_duration(link["delay"]), parse_probability(loss)


@sweep_figure("webrc.fig5")
def fig5(sweep: Sweep, folder: Path, flow: str = "webrc", node: str = "d1") -> list[Path]:
    """Fig. 5: steady-state throughput (packets/s) against loss, one line per RTT, with
    Eq. 1 adjusted by the upper bound of Eq. 7 (and LOSSP from Eq. 8) for comparison."""
    import numpy as np

    from agents.webrc.model import loss_event_rate, peak_to_mean, tcp_rate
    from mcclab.analysis.metrics import throughput

    points: dict[float, list[tuple[float, float]]] = {}
    for point in sweep.points:
        path = _path_of(point.record.set)
        if path is None or point.run is None:
            continue
        bps = throughput(point.run.per_second, flow, point.run.window, node)
        if math.isnan(bps):
            continue
        points.setdefault(path[0], []).append((path[1], bps / (8 * 1024)))
    if not points:
        return []
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(6, 4.5))
        losses = np.logspace(-4, -1, 60)
        for i, rtt in enumerate(sorted(points)):
            color = f"C{i % 10}"
            model = [tcp_rate(loss_event_rate(p), rtt) * peak_to_mean(0.75) for p in losses]
            ax.plot(losses, model, color=color, linewidth=0.8, label=f"{rtt:g} s")
            xs, ys = zip(*sorted(points[rtt]), strict=True)
            ax.plot(xs, ys, "o", color=color)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("packet loss probability")
        ax.set_ylabel("throughput (packets/s)")
        ax.legend(title="MRTT (Eqs. 1, 7, 8)", fontsize=8)
        return save(fig, folder, "webrc-fig5")

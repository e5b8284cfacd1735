"""RLC (INFOCOM 1998) analysis plugins: Table 1's indexes, Fig. 3, Fig. 5, Fig. 7.

The computations live in :mod:`agents.rlc.measures`,
:mod:`agents.rlc.model` and :mod:`agents.rlc.figures`; this
module names them for specs (``kind: measure``, ``figures:``, sweep figures).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from agents.rlc import measures as ra
from agents.rlc.figures import fig3_figure, fig5_figure, fig7_figure, fig7_sync
from agents.rlc.model import eq2_c
from mcclab.analysis.plugins import figure, measure, sweep_figure
from mcclab.analysis.results import Run
from mcclab.analysis.sweep import Sweep
from mcclab.model.units import parse_rate


@measure("rlc.fairness", unit="1", domain=(0, 1))
def fairness(run: Run, packet_size: int = 256) -> float:
    """Jain's fairness index over the RLC instances' throughputs (Table 1)."""
    return ra.table1_row(run, 1.0, packet_size=packet_size)["fairness"]


@measure("rlc.router_loss", unit="1", domain=(0, 1))
def router_loss(run: Run, src: str = "n1", dst: str = "n2") -> float:
    """Queue drops over arrivals at the bottleneck direction ``src -> dst`` (Table 1)."""
    return ra.router_loss(run, src, dst)


@measure("rlc.perceived_loss", unit="1", domain=(0, 1))
def perceived_loss(run: Run) -> float:
    """Lost over expected packets on the joined layers, averaged over instances (Table 1)."""
    vals = [i.perceived_loss for i in ra.instances(run)]
    return float(np.nanmean(vals)) if vals else math.nan


@measure("rlc.burst_loss", unit="1", domain=(0, 1))
def burst_loss(run: Run) -> float:
    """Loss events (losses within t_D count once) over expected packets, mean of instances."""
    vals = [i.burst_loss for i in ra.instances(run)]
    return float(np.nanmean(vals)) if vals else math.nan


@measure("rlc.exploitation", unit="1", domain=(0, 1))
def exploitation(run: Run, capacity: str = "1.5Mbit", packet_size: int = 256) -> float:
    """Aggregate RLC rate on the wire (payload + 28 B per packet) over the capacity."""
    return ra.table1_row(run, parse_rate(capacity), packet_size=packet_size)["exploitation"]


@measure("rlc.eq2_in_band", unit="1", domain=(0, 1))
def eq2_in_band(run: Run, low: float = 1.0, high: float = 2.0, tau0: float = 0.125,
                packet_size: int = 256, P: int = 1, W: int = 8) -> float:  # noqa: N803
    """Fraction of instances whose (throughput, burst loss) point lies in Eq. 2's band."""
    cs = [eq2_c(i.throughput_bps / 8, i.burst_loss, packet_size, tau0, P, W)
          for i in ra.instances(run, packet_size) if i.burst_loss > 0]
    if not cs:
        return math.nan
    return sum(low <= c <= high for c in cs) / len(cs)


@measure("rlc.in_sync", unit="1", domain=(0, 1))
def in_sync(run: Run, nodes: list[str], flow: str = "rlc") -> float:
    """Fraction of time after convergence that ``nodes`` hold the same level (Fig. 7)."""
    return fig7_sync(run, flow, tuple(nodes)).get("in_sync", math.nan)


@measure("rlc.converge_time", unit="s")
def converge_time(run: Run, nodes: list[str], flow: str = "rlc") -> float:
    """Seconds from the last of ``nodes`` starting until they share a level (Fig. 7)."""
    return fig7_sync(run, flow, tuple(nodes)).get("converge_s", math.nan)


@figure("rlc.fig7")
def fig7(run: Run, folder: Path, flow: str = "rlc") -> list[Path]:
    """Subscribed rate of every receiver over time (Fig. 7, left)."""
    return fig7_figure(run, folder, flow)


@figure("rlc.fig5")
def fig5(run: Run, folder: Path, tcp_prefix: str = "tcp") -> list[Path]:
    """Aggregate throughput of the RLC instances and of the TCP connections (Fig. 5)."""
    flows = sorted(run.per_second["flow"].unique())
    groups = {"RLC": [f for f in flows if not f.startswith(tcp_prefix)],
              "TCP": [f for f in flows if f.startswith(tcp_prefix)]}
    return fig5_figure(run, folder, groups, title=f"RLC Fig. 5: {run.spec.name}")


@figure("rlc.fig3")
def fig3_run(run: Run, folder: Path) -> list[Path]:
    """Throughput vs burst loss rate of the run's instances with Eq. 2's band (Fig. 3)."""
    points = [(i.burst_loss, i.throughput_bps / 8, len(ra.instances(run)))
              for i in ra.instances(run)]
    return fig3_figure(points, folder, run.spec.name)


@sweep_figure("rlc.fig3")
def fig3_sweep(sweep: Sweep, folder: Path, key: str = "") -> list[Path]:
    """Every run's instances in one Fig. 3 (one marker per swept value)."""
    points = []
    for point in sweep.points:
        if point.run is None:
            continue
        label = point.record.set.get(key, point.name) if key else point.name
        points += [(i.burst_loss, i.throughput_bps / 8, label) for i in ra.instances(point.run)]
    return fig3_figure(points, folder, sweep.info.experiment)


@measure("rlc.group_ratio")
def group_ratio(run: Run, tcp_prefix: str = "tcp") -> float:
    """Aggregate throughput of the RLC instances over that of the TCP flows (Fig. 5)."""
    from mcclab.analysis.metrics import throughput

    flows = sorted(run.per_second["flow"].unique())
    rlc = sum(throughput(run.per_second, f, run.window) for f in flows
              if not f.startswith(tcp_prefix))
    tcp = sum(throughput(run.per_second, f, run.window) for f in flows
              if f.startswith(tcp_prefix))
    return rlc / tcp if tcp > 0 else math.nan


@measure("rlc.eq2_c_median")
def eq2_c_median(run: Run, tau0: float = 0.125, packet_size: int = 256, P: int = 1,  # noqa: N803
                 W: int = 8) -> float:
    """Median over instances of the c' their (throughput, burst loss) point implies."""
    cs = [eq2_c(i.throughput_bps / 8, i.burst_loss, packet_size, tau0, P, W)
          for i in ra.instances(run, packet_size) if i.burst_loss > 0]
    return float(np.median(cs)) if cs else math.nan

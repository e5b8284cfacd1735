"""ORMCC figures in the paper's style (Fig. 4, Fig. 6, Fig. 8), from a run folder alone.

``python -m mcclab.analysis.ormcc_figures RUN`` writes them into ``RUN/figures/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from mcclab.analysis import ormcc_metrics as om
from mcclab.analysis.figures import STYLE, save
from mcclab.analysis.results import Run, load_run


def _rate_at(run: Run, flow: str, node: str) -> pd.Series:
    """Per-second throughput of ``flow`` at ``node`` (0 for missing seconds)."""
    t = run.per_second
    rows = t[(t["flow"] == flow) & (t["node"] == node)].set_index("t")["throughput_bps"]
    full = pd.RangeIndex(1, int(t["t"].max()) + 1) if not t.empty else pd.RangeIndex(0)
    return rows.groupby(level=0).sum().reindex(full, fill_value=0.0)


def running_average_figure(run: Run, folder: Path, node: str = "h1",
                           flows: tuple[str, ...] = ("multi", "uni1", "tcp1"),
                           name: str = "ormcc-fig4") -> list[Path]:
    """Fig. 4: over-time average rate (bytes in [0, t] over t) of each flow at ``node``."""
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
        for flow in flows:
            rate = _rate_at(run, flow, node)
            if rate.empty or not rate.any():
                continue
            avg = rate.cumsum() / pd.Series(rate.index, index=rate.index)
            ax.plot(avg.index, avg / 1e3, label=flow)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("over-time average rate (kbit/s)")
        ax.set_title(f"average rates at {node}")
        ax.legend()
        return save(fig, folder, f"{name}-{node}")


def tracking_figure(run: Run, folder: Path, flow: str = "multi",
                    name: str = "ormcc-fig8") -> list[Path]:
    """Fig. 8: the source's sending rate, with a dashed line and label at every CR change."""
    rate = om.gauge(run, flow, "rate_bps")
    if rate.empty:
        return []
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(7.2, 3.6))
        series = rate.iloc[:, 0]
        ax.plot(series.index, series / 1e3, color="black", linewidth=0.8, label="sending rate")
        top = float(series.max() / 1e3) if len(series) else 1.0
        for t, node in om.cr_switches(run, flow):
            ax.axvline(t, color="grey", linestyle="--", linewidth=0.6)
            ax.text(t, top, node, rotation=90, fontsize=7, va="top", ha="right")
        ax.set_xlabel("time (s)")
        ax.set_ylabel("kbit/s")
        ax.set_title(f"{flow}: sending rate and CR changes")
        return save(fig, folder, name)


def main(argv: list[str]) -> None:
    """Write the ORMCC figures that apply to each run folder given."""
    for arg in argv:
        run = load_run(Path(arg))
        folder = Path(arg) / "figures"
        folder.mkdir(exist_ok=True)
        flows = set(run.per_second["flow"])
        written: list[Path] = []
        if {"multi", "uni1", "tcp1"} <= flows:
            nodes = sorted(set(run.per_second[run.per_second["flow"] == "multi"]["node"]),
                           key=lambda n: int(n[1:]) if n[1:].isdigit() else 0)
            for node in (nodes[0], nodes[-1]):
                i = node[1:]
                written += running_average_figure(run, folder, node, ("multi", f"uni{i}",
                                                                      f"tcp{i}"))
        for flow in ("multi", "ormcc", "long"):
            if not om.gauge(run, flow, "rate_bps").empty:
                written += tracking_figure(run, folder, flow, name=f"ormcc-tracking-{flow}")
        for path in written:
            print(path)


if __name__ == "__main__":
    main(sys.argv[1:])

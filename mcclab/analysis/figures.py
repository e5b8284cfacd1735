"""Figures of a run, in the style of the papers: plain lines, seconds on x, kbit/s or Mbit/s on y.

Each figure is written as PNG (for people) and SVG (embedded in the report)
into ``<run>/figures/``. Matplotlib runs headless (Agg) and SVG text stays
text, so the report is small and sharp and needs no fonts of its own.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: headless, and the fastest backend

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from mcclab.analysis.results import Run  # noqa: E402
from mcclab.analysis.summary import PERCENT_KINDS, Summary, format_value  # noqa: E402
from mcclab.model.quantities import FigureRef  # noqa: E402

STYLE = {
    "font.family": "sans-serif",
    "font.size": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#dddddd",
    "grid.linewidth": 0.6,
    "legend.frameon": False,
    "svg.fonttype": "none",
    "svg.hashsalt": None,
}
_MAX_LEGEND = 16  # beyond this many lines a legend hides the data
_STYLES = ["-", "--", ":", "-."]


def rate_scale(max_bps: float) -> tuple[float, str]:
    """Divisor and axis label: Mbit/s from 1 Mbit/s up, else kbit/s (as the papers plot)."""
    return (1e6, "Mbit/s") if max_bps >= 1e6 else (1e3, "kbit/s")


def save(fig: Figure, folder: Path, name: str) -> list[Path]:
    """Write ``name.png`` and ``name.svg`` and close the figure."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{name}.png", folder / f"{name}.svg"]
    fig.savefig(paths[0], dpi=110, bbox_inches="tight")
    fig.savefig(paths[1], bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    return paths


def _mark_window(ax: plt.Axes, run: Run, label: bool = True) -> None:
    """Shade the warm-up and mark where an interrupted run stopped (labelled once)."""
    start, _ = run.window
    if start > 0:
        ax.axvspan(0, start, color="#f2f2f2", zorder=0, lw=0)
    if run.info.status != "complete" and run.info.elapsed_s is not None:
        ax.axvline(run.info.elapsed_s, color="#c0392b", ls="--", lw=1)
        if label:
            ax.text(run.info.elapsed_s, 1.0, f"{run.info.status} ", color="#c0392b",
                    transform=ax.get_xaxis_transform(), va="top", ha="right", fontsize=8)


def throughput_figure(run: Run, folder: Path) -> list[Path]:
    """Throughput over time of every flow at every receiver, with level and loss panels if any."""
    table = run.per_second.sort_values("t")
    has_level = table["level"].notna().any()
    has_loss = (table["lost"].fillna(0) > 0).any()
    panels = 1 + has_level + has_loss
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(panels, 1, sharex=True, squeeze=False, layout="constrained",
                                 figsize=(10.5, 3.6 + 1.6 * (panels - 1)),
                                 gridspec_kw={"height_ratios": [2.2] + [1] * (panels - 1)})
        axes = list(axes[:, 0])
        ax = axes[0]
        scale, unit = rate_scale(float(table["throughput_bps"].max() or 0))
        lines = _lines(table)
        for label, colour, style, rows in lines:
            ax.plot(rows["t"], rows["throughput_bps"] / scale, lw=1.1, ls=style,
                    color=colour, label=label)
        ax.set_ylabel(f"throughput ({unit})")
        ax.set_ylim(bottom=0)
        if not lines:
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", color="grey")
        elif len(lines) <= _MAX_LEGEND:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=9,
                      ncol=1 if len(lines) <= 8 else 2)
        panel = 1
        if has_level:
            for _, colour, style, rows in lines:
                if rows["level"].notna().any():
                    axes[panel].step(rows["t"], rows["level"], where="post", lw=1, ls=style,
                                     color=colour)
            axes[panel].set_ylabel("level")
            panel += 1
        if has_loss:
            for _, colour, style, rows in lines:
                if not rows["packets"].any():
                    continue  # no packet counts (TCP via iperf3): no loss to show
                axes[panel].plot(rows["t"], rows["lost"].fillna(0), lw=1, ls=style,
                                 color=colour)
            axes[panel].set_ylabel("lost pkts/s")
        for i, a in enumerate(axes):
            _mark_window(a, run, label=i == 0)
        axes[-1].set_xlabel("time (s)")
        axes[-1].set_xlim(left=0)
        fig.suptitle(f"{run.spec.name}: throughput", x=0.01, ha="left", fontsize=11)
        return save(fig, folder, "throughput")


def _lines(table: pd.DataFrame) -> list[tuple[str, str, str, pd.DataFrame]]:
    """(label, colour, line style, rows) per flow and receiver.

    A flow keeps one colour at all its receivers and line styles tell the
    receivers apart, as in the papers' multi-receiver figures.
    """
    out = []
    for i, flow in enumerate(table["flow"].unique()):
        rows = table[table["flow"] == flow]
        nodes = list(rows["node"].unique())
        for j, node in enumerate(nodes):
            label = f"{flow} @ {node}" if len(nodes) > 1 else flow
            out.append((label, f"C{i % 10}", _STYLES[j % len(_STYLES)],
                        rows[rows["node"] == node]))
    return out


def references_figure(summary: Summary, folder: Path) -> list[Path]:
    """Paper versus measured, one small panel per reference quantity (units differ)."""
    quantities = summary.quantities
    cols = min(3, max(1, len(quantities)))
    rows = max(1, math.ceil(len(quantities) / cols))
    colours = {"pass": "#2e7d32", "fail": "#c62828", "n/a": "#9e9e9e", "error": "#6a1b9a"}
    with plt.rc_context(STYLE | {"axes.grid": False}):
        fig, axes = plt.subplots(rows, cols, figsize=(3.5 * cols, 2.8 * rows), squeeze=False,
                                 layout="constrained")
        for ax in axes.flat[len(quantities):]:
            ax.set_visible(False)
        if not quantities:
            axes[0, 0].set_visible(True)
            axes[0, 0].axis("off")
            axes[0, 0].text(0.5, 0.5, "no reference quantities", ha="center", color="grey")
        for ax, q in zip(axes.flat, quantities, strict=False):
            scale, unit = _bar_scale(q)
            # No paper value (the paper gives no number): no paper bar, and the tick says so.
            values = [(q.paper or 0) / scale, (q.measured or 0) / scale]
            ax.bar([0, 1], values, color=["#90a4ae", colours[q.verdict]], width=0.6)
            # The acceptance band around the paper value, so a bar's verdict is visible.
            band = _band(q)
            if band is not None:
                ax.axhspan(band[0] / scale, band[1] / scale, color="#fff3c4", zorder=0)
            ax.set_xticks([0, 1], ["paper" if q.paper is not None else "no paper\nvalue",
                                   "measured"])
            ax.set_title(q.label, fontsize=10)
            if unit:
                ax.set_ylabel(unit)
            top = max(values + [band[1] / scale if band else 0]) or 1
            ax.set_ylim(0, top * 1.25)
            text = ("n/a" if q.measured is None
                    else f"{format_value(q.kind, q.measured, q.unit)}\n{q.verdict}")
            ax.text(1, values[1] + top * 0.03, text, ha="center",
                    va="bottom", fontsize=8, color=colours[q.verdict])
        return save(fig, folder, "references")


def _bar_scale(q) -> tuple[float, str]:  # noqa: ANN001 (a summary Quantity)
    """Divisor and unit of a quantity's bars, matching the report table's units."""
    if q.unit == "bit/s":
        return rate_scale(max(q.paper or 0, q.measured or 0))
    if q.kind in PERCENT_KINDS:
        return 0.01, "%"
    if q.kind == "measure" and q.unit not in ("1", "fraction"):
        return 1.0, q.unit
    return 1.0, ""


def _band(q) -> tuple[float, float] | None:  # noqa: ANN001 (a summary Quantity)
    """The interval a quantity must fall in (intersection when both criteria are given)."""
    low, high = -math.inf, math.inf
    if q.tolerance is not None and q.paper is not None:
        low, high = q.paper - q.tolerance * abs(q.paper), q.paper + q.tolerance * abs(q.paper)
    if q.within is not None:
        low, high = max(low, q.within[0]), min(high, q.within[1])
    if not math.isfinite(low) or low > high:
        return None
    return (max(low, 0.0), high)


def link_directions(links: pd.DataFrame, share: float = 0.05, most: int = 8
                    ) -> list[tuple[str, pd.DataFrame]]:
    """(label, rows) of the busiest link directions, busiest first.

    Every link has a row per direction (``src`` to ``dst``) each second, and
    their counters must not be mixed. Directions that carried less than
    ``share`` of the busiest one's bytes (ACK paths, idle access links) are
    left out, and at most ``most`` are kept, so the figure shows the
    bottleneck rather than a tangle.
    """
    out = []
    for (_, src, dst), rows in links.sort_values("t").groupby(["link", "src", "dst"],
                                                               sort=False):
        sent = float(rows["bytes_out"].max() - rows["bytes_out"].min())
        out.append((sent, f"{src}→{dst}", rows))
    if not out:
        return []
    top = max(sent for sent, _, _ in out)
    busy = sorted((o for o in out if o[0] >= share * top), key=lambda o: -o[0])[:most]
    return [(label, rows) for _, label, rows in busy]


def links_figure(run: Run, folder: Path) -> list[Path]:
    """Per busy link direction: sending rate, queue length, and drops per second."""
    links = run.links if run.links is not None else pd.DataFrame()
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(3, 1, sharex=True, figsize=(10.5, 5.6), layout="constrained")
        series = []
        for label, rows in link_directions(links):
            dt = rows["t"].diff()
            rate = rows["bytes_out"].diff() * 8 / dt
            drops = (rows["drops_queue"] + rows["drops_loss"]).diff() / dt
            series.append((label, rows["t"], rate, rows["qlen_pkts"], drops))
        top = max((float(r[2].max()) for r in series if r[2].notna().any()), default=0.0)
        scale, unit = rate_scale(top)
        for label, t, rate, qlen, drops in series:
            axes[0].plot(t, rate / scale, lw=1.1, label=label)
            axes[1].plot(t, qlen, lw=1.1)
            axes[2].plot(t, drops, lw=1.1)
        axes[0].set_ylabel(f"sent ({unit})")
        axes[1].set_ylabel("queue (pkts)")
        axes[2].set_ylabel("drops/s")
        for i, ax in enumerate(axes):
            ax.set_ylim(bottom=0)
            _mark_window(ax, run, label=i == 0)
        if series:
            axes[0].legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=9)
        axes[-1].set_xlabel("time (s)")
        axes[-1].set_xlim(left=0)
        fig.suptitle(f"{run.spec.name}: links", x=0.01, ha="left", fontsize=11)
        return save(fig, folder, "links")


def write_figures(run: Run, summary: Summary,
                  captions: dict[str, str] | None = None) -> list[Path]:
    """Every figure of a run, the spec's plugin figures last; returns the written paths.

    A plugin figure that fails (unknown, wrong arguments, or raising) is left
    out and noted in ``run.notes``, which the report lists. ``captions``, when
    given, receives each plugin figure's caption (its docstring's first line)
    by file stem.
    """
    folder = run.path / "figures"
    paths = throughput_figure(run, folder) + references_figure(summary, folder)
    if run.links is not None and not run.links.empty:
        paths += links_figure(run, folder)
    for ref in run.spec.figures:
        made = plugin_figure(ref, run, folder, run.notes, sweep=False)
        paths += made
        if captions is not None:
            caption = ref.plugin().doc if made else ""
            captions.update({p.stem: caption for p in made})
    return paths


def plugin_figure(ref: FigureRef, subject: object, folder: Path, notes: list[str],
                  sweep: bool) -> list[Path]:
    """Draw one plugin figure of a run or sweep; a failure becomes a note, not an exception."""
    problem = ref.check(sweep)
    if problem:
        notes.append(f"figure {ref.figure} left out: {problem}")
        return []
    folder.mkdir(parents=True, exist_ok=True)
    try:
        made = ref.plugin(sweep).fn(subject, folder, **ref.args)
    except Exception as exc:  # noqa: BLE001 - a plugin bug costs its figure, not the report
        plt.close("all")
        notes.append(f"figure {ref.figure} failed: {type(exc).__name__}: {exc}")
        return []
    return [Path(p) for p in made or []]

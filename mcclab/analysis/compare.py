"""``mcclab compare RUN RUN...``: runs side by side, as a table and one overlay figure.

Each run is re-analysed from its folder (not from a possibly stale
``summary.json``), so runs analysed by different versions compare fairly.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

# pyplot through figures, which selects the headless Agg backend first
from mcclab.analysis.figures import STYLE, plt, rate_scale, save
from mcclab.analysis.results import Run, RunError, load_run
from mcclab.analysis.summary import (
    Summary,
    format_criterion,
    format_value,
    shown_verdict,
    summarise,
)
from mcclab.model.loader import SpecError
from mcclab.refuse import refuse

_COLOURS = {"pass": "green", "fail": "red", "n/a": "dim", "error": "magenta"}
_LINESTYLES = ["-", "--", ":", "-."]


def _names(runs: list[Run]) -> list[str]:
    """Column names: the run id, prefixed by the experiment when runs mix experiments."""
    mixed = len({r.info.experiment for r in runs}) > 1
    return [f"{r.info.experiment}/{r.info.run_id}" if mixed else r.info.run_id for r in runs]


def comparison_table(runs: list[Run], summaries: list[Summary]) -> Table:
    """One row per reference quantity (matched by label and kind), one column per run."""
    names = _names(runs)
    table = Table(title="paper versus measured", show_lines=False)
    table.add_column("quantity", no_wrap=True)
    table.add_column("paper", justify="right")
    table.add_column("criterion", justify="right")
    for name, run in zip(names, runs, strict=True):
        status = "" if run.info.status == "complete" else f"\n({run.info.status})"
        table.add_column(name + status, justify="right", no_wrap=True)
    keys: list[tuple[str, str]] = []
    for summary in summaries:
        keys += [(q.label, q.kind) for q in summary.quantities if (q.label, q.kind) not in keys]
    for label, kind in keys:
        found = [next((q for q in s.quantities if (q.label, q.kind) == (label, kind)), None)
                 for s in summaries]
        first = next(q for q in found if q is not None)
        papers = {q.paper for q in found if q is not None}
        # Different experiments may hold the same label with different paper values.
        paper = format_value(kind, first.paper, first.unit) + (" *" if len(papers) > 1 else "")
        cells = []
        for q in found:
            if q is None:
                cells.append(Text("—", style="dim"))
            else:
                cells.append(Text(f"{format_value(kind, q.measured, q.unit)} {shown_verdict(q)}",
                                  style=_COLOURS[q.verdict]))
        table.add_row(label, paper, format_criterion(first), *cells)
    if not keys:
        table.add_row("(no reference quantities)", "", "", *[""] * len(runs))
    return table


def overlay_figure(runs: list[Run], out: Path) -> list[Path]:
    """Each flow's throughput (mean over its receivers) over time, all runs overlaid.

    Colour tells the runs apart, line style the flows.
    """
    names = _names(runs)
    series = []
    for name, run in zip(names, runs, strict=True):
        table = run.per_second
        for j, flow in enumerate(table["flow"].unique()):
            per_node = table[table["flow"] == flow].pivot_table(
                index="t", columns="node", values="throughput_bps", aggfunc="sum")
            series.append((name, flow, j, per_node.fillna(0).mean(axis=1)))
    top = max((float(s.max()) for *_, s in series if len(s)), default=0.0)
    scale, unit = rate_scale(top)
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(10.5, 4), layout="constrained")
        for name, flow, j, s in series:
            colour = f"C{names.index(name) % 10}"
            ax.plot(s.index, s / scale, color=colour, ls=_LINESTYLES[j % 4], lw=1.1,
                    label=f"{name}: {flow}")
        ax.set_xlabel("time (s)")
        ax.set_ylabel(f"throughput ({unit})")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        if series:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=9)
        fig.suptitle("throughput per flow (mean over receivers)", x=0.01, ha="left",
                     fontsize=11)
        return save(fig, out.parent, out.stem)


def default_output(runs: list[Run]) -> Path:
    """``compare-<ids>.png`` in the runs' common parent folder (never inside a run)."""
    parent = Path(os.path.commonpath([r.path.resolve() for r in runs]))
    if any(parent == r.path.resolve() for r in runs):
        parent = parent.parent  # the same run given twice
    ids = "_".join(r.info.run_id for r in runs)
    if len(ids) > 60:
        ids = hashlib.sha1(ids.encode()).hexdigest()[:12]
    return parent / f"compare-{ids}.png"


def compare(folders: list[Path], out: Path | None = None) -> tuple[Table, list[Path]]:
    """Load and summarise the runs; return the table and the overlay figure's paths."""
    runs = [load_run(f) for f in folders]
    summaries = [summarise(r) for r in runs]
    paths = overlay_figure(runs, out or default_output(runs))
    return comparison_table(runs, summaries), paths


def compare_command(runs: list[Path]) -> None:
    """``mcclab compare RUN RUN...``: print the table and the overlay figure's path."""
    console, err = Console(), Console(stderr=True, soft_wrap=True)
    if not runs:
        err.print("give at least one results folder")
        raise typer.Exit(2)
    try:
        table, paths = compare(runs)
    except (RunError, SpecError) as exc:
        refuse(err, "cannot analyse", exc, code=2)
    console.print(table)
    console.print(f"overlay figure: {paths[0]} (and {paths[1].name})", highlight=False,
                  markup=False, soft_wrap=True)

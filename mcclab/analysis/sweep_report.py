"""A sweep's report: ``sweep.csv``, the sweep figures, ``trials.csv`` and ``report.html``.

The page (``templates/sweep_report.html.j2``) is self-contained and styled
like a run's report (:mod:`.page`); it is built from the sweep folder alone
(:func:`mcclab.analysis.sweep.load_sweep`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mcclab.analysis.figures import plugin_figure
from mcclab.analysis.page import figure_items, render_page
from mcclab.analysis.stalls import is_overloaded
from mcclab.analysis.summary import (
    NO_PAPER,
    Quantity,
    format_criterion,
    format_value,
    shown_verdict,
    unjudged_without_paper,
)
from mcclab.analysis.sweep import Sweep, SweepPoint, load_sweep
from mcclab.analysis.trials import TRIAL_KEY, is_trials, trials_table, write_trials_csv
from mcclab.model.tcp_models import model


def _banner(sweep: Sweep) -> dict[str, Any] | None:
    """A banner for a sweep that did not run all its points (None when it did)."""
    info = sweep.info
    if info.status == "complete":
        return None
    what = {"interrupted": "This sweep was interrupted",
            "failed": "This sweep stopped: the lab could not be brought up",
            "running": "This sweep has not finished: sweep.json still says 'running'",
            "partial": "This sweep is partial: it stopped at its --limit, and "
                       "'mcclab sweep --resume' runs the rest"}.get(
                info.status, f"This sweep is {info.status}")
    css = "failed" if info.status == "failed" else "interrupted"
    return {"css": css, "what": what, "done": len(info.runs), "planned": info.planned}


def _first(sweep: Sweep, label: str) -> Quantity | None:
    """The first run's quantity with this label (for the paper value and criterion)."""
    for point in sweep.points:
        for q in point.summary.quantities if point.summary is not None else []:
            if q.label == label:
                return q
    return None


def _run_link(sweep: Sweep, point: SweepPoint) -> tuple[str, str | None]:
    """The run's id and the link to its report (None: no report to link)."""
    if point.path is None:
        return "–", None
    page = point.path / "report.html"
    if not page.is_file():
        return point.name, None
    return point.name, os.path.relpath(page, sweep.path)


def _cell(q: Quantity | None) -> dict[str, Any] | None:
    """A measured value with its verdict (None: the run has no such quantity)."""
    if q is None:
        return None
    return {"value": format_value(q.kind, q.measured, q.unit), "verdict": shown_verdict(q),
            "error": q.error}


def _overloaded(point: SweepPoint) -> bool:
    """Whether a run's agents stalled."""
    return point.summary is not None and is_overloaded(point.summary.agent_stalls)


def _reading(key: str, point: SweepPoint) -> str:
    """Under a swept TCP model: whether its row is the verdict or a second reading ('' if not)."""
    if key != "tcp.model":
        return ""
    try:
        verdict = model(str(point.record.set.get(key))).verdict
    except (KeyError, ValueError):
        return ""
    return ("the paper's TCP: the verdict" if verdict
            else "Linux's TCP: a second reading, not the verdict")


def _table(sweep: Sweep) -> dict[str, Any] | None:
    """One row per run: the swept values, the run, its status, and each quantity (None: no run)."""
    if not sweep.points:
        return None
    labels = sweep.labels()
    columns = []
    for label in labels:
        first = _first(sweep, label)
        columns.append({"label": label, "paper": None} if first is None else
                       {"label": label,
                        "paper": ("no paper value" if first.paper is None else
                                  "paper " + format_value(first.kind, first.paper, first.unit)),
                        "criterion": format_criterion(first)})
    rows = []
    for point in sweep.points:
        by_label = {q.label: q for q in (point.summary.quantities if point.summary else [])}
        run, href = _run_link(sweep, point)
        rows.append({"set": [(point.record.set.get(k, "–"), _reading(k, point))
                             for k in sweep.keys],
                     "run": run, "href": href, "status": point.record.status,
                     "error": point.record.error, "overloaded": _overloaded(point),
                     "cells": [_cell(by_label.get(label)) for label in labels]})
    return {"swept": sweep.keys, "columns": columns, "rows": rows}


def _trials(sweep: Sweep) -> dict[str, Any] | None:
    """Mean, deviation and range over the seeds, the criterion applied to the mean (None: none)."""
    if not is_trials(sweep):
        return None
    table = trials_table(sweep)
    groups = [k for k in sweep.keys if k != TRIAL_KEY]
    rows = []
    for row in table.to_dict("records"):
        shown = {c: format_value(row["kind"], row[c], row["unit"])
                 for c in ("mean", "sd", "min", "max", "paper")}
        extra = "".join(f", {n} {what}" for n, what in ((row["missing"], "missing"),
                                                        (row["overloaded"], "overloaded"))
                        if n)
        first = _first(sweep, row["label"])
        verdict = row["verdict"]
        if verdict == "n/a" and first is not None and unjudged_without_paper(first.paper,
                                                                             first.within):
            verdict = NO_PAPER
        rows.append({"groups": [row[k] for k in groups], "label": row["label"],
                     "runs": row["runs"], "extra": extra, "verdict": verdict, **shown})
    return {"swept": groups, "rows": rows}


def _details(sweep: Sweep) -> list[tuple[str, str]]:
    """What was swept and how the sweep went."""
    info = sweep.info
    pairs = [(f"over {key}", ", ".join(map(str, values))) for key, values in info.over.items()]
    pairs += [("--set", " ".join(info.set) or "none"), ("profile", info.profile or "–"),
              ("runs", f"{len(info.runs)} of {info.planned}"), ("status", info.status),
              ("started", info.started or "–"), ("ended", info.ended or "–")]
    return pairs


def render_sweep(sweep: Sweep, figures: list[Path], captions: dict[str, str]) -> str:
    """The sweep report page as a string (templates/sweep_report.html.j2, values escaped)."""
    info = sweep.info
    return render_page(
        "sweep_report.html.j2", title=f"{info.experiment}: sweep {info.sweep}",
        sweep_id=info.sweep_id, profile=info.profile or "–", status=info.status,
        banner=_banner(sweep), description=info.description, notes=sweep.notes,
        table=_table(sweep), trials=_trials(sweep),
        figure_items=figure_items(figures, captions), details=_details(sweep))


def write_sweep_csv(sweep: Sweep) -> Path:
    """Write ``sweep.csv`` into the sweep folder."""
    path = sweep.path / "sweep.csv"
    sweep.table().to_csv(path, index=False)
    return path


def write_sweep_figures(sweep: Sweep, captions: dict[str, str] | None = None) -> list[Path]:
    """The sweep's figures (plugins); failures become notes."""
    paths: list[Path] = []
    for ref in sweep.info.figures:
        made = plugin_figure(ref, sweep, sweep.path / "figures", sweep.notes, sweep=True)
        paths += made
        if captions is not None and made:
            caption = ref.plugin(sweep=True).doc
            captions.update({p.stem: caption for p in made})
    return paths


def build_sweep_report(folder: Path | str) -> Path:
    """Read a sweep folder, write sweep.csv, the figures and report.html; return the page."""
    sweep = load_sweep(folder)
    write_sweep_csv(sweep)
    write_trials_csv(sweep)
    captions: dict[str, str] = {}
    figures = write_sweep_figures(sweep, captions)
    page = sweep.path / "report.html"
    page.write_text(render_sweep(sweep, figures, captions))
    return page


"""The HTML report of a run: one self-contained page written next to the data.

The page has no scripts and loads nothing: styles are inline and the figures'
SVGs are embedded, so it opens the same from a laptop, a CI artifact or an
email, years later. Building a report also writes ``summary.json`` and the
figures, from the folder alone. The functions here gather the values; the HTML
is ``templates/report.html.j2``, rendered with every value escaped.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from mcclab.analysis import metrics
from mcclab.analysis.captures import capture_timelines
from mcclab.analysis.figures import write_figures
from mcclab.analysis.page import figure_items, render_page
from mcclab.analysis.results import Run, load_run
from mcclab.analysis.stalls import allowed, sentence
from mcclab.analysis.summary import (
    Summary,
    format_criterion,
    format_rate,
    format_value,
    shown_verdict,
    summarise,
)
from mcclab.model.tcp_models import reading_label


def _banner(run: Run) -> dict[str, Any] | None:
    """The status banner of a run that did not complete (None when it did)."""
    info = run.info
    if info.status == "complete":
        return None
    elapsed = "?" if info.elapsed_s is None else f"{info.elapsed_s:g}"
    what = {"interrupted": "This run was interrupted",
            "failed": "This run failed",
            "running": "This run has not finished: run.json still says 'running' (the runner "
                       "is still going, or died before writing its final record)",
            "killed": "This run's runner was killed before it could write its final record "
                      "(found dead later)"}[info.status]
    start, end = run.window
    if end > start:
        detail = (f"It ran {elapsed} s of the planned {info.duration_s:g} s; the results "
                  f"below use the data recorded up to then (window {_window(run)}).")
    else:
        detail = (f"It ran {elapsed} s of the planned {info.duration_s:g} s and stopped "
                  f"before the {info.warmup_s:g}-s warm-up ended, so nothing was measured.")
    return {"status": info.status, "what": what, "detail": detail, "error": info.error}


def _agent_stalls(summary: Summary) -> dict[str, Any] | None:
    """Each agent's stalled seconds in the window, and the thresholds (None: not recorded)."""
    stalls = summary.agent_stalls
    if stalls is None:
        return None
    rows = [{"flow": a.flow, "role": a.role, "node": a.node,
             "stalled": f"{a.stalled} of {a.seconds}",
             "late": "–" if a.worst_late_ms is None else f"{a.worst_late_ms:.1f}",
             "verdict": "over the limit" if a.stalled > allowed(a.seconds) else "ok"}
            for a in stalls.agents]
    return {"late_ms": f"{stalls.late_ms:g}", "silent_s": f"{stalls.silent_s:g}", "rows": rows}


def _window(run: Run) -> str:
    """The measurement window for people."""
    start, end = run.window
    return f"{start:g}–{end:g} s" if end > start else f"empty (warm-up {start:g} s not reached)"


def _tcp_reading(run: Run) -> str:
    """Which TCP the run's TCP flows ran: the paper's model (the verdict) or a second reading.

    '' when the run named no TCP model.
    """
    name = (run.spec.tcp or {}).get("model")
    return reading_label(name if isinstance(name, str) else None)


def _quantities(summary: Summary) -> dict[str, Any] | None:
    """The paper-versus-measured rows and their verdict counts (None: the spec lists none)."""
    if not summary.quantities:
        return None
    counts = summary.counts()
    start, end = summary.window
    window = f"over the window {start:g}–{end:g} s" if end > start else "no measurement window"
    head = {"pass": counts["pass"], "fail": counts["fail"], "na": counts["n/a"],
            "error": counts["error"], "marginal": sum(q.marginal for q in summary.quantities),
            "window": window}
    rows = [{"label": q.label, "kind": q.kind, "source": q.source,
             "paper": format_value(q.kind, q.paper, q.unit),
             "measured": format_value(q.kind, q.measured, q.unit),
             "criterion": format_criterion(q), "verdict": shown_verdict(q), "marginal": q.marginal,
             "note": q.note}
            for q in summary.quantities]
    return {"counts": head, "rows": rows}


def _flows(run: Run) -> list[dict[str, str]] | None:
    """Per flow and receiver: throughput, loss and convergence (None: no measurements)."""
    table, window = run.per_second, run.window
    if table.empty:
        return None
    rows = []
    for (flow, node), part in table.groupby(["flow", "node"], sort=False):
        rate = metrics.throughput(table, flow, window, node)
        loss = metrics.flow_loss(table, flow, window, node)
        series = part.groupby("t")["throughput_bps"].sum()
        conv = metrics.convergence_time(series, band=0.1, smooth=5)
        rows.append({"flow": flow, "type": run.flow_type(flow), "node": node,
                     "rate": format_rate(rate) if math.isfinite(rate) else "–",
                     "loss": format_value("loss", loss),
                     "settled": "–" if math.isnan(conv) else f"{conv:g} s"})
    return rows


def _flatten(data: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Nested JSON as (dotted key, value) pairs."""
    if isinstance(data, dict):
        out = []
        for key, value in data.items():
            out += _flatten(value, f"{prefix}.{key}" if prefix else str(key))
        return out
    if isinstance(data, list) and not all(isinstance(v, str | int | float) for v in data):
        return [(prefix, json.dumps(data))]
    return [(prefix, ", ".join(map(str, data)) if isinstance(data, list) else str(data))]


def _run_details(run: Run) -> list[tuple[str, str]]:
    """Timings, profile and scaling rule of the run."""
    info = run.info
    pairs = [("status", info.status), ("profile", info.profile or "–"),
             ("scaling rule", info.scaling or "none (the paper's parameters)"),
             ("planned duration", f"{info.duration_s:g} s"), ("warm-up", f"{info.warmup_s:g} s"),
             ("elapsed", "–" if info.elapsed_s is None else f"{info.elapsed_s:g} s"),
             ("measurement window", _window(run)),
             ("started", str(info.started or "–")), ("ended", str(info.ended or "–"))]
    if info.error:
        pairs.append(("error", info.error))
    return pairs


def render(run: Run, summary: Summary, figures: list[Path],
           captions: dict[str, str] | None = None) -> str:
    """The report page as a string (templates/report.html.j2, every value escaped)."""
    spec, info = run.spec, run.info
    return render_page(
        "report.html.j2",
        title=f"{spec.name or info.experiment} — {info.run_id}",
        heading=spec.name or info.experiment, run_id=info.run_id,
        profile=info.profile or "–", status=info.status,
        banner=_banner(run), stalls_banner=sentence(summary.agent_stalls),
        description=spec.description, reference=spec.reference or "–",
        tcp=_tcp_reading(run), notes=run.notes, quantities=_quantities(summary),
        figure_items=figure_items(figures, captions), flows=_flows(run),
        captures=capture_timelines(run.path), details=_run_details(run),
        agent_stalls=_agent_stalls(summary),
        environment=_flatten(run.env) if run.env else None)


def build_report(folder: Path | str) -> Path:
    """Read a results folder, write summary.json, figures/ and report.html; return the page."""
    run = load_run(folder)
    summary = summarise(run)
    (run.path / "summary.json").write_text(summary.model_dump_json(indent=2) + "\n")
    captions: dict[str, str] = {}
    figures = write_figures(run, summary, captions)
    page = run.path / "report.html"
    page.write_text(render(run, summary, figures, captions))
    return page

"""The HTML report of a run: one self-contained page written next to the data.

The page has no scripts and loads nothing: styles are inline and the figures'
SVGs are embedded, so it opens the same from a laptop, a CI artifact or an
email, years later. Building a report also writes ``summary.json`` and the
figures, from the folder alone.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from mcclab.analysis import metrics
from mcclab.analysis.captures import capture_section
from mcclab.analysis.figures import write_figures
from mcclab.analysis.page import CSS, definitions, esc, figures_html, verdict_badge
from mcclab.analysis.results import Run, load_run
from mcclab.analysis.stalls import allowed
from mcclab.analysis.stalls import describe as describe_stalls
from mcclab.analysis.summary import (
    Summary,
    format_criterion,
    format_rate,
    format_value,
    summarise,
)
from mcclab.experiment.tcp_models import reading_label


def _keep_units(text: str) -> str:
    """Escape, and glue units to their numbers so '60 %' never breaks across lines."""
    return re.sub(r" (%|[kMG]?bit/s)", r"&nbsp;\1", esc(text))


def _banner(run: Run) -> str:
    """The status banner of a run that did not complete ('' when it did)."""
    info = run.info
    if info.status == "complete":
        return ""
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
    error = f"<span class='detail'>Error: {esc(info.error)}</span>" if info.error else ""
    return (f"<div class='banner {info.status}' role='alert'>{what}."
            f"<span class='detail'>{esc(detail)}</span>{error}</div>")


def _stalls_banner(summary: Summary) -> str:
    """The banner of a run whose agents did not get the CPU ('' when they did)."""
    stalls = summary.agent_stalls
    if stalls is None or not stalls.overloaded:
        return ""
    return (f"<div class='banner overloaded' role='alert'>The agents stalled: the results "
            f"below are not the protocol's.<span class='detail'>{esc(describe_stalls(stalls))}"
            f"</span></div>")


def _agent_stalls(summary: Summary) -> str:
    """A table of each agent's stalled seconds in the window, or why there is none."""
    stalls = summary.agent_stalls
    if stalls is None:
        return "<p>Not recorded (no tables/agents.csv).</p>"
    rows = "".join(
        f"<tr><td>{esc(a.flow)}</td><td>{esc(a.role)}</td><td>{esc(a.node)}</td>"
        f"<td class='num'>{a.stalled} of {a.seconds}</td>"
        f"<td class='num'>{'–' if a.worst_late_ms is None else f'{a.worst_late_ms:.1f}'}</td>"
        f"<td>{'over the limit' if a.stalled > allowed(a.seconds) else 'ok'}</td></tr>"
        for a in stalls.agents)
    return (f"<p class='why'>A second is stalled when the agent's timers ran "
            f"{stalls.late_ms:g} ms or more late in it, or it wrote no record for over "
            f"{stalls.silent_s:g} s.</p><table><tr><th>flow</th><th>role</th><th>node</th>"
            f"<th class='num'>stalled seconds</th><th class='num'>latest timer (ms)</th>"
            f"<th></th></tr>{rows}</table>")


def _window(run: Run) -> str:
    """The measurement window for people."""
    start, end = run.window
    return f"{start:g}–{end:g} s" if end > start else f"empty (warm-up {start:g} s not reached)"


MARGINAL_BADGE = "<span class='marginal'>marginal</span>"


def _tcp_reading(run: Run) -> str:
    """Which TCP the run's TCP flows ran: the paper's model (the verdict) or a second reading."""
    name = (run.spec.tcp or {}).get("model")
    label = reading_label(name if isinstance(name, str) else None)
    return f"<p><strong>TCP:</strong> {esc(label)} (docs/tcp-models.md)</p>" if label else ""


def _quantities(summary: Summary) -> str:
    """The paper-versus-measured table with its verdict counts."""
    if not summary.quantities:
        return "<p>The spec lists no reference quantities.</p>"
    counts = summary.counts()
    start, end = summary.window
    window = f"over the window {start:g}–{end:g} s" if end > start else "no measurement window"
    errors = f", {counts['error']} error" if counts["error"] else ""
    marginal = sum(q.marginal for q in summary.quantities)
    marginal_note = (f" ({marginal} marginal: within 10 % of the band's edge)"
                     if marginal else "")
    head = (f"<p class='counts'>{counts['pass']} pass, {counts['fail']} fail, "
            f"{counts['n/a']} n/a{errors}{marginal_note}; {window}.</p>")
    rows = []
    for q in summary.quantities:
        rows.append(
            f"<tr><td>{esc(q.label)}<div class='why'>{esc(q.kind)}"
            f"{' · ' + esc(q.source) if q.source else ''}</div></td>"
            f"<td class='num'>{esc(format_value(q.kind, q.paper, q.unit))}</td>"
            f"<td class='num'>{esc(format_value(q.kind, q.measured, q.unit))}</td>"
            f"<td class='num'>{esc(format_criterion(q))}</td>"
            f"<td>{verdict_badge(q.verdict)}{MARGINAL_BADGE if q.marginal else ''}</td>"
            f"<td class='why'>{_keep_units(q.note)}</td></tr>")
    widths = "".join(f"<col style='width: {w}%'>" for w in (27, 10, 11, 12, 8, 32))
    return (head + f"<table><colgroup>{widths}</colgroup>"
            "<thead><tr><th>quantity</th><th class='num'>paper</th>"
            "<th class='num'>measured</th><th class='num'>tolerance</th><th>verdict</th>"
            "<th>why</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


def _flows(run: Run) -> str:
    """Per flow and receiver: throughput, loss and convergence."""
    table, window = run.per_second, run.window
    if table.empty:
        return "<p>No per-second measurements were recorded.</p>"
    rows = []
    for (flow, node), part in table.groupby(["flow", "node"], sort=False):
        rate = metrics.throughput(table, flow, window, node)
        loss = metrics.flow_loss(table, flow, window, node)
        series = part.groupby("t")["throughput_bps"].sum()
        conv = metrics.convergence_time(series, band=0.1, smooth=5)
        rows.append(
            f"<tr><td>{esc(flow)}</td><td>{esc(run.flow_type(flow))}</td><td>{esc(node)}</td>"
            f"<td class='num'>{esc(format_rate(rate) if math.isfinite(rate) else '–')}</td>"
            f"<td class='num'>{esc(format_value('loss', loss))}</td>"
            f"<td class='num'>{'–' if math.isnan(conv) else f'{conv:g} s'}</td></tr>")
    return ("<table><thead><tr><th>flow</th><th>type</th><th>receiver</th>"
            "<th class='num'>mean throughput</th><th class='num'>loss</th>"
            "<th class='num'>settled from</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table><p class='why'>Throughput and loss over the "
            "measurement window. <em>Settled from</em>: the time after which the 5-s moving "
            "average stays within ±10 % of its mean over the last quarter of the run "
            "(see docs/results.md).</p>")


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


def _run_details(run: Run) -> str:
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
    return definitions(pairs)


def render(run: Run, summary: Summary, figures: list[Path],
           captions: dict[str, str] | None = None) -> str:
    """The report page as a string."""
    spec, info = run.spec, run.info
    notes = "".join(f"<li>{esc(n)}</li>" for n in run.notes)
    title = f"{spec.name or info.experiment} — {info.run_id}"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)}</title><style>{CSS}</style></head>
<body><main>
<h1>{esc(spec.name or info.experiment)}</h1>
<p class="sub">run <strong>{esc(info.run_id)}</strong> · profile {esc(info.profile or '–')} ·
<span class="status-{esc(info.status)}">{esc(info.status)}</span></p>
{_banner(run)}
{_stalls_banner(summary)}
<p>{esc(spec.description)}</p>
<p><strong>Paper:</strong> {esc(spec.reference or '–')}</p>
{_tcp_reading(run)}
{f'<ul class="notes">{notes}</ul>' if notes else ''}
<h2>Paper versus measured</h2>
{_quantities(summary)}
<h2>Figures</h2>
{figures_html(figures, captions)}
<h2>Flows</h2>
{_flows(run)}
{capture_section(run.path)}
<h2>Run</h2>
{_run_details(run)}
<h3>Did the agents get the CPU?</h3>
{_agent_stalls(summary)}
<h2>Environment</h2>
{definitions(_flatten(run.env)) if run.env else '<p>Not recorded.</p>'}
</main></body></html>
"""


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

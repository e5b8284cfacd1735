"""The HTML report of a run: one self-contained page written next to the data.

The page has no scripts and loads nothing: styles are inline and the figures'
SVGs are embedded, so it opens the same from a laptop, a CI artifact or an
email, years later. Building a report also writes ``summary.json`` and the
figures, from the folder alone.
"""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path
from typing import Any

from mcclab.analysis import metrics
from mcclab.analysis.captures import capture_section
from mcclab.analysis.figures import write_figures
from mcclab.analysis.results import Run, load_run
from mcclab.analysis.stalls import allowed, warning_for
from mcclab.analysis.stalls import describe as describe_stalls
from mcclab.analysis.summary import (
    Summary,
    format_criterion,
    format_rate,
    format_value,
    summarise,
)

CSS = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       color: #222; margin: 0; background: #fafafa; }
main { max-width: 1100px; margin: 0 auto; padding: 24px 32px 48px; background: #fff; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 32px 0 8px; border-bottom: 1px solid #e5e5e5; padding-bottom: 4px; }
.sub { color: #666; margin: 0 0 12px; }
.banner { padding: 12px 16px; border-radius: 6px; margin: 16px 0; font-weight: 600; }
.banner.interrupted, .banner.running, .banner.killed { background: #fff4e5;
                                       border: 1px solid #f0a040; color: #8a4b00; }
.banner.failed, .banner.overloaded { background: #fdecea; border: 1px solid #e57373;
                                     color: #a31515; }
.banner .detail { font-weight: 400; display: block; margin-top: 4px; }
table { border-collapse: collapse; width: 100%; margin: 8px 0; font-size: 14px; }
th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid #eee; vertical-align: top; }
th { background: #f5f5f5; font-weight: 600; }
th.num { text-align: right; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.verdict { display: inline-block; padding: 1px 10px; border-radius: 10px; font-weight: 600;
           font-size: 13px; }
.v-pass { background: #e6f4ea; color: #1e6b34; }
.v-fail { background: #fdecea; color: #a31515; }
.v-na { background: #eee; color: #555; }
.marginal { display: inline-block; margin-left: 4px; padding: 0 6px; border-radius: 8px;
            font-size: 12px; background: #fff4e5; color: #8a4b00; }
.status-complete { color: #1e6b34; } .status-interrupted { color: #8a4b00; }
.status-failed { color: #a31515; }
.status-running, .status-killed { color: #8a4b00; }
.why { color: #555; font-size: 13px; }
.counts { margin: 4px 0 8px; color: #444; }
figure { margin: 16px 0; }
figure svg { display: block; width: 100%; height: auto; }
figcaption { color: #666; font-size: 13px; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 8px 0; }
dt { color: #666; } dd { margin: 0; font-family: ui-monospace, "DejaVu Sans Mono", monospace;
     font-size: 13px; overflow-wrap: anywhere; }
ul.notes { color: #8a4b00; }
"""


def _e(text: object) -> str:
    """HTML-escape any value, quotes included."""
    return html.escape(str(text), quote=True)


def _keep_units(text: str) -> str:
    """Escape, and glue units to their numbers so '60 %' never breaks across lines."""
    return re.sub(r" (%|[kMG]?bit/s)", r"&nbsp;\1", _e(text))


def inline_svg(path: Path) -> str:
    """An SVG file's ``<svg>`` element for embedding: natural size, shrunk to fit the page."""
    text = path.read_text()
    text = text[text.index("<svg"):]  # drop the XML declaration and DOCTYPE
    # Fixed width/height would overflow a narrow window; the viewBox keeps the
    # aspect ratio, and max-width keeps small figures (and their fonts) at
    # their natural size instead of blowing them up.
    return re.sub(r'<svg([^>]*?) width="([^"]*)" height="[^"]*"',
                  r'<svg\1 style="max-width: \2"', text, count=1)


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
    error = f"<span class='detail'>Error: {_e(info.error)}</span>" if info.error else ""
    return (f"<div class='banner {info.status}' role='alert'>{what}."
            f"<span class='detail'>{_e(detail)}</span>{error}</div>")


def _stalls_banner(summary: Summary) -> str:
    """The banner of a run whose agents did not get the CPU ('' when they did)."""
    stalls = summary.agent_stalls
    if stalls is None or not stalls.overloaded:
        return ""
    return (f"<div class='banner overloaded' role='alert'>The agents stalled: the results "
            f"below are not the protocol's.<span class='detail'>{_e(describe_stalls(stalls))}"
            f"</span></div>")


def _agent_stalls(summary: Summary) -> str:
    """A table of each agent's stalled seconds in the window, or why there is none."""
    stalls = summary.agent_stalls
    if stalls is None:
        return "<p>Not recorded (no tables/agents.csv).</p>"
    rows = "".join(
        f"<tr><td>{_e(a.flow)}</td><td>{_e(a.role)}</td><td>{_e(a.node)}</td>"
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
    from mcclab.experiment.tcp_models import reading_label

    name = (run.spec.tcp or {}).get("model")
    label = reading_label(name if isinstance(name, str) else None)
    return f"<p><strong>TCP:</strong> {_e(label)} (docs/tcp-models.md)</p>" if label else ""


def _verdict(verdict: str) -> str:
    """A coloured verdict badge."""
    css = {"pass": "v-pass", "fail": "v-fail", "error": "v-fail"}.get(verdict, "v-na")
    return f"<span class='verdict {css}'>{_e(verdict)}</span>"


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
            f"<tr><td>{_e(q.label)}<div class='why'>{_e(q.kind)}"
            f"{' · ' + _e(q.source) if q.source else ''}</div></td>"
            f"<td class='num'>{_e(format_value(q.kind, q.paper, q.unit))}</td>"
            f"<td class='num'>{_e(format_value(q.kind, q.measured, q.unit))}</td>"
            f"<td class='num'>{_e(format_criterion(q))}</td>"
            f"<td>{_verdict(q.verdict)}{MARGINAL_BADGE if q.marginal else ''}</td>"
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
            f"<tr><td>{_e(flow)}</td><td>{_e(run.flow_type(flow))}</td><td>{_e(node)}</td>"
            f"<td class='num'>{_e(format_rate(rate) if math.isfinite(rate) else '–')}</td>"
            f"<td class='num'>{_e(format_value('loss', loss))}</td>"
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


def _definitions(pairs: list[tuple[str, str]]) -> str:
    """Key/value pairs as a definition list."""
    return "<dl>" + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in pairs) + "</dl>"


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
    return _definitions(pairs)


def _figures(paths: list[Path], extra: dict[str, str] | None = None,
             base: str = "figures") -> str:
    """The SVG figures, embedded, with captions and links to the PNGs.

    ``extra`` holds plugin figures' captions by file stem; ``base`` is the
    figures' folder relative to the page.
    """
    captions = {
        "throughput": "Throughput of each flow at each receiver (shaded: warm-up, "
                      "not measured).",
        "references": "Paper (grey) versus measured (coloured by verdict); the yellow band "
                      "is the accepted range.",
        "links": "Per link direction: sending rate, queue length and drops per second "
                 "(the busiest directions; idle ones and ACK paths are left out).",
    }
    captions.update(extra or {})
    out = []
    for path in paths:
        if path.suffix != ".svg":
            continue
        png = (f" <a href='{_e(base)}/{_e(path.stem)}.png'>PNG</a>"
               if path.with_suffix(".png").is_file() else "")
        out.append(f"<figure>{inline_svg(path)}<figcaption>{_e(captions.get(path.stem, ''))}"
                   f"{png}</figcaption></figure>")
    return "".join(out)


def render(run: Run, summary: Summary, figures: list[Path],
           captions: dict[str, str] | None = None) -> str:
    """The report page as a string."""
    spec, info = run.spec, run.info
    notes = "".join(f"<li>{_e(n)}</li>" for n in run.notes)
    title = f"{spec.name or info.experiment} — {info.run_id}"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title><style>{CSS}</style></head>
<body><main>
<h1>{_e(spec.name or info.experiment)}</h1>
<p class="sub">run <strong>{_e(info.run_id)}</strong> · profile {_e(info.profile or '–')} ·
<span class="status-{_e(info.status)}">{_e(info.status)}</span></p>
{_banner(run)}
{_stalls_banner(summary)}
<p>{_e(spec.description)}</p>
<p><strong>Paper:</strong> {_e(spec.reference or '–')}</p>
{_tcp_reading(run)}
{f'<ul class="notes">{notes}</ul>' if notes else ''}
<h2>Paper versus measured</h2>
{_quantities(summary)}
<h2>Figures</h2>
{_figures(figures, captions)}
<h2>Flows</h2>
{_flows(run)}
{capture_section(run.path)}
<h2>Run</h2>
{_run_details(run)}
<h3>Did the agents get the CPU?</h3>
{_agent_stalls(summary)}
<h2>Environment</h2>
{_definitions(_flatten(run.env)) if run.env else '<p>Not recorded.</p>'}
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


def _sweep_report(folder: Path, console: Any, err: Any) -> bool:
    """Rebuild a sweep's report (not its runs'); print its status; False if unreadable."""
    from mcclab.analysis.results import RunError
    from mcclab.analysis.sweep import build_sweep_report, load_sweep

    try:
        page = build_sweep_report(folder)
    except RunError as exc:
        err.print(f"[red]cannot analyse[/red] {folder}\n{exc}", highlight=False, soft_wrap=True)
        return False
    info = load_sweep(folder).info
    colour = {"complete": "green", "interrupted": "yellow"}.get(info.status, "red")
    console.print(f"[{colour}]sweep {info.status}[/{colour}] {len(info.runs)} of "
                  f"{info.planned} runs: {page}", highlight=False, soft_wrap=True)
    return True


def report_command(runs: list[Path]) -> None:
    """``mcclab report FOLDER...``: build each run's (or sweep's) report; exit 2 if unreadable."""
    import typer
    from rich.console import Console

    from mcclab.analysis.results import RunError
    from mcclab.model.loader import SpecError

    console, err = Console(), Console(stderr=True)
    bad = 0
    for folder in runs:
        if (Path(folder) / "sweep.json").is_file():
            bad += not _sweep_report(Path(folder), console, err)
            continue
        try:
            page = build_report(folder)
        except (RunError, SpecError) as exc:
            bad += 1
            err.print(f"[red]cannot analyse[/red] {folder}\n{exc}", highlight=False,
                      soft_wrap=True)
            continue
        summary = json.loads((page.parent / "summary.json").read_text())
        verdicts = [q["verdict"] for q in summary["quantities"]]
        counts = ", ".join(f"{verdicts.count(v)} {v}" for v in ("pass", "fail", "n/a", "error")
                           if v != "error" or v in verdicts)
        status = summary["status"]
        colour = {"complete": "green", "interrupted": "yellow"}.get(status, "red")
        # soft_wrap: a path broken over two lines cannot be copied or clicked
        console.print(f"[{colour}]{status}[/{colour}] {counts}: {page}", highlight=False,
                      soft_wrap=True)
        overloaded = warning_for(summary)
        if overloaded:
            err.print(f"[red]warning:[/red] {overloaded}", highlight=False, soft_wrap=True)
    if bad:
        raise typer.Exit(2)

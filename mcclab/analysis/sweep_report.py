"""A sweep's report: ``sweep.csv``, the sweep figures, ``trials.csv`` and ``report.html``.

The page is self-contained and styled like a run's report (:mod:`.page`); it
is built from the sweep folder alone (:func:`mcclab.analysis.sweep.load_sweep`).
"""

from __future__ import annotations

import os
from pathlib import Path

from mcclab.analysis.figures import plugin_figure
from mcclab.analysis.page import CSS, definitions, esc, figures_html, verdict_badge
from mcclab.analysis.summary import Quantity, format_criterion, format_value
from mcclab.analysis.sweep import Sweep, SweepPoint, load_sweep
from mcclab.analysis.trials import TRIAL_KEY, is_trials, trials_table, write_trials_csv
from mcclab.experiment.tcp_models import model


def _banner(sweep: Sweep) -> str:
    """A banner for a sweep that did not run all its points ('' when it did)."""
    info = sweep.info
    if info.status == "complete":
        return ""
    what = {"interrupted": "This sweep was interrupted",
            "failed": "This sweep stopped: the lab could not be brought up",
            "running": "This sweep has not finished: sweep.json still says 'running'"}.get(
                info.status, f"This sweep is {info.status}")
    css = "failed" if info.status == "failed" else "interrupted"
    return (f"<div class='banner {css}' role='alert'>{esc(what)}.<span class='detail'>"
            f"{len(info.runs)} of {info.planned} runs were done; the table and figures use "
            "those.</span></div>")


def _first(sweep: Sweep, label: str) -> Quantity | None:
    """The first run's quantity with this label (for the paper value and criterion)."""
    for point in sweep.points:
        for q in point.summary.quantities if point.summary is not None else []:
            if q.label == label:
                return q
    return None


def _run_link(sweep: Sweep, point: SweepPoint) -> str:
    """The run's id, linked to its report when there is one."""
    if point.path is None:
        return "–"
    page = point.path / "report.html"
    if not page.is_file():
        return esc(point.name)
    href = os.path.relpath(page, sweep.path)
    return f"<a href='{esc(href)}'>{esc(point.name)}</a>"


def _cell(q: Quantity | None) -> str:
    """A measured value with its verdict."""
    if q is None:
        return "<td class='num'>–</td>"
    value = format_value(q.kind, q.measured, q.unit)
    title = f" title='{esc(q.error)}'" if q.error else ""
    return f"<td class='num'{title}>{esc(value)} {verdict_badge(q.verdict)}</td>"


def _overloaded(point: SweepPoint) -> str:
    """A warning under a run's status when its agents stalled ('' otherwise)."""
    stalls = point.summary.agent_stalls if point.summary is not None else None
    if stalls is None or not stalls.overloaded:
        return ""
    return "<div class='v-fail'>overloaded: the agents stalled (see its report)</div>"


def _reading(key: str, point: SweepPoint) -> str:
    """Under a swept TCP model: whether its row is the verdict or a second reading."""
    if key != "tcp.model":
        return ""
    try:
        verdict = model(str(point.record.set.get(key))).verdict
    except (KeyError, ValueError):
        return ""
    text = ("the paper's TCP: the verdict" if verdict
            else "Linux's TCP: a second reading, not the verdict")
    return f"<div class='why'>{esc(text)}</div>"


def _table(sweep: Sweep) -> str:
    """One row per run: the swept values, the run, its status, and each quantity."""
    if not sweep.points:
        return "<p>No run was done.</p>"
    labels = sweep.labels()
    head = "".join(f"<th>{esc(k)}</th>" for k in sweep.keys) + "<th>run</th><th>status</th>"
    for label in labels:
        first = _first(sweep, label)
        paper = "" if first is None else (
            f"<div class='why'>paper {esc(format_value(first.kind, first.paper, first.unit))}, "
            f"{esc(format_criterion(first))}</div>")
        head += f"<th class='num'>{esc(label)}{paper}</th>"
    rows = []
    for point in sweep.points:
        by_label = {q.label: q for q in (point.summary.quantities if point.summary else [])}
        cells = "".join(f"<td>{esc(point.record.set.get(k, '–'))}{_reading(k, point)}</td>"
                        for k in sweep.keys)
        cells += (f"<td>{_run_link(sweep, point)}</td>"
                  f"<td class='status-{esc(point.record.status)}'>{esc(point.record.status)}"
                  + (f"<div class='why'>{esc(point.record.error)}</div>"
                     if point.record.error else "") + _overloaded(point) + "</td>")
        cells += "".join(_cell(by_label.get(label)) for label in labels)
        rows.append(f"<tr>{cells}</tr>")
    return (f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
            "<p class='why'>Each run is measured over its own window; the verdicts are "
            "against the paper values of the spec (see each run's report). "
            "The same data are in sweep.csv.</p>")


def _trials(sweep: Sweep) -> str:
    """Mean, deviation and range over the seeds, the criterion applied to the mean ('' if none)."""
    if not is_trials(sweep):
        return ""
    table = trials_table(sweep)
    groups = [k for k in sweep.keys if k != TRIAL_KEY]
    head = "".join(f"<th>{esc(k)}</th>" for k in groups)
    head += ("<th>quantity</th><th class='num'>runs</th><th class='num'>mean</th>"
             "<th class='num'>sd</th><th class='num'>min – max</th><th class='num'>paper</th>")
    rows = []
    for row in table.to_dict("records"):
        shown = {c: esc(format_value(row["kind"], row[c], row["unit"]))
                 for c in ("mean", "sd", "min", "max", "paper")}
        extra = "".join(f", {n} {what}" for n, what in ((row["missing"], "missing"),
                                                        (row["overloaded"], "overloaded"))
                        if n)
        cells = "".join(f"<td>{esc(row[k])}</td>" for k in groups)
        cells += (f"<td>{esc(row['label'])}</td><td class='num'>{row['runs']}{esc(extra)}</td>"
                  f"<td class='num'>{shown['mean']} {verdict_badge(row['verdict'])}</td>"
                  f"<td class='num'>{shown['sd']}</td>"
                  f"<td class='num'>{shown['min']} – {shown['max']}</td>"
                  f"<td class='num'>{shown['paper']}</td>")
        rows.append(f"<tr>{cells}</tr>")
    return (f"<h2>Over the trials</h2><table><thead><tr>{head}</tr></thead><tbody>"
            f"{''.join(rows)}</tbody></table><p class='why'>Within a row the runs differ only "
            "in their seed. The verdict applies the spec's criterion to the mean over the "
            "complete runs, as the paper's number is a mean. The same data are in trials.csv.</p>")


def _details(sweep: Sweep) -> str:
    """What was swept and how the sweep went."""
    info = sweep.info
    pairs = [(f"over {key}", ", ".join(map(str, values))) for key, values in info.over.items()]
    pairs += [("--set", " ".join(info.set) or "none"), ("profile", info.profile or "–"),
              ("runs", f"{len(info.runs)} of {info.planned}"), ("status", info.status),
              ("started", info.started or "–"), ("ended", info.ended or "–")]
    return definitions(pairs)


def render_sweep(sweep: Sweep, figures: list[Path], captions: dict[str, str]) -> str:
    """The sweep report page as a string."""
    info = sweep.info
    notes = "".join(f"<li>{esc(n)}</li>" for n in sweep.notes)
    title = f"{info.experiment}: sweep {info.sweep}"
    drawn = figures_html(figures, captions) or "<p>The sweep names no figures.</p>"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)} — {esc(info.sweep_id)}</title><style>{CSS}</style></head>
<body><main>
<h1>{esc(title)}</h1>
<p class="sub">{esc(info.sweep_id)} · profile {esc(info.profile or '–')} ·
<span class="status-{esc(info.status)}">{esc(info.status)}</span></p>
{_banner(sweep)}
<p>{esc(info.description)}</p>
{f'<ul class="notes">{notes}</ul>' if notes else ''}
<h2>Runs</h2>
{_table(sweep)}
{_trials(sweep)}
<h2>Figures</h2>
{drawn}
<h2>Sweep</h2>
{_details(sweep)}
</main></body></html>
"""


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


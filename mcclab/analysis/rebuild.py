"""``mcclab report FOLDER...``: rebuild the report of each run or sweep folder named.

A folder with a ``sweep.json`` is a sweep's and gets a sweep report
(:mod:`.sweep_report`, which reads its runs but does not rebuild theirs); any
other folder is a run's (:mod:`.report`). This module only chooses between the
two and tells the user how it went.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from mcclab.analysis.report import build_report
from mcclab.analysis.results import RunError
from mcclab.analysis.stalls import warning_for
from mcclab.analysis.sweep import load_sweep
from mcclab.analysis.sweep_report import build_sweep_report
from mcclab.model.loader import SpecError
from mcclab.refuse import alert
from mcclab.resultsdir import SWEEP_JSON


def is_sweep(folder: Path) -> bool:
    """Whether a results folder is a sweep's (it has a ``sweep.json``)."""
    return (folder / SWEEP_JSON).is_file()


def _report_sweep(folder: Path, console: Console, err: Console) -> bool:
    """Rebuild a sweep's report (not its runs'); print its status; False if unreadable."""
    try:
        page = build_sweep_report(folder)
    except RunError as exc:
        err.print(alert("cannot analyse", f"{folder}\n{exc}", sep=" "), highlight=False,
                  soft_wrap=True)
        return False
    info = load_sweep(folder).info
    colour = {"complete": "green", "interrupted": "yellow"}.get(info.status, "red")
    console.print(alert(f"sweep {info.status}", f"{len(info.runs)} of {info.planned} runs: {page}",
                        sep=" ", style=colour), highlight=False, soft_wrap=True)
    return True


def _report_run(folder: Path, console: Console, err: Console) -> bool:
    """Rebuild a run's report; print its verdict counts and status; False if unreadable."""
    try:
        page = build_report(folder)
    except (RunError, SpecError) as exc:
        err.print(alert("cannot analyse", f"{folder}\n{exc}", sep=" "), highlight=False,
                  soft_wrap=True)
        return False
    summary = json.loads((page.parent / "summary.json").read_text())
    verdicts = [q["verdict"] for q in summary["quantities"]]
    counts = ", ".join(f"{verdicts.count(v)} {v}" for v in ("pass", "fail", "n/a", "error")
                       if v != "error" or v in verdicts)
    status = summary["status"]
    colour = {"complete": "green", "interrupted": "yellow"}.get(status, "red")
    # soft_wrap: a path broken over two lines cannot be copied or clicked
    console.print(alert(status, f"{counts}: {page}", sep=" ", style=colour), highlight=False,
                  soft_wrap=True)
    overloaded = warning_for(summary)
    if overloaded:
        err.print(alert("warning:", overloaded, sep=" "), highlight=False, soft_wrap=True)
    return True


def report_command(runs: list[Path]) -> None:
    """Build each run's (or sweep's) report and print how it went; exit 2 if any is unreadable."""
    console, err = Console(), Console(stderr=True)
    bad = 0
    for folder in map(Path, runs):
        rebuild = _report_sweep if is_sweep(folder) else _report_run
        bad += not rebuild(folder, console, err)
    if bad:
        raise typer.Exit(2)

"""Reading a sweep: ``sweep.json`` and the run folders it lists, nothing else.

``results/<exp>/sweep-<id>/sweep.json`` names the sweep's runs (folders
relative to the sweep folder) and the values each was run with. :class:`Sweep`
holds them with each run's summary and gives ``sweep.csv``'s table (one row per
run and reference quantity); sweep figure plugins receive it. The sweep's
files (``sweep.csv``, figures, ``trials.csv``, ``report.html``) are written by
:mod:`mcclab.analysis.sweep_report`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcclab.analysis.results import Run, RunError, load_run
from mcclab.analysis.summary import Summary, summarise
from mcclab.model.loader import SpecError, field_path
from mcclab.model.quantities import FigureRef
from mcclab.resultsdir import SWEEP_JSON

CSV_COLUMNS = ["run", "status", "overloaded", "label", "kind", "unit", "paper", "measured",
               "verdict"]


class SweepRunRecord(BaseModel):
    """One run of a sweep as ``sweep.json`` lists it."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    dir: str | None = Field(None, description="the run folder, relative to the sweep folder")
    set: dict[str, Any] = Field(default_factory=dict)
    status: str
    error: str | None = None


class SweepRecord(BaseModel):
    """``sweep.json``. Unknown keys are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    experiment: str
    sweep: str
    sweep_id: str = ""
    profile: str = ""
    description: str = ""
    set: list[str] = Field(default_factory=list, description="the command line's --set")
    over: dict[str, list[Any]]
    figures: list[FigureRef] = Field(default_factory=list)
    status: str = Field(description="complete, partial (stopped at its --limit), interrupted, "
                                    "failed, or running (still going or killed)")
    started: str | None = None
    ended: str | None = None
    planned: int = 0
    runs: list[SweepRunRecord] = Field(default_factory=list)
    superseded: list[SweepRunRecord] = Field(
        default_factory=list, description="runs that did not complete and whose point ran "
                                          "again when the sweep was resumed")


@dataclass
class SweepPoint:
    """A run of the sweep: its record, and the run and summary when its folder is readable."""

    record: SweepRunRecord
    path: Path | None
    run: Run | None = None
    summary: Summary | None = None

    @property
    def name(self) -> str:
        """The run's folder name (its run id), or '–'."""
        return self.path.name if self.path is not None else "–"


@dataclass
class Sweep:
    """Everything read from a sweep folder and the run folders it lists."""

    path: Path
    info: SweepRecord
    points: list[SweepPoint]
    notes: list[str] = field(default_factory=list)

    @property
    def keys(self) -> list[str]:
        """The swept dotted keys, in the spec's order."""
        return list(self.info.over)

    def table(self) -> pd.DataFrame:
        """One row per run and reference quantity (``sweep.csv``).

        Columns: one per swept key (its value for the run), then ``run``,
        ``status``, ``overloaded`` (``agent_stalls``; empty when unknown), ``label``,
        ``kind``, ``unit``, ``paper``, ``measured``, ``verdict``. A run without
        quantities (it failed early, or its folder is unreadable) has one row with
        the quantity columns empty.
        """
        rows = []
        for point in self.points:
            values = {key: table_cell(point.record.set.get(key)) for key in self.keys}
            stalls = point.summary.agent_stalls if point.summary is not None else None
            base = {**values, "run": point.name, "status": point.record.status,
                    "overloaded": None if stalls is None else stalls.overloaded}
            quantities = point.summary.quantities if point.summary is not None else []
            for q in quantities:
                rows.append({**base, "label": q.label, "kind": q.kind, "unit": q.unit,
                             "paper": q.paper, "measured": q.measured, "verdict": q.verdict})
            if not quantities:
                rows.append({**base, "label": None, "kind": None, "unit": None,
                             "paper": None, "measured": None, "verdict": None})
        return pd.DataFrame(rows, columns=[*self.keys, *CSV_COLUMNS])

    def quantity(self, label: str) -> pd.DataFrame:
        """The rows of one reference quantity (by label), one per run that has it."""
        table = self.table()
        return table[table["label"] == label].reset_index(drop=True)

    def labels(self) -> list[str]:
        """The reference quantities' labels, in the order the runs list them."""
        out: list[str] = []
        for point in self.points:
            for q in point.summary.quantities if point.summary is not None else []:
                if q.label not in out:
                    out.append(q.label)
        return out


def table_cell(value: Any) -> Any:
    """A set value for a table cell: scalars as they are, anything else as JSON."""
    return value if value is None or isinstance(value, str | int | float | bool) \
        else json.dumps(value)


def load_sweep(folder: Path | str) -> Sweep:
    """Read a sweep folder; RunError when ``sweep.json`` is missing or breaks the contract.

    A listed run whose folder is missing or unreadable is a note, not an error:
    the sweep's other runs still make a report.
    """
    folder = Path(folder)
    path = folder / SWEEP_JSON
    if not path.is_file():
        raise RunError(f"{folder}: no sweep.json (is this a sweep folder?)")
    try:
        info = SweepRecord.model_validate(json.loads(path.read_text()))
    except json.JSONDecodeError as exc:
        raise RunError(f"{path}: not valid JSON: {exc}") from None
    except ValidationError as exc:
        problems = "; ".join(f"{field_path(e['loc'])}: {e['msg']}"
                             for e in exc.errors(include_url=False))
        raise RunError(f"{path}: {problems}") from None
    notes: list[str] = []
    points = []
    for record in info.runs:
        run_path = (folder / record.dir).resolve() if record.dir else None
        point = SweepPoint(record, run_path)
        if run_path is None:
            notes.append(f"a run with {_describe(record.set)} left no folder: "
                         f"{record.error or record.status}")
        else:
            try:
                point.run = load_run(run_path)
                point.summary = summarise(point.run)
            except (RunError, SpecError, OSError) as exc:
                notes.append(f"run {run_path.name} ({_describe(record.set)}) cannot be read: "
                             f"{exc}")
        points.append(point)
    if info.status != "complete":
        notes.insert(0, f"the sweep is {info.status}: {len(info.runs)} of {info.planned} "
                        "runs were done")
    return Sweep(folder, info, points, notes)


def _describe(values: dict[str, Any]) -> str:
    """Set values for people: 'a=1, b=2'."""
    return ", ".join(f"{k}={v}" for k, v in values.items()) or "no values"

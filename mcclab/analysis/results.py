"""Reading one run's results folder: the only input of the analysis (Pantheon's rule).

A folder ``results/<experiment>/<run-id>/`` holds ``run.json``, ``spec.yaml``,
``env.json``, ``tables/per_second.csv`` and optionally ``tables/links.csv``,
``tables/protocol.csv`` and ``tables/agents.csv``
(the contract is in ``docs/results.md``; its names and columns in
:mod:`mcclab.resultsdir`). Only ``run.json`` is required: a run
that failed early may have nothing else, and its report must still say so.
A file that exists but breaks the contract is an error naming the file and
field, like the topology loader's; a missing optional file is a note.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from mcclab.analysis.metrics import Window
from mcclab.model.loader import SpecError, field_path, read_yaml
from mcclab.model.quantities import (
    REFERENCE_KINDS,
    FigureRef,
    Reference,
    ip_bits_problem,
    plugin_arg_flows,
)
from mcclab.resultsdir import (
    AGENT_COLUMNS,
    AGENTS_CSV,
    ENV_JSON,
    LINK_COLUMNS,
    LINKS_CSV,
    OPTIONAL_NUMBER_COLUMNS,
    PER_SECOND_COLUMNS,
    PER_SECOND_CSV,
    PROTOCOL_COLUMNS,
    PROTOCOL_CSV,
    RUN_JSON,
    SPEC_YAML,
    TEXT_COLUMNS,
)

# "running" is not a final status: run.json still says so when the runner is
# still going or died without writing its final record (kill -9, power loss).
# "killed" is such a record once its runner was found dead
# (mcclab.experiment.record). Both are analysed like an interrupted run.
Status = Literal["complete", "interrupted", "failed", "running", "killed"]



class RunError(Exception):
    """A results folder cannot be read; the message names the file and what is wrong."""


class RunInfo(BaseModel):
    """``run.json``: what the runner did. Unknown keys are ignored (the runner may add some)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    experiment: str
    run_id: str
    profile: str = ""
    status: Status
    started: datetime | None = None
    ended: datetime | None = None
    duration_s: float = Field(ge=0, description="planned duration")
    warmup_s: float = Field(0.0, ge=0)
    elapsed_s: float | None = Field(None, ge=0, description="actual duration")
    error: str | None = None
    scaling: str = ""
    phase_s: dict[str, float] = Field(default_factory=dict,
                                      description="wall seconds in each phase of the run")


class FlowLabel(BaseModel):
    """The part of a spec's flow the analysis needs: its name and type, for labels."""

    model_config = ConfigDict(extra="allow", frozen=True)

    name: str
    type: str


class SpecView(BaseModel):
    """The analysis' view of ``spec.yaml``: labels and the reference quantities.

    The rest of the spec belongs to the runner and is ignored here; the
    references are validated strictly (unknown keys, units, tolerances).
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str
    description: str = ""
    reference: str = ""
    flows: list[FlowLabel] = Field(default_factory=list)
    tcp: dict[str, Any] | None = Field(None, description="the TCP model the run named "
                                       "(``model``; null: none)")
    references: list[Reference] = Field(default_factory=list)
    # Checked when drawn, not here: a figure plugin that is gone must not make
    # the run unreadable (the report says why the figure is missing).
    figures: list[FigureRef] = Field(default_factory=list)

    @model_validator(mode="after")
    def _known_flows(self) -> SpecView:
        """Every flow a reference names must be one of the spec's flows."""
        if not self.flows:
            return self  # nothing to check against (a spec without flows)
        types = {f.name: f.type for f in self.flows}
        for i, ref in enumerate(self.references):
            for key, name in _flow_names(ref):
                if name not in types:
                    raise ValueError(f"references[{i}].{key}: unknown flow {name!r} "
                                     f"(the spec's flows are {', '.join(sorted(types))})")
            problem = ip_bits_problem(ref, types)
            if problem:
                raise ValueError(f"references[{i}].{problem}")
        return self


def _flow_names(ref: Any) -> list[tuple[str, str]]:
    """(field, flow name) pairs a reference names."""
    out = []
    for key in ("flow", "numerator", "denominator"):
        if getattr(ref, key, None):
            out.append((key, getattr(ref, key)))
    for key in ("flows", "of_flows"):
        out += [(f"{key}[{j}]", name) for j, name in enumerate(getattr(ref, key, []))]
    return out + plugin_arg_flows(ref)


@dataclass
class Run:
    """Everything read from one results folder."""

    path: Path
    info: RunInfo
    spec: SpecView
    env: dict[str, Any]
    per_second: pd.DataFrame
    links: pd.DataFrame | None
    notes: list[str] = field(default_factory=list)
    protocol: pd.DataFrame = field(default_factory=lambda: read_table_empty(PROTOCOL_COLUMNS))
    """The protocol cores' gauges, one row per second, node and gauge
    (``tables/protocol.csv``; empty for runs without one)."""
    agents: pd.DataFrame = field(default_factory=lambda: read_table_empty(AGENT_COLUMNS))
    """The agents' schedule, start, stats records and stop (``tables/agents.csv``;
    empty for runs without one): whether they got the CPU."""

    @property
    def window(self) -> Window:
        """The measurement window, clipped to what was run and recorded."""
        return measurement_window(self.info, self.per_second)

    def flow_type(self, flow: str) -> str:
        """The flow's type from the spec, else its ``kind`` in the table, else ''."""
        for f in self.spec.flows:
            if f.name == flow:
                return f.type
        kinds = self.per_second.loc[self.per_second["flow"] == flow, "kind"]
        return str(kinds.iloc[0]) if len(kinds) else ""


def measurement_window(info: RunInfo, per_second: pd.DataFrame) -> Window:
    """``(warmup_s, end)`` with end = min(planned duration, elapsed, last second recorded).

    An interrupted run is measured on the data it has. When the run stopped
    before the warm-up ended, ``end < start``: the window is empty and every
    quantity is n/a.
    """
    end = info.duration_s
    if info.elapsed_s is not None:
        end = min(end, info.elapsed_s)
    if not per_second.empty:
        end = min(end, float(per_second["t"].max()))
    return (info.warmup_s, end)


def _pydantic_problems(exc: ValidationError) -> list[tuple[str, str]]:
    """(field, reason) pairs, without the union tag pydantic puts in reference paths."""
    out = []
    for err in exc.errors(include_url=False):
        loc = list(err["loc"])
        # references[2].throughput.paper -> references[2].paper: the kind is
        # already the entry's own 'kind' key, the tag only adds noise.
        if len(loc) >= 3 and loc[0] == "references" and loc[2] in REFERENCE_KINDS:
            del loc[2]
        reason = err["msg"]
        if err["type"] == "extra_forbidden":
            reason = "unknown key (check the spelling)"
        reason = reason.removeprefix("Value error, ")
        where = field_path(tuple(loc))
        if where == "(top level)" and ": " in reason and reason.startswith("references["):
            where, reason = reason.split(": ", 1)
        out.append((where, reason))
    return out


def load_spec(path: Path) -> SpecView:
    """Read and validate ``spec.yaml``; SpecError names the file and each bad field."""
    data = read_yaml(path)
    try:
        return SpecView.model_validate(data)
    except ValidationError as exc:
        raise SpecError(path, _pydantic_problems(exc)) from None


def _read_json(path: Path) -> dict[str, Any]:
    """Read a JSON object, RunError naming the file otherwise."""
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise RunError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise RunError(f"{path}: expected a JSON object")
    return data


def load_info(folder: Path) -> RunInfo:
    """Read ``run.json``; RunError if it is missing or breaks the contract."""
    path = folder / RUN_JSON
    if not path.is_file():
        raise RunError(f"{folder}: no run.json (is this a results folder?)")
    try:
        return RunInfo.model_validate(_read_json(path))
    except ValidationError as exc:
        problems = "; ".join(f"{field_path(e['loc'])}: {e['msg']}"
                             for e in exc.errors(include_url=False))
        raise RunError(f"{path}: {problems}") from None


def read_table(path: Path, columns: list[str]) -> pd.DataFrame:
    """Read a tidy CSV table, checking its columns and coercing numbers.

    Names are kept as text exactly (a node called ``NA`` stays ``"NA"``);
    empty optional cells become ``nan``; anything else that is not a number is
    an error naming the file, column and line.
    """
    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:  # a zero-byte file: the run wrote nothing yet
        return read_table_empty(columns)
    missing = [c for c in columns if c not in raw.columns]
    if missing:
        raise RunError(f"{path}: missing column(s) {', '.join(missing)}")
    table = raw[columns].copy()
    for col in columns:
        if col in TEXT_COLUMNS:
            continue
        cells = table[col].str.strip()
        numbers = pd.to_numeric(cells.where(cells != ""), errors="coerce")
        bad = numbers.isna() & (cells != "")
        if col not in OPTIONAL_NUMBER_COLUMNS:
            bad |= cells == ""
        if bad.any():
            line = int(bad.to_numpy().nonzero()[0][0]) + 2  # header is line 1
            raise RunError(f"{path}: line {line}: column {col!r}: expected a number, "
                           f"got {table[col].iloc[line - 2]!r}")
        table[col] = numbers.astype(float)
    return table


def load_run(folder: Path | str) -> Run:
    """Read a results folder. Raises RunError or SpecError when it cannot be analysed."""
    folder = Path(folder)
    info = load_info(folder)
    notes: list[str] = []
    spec_path = folder / SPEC_YAML
    if spec_path.is_file():
        spec = load_spec(spec_path)
    else:
        notes.append("spec.yaml is missing: no reference quantities to compare")
        spec = SpecView(name=info.experiment)
    env_path = folder / ENV_JSON
    env: dict[str, Any] = {}
    if env_path.is_file():
        env = _read_json(env_path)
    else:
        notes.append("env.json is missing: the environment is unknown")
    per_second_path = folder / PER_SECOND_CSV
    if per_second_path.is_file():
        per_second = read_table(per_second_path, PER_SECOND_COLUMNS)
    else:
        notes.append("tables/per_second.csv is missing: no measurements")
        per_second = read_table_empty(PER_SECOND_COLUMNS)
    # Optional tables: a bad one costs what it feeds (a figure, gauges, the stall
    # check), not the report.
    links = _optional_table(folder, LINKS_CSV, LINK_COLUMNS, notes)
    protocol = _optional_table(folder, PROTOCOL_CSV, PROTOCOL_COLUMNS, notes)
    agents = _optional_table(folder, AGENTS_CSV, AGENT_COLUMNS, notes)
    run = Run(folder, info, spec, env, per_second, links, notes,
              read_table_empty(PROTOCOL_COLUMNS) if protocol is None else protocol,
              read_table_empty(AGENT_COLUMNS) if agents is None else agents)
    start, end = run.window
    if end <= start:
        notes.append(f"the measurement window is empty: the run stopped at "
                     f"{_fmt_s(end)} s, before the warm-up ended at {_fmt_s(start)} s")
    return run


def _optional_table(folder: Path, table: Path, columns: list[str],
                    notes: list[str]) -> pd.DataFrame | None:
    """``folder/table`` when it exists and keeps the contract; None, with a note if bad."""
    path = folder / table
    if not path.is_file():
        return None
    try:
        return read_table(path, columns)
    except RunError as exc:
        notes.append(f"{table.as_posix()} ignored: {exc}")
        return None


def read_table_empty(columns: list[str]) -> pd.DataFrame:
    """An empty table with the given columns (numbers as float, names as text)."""
    return pd.DataFrame({c: pd.Series(dtype=str if c in TEXT_COLUMNS else float)
                         for c in columns})


def _fmt_s(seconds: float) -> str:
    """Seconds for messages."""
    return f"{seconds:g}" if math.isfinite(seconds) else "?"

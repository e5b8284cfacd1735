"""``results/index.html``: every paper result of the newest runs, one table per paper.

The index is built from result folders alone (Pantheon's rule), so it can be
rebuilt at any time without a lab (``mcclab index``). For each experiment and
profile it takes the newest of:

* a single run (``results/<exp>/<run-id>/``) that no sweep lists, and
* a sweep over seeds (``results/<exp>/sweep-<id>/``, :mod:`mcclab.analysis.trials`),
  whose quantities are the mean over the trials, with their spread.

Every quantity is re-judged from its folder with the current analysis (as
``mcclab report`` and ``mcclab compare`` do), so an index never mixes verdicts
of different analysis versions. Rows are grouped by paper, which is read from
the protocols of the run's multicast flows, or else from the experiment's name
(``ormcc-fig4-pgmcc``: a baseline the ORMCC paper compares with).

Where the TCP competes, the verdict is the run under the paper's TCP model
(``docs/tcp-models.md``). A run under Linux's default TCP (the models file's
``linux_reading``, a single run or a point of a ``tcp-readings`` sweep) is
never a verdict: the newest one of the same experiment and profile is shown
beside each verdict as a second reading. A run under another model that is not
a paper's (``linux-cubic``, for exploration) is left out.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml
from jinja2 import Environment, PackageLoader

from mcclab.analysis.results import RunError, load_run
from mcclab.analysis.stalls import is_overloaded, sentence
from mcclab.analysis.summary import (
    Quantity,
    format_criterion,
    format_value,
    is_marginal,
    margin,
    summarise,
)
from mcclab.analysis.sweep import load_sweep
from mcclab.analysis.trials import trials_table
from mcclab.model import tcp_models
from mcclab.model.loader import SpecError

# The papers, in the order the index shows them, keyed by the protocol that names them.
PAPERS: dict[str, str] = {
    "webrc": "WEBRC: Luby, Goyal, Skaria, Horn, SIGCOMM 2002",
    "rlc": "RLC: Vicisano, Rizzo, Crowcroft, INFOCOM 1998",
    "ormcc": "ORMCC: Li and Kalyanaraman",
    "stair": "STAIR: Byers, Kwon, Luby, Mitzenmacher, IEEE/ACM ToN 2006",
}
OTHER = "other"


@dataclass(frozen=True)
class Row:
    """One paper result of one experiment, as the index shows it."""

    label: str
    source: str
    kind: str
    unit: str
    paper: float | None  # None: the paper gives no number (a range judges it)
    mean: float | None
    sd: float | None
    runs: int
    verdict: str
    margin: float | None
    criterion: str
    linux: float | None = None  # the Linux reading's measured value (never the verdict)
    linux_inside: bool | None = None  # whether that value lies in the band

    @property
    def marginal(self) -> bool:
        """A pass or fail within 10 % of its band's edge, either side (summary.margin)."""
        return is_marginal(self.verdict, self.margin)


@dataclass
class Entry:
    """The newest result of one experiment and profile: a run or a trials sweep."""

    experiment: str
    paper: str
    reference: str
    folder: Path
    kind: str  # "run" or "trials"
    profile: str
    status: str
    started: str
    rows: list[Row] = field(default_factory=list)
    note: str = ""
    reported: int = 0  # quantities the spec reports without a criterion: left to the report
    tcp_model: str | None = None  # the paper's TCP model the verdict ran under
    reading: Reading | None = None  # Linux's default TCP, the second reading
    planned: int | None = None  # a trials sweep's planned runs (its rows' runs are out of it)
    took_s: float | None = None  # wall time of its runs (run_took_s), None when none recorded it
    # Why its values describe the loaded machine, not the protocol: the stall check's
    # sentence for a run, how many trials for a sweep; "" when its agents kept up (or
    # nothing recorded whether they did).
    overloaded: str = ""

    def report(self, root: Path) -> str | None:
        """The entry's report.html relative to ``root``, when it exists."""
        page = self.folder / "report.html"
        return page.relative_to(root).as_posix() if page.is_file() else None


@dataclass
class Reading:
    """A run under Linux's default TCP: the second reading beside a verdict."""

    folder: Path
    status: str
    model: str
    values: dict[str, tuple[float | None, bool | None]] = field(default_factory=dict)
    note: str = ""
    overloaded: str = ""  # as Entry.overloaded

    def report(self, root: Path) -> str | None:
        """The reading's report.html relative to ``root``, when it exists."""
        page = self.folder / "report.html"
        return page.relative_to(root).as_posix() if page.is_file() else None


def paper_of(protocols: list[str], experiment: str = "") -> str:
    """The paper a run reproduces, from its multicast flows' protocols; else from the
    experiment's name, whose first word names the paper (``ormcc-fig4-pgmcc``: a
    baseline that the ORMCC paper runs beside its own protocol)."""
    for key in PAPERS:
        if key in protocols:
            return key
    prefix = experiment.split("-", 1)[0]
    return prefix if prefix in PAPERS else OTHER


def _row(q: Quantity, mean: float | None, sd: float | None, runs: int, verdict: str) -> Row:
    """A Row from a quantity's criterion and a measured (mean) value."""
    return Row(label=q.label, source=q.source, kind=q.kind, unit=q.unit, paper=q.paper,
               mean=mean, sd=sd, runs=runs, verdict=verdict,
               margin=None if mean is None else margin(mean, q.paper, q.tolerance, q.within,
                                                       q.domain),
               criterion=format_criterion(q))


def _has_criterion(q: Quantity) -> bool:
    """Whether a quantity is judged (a tolerance or a range), not only reported."""
    return q.tolerance is not None or q.within is not None


def _finite(value: object) -> float | None:
    """A float cell, None for NaN or a missing one."""
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def run_took_s(phases: object) -> float | None:
    """A run's wall time from its ``run.json``'s ``phase_s``: the sum of its phases
    (bring-up to analysis), so what a reader should plan for, not only the experiment's
    duration. None for a run that recorded no phases."""
    if not isinstance(phases, dict):
        return None
    seconds = [v for v in phases.values() if isinstance(v, int | float)]
    return float(sum(seconds)) if seconds else None


def _run_entry(folder: Path) -> Entry:
    """An entry from a single run's folder; an unreadable one gets a note and no rows."""
    info = json.loads((folder / "run.json").read_text())
    entry = Entry(experiment=info.get("experiment", folder.parent.name), paper=OTHER,
                  reference="", folder=folder, kind="run", profile=info.get("profile", ""),
                  status=info.get("status", "?"), started=info.get("started") or "",
                  took_s=run_took_s(info.get("phase_s")))
    try:
        run = load_run(folder)
    except (RunError, SpecError, OSError) as exc:
        entry.note = f"cannot be read: {exc}"
        return entry
    entry.reference = run.spec.reference
    entry.paper = paper_of([str(getattr(f, "protocol", "")) for f in run.spec.flows],
                           entry.experiment)
    entry.tcp_model = _model_name(run.spec.tcp)
    summary = summarise(run)
    entry.overloaded = sentence(summary.agent_stalls)
    judged = [q for q in summary.quantities if _has_criterion(q)]
    entry.reported = len(summary.quantities) - len(judged)
    entry.rows = [_row(q, q.measured, None, int(q.measured is not None), q.verdict)
                  for q in judged]
    return entry


def _trials_entry(folder: Path) -> Entry:
    """An entry from a trials sweep: the mean over its seeds, with the spread."""
    sweep = load_sweep(folder)
    info = sweep.info
    entry = Entry(experiment=info.experiment, paper=OTHER, reference="", folder=folder,
                  kind="trials", profile=info.profile, status=info.status,
                  started=info.started or "", note="; ".join(sweep.notes),
                  planned=info.planned or None)
    took = [t for p in sweep.points if p.run is not None
            and (t := run_took_s(p.run.info.phase_s)) is not None]
    entry.took_s = sum(took) if took else None
    read = [p.summary for p in sweep.points if p.summary is not None]
    stalled = sum(is_overloaded(s.agent_stalls) for s in read)
    if stalled:
        entry.overloaded = (f"{stalled} of its {len(read)} trials ran overloaded (their "
                            f"agents stalled; each trial's report says how)")
    first = next((p for p in sweep.points if p.run is not None and p.summary is not None), None)
    if first is None:
        entry.note = entry.note or "no readable run"
        return entry
    entry.reference = first.run.spec.reference
    entry.paper = paper_of([str(getattr(f, "protocol", "")) for f in first.run.spec.flows],
                           entry.experiment)
    entry.tcp_model = _model_name(first.run.spec.tcp)
    criteria = {q.label: q for q in first.summary.quantities}
    table = trials_table(sweep)
    for _, cells in table.iterrows():
        q = criteria.get(cells["label"])
        if q is None:
            continue
        if not _has_criterion(q):
            entry.reported += 1
            continue
        entry.rows.append(_row(q, _finite(cells["mean"]), _finite(cells["sd"]),
                               int(cells["runs"]), str(cells["verdict"])))
    return entry


def _model_name(tcp: object) -> str | None:
    """The TCP model named by a spec's ``tcp`` mapping, None without one."""
    name = tcp.get("model") if isinstance(tcp, dict) else None
    return name if isinstance(name, str) else None


def tcp_model_of(folder: Path) -> str | None:
    """The TCP model a run's ``spec.yaml`` names (None: none, or unreadable)."""
    try:
        data = yaml.safe_load((folder / "spec.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return None
    return _model_name(data.get("tcp")) if isinstance(data, dict) else None


def role_of(model: str | None) -> str:
    """'verdict' for a paper's model (or none), 'reading' for Linux's default TCP, 'other'
    for another model that is not a paper's (exploration). An unknown name is a verdict,
    as a run by a newer mcclab keeps its verdict."""
    if model is None:
        return "verdict"
    try:
        known = tcp_models.models()
    except SpecError:
        return "verdict"
    if model == known.linux_reading:
        return "reading"
    found = known.models.get(model)
    return "other" if found is not None and not found.verdict else "verdict"


def _sweep_runs(experiment_dir: Path) -> tuple[set[Path], set[Path]]:
    """Run folders that sweeps under ``experiment_dir`` list: those a sweep owns (a trials
    or parameter sweep), and those of sweeps over ``tcp.model`` alone (``tcp-readings``),
    which are read as single runs of their model."""
    owned: set[Path] = set()
    readings: set[Path] = set()
    for record in experiment_dir.glob("sweep-*/sweep.json"):
        try:
            info = json.loads(record.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        runs = info.get("runs", []) if isinstance(info, dict) else []
        folders = {(record.parent / r["dir"]).resolve() for r in runs if r.get("dir")}
        if set(info.get("over") or {}) == {"tcp.model"}:
            readings |= folders
        else:
            owned |= folders
    return owned - readings, readings


def candidates(results: Path, role: str = "verdict") -> list[tuple[str, str, str, str, Path]]:
    """(experiment, profile, started, status, folder) of every single run and trials sweep
    whose TCP plays ``role`` ('verdict', or 'reading' for Linux's default TCP; a trials
    sweep is a verdict)."""
    out = []
    for exp_dir in sorted(p for p in results.iterdir() if p.is_dir()):
        owned, _ = _sweep_runs(exp_dir)
        for folder in sorted(exp_dir.iterdir()):
            try:
                if (folder / "run.json").is_file() and folder.resolve() not in owned:
                    if role_of(tcp_model_of(folder)) != role:
                        continue
                    info = json.loads((folder / "run.json").read_text())
                elif (folder / "sweep.json").is_file() and role == "verdict":
                    info = json.loads((folder / "sweep.json").read_text())
                    if not is_trials_record(info):
                        continue  # a parameter sweep is not one result
                else:
                    continue
            except (OSError, json.JSONDecodeError):
                continue
            out.append((str(info.get("experiment", exp_dir.name)), str(info.get("profile", "")),
                        str(info.get("started") or folder.name), str(info.get("status", "?")),
                        folder))
    return out


def select(results: Path, profile: str | None = None,
           experiments: list[str] | None = None, role: str = "verdict",
           ) -> list[tuple[Path, str]]:
    """Per experiment (and per profile unless one is given): the newest complete run or
    trials sweep (complete or partial), with a note naming any newer one that did not
    complete; the newest of
    any status when none completed. ``role='reading'`` picks Linux's TCP runs instead."""
    groups: dict[tuple[str, str], list[tuple[str, str, Path]]] = {}
    for experiment, prof, started, status, folder in candidates(results, role):
        if profile is not None and prof != profile:
            continue
        if experiments is not None and experiment not in experiments:
            continue
        groups.setdefault((experiment, prof), []).append((started, status, folder))
    out = []
    for found in groups.values():
        found.sort(key=lambda item: item[0])
        # A partial trials sweep (stopped at its --limit) is a result: the mean over the
        # trials it ran, its entry noting how many of the planned ones that is.
        complete = [item for item in found if item[1] in ("complete", "partial")]
        chosen = complete[-1] if complete else found[-1]
        newer = [f"{folder.name} ({status})" for started, status, folder in found
                 if started > chosen[0]]
        note = f"newer, not complete: {', '.join(newer)}" if newer else ""
        out.append((chosen[2], note))
    return sorted(out, key=lambda item: str(item[0]))


def newest(results: Path, profile: str | None = None,
           experiments: list[str] | None = None) -> list[Path]:
    """The folders :func:`select` picks."""
    return [folder for folder, _ in select(results, profile, experiments)]


def load_entries(folders: list[Path], notes: dict[Path, str] | None = None,
                 readings: list[tuple[Path, str]] | None = None) -> list[Entry]:
    """An entry per folder: a trials sweep or a single run; ``notes`` added to theirs.

    ``readings`` (folder, note) are Linux-TCP runs (:func:`select` with ``role='reading'``);
    each is attached to the entry of its experiment and profile, and one without an
    entry gets an entry of its own without verdicts.
    """
    entries = []
    for folder in folders:
        if (folder / "sweep.json").is_file() and \
                is_trials_record(json.loads((folder / "sweep.json").read_text())):
            entry = _trials_entry(folder)
        else:
            entry = _run_entry(folder)
        extra = (notes or {}).get(folder, "")
        entry.note = "; ".join(n for n in (entry.note, extra) if n)
        entries.append(entry)
    for folder, note in readings or []:
        _attach(entries, folder, note)
    return entries


def load_reading(folder: Path, note: str = "") -> tuple[Reading | None, dict]:
    """A Linux-TCP run's measured values by label, each with whether it lies in its band,
    and the run's run.json; None without a readable run.json, a note when the rest of
    the folder cannot be read."""
    try:
        info = json.loads((folder / "run.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None, {}
    reading = Reading(folder=folder, status=str(info.get("status", "?")),
                      model=tcp_model_of(folder) or "", note=note)
    try:
        run = load_run(folder)
    except (RunError, SpecError, OSError) as exc:
        reading.note = "; ".join(n for n in (note, f"cannot be read: {exc}") if n)
        return reading, info
    summary = summarise(run)
    reading.overloaded = sentence(summary.agent_stalls)
    for q in summary.quantities:
        if _has_criterion(q):
            inside = None if q.verdict not in ("pass", "fail") else q.verdict == "pass"
            reading.values[q.label] = (q.measured, inside)
    return reading, info


def _attach(entries: list[Entry], folder: Path, note: str) -> None:
    """Put a Linux-TCP reading beside the verdict entry of its experiment and profile."""
    reading, info = load_reading(folder, note)
    if reading is None:
        return
    experiment = str(info.get("experiment", folder.parent.name))
    profile = str(info.get("profile", ""))
    entry = next((e for e in entries
                  if e.experiment == experiment and e.profile == profile), None)
    if entry is None:
        entry = Entry(experiment=experiment, paper=OTHER, reference="", folder=folder,
                      kind="run", profile=profile, status=reading.status,
                      started=str(info.get("started") or ""),
                      took_s=run_took_s(info.get("phase_s")),
                      note="no run under the paper's TCP model; only Linux's default TCP, "
                           "which is never the verdict")
        try:
            run = load_run(folder)
            entry.paper = paper_of([str(getattr(f, "protocol", "")) for f in run.spec.flows],
                                   entry.experiment)
            entry.reference = run.spec.reference
        except (RunError, SpecError, OSError):
            pass
        entries.append(entry)
    entry.reading = reading
    entry.rows = [replace(row, linux=reading.values.get(row.label, (None, None))[0],
                          linux_inside=reading.values.get(row.label, (None, None))[1])
                  for row in entry.rows]


def is_trials_record(sweep_json: dict) -> bool:
    """Whether a parsed ``sweep.json`` is a sweep over seeds (trials)."""
    return "seed" in (sweep_json.get("over") or {})


@dataclass(frozen=True)
class Counts:
    """What a table (or the page) holds: its results by verdict, the experiments that ran
    overloaded and the failures that are theirs, and the time their runs took."""

    results: int
    passed: int
    failed: int
    marginal: int  # of the passes and fails, those within 10 % of their band's edge
    other: int  # n/a or errors
    overloaded: int
    overloaded_failed: int
    minutes: float  # of the entries that recorded their runs' time
    untimed: int  # entries whose runs recorded no time


def _counts(entries: list[Entry]) -> Counts:
    """The :class:`Counts` of these entries."""
    rows = [r for e in entries for r in e.rows]
    judged = [r for r in rows if r.verdict in ("pass", "fail")]
    loaded = [e for e in entries if e.overloaded]
    return Counts(results=len(rows), passed=sum(r.verdict == "pass" for r in rows),
                  failed=sum(r.verdict == "fail" for r in rows),
                  marginal=sum(r.marginal for r in judged), other=len(rows) - len(judged),
                  overloaded=len(loaded),
                  overloaded_failed=sum(r.verdict == "fail" for e in loaded for r in e.rows),
                  minutes=sum(e.took_s for e in entries if e.took_s is not None) / 60,
                  untimed=sum(e.took_s is None for e in entries))


def _environment() -> Environment:
    """The Jinja2 environment: templates from the package, HTML escaped."""
    env = Environment(loader=PackageLoader("mcclab.analysis", "templates"),
                      autoescape=True, trim_blocks=True,
                      lstrip_blocks=True)
    env.filters["value"] = lambda row, v: format_value(row.kind, v, row.unit)
    env.filters["percent"] = lambda v: "–" if v is None else f"{v * 100:+.0f} %"
    env.filters["minutes"] = lambda v: f"{v / 60:.1f} min"
    return env


def render(entries: list[Entry], root: Path, title: str = "mcclab: the papers reproduced") -> str:
    """The index page for these entries; links are relative to ``root``."""
    groups = []
    for key in [*PAPERS, OTHER]:
        mine = sorted((e for e in entries if e.paper == key), key=lambda e: e.experiment)
        if mine:
            # The second-reading column where a TCP competes in some experiment of the paper.
            tcp = any(e.tcp_model or e.reading for e in mine)
            groups.append({"title": PAPERS.get(key, "Other experiments"), "entries": mine,
                           "counts": _counts(mine), "tcp": tcp})
    template = _environment().get_template("index.html.j2")
    return template.render(title=title, groups=groups, counts=_counts(entries),
                           report=lambda e: e.report(root))


def build_index(results: Path, profile: str | None = None,
                experiments: list[str] | None = None) -> Path:
    """Write ``<results>/index.html`` from the newest result folders and return its path."""
    results = Path(results).resolve()
    picked = select(results, profile, experiments)
    readings = select(results, profile, experiments, role="reading")
    entries = load_entries([folder for folder, _ in picked], dict(picked), readings)
    page = results / "index.html"
    page.write_text(render(entries, results))
    return page


__all__ = ["PAPERS", "Counts", "Entry", "Reading", "Row", "build_index", "candidates",
           "load_entries", "load_reading", "newest", "paper_of", "render",
           "role_of", "run_took_s", "select", "tcp_model_of"]

"""Run a sweep: every point of a spec's ``sweeps.<name>.over`` as an ordinary run.

Each point is the experiment resolved with the profile, the command line's
``--set`` and then the point's values, run by the ordinary runner into its
own run folder. The sweep's folder ``results/<exp>/sweep-<id>/`` records the
points (``sweep.json``, rewritten after every run, so even a killed sweep
leaves a readable record); the report builder the caller passes
(:attr:`SweepOptions.report`; ``mcclab sweep`` passes the analysis') then writes
``sweep.csv``, the sweep figures and ``report.html``.

Ctrl-C (or SIGTERM) stops the sweep: the current run is torn down and
recorded as interrupted by the runner, no further point is started, and the
sweep folder is written with the runs done.

A long sweep (a paper's 100 trials) need not run in one sitting:
:attr:`SweepOptions.limit` stops it after that many runs, its status then
``partial``, and :func:`resume_sweep` goes on with any sweep folder (partial,
interrupted, failed, or killed with its process) by running each point that has
no complete run, in the same folder, under the spec, profile and ``--set`` the
sweep started with. A run that did not complete stays recorded, under
``superseded``, once its point has run again.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from mcclab.experiment.estimate import run_estimate_s
from mcclab.experiment.loader import Resolved, find_experiment, resolve
from mcclab.jsonfile import write_json_atomic
from mcclab.lab import PreflightError
from mcclab.model.loader import SpecError


@dataclass
class SweepOptions:
    """How to run a sweep: the runner's options, progress, and the run function (injectable)."""

    run: Any  # mcclab.experiment.runner.RunOptions
    # (k, n, point) before run k of n starts
    progress: Callable[[int, int, dict[str, Any]], None] = lambda k, n, point: None
    # The ordinary runner by default; tests pass a fake that writes a synthetic run.
    execute: Callable[[Resolved, Any], Path] | None = None
    sets: list[str] = field(default_factory=list)
    # Writes sweep.csv, the figures and report.html from the sweep folder once the
    # runs are done (``mcclab sweep`` passes
    # mcclab.analysis.sweep_report.build_sweep_report; this package does not import
    # the analysis). None leaves the report to ``mcclab report``.
    report: Callable[[Path], object] | None = None
    # Run at most this many points now (None: all); the rest wait for resume_sweep.
    limit: int | None = None
    # The plan (every point, which are complete, each estimate) once the sweep holds
    # its folder, before the first run: what ``mcclab sweep`` prints as its estimate.
    planned: Callable[[list[PlannedPoint]], None] = lambda planned: None


class ResumeError(Exception):
    """A sweep folder that cannot be resumed: unreadable, still running, or its spec changed."""


# The file a running sweep holds an flock on, so that a resume can tell a sweep
# whose process died (the kernel dropped the lock) from one that still runs.
LOCK_FILE = ".sweep.lock"


def new_sweep_dir(results: Path, experiment: str) -> Path:
    """A fresh folder results/<experiment>/sweep-<id>, created exclusively."""
    base = results / experiment
    base.mkdir(parents=True, exist_ok=True)
    while True:
        path = base / f"sweep-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue


def plan(name_or_path: str, sweep: str, profile: str, sets: list[str]
         ) -> tuple[Resolved, list[tuple[dict[str, Any], Resolved]]]:
    """Resolve the experiment and every point of the sweep, before anything runs.

    Raises SpecError naming the sweep and the point when a point does not
    make a valid experiment (e.g. a count the topology has no hosts for).
    """
    base = resolve(name_or_path, profile, sets)
    sweeps = base.experiment.sweeps
    if sweep not in sweeps:
        known = ", ".join(sorted(sweeps)) or "none"
        raise SpecError(base.path, [("--sweep", f"no sweep {sweep!r}; known: {known}")])
    points = []
    for point in sweeps[sweep].points():
        try:
            points.append((point, resolve(name_or_path, profile, sets, extra=point)))
        except SpecError as exc:
            where = ", ".join(f"{k}={v}" for k, v in point.items())
            raise SpecError(exc.path, [(f"sweeps.{sweep} at {where}: {f}", r)
                                       for f, r in exc.problems], exc.note) from None
    return base, points


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Between runs, SIGTERM stops the sweep like Ctrl-C (the runner handles it during runs)."""
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    try:
        old = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _status_of(run_dir: Path | None) -> str:
    """A run's status from its run.json ('failed' when there is none)."""
    try:
        return str(json.loads((run_dir / "run.json").read_text())["status"])  # type: ignore[operator]
    except (OSError, TypeError, ValueError, KeyError):
        return "failed"


def run_sweep(name_or_path: str, sweep: str, profile: str, options: SweepOptions) -> Path:
    """Run the points of a sweep (at most ``options.limit``) into a new sweep folder; return it."""
    base, points = plan(name_or_path, sweep, profile, options.sets)
    exp = base.experiment
    spec = exp.sweeps[sweep]
    folder = new_sweep_dir(options.run.results, exp.name)
    record: dict[str, Any] = {
        "experiment": exp.name, "sweep": sweep, "sweep_id": folder.name, "profile": profile,
        "description": spec.description, "spec_file": str(find_experiment(name_or_path)),
        "set": list(options.sets), "over": spec.over,
        "figures": [f.model_dump(mode="json") for f in spec.figures],
        "status": "running", "started": datetime.now(UTC).isoformat(), "ended": None,
        "planned": len(points), "runs": [],
    }
    with _held(folder):
        write_json_atomic(folder / "sweep.json", record)
        return _run_points(folder, record, points, options)


def resume_sweep(folder: Path, options: SweepOptions) -> Path:
    """Go on with the sweep in ``folder``: run each point without a complete run.

    The points are planned again from the spec file, sweep, profile and ``--set``
    that ``sweep.json`` records (``options.sets`` is not used). Raises ResumeError
    when the folder has no readable ``sweep.json``, another process is running the
    sweep, or the spec's sweep no longer plans the points the record holds; and
    SpecError when the spec no longer resolves.
    """
    record = _read_record(folder)
    with _held(folder):
        return _run_points(folder, record, _replan(folder, record), options)


@dataclass(frozen=True)
class PlannedPoint:
    """One point of a sweep as a dry run shows it: run k of n, its values, its estimate,
    and whether the sweep folder already holds a complete run of it."""

    k: int
    n: int
    point: dict[str, Any]
    estimate_s: float
    complete: bool


def preview(name_or_path: str, sweep: str, profile: str, sets: list[str]
            ) -> list[PlannedPoint]:
    """The points a new sweep would run, with their estimates (SpecError if one is bad)."""
    _, points = plan(name_or_path, sweep, profile, sets)
    return _planned(points, [None] * len(points))


def preview_resume(folder: Path) -> list[PlannedPoint]:
    """The points of the sweep in ``folder``, which of them are complete, and the estimates
    of the rest; ResumeError or SpecError as :func:`resume_sweep` would raise them."""
    record = _read_record(folder)
    points = _replan(folder, record)
    return _planned(points, _place(folder, record, points))


def running_elsewhere(folder: Path) -> bool:
    """Whether another process holds the sweep folder's lock (runs its points now)."""
    try:
        with _held(folder):
            return False
    except ResumeError:
        return True


def _planned(points: list[tuple[dict[str, Any], Resolved]],
             entries: list[dict[str, Any] | None]) -> list[PlannedPoint]:
    n = len(points)
    return [PlannedPoint(k, n, point, run_estimate_s(resolved),
                         entry is not None and entry.get("status") == "complete")
            for k, ((point, resolved), entry) in enumerate(zip(points, entries, strict=True),
                                                          start=1)]


def _read_record(folder: Path) -> dict[str, Any]:
    """``sweep.json`` of ``folder``, checked for what a resume needs (ResumeError if not)."""
    path = folder / "sweep.json"
    try:
        record = json.loads(path.read_text())
        missing = [k for k in ("spec_file", "sweep", "profile", "planned") if k not in record]
        if missing:
            raise KeyError(", ".join(missing))
        int(record["planned"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ResumeError(f"{path}: not a readable sweep record ({exc})") from None
    return record


def _replan(folder: Path, record: dict[str, Any]) -> list[tuple[dict[str, Any], Resolved]]:
    """The points planned again from the record; ResumeError if their number changed."""
    name, sweep = str(record["spec_file"]), str(record["sweep"])
    sets = [str(s) for s in record.get("set", [])]
    _, points = plan(name, sweep, str(record["profile"]), sets)
    planned = int(record["planned"])
    if len(points) != planned:
        raise ResumeError(
            f"{folder}: sweep {sweep!r} of {name} now has {len(points)} points and this "
            f"sweep planned {planned}: the spec changed since it started; start a new "
            "sweep instead")
    return points


def _key(point: object) -> str:
    """A point's values as one comparable string (a recorded point has been through JSON)."""
    return json.dumps(point, sort_keys=True, default=str)


@contextlib.contextmanager
def _held(folder: Path) -> Iterator[None]:
    """Hold the sweep folder's lock while its points run; ResumeError if another process does."""
    with open(folder / LOCK_FILE, "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ResumeError(f"{folder}: another process is running this sweep") from None
        yield


def _run_points(folder: Path, record: dict[str, Any],
                points: list[tuple[dict[str, Any], Resolved]], options: SweepOptions) -> Path:
    """Run the points that have no complete run in ``record`` (up to the limit), keeping
    ``record`` (and ``sweep.json``) in the points' order; then the report.

    Raises ResumeError, before anything is written, when ``record`` lists a run of a
    point that ``points`` no longer has.
    """
    execute = options.execute
    if execute is None:
        from mcclab.experiment.runner import execute
    # The entry each point has so far; an entry of an earlier attempt that did not
    # complete moves to "superseded" when its point runs again.
    entries = _place(folder, record, points)
    options.planned(_planned(points, entries))
    record["status"], record["ended"] = "running", None

    def write() -> None:
        record["runs"] = [e for e in entries if e is not None]
        write_json_atomic(folder / "sweep.json", record)

    write()
    status, ran = "complete", 0
    with _sigterm_as_interrupt():
        for k, (point, resolved) in enumerate(points, start=1):
            before = entries[k - 1]
            if before is not None and before.get("status") == "complete":
                continue
            if options.limit is not None and ran >= options.limit:
                status = "partial"
                break
            ran += 1
            entry, refused = _run_point(k, len(points), point, resolved, folder, execute,
                                        options)
            if entry["status"] == "interrupted":
                status = "interrupted"
            elif refused:
                status = "failed"  # the machine cannot run labs: no point going on
            if entry["dir"] is not None or entry["status"] != "interrupted":
                if before is not None:
                    record.setdefault("superseded", []).append(before)
                entries[k - 1] = entry
            write()
            if status != "complete":
                break
    record["status"], record["ended"] = status, datetime.now(UTC).isoformat()
    write()
    if options.report is None:
        return folder
    try:
        options.report(folder)
    except Exception as exc:  # noqa: BLE001 - the record stands; `mcclab report` can rebuild
        (folder / "analysis-error.txt").write_text(f"{type(exc).__name__}: {exc}\n")
    return folder


def _place(folder: Path, record: dict[str, Any],
           points: list[tuple[dict[str, Any], Resolved]]) -> list[dict[str, Any] | None]:
    """The entry of ``record`` each point has so far (None: not run yet), in the points'
    order; ResumeError when ``record`` lists a run of a point that ``points`` does not have.
    """
    entries: list[dict[str, Any] | None] = [None] * len(points)
    keys = [_key(point) for point, _ in points]
    for entry in record.get("runs", []):
        key = _key(entry.get("set"))
        slot = next((i for i, k in enumerate(keys) if k == key and entries[i] is None), None)
        if slot is None:
            raise ResumeError(
                f"{folder}: the spec's sweep {record.get('sweep')!r} no longer has the point "
                f"{entry.get('set')} that this sweep ran; start a new sweep instead")
        entries[slot] = entry
    return entries


def _run_point(k: int, n: int, point: dict[str, Any], resolved: Resolved, folder: Path,
               execute: Callable[[Resolved, Any], Path], options: SweepOptions
               ) -> tuple[dict[str, Any], bool]:
    """Run one point (k of n): its entry for ``sweep.json``, and whether the lab refused to
    start (PreflightError: the machine cannot run labs)."""
    current: dict[str, Path] = {}
    refused = False
    entry: dict[str, Any] = {"dir": None, "set": point, "status": "failed", "error": None}
    try:
        options.progress(k, n, point)
        run_options = replace(options.run, started=partial(current.__setitem__, "dir"))
        run_dir = execute(resolved, run_options)
        current["dir"] = run_dir
        entry["status"] = _status_of(run_dir)
    except KeyboardInterrupt:
        entry["status"], entry["error"] = "interrupted", "stopped by Ctrl-C"
    except Exception as exc:  # noqa: BLE001 - recorded; the sweep goes on
        entry["error"] = f"{type(exc).__name__}: {exc}"
        refused = isinstance(exc, PreflightError)
    # A run the lab refused (PreflightError) leaves no folder to point at.
    if "dir" in current and current["dir"].is_dir():
        entry["dir"] = os.path.relpath(current["dir"], folder)
        if entry["status"] == "failed":
            entry["status"] = _status_of(current["dir"])
            if entry["status"] == "running":
                entry["status"] = "failed"
    return entry, refused

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
"""

from __future__ import annotations

import contextlib
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

from mcclab.experiment.loader import Resolved, find_experiment, resolve
from mcclab.jsonfile import write_json_atomic
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
    """Run every point of a sweep and write the sweep folder; return its path."""
    base, points = plan(name_or_path, sweep, profile, options.sets)
    execute = options.execute
    if execute is None:
        from mcclab.experiment.runner import execute
    exp = base.experiment
    spec = exp.sweeps[sweep]
    results = options.run.results
    folder = new_sweep_dir(results, exp.name)
    record: dict[str, Any] = {
        "experiment": exp.name, "sweep": sweep, "sweep_id": folder.name, "profile": profile,
        "description": spec.description, "spec_file": str(find_experiment(name_or_path)),
        "set": list(options.sets), "over": spec.over,
        "figures": [f.model_dump(mode="json") for f in spec.figures],
        "status": "running", "started": datetime.now(UTC).isoformat(), "ended": None,
        "planned": len(points), "runs": [],
    }
    write_json_atomic(folder / "sweep.json", record)
    status = "complete"
    with _sigterm_as_interrupt():
        for k, (point, resolved) in enumerate(points, start=1):
            current: dict[str, Path] = {}
            entry: dict[str, Any] = {"dir": None, "set": point, "status": "failed", "error": None}
            try:
                options.progress(k, len(points), point)
                run_options = replace(options.run, started=partial(current.__setitem__, "dir"))
                run_dir = execute(resolved, run_options)
                current["dir"] = run_dir
                entry["status"] = _status_of(run_dir)
            except KeyboardInterrupt:
                entry["status"], entry["error"] = "interrupted", "stopped by Ctrl-C"
                status = "interrupted"
            except Exception as exc:  # noqa: BLE001 - recorded; the sweep goes on
                entry["error"] = f"{type(exc).__name__}: {exc}"
                if type(exc).__name__ == "PreflightError":
                    status = "failed"  # the machine cannot run labs: no point going on
            # A run the lab refused (PreflightError) leaves no folder to point at.
            if "dir" in current and current["dir"].is_dir():
                entry["dir"] = os.path.relpath(current["dir"], folder)
                if entry["status"] == "failed" and current["dir"].is_dir():
                    entry["status"] = _status_of(current["dir"])
                    if entry["status"] == "running":
                        entry["status"] = "failed"
            if entry["dir"] is not None or entry["status"] != "interrupted":
                record["runs"].append(entry)
            if entry["status"] == "interrupted":
                status = "interrupted"
            write_json_atomic(folder / "sweep.json", record)
            if status != "complete":
                break
    record["status"], record["ended"] = status, datetime.now(UTC).isoformat()
    write_json_atomic(folder / "sweep.json", record)
    if options.report is None:
        return folder
    try:
        options.report(folder)
    except Exception as exc:  # noqa: BLE001 - the record stands; `mcclab report` can rebuild
        (folder / "analysis-error.txt").write_text(f"{type(exc).__name__}: {exc}\n")
    return folder

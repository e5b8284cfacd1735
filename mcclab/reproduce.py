"""``mcclab reproduce``: every paper experiment, one after the other, then ``results/index.html``.

The plan is data: one ``mcclab run`` (or, in the paper profile, ``mcclab sweep
--sweep trials`` where the paper averaged several trials) argv per experiment,
built and checked before anything starts, so a broken spec stops the whole
reproduction with its error instead of an hour into it. One runner executes
the steps, each in a process group of its own (a signal to this command is
passed on to the step in progress, which stops its run cleanly, and nothing
after it starts). A failed step is recorded and the next one runs.

Each reproduction is recorded in ``results/reproduce/<id>/``: ``reproduce.json``
(the plan, each step's folder, exit status and elapsed time) and every step's
console output in ``logs/``. The index is then built from the result folders
alone (:mod:`mcclab.analysis.index`), as ``mcclab index`` rebuilds it later.

A reproduction that stopped (Ctrl-C, a crash, a power cut) goes on with
:func:`resume_plan`: the steps that completed are kept, a trials step whose sweep
folder exists resumes that sweep (``mcclab sweep --resume``, so its complete
trials are not run again), and every other step runs again, all recorded in the
same ``reproduce.json``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from mcclab.analysis.stalls import warning_in
from mcclab.experiment.estimate import run_estimate_s
from mcclab.experiment.loader import EXPERIMENTS, resolve
from mcclab.jsonfile import write_json_atomic
from mcclab.model.loader import read_yaml

TRIALS_SWEEP = "trials"
LAB_CHECK = "lab check"


@dataclass(frozen=True)
class Step:
    """One experiment of a reproduction: what runs, and how long it should take."""

    experiment: str
    kind: str  # "run" or "trials"
    argv: list[str]
    runs: int
    estimate_s: float
    resumes: str | None = None  # the sweep folder a resumed trials step goes on with


@dataclass
class Outcome:
    """What one step did."""

    experiment: str
    kind: str
    argv: list[str]
    exit_code: int | None = None
    folders: list[str] = field(default_factory=list)
    status: str = "not run"
    elapsed_s: float = 0.0
    log: str = ""
    overloaded: int = 0  # of its runs, those whose agents stalled (summary.json's stall check)


def paper_experiments(directory: Path = EXPERIMENTS) -> list[str]:
    """Every experiment that reproduces a paper result (a 'lab check' spec does not)."""
    names = []
    for path in sorted(directory.glob("*.yaml")):
        reference = str((read_yaml(path) or {}).get("reference", ""))
        if not reference.lower().startswith(LAB_CHECK):
            names.append(path.stem)
    return names


def plan(profile: str, experiments: list[str] | None = None, results: Path = Path("results"),
         command: list[str] | None = None, wait: float = 0.0) -> list[Step]:
    """The steps of a reproduction; raises SpecError before anything runs if a spec is bad.

    In the paper profile, an experiment with a ``trials`` sweep over ``seed``
    runs that sweep (the paper's number of trials); otherwise one run.
    """
    command = command or [sys.executable, "-m", "mcclab"]
    steps = []
    for name in experiments if experiments is not None else paper_experiments():
        res = resolve(name, profile)
        exp = res.experiment
        trials = exp.sweeps.get(TRIALS_SWEEP)
        common = ["--profile", profile, "--results", str(results), "--wait", f"{wait:g}"]
        if profile == "paper" and trials is not None and "seed" in trials.over:
            runs = len(trials.points())
            argv = [*command, "sweep", name, "--sweep", TRIALS_SWEEP, *common]
            kind = "trials"
        else:
            runs = 1
            argv = [*command, "run", name, *common]
            kind = "run"
        steps.append(Step(name, kind, argv, runs, runs * run_estimate_s(res)))
    return steps


def _folders(results: Path, experiment: str) -> set[str]:
    """The run and sweep folders of one experiment."""
    base = results / experiment
    return {p.name for p in base.iterdir() if p.is_dir()} if base.is_dir() else set()


def _status(folder: Path) -> str:
    """The status a run or sweep folder records."""
    for name in ("sweep.json", "run.json"):
        try:
            return str(json.loads((folder / name).read_text()).get("status", "?"))
        except (OSError, json.JSONDecodeError):
            continue
    return "?"


def _stop(proc: subprocess.Popen, grace: float = 120.0) -> None:
    """Pass an interrupt to a step's process group and wait for its clean stop."""
    for sig, wait in ((signal.SIGINT, grace), (signal.SIGTERM, 30.0), (signal.SIGKILL, 10.0)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def execute(steps: list[Step], results: Path, record_dir: Path,
            on_step: Callable[[int, Step, Outcome | None], None] | None = None,
            profile: str = "", earlier: dict | None = None) -> list[Outcome]:
    """Run the steps one after the other; record them in ``record_dir/reproduce.json``.

    ``on_step(k, step, None)`` is called when step k starts and ``on_step(k, step,
    outcome)`` when it ends. A KeyboardInterrupt (Ctrl-C, or SIGTERM turned into
    one by the caller) stops the step in progress cleanly and ends the reproduction.
    ``earlier`` is the record of a reproduction being resumed (:func:`resume_plan`):
    its complete steps are kept and not run, the outcomes of the others move to its
    ``superseded`` list, and the record keeps when each sitting started.
    """
    logs = record_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    outcomes = [Outcome(s.experiment, s.kind, s.argv) for s in steps]
    now = datetime.now(UTC).isoformat()
    record: dict = {"started": now, "status": "running", "profile": profile,
                    "results": str(results), "steps": outcomes}
    if earlier is not None:
        record.update(started=earlier.get("started", now), profile=earlier.get("profile", profile),
                      sittings=[*earlier.get("sittings", [earlier.get("started", now)]), now],
                      superseded=list(earlier.get("superseded", [])))
        done = completed(earlier)
        for k, old in enumerate(earlier.get("steps", [])[:len(steps)]):
            if k in done:
                outcomes[k] = Outcome(**{key: value for key, value in old.items()
                                         if key in Outcome.__dataclass_fields__})
            elif old.get("status") != "not run":
                record["superseded"].append(old)
    _write(record_dir, record)
    try:
        for k, (step, outcome) in enumerate(zip(steps, outcomes, strict=True), start=1):
            if outcome.status == "complete":
                continue  # done in an earlier sitting
            if on_step:
                on_step(k, step, None)
            before = _folders(results, step.experiment)
            log = logs / f"{k:02d}-{step.experiment}.log"
            attempt = 1
            while log.exists():  # an earlier sitting's log of this step stays
                attempt += 1
                log = logs / f"{k:02d}-{step.experiment}.{attempt}.log"
            outcome.log = str(log.relative_to(record_dir))
            start = time.monotonic()
            with log.open("wb") as out:
                proc = subprocess.Popen(step.argv, stdout=out, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True)
                try:
                    outcome.exit_code = proc.wait()
                except BaseException:
                    _stop(proc)
                    outcome.exit_code = proc.returncode
                    outcome.status = "interrupted"
                    raise
                finally:
                    outcome.elapsed_s = round(time.monotonic() - start, 1)
                    new = sorted(_folders(results, step.experiment) - before)
                    outcome.folders = [str(results / step.experiment / n) for n in new]
                    if step.resumes is not None:  # the sweep is not new, but it is this step's
                        outcome.folders.insert(0, step.resumes)
                    _write(record_dir, record)
            # A sweep's own folder carries the sweep's status; runs are in it too.
            mine = [Path(f) for f in outcome.folders]
            sweeps = [f for f in mine if (f / "sweep.json").is_file()]
            outcome.status = _status(sweeps[-1] if sweeps else mine[-1]) if mine else \
                f"no folder (exit {outcome.exit_code})"
            outcome.overloaded = sum(warning_in(f / "summary.json") is not None
                                     for f in mine if (f / "run.json").is_file())
            _write(record_dir, record)
            if on_step:
                on_step(k, step, outcome)
        record["status"] = "complete"
    except BaseException:
        record["status"] = "interrupted"
        raise
    finally:
        record["ended"] = datetime.now(UTC).isoformat()
        _write(record_dir, record)
    return outcomes


def completed(record: dict | None) -> set[int]:
    """The indices of the steps a reproduction's record (``reproduce.json``) has complete."""
    steps = (record or {}).get("steps", [])
    return {k for k, old in enumerate(steps) if old.get("status") == "complete"}


def _argv_value(argv: list[str], flag: str) -> str | None:
    """The value after ``flag`` in a step's command line (records that predate a key)."""
    return argv[argv.index(flag) + 1] if flag in argv[:-1] else None


def resume_plan(record_dir: Path, command: list[str] | None = None, wait: float = 0.0
                ) -> tuple[str, Path, list[Step], dict]:
    """What is left of the reproduction recorded in ``record_dir``.

    Returns its profile, results folder, steps and record. The steps are planned
    again (so a spec broken since stops here, before anything runs, with SpecError);
    a trials step whose sweep folder exists and did not complete resumes that sweep.
    Raises ValueError when ``record_dir`` holds no readable ``reproduce.json``.
    """
    path = record_dir / "reproduce.json"
    try:
        record = json.loads(path.read_text())
        old_steps = list(record["steps"])
        first = old_steps[0]["argv"] if old_steps else []
        profile = record.get("profile") or _argv_value(first, "--profile")
        results = record.get("results") or _argv_value(first, "--results")
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise ValueError(f"{path}: not a readable reproduction record ({exc})") from None
    if not profile or not results:
        raise ValueError(f"{path}: the record names no profile or results folder")
    command = command or [sys.executable, "-m", "mcclab"]
    steps = plan(profile, [str(s["experiment"]) for s in old_steps], Path(results), command,
                 wait)
    done = completed(record)
    for k, (step, old) in enumerate(zip(steps, old_steps, strict=True)):
        sweeps = [f for f in old.get("folders", []) if (Path(f) / "sweep.json").is_file()]
        if step.kind == "trials" and k not in done and sweeps:
            argv = [*command, "sweep", "--resume", sweeps[0], "--wait", f"{wait:g}"]
            steps[k] = replace(step, argv=argv, resumes=sweeps[0])
    return profile, Path(results), steps, record


def _write(record_dir: Path, record: dict) -> None:
    """``reproduce.json``, replaced whole so a reader never sees half of it."""
    data = {**record, "steps": [asdict(o) for o in record["steps"]]}
    write_json_atomic(record_dir / "reproduce.json", data, newline=True)


def write_index(results: Path, profile: str, experiments: list[str],
                build: Callable[[Path, str, list[str]], Path]) -> tuple[Path | None, str]:
    """The reproduction's last step: ``build`` (index.build_index) the index page.

    Returns the page, or None and why it failed with the ``mcclab index`` command that
    rebuilds it. Any error is caught: the runs are done and recorded by then, and a
    broken page (a template changed under a running reproduction, a full disk) must
    not end hours of runs with a traceback instead of the way to the page.
    """
    try:
        return build(results, profile, experiments), ""
    except Exception as exc:  # noqa: BLE001 - reported with its remedy, runs are safe
        return None, (f"the index could not be written ({type(exc).__name__}: {exc}); the "
                      f"runs are recorded; rebuild it with: mcclab index --results {results} "
                      f"--profile {profile}")


def new_record_dir(results: Path) -> Path:
    """``results/reproduce/<time>-<pid>/``, created."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    folder = results / "reproduce" / f"{stamp}-{os.getpid()}"
    folder.mkdir(parents=True)
    return folder

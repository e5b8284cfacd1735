"""The run record stays true: dead runners are found, refused runs leave no folder, and
signals in each phase of the runner end as an interrupted record (with a fake lab)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from datetime import datetime
from pathlib import Path

import pytest

from mcclab.analysis.report import build_report
from mcclab.experiment.loader import resolve
from mcclab.experiment.record import mark_killed_runs, runner_alive, runner_identity
from mcclab.experiment.runner import RunOptions, execute
from mcclab.lab import PreflightError
from mcclab.state import proc_start_time

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "tests" / "integration" / "signals-run.yaml"


def write_run(root: Path, name: str, **fields) -> Path:
    """A run folder results/<exp>/<name>/ whose run.json holds ``fields``."""
    folder = root / "exp" / name
    folder.mkdir(parents=True)
    record = {"experiment": "exp", "run_id": name, "status": "running", "duration_s": 10.0,
              "elapsed_s": 3.0, "error": None, "custom": [1, 2], **fields}
    (folder / "run.json").write_text(json.dumps(record))
    return folder


def read(folder: Path) -> dict:
    return json.loads((folder / "run.json").read_text())


def dead_pid() -> int:
    """The pid of a child that has exited and been reaped."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_mark_killed_runs_tells_dead_recycled_and_alive_runners_apart(tmp_path):
    me = os.getpid()
    alive = write_run(tmp_path, "alive", **runner_identity())
    recycled = write_run(tmp_path, "recycled", runner_pid=me,
                         runner_start_time=proc_start_time(me) - 1)
    dead = write_run(tmp_path, "dead", runner_pid=dead_pid(), runner_start_time=12345)
    other_boot = write_run(tmp_path, "other-boot", **{**runner_identity(),
                                                      "runner_boot_id": "another-boot"})
    old = write_run(tmp_path, "old")  # written before runners were recorded
    done = write_run(tmp_path, "done", status="complete", runner_pid=dead_pid(),
                     runner_start_time=1)

    marked = mark_killed_runs(tmp_path)

    assert sorted(marked) == sorted([recycled, dead, other_boot])
    for folder in (recycled, dead, other_boot):
        record = read(folder)
        assert record["status"] == "killed"
        assert datetime.fromisoformat(record["killed_found"]).tzinfo is not None
        # everything else is kept as it was
        assert record["elapsed_s"] == 3.0 and record["custom"] == [1, 2]
        assert record["run_id"] == folder.name
    assert read(alive)["status"] == "running" and "killed_found" not in read(alive)
    assert read(old)["status"] == "running"
    assert read(done)["status"] == "complete"
    # a second pass finds nothing more
    assert mark_killed_runs(tmp_path) == []


def test_runner_alive_needs_the_runner_fields():
    assert runner_alive({}) is None
    assert runner_alive({"runner_pid": os.getpid()}) is None
    assert runner_alive(runner_identity()) is True


def test_mark_killed_runs_skips_unreadable_records_and_missing_roots(tmp_path):
    folder = tmp_path / "exp" / "broken"
    folder.mkdir(parents=True)
    (folder / "run.json").write_text("{not json")
    assert mark_killed_runs(tmp_path) == []
    assert mark_killed_runs(tmp_path / "nowhere") == []


class FakeLab:
    """Stands in for mcclab.lab.Lab: ``up`` runs a scripted action, ``down`` records calls."""

    def __init__(self, topo, options, on_up=None, on_down=None):  # noqa: ANN001
        self.topo = topo
        self.options = options
        self.on_up = on_up or (lambda: None)
        self.on_down = on_down or (lambda: None)
        self.state = type("S", (), {"path": Path("/nonexistent/mcclab-fake-lab")})()
        self.link_backend = "none"
        self.features = None
        self.routers = None  # as Lab's before its routers start
        self.downs: list[str] = []

    def up(self) -> FakeLab:
        self.on_up()
        raise RuntimeError("the fake lab goes no further")

    def down(self) -> None:
        self.downs.append("started")
        self.on_down()
        self.downs.append("finished")


def run_with(tmp_path: Path, **fake) -> tuple[list[FakeLab], RunOptions]:
    labs: list[FakeLab] = []

    def factory(topo, options):  # noqa: ANN001, ANN202
        labs.append(FakeLab(topo, options, **fake))
        return labs[-1]

    # The report builder mcclab run injects, so these runs end as a real one does.
    return labs, RunOptions(results=tmp_path / "results", lab=factory, analyse=build_report)


def test_a_run_refused_by_preflight_leaves_no_folder(tmp_path):
    def refuse():
        raise PreflightError("cannot start the lab: another mcclab lab is up")

    labs, options = run_with(tmp_path, on_up=refuse)
    started = []
    options.started = started.append
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(PreflightError):
        execute(resolve(str(SPEC), "quick", []), options)
    assert started, "the run never created its folder: the test proves nothing"
    assert not started[0].exists()
    assert list((tmp_path / "results").rglob("*")) in ([], [tmp_path / "results" / "signals-run"])
    assert labs[0].downs == ["started", "finished"]
    # the runner's handlers are gone again
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_signal_in_bring_up_ends_as_an_interrupted_record(tmp_path):
    labs, options = run_with(tmp_path, on_up=lambda: os.kill(os.getpid(), signal.SIGTERM))
    run = execute(resolve(str(SPEC), "quick", []), options)
    record = read(run)
    assert record["status"] == "interrupted"
    assert record["interrupted_phase"] == "bring-up"
    assert record["error"] == "stopped by SIGTERM during bring-up"
    assert record["signals"] == [{"signal": "SIGTERM", "phase": "bring-up"}]
    assert record["runner_pid"] == os.getpid()
    assert record["runner_start_time"] == proc_start_time(os.getpid())
    assert "phase" not in record  # only a record still running says where it is
    assert labs[0].downs == ["started", "finished"]
    assert (run / "report.html").is_file()


def test_the_runner_reports_only_through_the_injected_analysis(tmp_path):
    # The runner does not import the analysis: it calls what it is given, once, with
    # the finished folder, and a failing analysis is noted without hiding the run.
    def stop() -> None:
        os.kill(os.getpid(), signal.SIGTERM)

    calls: list[Path] = []
    _, options = run_with(tmp_path / "a", on_up=stop)
    options.analyse = calls.append
    run = execute(resolve(str(SPEC), "quick", []), options)
    assert calls == [run] and not (run / "report.html").exists()

    def broken(folder: Path) -> None:
        raise ValueError("no plot today")

    _, options = run_with(tmp_path / "b", on_up=stop)
    options.analyse = broken
    run = execute(resolve(str(SPEC), "quick", []), options)
    assert read(run)["status"] == "interrupted"
    assert (run / "analysis-error.txt").read_text() == "ValueError: no plot today\n"


def test_signals_during_teardown_do_not_break_it_and_skip_the_analysis(tmp_path):
    def impatient_user():
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)

    labs, options = run_with(tmp_path, on_down=impatient_user)
    with pytest.raises(RuntimeError, match="goes no further"):
        execute(resolve(str(SPEC), "quick", []), options)
    (run,) = (tmp_path / "results" / "signals-run").iterdir()
    record = read(run)
    # teardown ran to its end; the failure stays the verdict, the signals are on record
    assert labs[0].downs == ["started", "finished"]
    assert record["status"] == "failed" and "goes no further" in record["error"]
    assert record["signals"] == [{"signal": "SIGINT", "phase": "teardown"},
                                 {"signal": "SIGTERM", "phase": "teardown"}]
    assert not (run / "report.html").exists()  # the analysis was skipped


def test_a_signal_before_the_folder_is_ready_is_answered_once_it_is(tmp_path):
    labs, options = run_with(tmp_path)
    options.started = lambda path: os.kill(os.getpid(), signal.SIGINT)
    run = execute(resolve(str(SPEC), "quick", []), options)
    record = read(run)
    assert record["status"] == "interrupted" and record["interrupted_phase"] == "starting"
    assert labs[0].downs == ["started", "finished"]


def test_a_killed_run_is_reported_like_an_interrupted_one(tmp_path):
    from synthetic_runs import demo_run

    run = demo_run(tmp_path / "exp" / "run", status="running", elapsed_s=40.0)
    record = read(run)
    record.update(runner_pid=dead_pid(), runner_start_time=1)
    (run / "run.json").write_text(json.dumps(record))
    assert mark_killed_runs(tmp_path) == [run]
    build_report(run)
    page = (run / "report.html").read_text()
    assert "runner was killed before it could write its final record" in page
    assert "It ran 40 s of the planned" in page
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "killed"


def test_a_stop_during_monitoring_start_is_not_swallowed(tmp_path):
    # start_monitoring reports its own failures and carries on; a signal must still stop
    # the run, so the runner's Interrupted is not an Exception.
    from mcclab.experiment.runner import Interrupted
    from mcclab.monitoring.session import start_monitoring

    class SignalledLab:
        state = None

        @property
        def plan(self):  # noqa: ANN202 - the first thing monitoring reads
            raise Interrupted("SIGTERM")

    with pytest.raises(Interrupted):
        start_monitoring(SignalledLab(), tmp_path, object(), None)


def test_a_sweep_point_refused_by_preflight_points_at_no_folder(tmp_path):
    import yaml

    from mcclab.experiment.sweep import SweepOptions, run_sweep

    spec = yaml.safe_load(SPEC.read_text())
    spec["sweeps"] = {"rate": {"over": {"flows.cbr.params.rate": ["300kbit", "600kbit"]}}}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec))

    def refuse():
        raise PreflightError("cannot start the lab: another mcclab lab is up")

    _, options = run_with(tmp_path, on_up=refuse)
    folder = run_sweep(str(path), "rate", "quick", SweepOptions(run=options))
    record = json.loads((folder / "sweep.json").read_text())
    assert record["status"] == "failed"
    (entry,) = record["runs"]  # the sweep stops at the first refusal
    assert entry["dir"] is None and entry["status"] == "failed"
    assert "PreflightError" in entry["error"]
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]


def test_stopper_durations_add_up_each_phase_it_entered():
    from mcclab.experiment.runner import Stopper

    stop = Stopper()
    stop.entered = [("bring-up", 10.0), ("monitoring", 12.5), ("running", 13.0),
                    ("export", 73.0)]
    assert stop.durations(now=75.25) == {"bring-up": 2.5, "monitoring": 0.5,
                                         "running": 60.0, "export": 2.25}
    assert Stopper().durations() == {}


def test_run_json_times_every_phase_the_run_went_through(tmp_path):
    # an interrupted bring-up still records the phases it passed and their times, and
    # when each bring-up step the lab reported as done ended
    labs: list[FakeLab] = []

    def up() -> None:
        progress = labs[0].options.progress
        progress("creating nodes", 1, 2)
        progress("creating nodes", 2, 2)
        progress("starting routers", 0, 1)
        os.kill(os.getpid(), signal.SIGTERM)

    labs, options = run_with(tmp_path, on_up=up)
    run = execute(resolve(str(SPEC), "quick", []), options)
    record = read(run)
    phases = record["phase_s"]
    assert list(phases) == ["bring-up", "export", "teardown", "tables", "analysis"]
    assert all(v >= 0 for v in phases.values())
    steps = record["bring_up_steps_s"]
    assert list(steps) == ["creating nodes"]  # the routers never all started
    assert 0 <= steps["creating nodes"] <= phases["bring-up"]


def test_run_json_times_the_runners_own_bring_up_steps(tmp_path, monkeypatch):
    # after the lab is up, the runner's steps (record, plan, setup commands, fork
    # server) are timed too: a signal during the setup commands leaves the steps
    # before it, in order, and not the setup itself
    from monitoring_support import private_machine

    from mcclab.model.addressing import plan_addresses

    # monitoring begins before the setup commands: not on this machine's own roots
    private_machine(tmp_path, monkeypatch, tmp_path / "state")

    class SetupRunner:
        remote: dict = {}  # no namespace routed elsewhere, as in a lab

        def run_all(self, commands):  # noqa: ANN001, ANN202
            os.kill(os.getpid(), signal.SIGTERM)

    class UpLab(FakeLab):
        def up(self) -> FakeLab:
            self.plan = plan_addresses(self.topo)
            self.runner = SetupRunner()
            for step in ("creating nodes", "waiting for routing"):
                self.options.progress(step, 1, 1)
            return self

    labs: list[FakeLab] = []

    def factory(topo, options):  # noqa: ANN001, ANN202
        labs.append(UpLab(topo, options))
        return labs[-1]

    options = RunOptions(results=tmp_path / "results", lab=factory, analyse=build_report)
    run = execute(resolve(str(SPEC), "quick", []), options)
    record = read(run)
    assert record["status"] == "interrupted"
    steps = record["bring_up_steps_s"]
    assert list(steps) == ["creating nodes", "waiting for routing", "lab up",
                           "environment recorded", "launches planned"]
    assert list(steps.values()) == sorted(steps.values())
    assert steps["launches planned"] <= record["phase_s"]["bring-up"]

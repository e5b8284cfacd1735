"""Monitoring's slow start overlaps the bring-up: the runner begins Prometheus with the
lab's first progress report, the exporter once the lab is up, and waits only right
before the flows; a stop or a failure at any step still ends what was started (the
processes and the runner's lab faked)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from types import SimpleNamespace

import pytest
from monitoring_support import never_alive, private_machine

from mcclab.experiment import runner
from mcclab.experiment.loader import resolve
from mcclab.experiment.runner import Interrupted, RunOptions, execute
from mcclab.model.addressing import plan_addresses
from mcclab.monitoring import export, lifecycle, session, storage
from mcclab.monitoring import prometheus as prom
from mcclab.state import LabState, TrackedProcess

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "tests" / "integration" / "signals-run.yaml"


class Events(list):
    """What happened, in order: ("spawn", what), ("wait", title), ("lab", step), ..."""


class StepLab:
    """Stands in for mcclab.lab.Lab: ``up`` reports one step, then runs ``during_up``;
    its record is a real LabState under a private root."""

    def __init__(self, topo, options, events: Events, during_up=lambda: None):  # noqa: ANN001
        self.topo = topo
        self.options = options
        self.plan = plan_addresses(topo)
        self.state = LabState(lab_id=options.lab_id)
        self.link_backend = "none"
        self.features = None
        self.links = None
        self.events = events
        self.during_up = during_up
        self.runner = SimpleNamespace(remote={},
                                      run_all=lambda cmds: events.append(("lab", "setup")))

    def up(self) -> StepLab:
        self.state.save()  # as Lab.up: the record exists before any progress report
        self.options.progress("creating nodes", 1, 1)
        self.events.append(("lab", "built"))
        self.during_up()
        self.events.append(("lab", "up"))
        return self

    def down(self) -> None:
        self.events.append(("lab", "down"))


@pytest.fixture
def faked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """Private lab and TSDB roots; spawns, readiness waits and the first scrape recorded."""
    tsdb_root = private_machine(tmp_path, monkeypatch, tmp_path / "state")
    events = Events()

    def fake_spawn(state: LabState, command, log: Path, what: str) -> TrackedProcess:  # noqa: ANN001
        events.append(("spawn", what))
        return never_alive(state, what)

    monkeypatch.setattr(lifecycle, "spawn", fake_spawn)
    monkeypatch.setattr(lifecycle, "wait_ready",
                        lambda check, procs, title, log: events.append(("wait", title)))
    monkeypatch.setattr(runner, "environment", lambda lab: {})
    # the control gateway's address is not on this machine: nothing binds it here
    monkeypatch.setattr(prom, "free_port", lambda host, preferred: preferred)
    return SimpleNamespace(events=events, tsdb_root=tsdb_root, tmp=tmp_path)


def _run(faked: SimpleNamespace, during_up=lambda: None) -> tuple[Path, list[StepLab]]:  # noqa: ANN001
    labs: list[StepLab] = []

    def factory(topo, options):  # noqa: ANN001, ANN202
        labs.append(StepLab(topo, options, faked.events, during_up))
        return labs[-1]

    options = RunOptions(results=faked.tmp / "results", lab=factory, fork=False)
    return execute(resolve(str(SPEC), "quick", []), options), labs


def test_prometheus_starts_during_the_bring_up_and_is_waited_for_only_before_the_flows(
        faked, monkeypatch):
    def first_scrape(url: str, run: str, timeout: float) -> bool:
        faked.events.append(("first scrape", run))
        # A signal here ends the run before its flows: the order up to now is the point.
        raise Interrupted("SIGTERM")

    monkeypatch.setattr(lifecycle, "first_scrape", first_scrape)
    run, _ = _run(faked)
    events = faked.events
    at = events.index
    # Prometheus begins with the first progress report, before the lab is up ...
    assert at(("spawn", "monitoring prometheus")) < at(("lab", "built")) < at(("lab", "up"))
    # ... the exporter once it is up (the namespaces exist), before the setup commands ...
    assert at(("lab", "up")) < at(("spawn", "monitoring exporter")) < at(("lab", "setup"))
    # ... and nothing is waited for until the monitoring phase, just before the flows.
    waits = [e for e in events if e[0] == "wait"]
    assert waits == [("wait", "the router and link exporter"), ("wait", "Prometheus")]
    assert at(("lab", "setup")) < at(waits[0]) < at(("first scrape", run.name))
    # the targets, written once the launch plan was known, are kept with the results
    kept = run / "logs" / "monitoring" / "targets.json"
    assert '"component": "exporter"' in kept.read_text()
    assert '"role": "sender"' in kept.read_text()  # the agents' endpoints too
    assert json.loads((run / "logs" / "monitoring.json").read_text())["notes"] == []


def test_a_signal_during_the_bring_up_stops_the_prometheus_it_began(faked, monkeypatch):
    copied: list = []
    monkeypatch.setattr(export, "copy_series", lambda *a: copied.append(a) or 1)
    monkeypatch.setattr(lifecycle, "first_scrape", lambda *a: pytest.fail("not that far"))
    stopped: list[str] = []
    monkeypatch.setattr(session, "kill_group", lambda proc: stopped.append(proc.what))
    run, labs = _run(faked, during_up=lambda: os.kill(os.getpid(), signal.SIGTERM))
    record = (run / "run.json").read_text()
    assert '"interrupted_phase": "bring-up"' in record
    assert [e for e in faked.events if e[0] == "spawn"] == [("spawn", "monitoring prometheus")]
    # stopped by the run's wind-up, its database removed, no series exported (none of the
    # run's were taken), and the lab torn down after that
    assert stopped == ["monitoring prometheus"]
    assert labs[0].state.processes == []
    assert list(faked.tsdb_root.iterdir()) == []
    assert copied == []
    assert faked.events[-1] == ("lab", "down")


# --- the steps themselves -------------------------------------------------------------------

class FakeTopo:
    def model_dump(self, mode: str) -> dict:
        return {"name": "chain"}

    def names(self, kind: str) -> list[str]:
        return ["r1"] if kind == "router" else []


def _start(faked: SimpleNamespace) -> session.MonitoringStart:
    lab = SimpleNamespace(state=LabState(lab_id="default-r1"), topo=FakeTopo(),
                          link_backend="kernel", plan=SimpleNamespace(
                              control_gateway=SimpleNamespace(ip="127.0.0.1")))
    lab.state.save()
    return session.MonitoringStart(lab, faked.tmp / "r1",
                                   SimpleNamespace(name="default", duration=5.0, flows=[]))


LAUNCHES = SimpleNamespace(launches=[SimpleNamespace(
    flow="m", role="receiver", node="d1", log="x",
    argv=("python", "-m", "agents.run", "--metrics", "172.30.0.9:9464"))])


def test_each_step_starts_its_part_and_only_the_last_one_waits(faked, monkeypatch):
    monkeypatch.setattr(lifecycle, "first_scrape",
                        lambda *a: faked.events.append(("first scrape",)) or True)
    start = _start(faked)
    work = start.lab.state.path / "monitoring"
    start.begin()
    start.begin()  # once only
    assert faked.events == [("spawn", "monitoring prometheus")]
    assert (work / "targets.json").read_text() == "[]"  # no target yet
    start.exporter(LAUNCHES)
    assert faked.events[1:] == [("spawn", "monitoring exporter")]
    assert "172.30.0.9:9464" in (work / "targets.json").read_text()
    mon = start.finish()
    assert faked.events[2:] == [("wait", "the router and link exporter"),
                                ("wait", "Prometheus"), ("first scrape",)]
    assert mon.notes == [] and mon.url and mon is start.mon
    assert (work / session.STATE_FILE).is_file()



def test_the_steps_are_taken_in_order_each_once(faked, monkeypatch):
    monkeypatch.setattr(lifecycle, "first_scrape", lambda *a: True)
    start = _start(faked)
    assert start.step is session.Step.NEW and not start.begun
    start.exporter(LAUNCHES)  # a lab that reported no progress: begins first
    assert start.step is session.Step.EXPORTER and start.begun
    assert [e[1] for e in faked.events] == ["monitoring prometheus", "monitoring exporter"]
    start.begin()
    start.exporter(LAUNCHES)  # each once
    assert len(faked.events) == 2 and start.step is session.Step.EXPORTER
    start.finish()
    assert start.step is session.Step.FINISHED
    start.finish()
    assert [e for e in faked.events if e[0] == "wait"] == [
        ("wait", "the router and link exporter"), ("wait", "Prometheus")]


def test_finish_before_the_targets_is_refused_and_ends_the_steps(faked):
    start = _start(faked)
    mon = start.finish()
    assert mon.notes == ["RuntimeError: the run's targets were never written"]
    assert mon.url is None and start.step is session.Step.FAILED
    start.begin()
    start.exporter(LAUNCHES)
    start.finish()
    assert faked.events == [] and len(mon.notes) == 1  # a failed start stays failed
    # the same after begin alone: the Prometheus it started is stopped
    start = _start(faked)
    start.begin()
    mon = start.finish()
    assert mon.notes == ["RuntimeError: the run's targets were never written"]
    assert mon.processes == [] and mon.prometheus_url is None
    start.exporter(LAUNCHES)
    assert faked.events == [("spawn", "monitoring prometheus")]


def test_a_lab_reporting_progress_while_it_is_made_is_no_trouble(faked, monkeypatch):
    """The runner's monitoring exists before its lab: a report from the lab's
    constructor, before the lab's record exists, begins nothing and breaks nothing."""
    monkeypatch.setattr(lifecycle, "first_scrape", lambda *a: (_ for _ in ()).throw(
        Interrupted("SIGTERM")))
    labs: list[StepLab] = []

    def factory(topo, options):  # noqa: ANN001, ANN202
        options.progress("probing", 0, 1)
        labs.append(StepLab(topo, options, faked.events))
        return labs[-1]

    run = execute(resolve(str(SPEC), "quick", []),
                  RunOptions(results=faked.tmp / "results", lab=factory, fork=False))
    at = faked.events.index
    assert at(("spawn", "monitoring prometheus")) < at(("lab", "built"))
    assert json.loads((run / "run.json").read_text())["status"] == "interrupted"  # at the scrape

def test_a_failing_exporter_stops_the_prometheus_begun_before_it(faked, monkeypatch):
    start = _start(faked)
    start.begin()
    spawn = lifecycle.spawn

    def no_exporter(state, command, log, what):  # noqa: ANN001, ANN202
        if what == "monitoring exporter":
            raise OSError("no python here")
        return spawn(state, command, log, what)

    monkeypatch.setattr(lifecycle, "spawn", no_exporter)
    stopped: list[str] = []
    monkeypatch.setattr(session, "kill_group", lambda proc: stopped.append(proc.what))
    start.exporter(LAUNCHES)
    mon = start.finish()  # no wait, no raise
    assert stopped == ["monitoring prometheus"] and mon.processes == []
    assert mon.url is None and mon.prometheus_url is None
    assert mon.notes == ["OSError: no python here"]
    assert [e for e in faked.events if e[0] == "wait"] == []


def test_a_database_folder_refused_at_the_beginning_starts_nothing_later(faked, monkeypatch):
    monkeypatch.setenv(storage.ROOT_ENV, str(faked.tmp / "not-mounted"))
    start = _start(faked)
    start.begin()
    start.exporter(LAUNCHES)
    mon = start.finish()
    assert faked.events == [] and mon.url is None and len(mon.notes) == 1


def test_the_first_scrape_counts_only_once_the_exporter_answered(monkeypatch):
    # Prometheus begun before the exporter stores its failed scrapes (up 0): the wait
    # must not end on one of those.
    def api(url, path, params, timeout=30.0):  # noqa: ANN001, ANN202
        stored = [{"metric": {"component": "exporter"}, "value": [1.0, "0"]}]
        return {"result": [] if params["query"].endswith("== 1") else stored}

    monkeypatch.setattr(prom, "api", api)
    monkeypatch.setattr(lifecycle.time, "sleep", lambda s: None)
    assert lifecycle.first_scrape("http://127.0.0.1:9", "r1", 0.05) is False
